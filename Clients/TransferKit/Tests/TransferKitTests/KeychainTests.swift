import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit

/// A Keychain that follows the documented `SecItem` semantics, for one app (its entitled
/// access groups, the first being the default one):
/// - an add of an item that exists is `errSecDuplicateItem`; an add without a group goes to the
///   default group; a group the app is not entitled to is `errSecMissingEntitlement`;
/// - a query without a group searches every group of the app; update and delete change every match;
/// - the data protection Keychain and macOS's file-based one are apart;
/// - `kSecAttrSynchronizable`: a query or an add without it means `false`; a synchronizable item
///   and a this-device-only item of the same key are two items. Synchronizable items live in the
///   phone's Apple account's iCloud Keychain (``AppleAccount``) when it has one with Keychain sync
///   on: every phone of that account sees them, and a phone restored from a backup (a new
///   `Device` of the same account) gets them, while this-device-only items stay on their phone;
///   without an Apple account they stay on the phone;
/// - while the phone is locked before its first unlock, every call is `errSecInteractionNotAllowed`.
/// Several apps may share one `FakeKeychain.Device` (their items live on the same phone).
final class FakeKeychain: SecItemCalls, @unchecked Sendable {
    struct Item: Equatable {
        var group: String
        var service: String
        var account: String
        var dataProtection: Bool
        var synchronizable: Bool
        var data: Data
        var attributes: [KeychainAttribute]
    }

    /// One Apple account's iCloud Keychain: the synchronizable items of every phone signed in to it.
    final class AppleAccount: @unchecked Sendable {
        let lock = NSLock()
        var items: [Item] = []
    }

    final class Device: @unchecked Sendable {
        typealias Item = FakeKeychain.Item
        let lock = NSLock()
        /// This phone's items: this-device-only ones, and synchronizable ones when it has no Apple account.
        var items: [Item] = []
        /// The Apple account the phone is signed in to with Keychain sync on; nil: none.
        let appleAccount: AppleAccount?
        var locked = false
        /// Runs before the next update (e.g. another process deleting the item).
        var beforeUpdate: (() -> Void)?
        /// Runs after the next copy (e.g. another process adding the item that was not found).
        var afterCopy: (() -> Void)?

        init(appleAccount: AppleAccount? = nil) {
            self.appleAccount = appleAccount
        }

        /// A phone restored from this one's backup: the same Apple account, none of the this-device-only items.
        func restoredFromBackup() -> Device { Device(appleAccount: appleAccount) }

        /// Every item the phone sees.
        var visible: [Item] {
            guard let appleAccount else { return items }
            appleAccount.lock.lock()
            defer { appleAccount.lock.unlock() }
            return items + appleAccount.items
        }

        /// Runs `body` on the list holding items that are `synchronizable` or not (the device lock held).
        func withList<T>(synchronizable: Bool, _ body: (inout [Item]) -> T) -> T {
            guard synchronizable, let appleAccount else { return body(&items) }
            appleAccount.lock.lock()
            defer { appleAccount.lock.unlock() }
            return body(&appleAccount.items)
        }
    }

    let device: Device
    /// The app's `keychain-access-groups`, default first.
    let groups: [String]

    init(device: Device = Device(), groups: [String]) {
        self.device = device
        self.groups = groups
    }

    var items: [Item] {
        device.lock.lock()
        defer { device.lock.unlock() }
        return device.visible
    }

    private struct Parsed {
        var service: String?
        var account: String?
        var group: String?
        var dataProtection = false
        var synchronizable = false
    }

    private func parse(_ attributes: [KeychainAttribute]) -> Parsed {
        var parsed = Parsed()
        for attribute in attributes {
            switch attribute {
            case .service(let service): parsed.service = service
            case .account(let account): parsed.account = account
            case .accessGroup(let group): parsed.group = group
            case .dataProtectionKeychain: parsed.dataProtection = true
            case .synchronizable: parsed.synchronizable = true
            case .notSynchronizable: parsed.synchronizable = false
            default: break
            }
        }
        return parsed
    }

    private func matches(_ query: Parsed, _ item: Item) -> Bool {
        (query.service.map { $0 == item.service } ?? true) && (query.account.map { $0 == item.account } ?? true)
            && (query.group.map { $0 == item.group } ?? groups.contains(item.group))
            && query.dataProtection == item.dataProtection && query.synchronizable == item.synchronizable
    }

    /// The status that stops a call before it looks at the items, if any.
    private func refusal(_ query: Parsed) -> Int32? {
        if device.locked { return KeychainStatus.interactionNotAllowed }
        if let group = query.group, !groups.contains(group) { return KeychainStatus.missingEntitlement }
        return nil
    }

    func copyMatching(_ query: [KeychainAttribute]) -> (status: Int32, data: Data?) {
        let (status, found) = copyAll(query)
        return (status, found.first?.data)
    }

    func copyAll(_ query: [KeychainAttribute]) -> (status: Int32, items: [(account: String, data: Data)]) {
        let hook = device.afterCopy
        device.afterCopy = nil
        defer { hook?() }
        device.lock.lock()
        defer { device.lock.unlock() }
        let parsed = parse(query)
        if let refusal = refusal(parsed) { return (refusal, []) }
        let found = device.withList(synchronizable: parsed.synchronizable) { list in list.filter { matches(parsed, $0) } }
        guard !found.isEmpty else { return (KeychainStatus.itemNotFound, []) }
        return (KeychainStatus.success, found.map { ($0.account, $0.data) })
    }

    func add(_ attributes: [KeychainAttribute], data: Data) -> Int32 {
        device.lock.lock()
        defer { device.lock.unlock() }
        var parsed = parse(attributes)
        if let refusal = refusal(parsed) { return refusal }
        parsed.group = parsed.group ?? groups[0]
        return device.withList(synchronizable: parsed.synchronizable) { list in
            if list.contains(where: { matches(parsed, $0) }) { return KeychainStatus.duplicateItem }
            list.append(Item(
                group: parsed.group!, service: parsed.service!, account: parsed.account!, dataProtection: parsed.dataProtection,
                synchronizable: parsed.synchronizable, data: data, attributes: attributes))
            return KeychainStatus.success
        }
    }

    func update(_ query: [KeychainAttribute], data: Data, attributes: [KeychainAttribute]) -> Int32 {
        let hook = device.beforeUpdate
        device.beforeUpdate = nil
        hook?()
        device.lock.lock()
        defer { device.lock.unlock() }
        let parsed = parse(query)
        if let refusal = refusal(parsed) { return refusal }
        return device.withList(synchronizable: parsed.synchronizable) { list in
            var found = false
            for index in list.indices where matches(parsed, list[index]) {
                list[index].data = data
                found = true
            }
            return found ? KeychainStatus.success : KeychainStatus.itemNotFound
        }
    }

    func defaultAccessGroup(dataProtection: Bool) -> String? { groups[0] }

    func delete(_ query: [KeychainAttribute]) -> Int32 {
        device.lock.lock()
        defer { device.lock.unlock() }
        let parsed = parse(query)
        if let refusal = refusal(parsed) { return refusal }
        return device.withList(synchronizable: parsed.synchronizable) { list in
            let before = list.count
            list.removeAll { matches(parsed, $0) }
            return list.count < before ? KeychainStatus.success : KeychainStatus.itemNotFound
        }
    }
}

@Suite("Keychain decisions (SecItem semantics, on every platform)")
struct KeychainTests {
    let key = StoreKey.identity

    @Test("every query names a generic password of the service and key, not synchronizable, in the data protection Keychain; writes are this-device-only after first unlock")
    func attributes() throws {
        let keychain = FakeKeychain(groups: ["TEAM.com.example.app"])
        let store = KeychainItems(location: .app(bundleIdentifier: "com.example.app"), calls: keychain)
        try store.write(Data("a".utf8), for: key)
        let item = try #require(keychain.items.first)
        #expect(Set(item.attributes) == [
            .genericPassword, .service("com.example.app"), .account(key), .notSynchronizable, .dataProtectionKeychain,
            .accessibleAfterFirstUnlockThisDeviceOnly,
        ])
        #expect(item.group == "TEAM.com.example.app")  // the app's default group: none was named
        let shared = KeychainItems.query(key, at: .shared(accessGroup: "TEAM.shared", service: "family"))
        #expect(shared.contains(.accessGroup("TEAM.shared")) && shared.contains(.dataProtectionKeychain))
        #expect(!KeychainItems.query(key, at: .transferKit1).contains(.dataProtectionKeychain))
    }

    @Test("a write adds, and updates what exists; an item deleted in between is added again")
    func addOrUpdate() throws {
        let keychain = FakeKeychain(groups: ["TEAM.app"])
        let store = KeychainItems(location: .app(bundleIdentifier: "app"), calls: keychain)
        #expect(try store.read(key) == nil)
        try store.write(Data("one".utf8), for: key)
        try store.write(Data("two".utf8), for: key)
        #expect(try store.read(key) == Data("two".utf8))
        #expect(keychain.items.count == 1)

        keychain.device.beforeUpdate = { keychain.device.items.removeAll() }  // another process deletes it
        try store.write(Data("three".utf8), for: key)
        #expect(try store.read(key) == Data("three".utf8))

        try store.remove(key)
        try store.remove(key)  // nothing stored is not an error
        #expect(try store.read(key) == nil)
    }

    @Test("status kinds: locked, missing entitlement, and the OSStatus kept", arguments: [
        (KeychainStatus.interactionNotAllowed, StorageError.Kind.locked),
        (KeychainStatus.missingEntitlement, .missingEntitlement),
        (KeychainStatus.duplicateItem, .duplicateItem),
        (KeychainStatus.decode, .undecodable),
        (Int32(-25291), .other),
    ])
    func statusKinds(_ status: Int32, _ kind: StorageError.Kind) {
        let failure = KeychainStatus.failure(status, "read", "transferkit.identity")
        #expect(failure.kind == kind && failure.status == status)
    }

    @Test("a locked phone and a group the app is not entitled to are told apart")
    func lockedAndMissingEntitlement() throws {
        let keychain = FakeKeychain(groups: ["TEAM.app"])
        let store = KeychainItems(location: .app(bundleIdentifier: "app"), calls: keychain)
        try store.write(Data("a".utf8), for: key)
        keychain.device.locked = true
        #expect { try store.read(key) } throws: { ($0 as? StorageError)?.kind == .locked }
        #expect { try store.write(Data("b".utf8), for: key) } throws: { ($0 as? StorageError)?.kind == .locked }
        keychain.device.locked = false

        let unentitled = KeychainItems(location: .shared(accessGroup: "OTHER.group", service: "s"), calls: keychain)
        #expect { try unentitled.read(key) } throws: { error in
            let error = error as? StorageError
            return error?.kind == .missingEntitlement && error?.status == -34018
        }
    }

    @Test("two apps of a family with Keychain Sharing keep their own identities by default; TransferKit 1's location mixed them")
    func perAppNamespace() throws {
        let phone = FakeKeychain.Device()
        // Both apps list the shared group first: it is their default group for adds.
        let news = FakeKeychain(device: phone, groups: ["TEAM.shared", "TEAM.com.example.news"])
        let weather = FakeKeychain(device: phone, groups: ["TEAM.shared", "TEAM.com.example.weather"])
        let newsStore = KeychainItems(location: .app(bundleIdentifier: "com.example.news"), calls: news)
        let weatherStore = KeychainItems(location: .app(bundleIdentifier: "com.example.weather"), calls: weather)

        try newsStore.write(Data("news identity".utf8), for: key)
        #expect(try weatherStore.read(key) == nil)
        try weatherStore.write(Data("weather identity".utf8), for: key)
        try weatherStore.remove(key)  // weather starts over
        #expect(try newsStore.read(key) == Data("news identity".utf8))

        // What TransferKit 1 did: one service, no group; the second app overwrote the first.
        let old = KeychainLocation(service: "TransferKit")
        try KeychainItems(location: old, calls: news).write(Data("news".utf8), for: key)
        try KeychainItems(location: old, calls: weather).write(Data("weather".utf8), for: key)
        #expect(try KeychainItems(location: old, calls: news).read(key) == Data("weather".utf8))
    }

    @Test("an app and its extension share the identity only through an explicit shared location")
    func explicitSharing() throws {
        let phone = FakeKeychain.Device()
        let app = FakeKeychain(device: phone, groups: ["TEAM.com.example.app", "TEAM.com.example.shared"])
        let widget = FakeKeychain(device: phone, groups: ["TEAM.com.example.app.widget", "TEAM.com.example.shared"])
        try KeychainItems(location: .app(bundleIdentifier: "com.example.app"), calls: app).write(Data("id".utf8), for: key)
        #expect(try KeychainItems(location: .app(bundleIdentifier: "com.example.app.widget"), calls: widget).read(key) == nil)

        let shared = KeychainLocation.shared(accessGroup: "TEAM.com.example.shared", service: "com.example.transfer")
        try KeychainItems(location: shared, calls: app).write(Data("shared id".utf8), for: key)
        #expect(try KeychainItems(location: shared, calls: widget).read(key) == Data("shared id".utf8))
    }

    @Test("a new location moves the items from the previous one: the launch signs in, no restore is reported")
    func migration() async throws {
        let phone = try await Launched()
        let keychain = FakeKeychain(groups: ["TEAM.com.example.app"])
        // TransferKit 1's items (service "TransferKit", macOS file-based Keychain): the identity,
        // and every account's tokens in one item.
        let old = KeychainItems(location: .transferKit1, calls: keychain)
        try old.write(#require(phone.keychain.items[StoreKey.identity]), for: StoreKey.identity)
        try old.write(Wire.encode(phone.storedSessions), for: StoreKey.legacySessions)

        let store = KeychainItems(
            location: .app(bundleIdentifier: "com.example.app"),
            previous: StandardLayout.previousLocations([.transferKit1], current: .app(bundleIdentifier: "com.example.app")),
            calls: keychain)
        let client = phone.server.client(keychain: store, appFiles: phone.appFiles, clock: phone.clock)
        #expect(try await client.launch() == .signedIn(accountId: phone.accountId, created: false))
        #expect(keychain.items.allSatisfy { $0.service == "com.example.app" && $0.dataProtection })
        #expect(keychain.items.contains { $0.account == StoreKey.identity })
        #expect(try store.read(StoreKey.identity) == phone.keychain.items[StoreKey.identity])
    }

    @Test("turning Keychain Sharing on: an item an extension wrote at the shared location while the app moved its own is the one read and kept")
    func moveNeverReturnsStaleItem() throws {
        let phone = FakeKeychain.Device()
        let app = FakeKeychain(device: phone, groups: ["TEAM.app", "TEAM.shared"])
        let widget = FakeKeychain(device: phone, groups: ["TEAM.widget", "TEAM.shared"])
        let shared = KeychainLocation.shared(accessGroup: "TEAM.shared", service: "com.example.transfer")
        let own = KeychainLocation.app(bundleIdentifier: "com.example.app")
        let key = StoreKey.session("a")
        try KeychainItems(location: own, calls: app).write(Data("old tokens".utf8), for: key)

        let store = KeychainItems(location: shared, previous: [own], calls: app)
        // The app finds nothing at the shared location; the widget then writes newer tokens there.
        phone.afterCopy = { try? KeychainItems(location: shared, calls: widget).write(Data("newer tokens".utf8), for: key) }
        let read = try store.read(key)
        #expect(read == Data("newer tokens".utf8), "the move returned the old location's stale copy: \(read.map { String(decoding: $0, as: UTF8.self) } ?? "nil")")
        #expect(try KeychainItems(location: shared, calls: widget).read(key) == Data("newer tokens".utf8), "the move overwrote the widget's newer item")
        #expect(try KeychainItems(location: own, calls: app).read(key) == nil, "the old copy is deleted once moved")
    }

    @Test("TransferKit 1's items are moved from the app's own group only: a sibling app's identity in the shared group is neither taken nor deleted")
    func transferKit1MoveTakesOwnItemsOnly() throws {
        let phone = FakeKeychain.Device()
        // news lists its own group first; weather lists the shared group first (its adds land there).
        let news = FakeKeychain(device: phone, groups: ["TEAM.com.example.news", "TEAM.shared"])
        let weather = FakeKeychain(device: phone, groups: ["TEAM.shared", "TEAM.com.example.weather"])
        try KeychainItems(location: .transferKit1, calls: weather).write(Data("weather identity".utf8), for: key)

        let newsStore = KeychainItems(
            location: .app(bundleIdentifier: "com.example.news"), previous: [.transferKit1], calls: news)
        let taken = try newsStore.read(key)
        #expect(taken == nil, "news took weather's TransferKit 1 identity: \(taken.map { String(decoding: $0, as: UTF8.self) } ?? "")")
        #expect(
            try KeychainItems(location: .transferKit1, calls: weather).read(key) == Data("weather identity".utf8),
            "weather's identity was deleted by news's move")

        // news's own TransferKit 1 items (in its default group) are still moved.
        try KeychainItems(location: .transferKit1, calls: news).write(Data("news tokens".utf8), for: StoreKey.session("n"))
        #expect(try newsStore.read(StoreKey.session("n")) == Data("news tokens".utf8))
        #expect(phone.items.filter { $0.service == "TransferKit" }.map(\.group) == ["TEAM.shared"])
    }

    @Test("the standard layout: the account list in the App Group when there is one, per app on macOS; shared stores share sessions")
    func standardLayout() {
        let support = URL(fileURLWithPath: "/Users/ann/Library/Application Support")
        let group = URL(fileURLWithPath: "/group")
        #expect(StandardLayout.accountListDirectory(
            applicationSupport: support, appGroupContainer: group, bundleIdentifier: "com.example.app", isMacOS: false).path
            == "/group/Library/Application Support/TransferKit")
        #expect(StandardLayout.accountListDirectory(
            applicationSupport: support, appGroupContainer: nil, bundleIdentifier: "com.example.app", isMacOS: true).path
            == "/Users/ann/Library/Application Support/com.example.app/TransferKit")
        #expect(StandardLayout.accountListDirectory(
            applicationSupport: support, appGroupContainer: nil, bundleIdentifier: "com.example.app", isMacOS: false).path
            == "/Users/ann/Library/Application Support/TransferKit")
        #expect(!StandardLayout.sharesSessions(keychain: .app(bundleIdentifier: "a"), appGroup: nil))
        #expect(StandardLayout.sharesSessions(keychain: .app(bundleIdentifier: "a"), appGroup: "group.a"))
        #expect(StandardLayout.sharesSessions(keychain: .shared(accessGroup: "T.g", service: "s"), appGroup: nil))
        #expect(KeychainLocation.app(bundleIdentifier: nil).service == "TransferKit")
    }

    @Test("the account list file is protected until the first unlock, set explicitly")
    func fileProtection() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("transferkit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = FileCredentialStore(directory: directory)
        #expect(store.protection?.rawValue == FileProtectionType.completeUntilFirstUserAuthentication.rawValue)
        try store.write(Data("list".utf8), for: StoreKey.accountList)
        #expect(try store.read(StoreKey.accountList) == Data("list".utf8))
    }
}
