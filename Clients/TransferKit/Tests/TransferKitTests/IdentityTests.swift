import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit

@Suite("Device identity")
struct IdentityTests {
    @Test("is generated once, stored, and reused by every later launch")
    func generatedOnceAndReused() async throws {
        let phone = try await Launched()
        let identity = try #require(phone.storedIdentity)
        #expect(UUID(uuidString: identity.deviceId) != nil && identity.deviceId == identity.deviceId.lowercased())
        #expect(identity.deviceSecret.count == 43)  // 256 bits, base64url, no padding
        #expect(identity.deviceSecret.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })

        // The same client again, and a new client on the same stores (the app relaunched).
        #expect(try await phone.client.launch() == .signedIn(accountId: phone.accountId, created: false))
        let relaunched = phone.server.client(keychain: phone.keychain, appFiles: phone.appFiles)
        #expect(try await relaunched.launch() == .signedIn(accountId: phone.accountId, created: false))

        let logins = phone.server.requests("POST /v1/devices/login")
        #expect(logins.count == 3)
        for login in logins {
            #expect(login.body["deviceId"] as? String == identity.deviceId)
            #expect(login.body["deviceSecret"] as? String == identity.deviceSecret)
        }
        #expect(phone.storedIdentity == identity)
        #expect(DeviceIdentity.generate() != DeviceIdentity.generate())
        #expect(phone.server.violations.isEmpty)
    }

    @Test("an unavailable store mints no identity, sends nothing, and emits storageUnavailable")
    func unavailableStore() async throws {
        let server = FakeServer()
        let keychain = MemoryCredentialStore()
        keychain.isAvailable = false  // rebooted, not unlocked yet
        let client = server.client(keychain: keychain)
        let events = EventLog(client)

        #expect(try await client.launch() == .storageUnavailable(.memoryLocked))
        await #expect { try await client.claimTransfer(email: "a@example.com", temporaryPassword: "blue-harbor-42") } throws: {
            TransferError.kind(of: $0) == .storageUnavailable
        }
        await #expect { try await client.addAccount() } throws: { TransferError.kind(of: $0) == .storageUnavailable }

        #expect(server.log.isEmpty)
        #expect(events.all.first == .storageUnavailable(.memoryLocked))
        #expect(events.all.allSatisfy { $0 == .storageUnavailable(.memoryLocked) })
        keychain.isAvailable = true
        #expect(keychain.items.isEmpty)
        #expect(client.state.deviceId == nil)

        // Once unlocked, the launch goes ahead.
        guard case .signedIn(_, true) = try await client.launch() else { Issue.record("no account after unlock"); return }
        #expect(server.count("POST /v1/devices/login") == 1)
    }

    @Test("an identity that cannot be written is never used")
    func unwritableStore() async throws {
        let server = FakeServer()
        let client = server.client(keychain: ReadOnlyStore())
        #expect(try await client.launch() == .storageUnavailable(StorageError("read-only")))
        #expect(server.log.isEmpty)
    }

    @Test("app data restored onto a new phone without the identity: restoredOntoNewPhone, no new account")
    func restoredOntoNewPhone() async throws {
        let old = try await Launched()
        let server = old.server
        let requestsBefore = server.log.count

        // The backup brings the app's files, not the this-device-only Keychain items.
        let keychain = MemoryCredentialStore()
        let appFiles = MemoryCredentialStore(old.appFiles.items)
        let client = server.client(keychain: keychain, appFiles: appFiles)
        let events = EventLog(client)

        let result = try await client.launch()
        guard case .restoredOntoNewPhone(let previous) = result else { Issue.record("got \(result)"); return }
        #expect(previous.map(\.id) == [old.accountId])
        #expect(events.all == [.restoredOntoNewPhone(previousAccounts: previous)])
        #expect(server.log.count == requestsBefore)
        #expect(keychain.items.isEmpty)

        // A failed claim makes an identity, but a relaunch still does not create an account with it.
        await #expect { try await client.claimTransfer(email: "a@example.com", temporaryPassword: "wrong-password-1") } throws: {
            TransferError.kind(of: $0) == .invalidTransferCredentials
        }
        let again = server.client(keychain: keychain, appFiles: appFiles)
        #expect(try await again.launch() == .restoredOntoNewPhone(previousAccounts: previous))
        // Only the old phone's login, and one naming the old account with the new identity (a login
        // that never creates an account): it is not on this phone, so this is a restore.
        let logins = server.requests("POST /v1/devices/login")
        #expect(logins.count == 2)
        #expect(logins.last?.body["accountId"] as? String == old.accountId)
        #expect(logins.last?.bodyKeys == ["deviceId", "deviceSecret", "accountId"])

        // The user declines the transfer: start over, and the next launch creates an account.
        try await again.startOver()
        guard case .signedIn(_, true) = try await again.launch() else { Issue.record("no new account"); return }
        #expect(server.violations.isEmpty)
    }
}

/// A store that reads as empty and refuses every write.
struct ReadOnlyStore: CredentialStore {
    func read(_ key: String) throws -> Data? { nil }
    func write(_ data: Data, for key: String) throws { throw CredentialStoreUnavailable("read-only") }
    func remove(_ key: String) throws {}
}

/// A store whose first read of each of `keys` finds nothing: this process read the store just
/// before another process (an extension starting at the same moment) wrote them.
final class ReadBeforeOtherProcess: CredentialStore, @unchecked Sendable {
    let store: any CredentialStore
    private let lock = NSLock()
    private var unread: Set<String>

    init(_ store: any CredentialStore, missing keys: Set<String>) {
        self.store = store
        unread = keys
    }

    func read(_ key: String) throws -> Data? {
        lock.lock()
        let miss = unread.remove(key) != nil
        lock.unlock()
        return miss ? nil : try store.read(key)
    }
    func write(_ data: Data, for key: String) throws { try store.write(data, for: key) }
    func remove(_ key: String) throws { try store.remove(key) }
    func add(_ data: Data, for key: String) throws -> Data? { try store.add(data, for: key) }
}

@Suite("Device identity written add-only")
struct AddOnlyIdentityTests {
    @Test("an app and its extension starting for the first time at once end with one identity and one account", arguments: [false, true])
    func firstStartsAtOnce(fileStore: Bool) async throws {
        let server = FakeServer()
        let phone = FakeKeychain.Device()
        let shared = KeychainLocation.shared(accessGroup: "TEAM.shared", service: "com.example.transfer")
        let appKeychain: any CredentialStore = KeychainItems(
            location: shared, calls: FakeKeychain(device: phone, groups: ["TEAM.app", "TEAM.shared"]))
        let widgetKeychain: any CredentialStore = KeychainItems(
            location: shared, calls: FakeKeychain(device: phone, groups: ["TEAM.widget", "TEAM.shared"]))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("transferkit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The same store for both (one Keychain group, or one file in the App Group's container).
        let widgetStore: any CredentialStore = fileStore ? FileCredentialStore(directory: directory) : widgetKeychain
        let appStore: any CredentialStore = fileStore ? FileCredentialStore(directory: directory) : appKeychain
        let list = MemoryCredentialStore()

        let widget = server.client(keychain: widgetStore, appFiles: list, sharesSessions: true)
        guard case .signedIn(let widgetAccount, true) = try await widget.launch() else {
            Issue.record("the widget's first launch did not create an account"); return
        }
        let widgetIdentity = try #require(try widgetStore.read(DeviceIdentity.self, StoreKey.identity))

        // The app read "no identity" before the widget added its own, and mints one.
        let app = server.client(
            keychain: ReadBeforeOtherProcess(appStore, missing: [StoreKey.identity]),
            appFiles: ReadBeforeOtherProcess(list, missing: [StoreKey.accountList]), sharesSessions: true)
        let launched = try await app.launch()
        #expect(
            launched == .signedIn(accountId: widgetAccount, created: false),
            "the app must adopt the identity the widget added (its account \(widgetAccount)), not create another: \(launched)")
        #expect(
            try widgetStore.read(DeviceIdentity.self, StoreKey.identity) == widgetIdentity,
            "the widget's identity was overwritten: its account is stranded")
        #expect(app.state.deviceId == widgetIdentity.deviceId)
    }

    @Test("add stores only when nothing is there and returns what is: memory, file and Keychain stores")
    func addSemantics() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("transferkit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stores: [any CredentialStore] = [
            MemoryCredentialStore(), FileCredentialStore(directory: directory),
            KeychainItems(location: .app(bundleIdentifier: "app"), calls: FakeKeychain(groups: ["TEAM.app"])),
        ]
        for store in stores {
            #expect(try store.add(Data("first".utf8), for: "k") == nil, "\(type(of: store)): an add into nothing stores")
            #expect(try store.add(Data("second".utf8), for: "k") == Data("first".utf8), "\(type(of: store)): an add never replaces")
            #expect(try store.read("k") == Data("first".utf8))
        }
        let keychain = FakeKeychain(groups: ["TEAM.app"])
        #expect(keychain.add([.service("s"), .account("k")], data: Data("a".utf8)) == KeychainStatus.success)
        #expect(keychain.add([.service("s"), .account("k")], data: Data("b".utf8)) == KeychainStatus.duplicateItem)
    }
}
