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
