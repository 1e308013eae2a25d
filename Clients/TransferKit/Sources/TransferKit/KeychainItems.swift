import Foundation

/// Where TransferKit's Keychain items live: a service name and, when apps or extensions share
/// them, a Keychain access group.
///
/// The default, ``thisApp``, is the app's own: the service is the bundle identifier and no
/// access group is named, so two apps of one family never read, overwrite or delete each
/// other's identity, even with Keychain Sharing on. Sharing is a choice you make explicitly
/// with ``shared(accessGroup:service:)``, in the app and in each extension that needs the
/// account (an extension has a bundle identifier of its own, so it never finds the app's
/// items by default).
public struct KeychainLocation: Sendable, Hashable, CustomStringConvertible {
    /// The items' `kSecAttrService`.
    public var service: String
    /// The items' `kSecAttrAccessGroup` (team-prefixed, from the app's entitlements); nil: the
    /// app's default group when adding, every group of the app when searching.
    public var accessGroup: String?
    /// Whether the items are in the data protection Keychain (`kSecUseDataProtectionKeychain`),
    /// which on macOS is what makes `ThisDeviceOnly` and access groups apply (iOS has only that
    /// one). False only to read items TransferKit 1 left in the macOS file-based Keychain.
    public var dataProtectionKeychain: Bool

    /// Items of `service`, in `accessGroup` (nil: the app's own).
    public init(service: String, accessGroup: String? = nil, dataProtectionKeychain: Bool = true) {
        self.service = service
        self.accessGroup = accessGroup
        self.dataProtectionKeychain = dataProtectionKeychain
    }

    /// The app's own items: service = the main bundle's identifier, no access group.
    public static var thisApp: KeychainLocation { app(bundleIdentifier: Bundle.main.bundleIdentifier) }

    /// The app's own items for `bundleIdentifier` ("TransferKit" when there is none, e.g. a command-line tool).
    static func app(bundleIdentifier: String?) -> KeychainLocation {
        KeychainLocation(service: bundleIdentifier ?? "TransferKit")
    }

    /// Items the app shares with its extensions or sibling apps through a Keychain access group
    /// (Keychain Sharing capability): every process that names the same group and service sees
    /// the same identity and sessions. Give the client `sharesSessions: true` in each of them
    /// (``TransferClient/standard(baseURL:keychain:appGroup:urlSession:headers:logger:migratingFrom:attestation:backupKeys:)`` does).
    ///
    /// - Parameters:
    ///   - accessGroup: the full group, with the team prefix: `"ABCDE12345.com.example.shared"`.
    ///   - service: the items' service; one name for the whole family.
    public static func shared(accessGroup: String, service: String) -> KeychainLocation {
        KeychainLocation(service: service, accessGroup: accessGroup)
    }

    /// Where TransferKit 1 kept its items by default (service "TransferKit", no group, and on macOS
    /// the file-based Keychain): read once and moved by ``TransferClient/standard(baseURL:keychain:appGroup:urlSession:headers:logger:migratingFrom:attestation:backupKeys:)``.
    public static let transferKit1 = KeychainLocation(service: "TransferKit", dataProtectionKeychain: false)

    public var description: String {
        "KeychainLocation(service: \(service), accessGroup: \(accessGroup ?? "default"))"
    }
}

/// One attribute of a Keychain query, in TransferKit's terms. The Apple-only bridge maps each
/// case to exactly one `kSec…` key and value; every decision about which attributes a query
/// carries is made here, where it compiles and is tested on every platform.
enum KeychainAttribute: Hashable, Sendable {
    /// `kSecClass: kSecClassGenericPassword`.
    case genericPassword
    /// `kSecAttrService`.
    case service(String)
    /// `kSecAttrAccount`: the store's key.
    case account(String)
    /// `kSecAttrAccessGroup`.
    case accessGroup(String)
    /// `kSecAttrSynchronizable: false`: never in iCloud Keychain.
    case notSynchronizable
    /// `kSecAttrSynchronizable: true`: in iCloud Keychain, on every device of the user's Apple
    /// account that has Keychain sync on (and on a phone restored from an iCloud backup).
    case synchronizable
    /// `kSecUseDataProtectionKeychain: true`.
    case dataProtectionKeychain
    /// `kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: readable after
    /// the first unlock since boot (background launches), never in backups or on another phone.
    case accessibleAfterFirstUnlockThisDeviceOnly
    /// `kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock`: readable after the first unlock,
    /// and allowed to leave the device (a synchronizable item cannot be `ThisDeviceOnly`).
    case accessibleAfterFirstUnlock
}

/// The four `SecItem` calls. On Apple platforms a thin bridge calls Security; the tests use a
/// fake that follows the documented semantics.
protocol SecItemCalls: Sendable {
    /// `SecItemCopyMatching` for one item's data (`kSecReturnData`, `kSecMatchLimitOne`).
    func copyMatching(_ query: [KeychainAttribute]) -> (status: Int32, data: Data?)
    /// `SecItemCopyMatching` for every matching item (`kSecMatchLimitAll`, `kSecReturnData`,
    /// `kSecReturnAttributes`): each item's `kSecAttrAccount` and data.
    func copyAll(_ query: [KeychainAttribute]) -> (status: Int32, items: [(account: String, data: Data)])
    /// `SecItemAdd` of an item with `attributes` and `data` as `kSecValueData`.
    func add(_ attributes: [KeychainAttribute], data: Data) -> Int32
    /// `SecItemUpdate` of the items `query` matches: `data` as `kSecValueData`, and `attributes`.
    func update(_ query: [KeychainAttribute], data: Data, attributes: [KeychainAttribute]) -> Int32
    /// `SecItemDelete` of the items `query` matches.
    func delete(_ query: [KeychainAttribute]) -> Int32
    /// The access group an add without `kSecAttrAccessGroup` goes to (the first of the app's
    /// `keychain-access-groups`, else its application identifier); nil when it cannot be told, or
    /// when the Keychain has no access groups (macOS's file-based one: `dataProtection` false).
    func defaultAccessGroup(dataProtection: Bool) -> String?
}

/// The `OSStatus` values TransferKit tells apart (Security's `errSec…`, as numbers, so that
/// this code compiles without Security).
enum KeychainStatus {
    static let success: Int32 = 0  // errSecSuccess
    static let itemNotFound: Int32 = -25300  // errSecItemNotFound
    static let duplicateItem: Int32 = -25299  // errSecDuplicateItem
    static let interactionNotAllowed: Int32 = -25308  // errSecInteractionNotAllowed
    static let missingEntitlement: Int32 = -34018  // errSecMissingEntitlement
    static let decode: Int32 = -26275  // errSecDecode

    /// The storage error of a failed call (`operation`: "read", "add", …).
    static func failure(_ status: Int32, _ operation: String, _ key: String) -> StorageError {
        let kind: StorageError.Kind
        switch status {
        case interactionNotAllowed: kind = .locked
        case missingEntitlement: kind = .missingEntitlement
        case duplicateItem: kind = .duplicateItem
        case decode: kind = .undecodable
        default: kind = .other
        }
        return StorageError(kind, status: status, reason: "Keychain \(operation) of \(key) failed: OSStatus \(status)")
    }
}

/// A ``CredentialStore`` of generic-password Keychain items, one per key, at a
/// ``KeychainLocation``: every decision of the Keychain store, over any ``SecItemCalls``.
///
/// - Reads: `errSecItemNotFound` is empty; anything else but success throws with its kind.
///   An item not found at the location is looked for at each of `previous` (an earlier
///   service or group of the app); one found there is moved (written here, then deleted there),
///   so that changing the location never loses the identity (a lost identity would look like
///   a restore onto a new phone). The move adds: an item another process wrote here meanwhile wins.
/// - Writes add the item, and update it when it exists (`errSecDuplicateItem`); an item
///   deleted between the two is added once more. ``add(_:for:)`` never updates: on
///   `errSecDuplicateItem` it returns the item that is there.
/// - Removes delete the item here only: a previous location's copy was deleted when it was
///   moved, and a location without an access group matches every group of the app, where a
///   sibling app's items may live.
struct KeychainItems: CredentialStore {
    let location: KeychainLocation
    let previous: [KeychainLocation]
    let calls: any SecItemCalls

    init(location: KeychainLocation, previous: [KeychainLocation] = [], calls: any SecItemCalls) {
        self.location = location
        self.previous = previous.filter { $0 != location }
        self.calls = calls
    }

    /// The query of the item `key` at `location`.
    static func query(_ key: String, at location: KeychainLocation) -> [KeychainAttribute] {
        var query: [KeychainAttribute] = [.genericPassword, .service(location.service), .account(key), .notSynchronizable]
        if let group = location.accessGroup { query.append(.accessGroup(group)) }
        if location.dataProtectionKeychain { query.append(.dataProtectionKeychain) }
        return query
    }

    /// What every item is written with beyond its query.
    static let protection: [KeychainAttribute] = [.accessibleAfterFirstUnlockThisDeviceOnly]

    func read(_ key: String) throws -> Data? {
        if let data = try copy(key, at: location) { return data }
        for previousLocation in previous {
            let old = ownItems(at: previousLocation)
            guard let data = try copy(key, at: old) else { continue }
            // Added, not written: an item another process put here since the read above (an
            // extension sharing the new location) is newer than the old copy, and is the answer.
            let kept = try add(data, for: key) ?? data
            try delete(key, at: old)
            return kept
        }
        return nil
    }

    /// `place` narrowed to the app's own items: a location without an access group (TransferKit
    /// 1's) matches every group of the app, and in a family with Keychain Sharing a sibling app's
    /// TransferKit 1 items may sit in the shared group; moving them would take the sibling's
    /// identity, and delete it from under the sibling. The app's own were added to its default group.
    private func ownItems(at place: KeychainLocation) -> KeychainLocation {
        guard place.accessGroup == nil, let group = calls.defaultAccessGroup(dataProtection: place.dataProtectionKeychain)
        else { return place }
        var own = place
        own.accessGroup = group
        return own
    }

    func write(_ data: Data, for key: String) throws {
        let query = Self.query(key, at: location)
        var status = calls.add(query + Self.protection, data: data)
        if status == KeychainStatus.duplicateItem {
            status = calls.update(query, data: data, attributes: Self.protection)
            if status == KeychainStatus.itemNotFound {  // deleted by another process meanwhile
                status = calls.add(query + Self.protection, data: data)
            }
        }
        guard status == KeychainStatus.success else { throw KeychainStatus.failure(status, "write", key) }
    }

    func remove(_ key: String) throws {
        try delete(key, at: location)
    }

    /// `SecItemAdd`, and on `errSecDuplicateItem` the item that is there: never an update, so
    /// that of two processes adding at once the second adopts the first's item.
    func add(_ data: Data, for key: String) throws -> Data? {
        let query = Self.query(key, at: location)
        while true {
            let status = calls.add(query + Self.protection, data: data)
            if status == KeychainStatus.success { return nil }
            guard status == KeychainStatus.duplicateItem else { throw KeychainStatus.failure(status, "add", key) }
            if let existing = try copy(key, at: location) { return existing }  // else deleted meanwhile: add again
        }
    }

    private func copy(_ key: String, at place: KeychainLocation) throws -> Data? {
        let (status, data) = calls.copyMatching(Self.query(key, at: place))
        switch status {
        case KeychainStatus.success:
            guard let data else { throw KeychainStatus.failure(KeychainStatus.decode, "read", key) }
            return data
        case KeychainStatus.itemNotFound:
            return nil
        default:
            throw KeychainStatus.failure(status, "read", key)
        }
    }

    private func delete(_ key: String, at place: KeychainLocation) throws {
        let status = calls.delete(Self.query(key, at: place))
        guard status == KeychainStatus.success || status == KeychainStatus.itemNotFound else {
            throw KeychainStatus.failure(status, "delete", key)
        }
    }
}

/// A ``SynchronizedStore`` of generic-password Keychain items that iCloud Keychain carries to the
/// user's other devices: `kSecAttrSynchronizable: true`, `kSecAttrAccessibleAfterFirstUnlock`
/// (readable in background launches; a synchronizable item cannot be `ThisDeviceOnly`), in the
/// data protection Keychain, at the location's service and group. Only backup keys go here: the
/// device identity and tokens stay in ``KeychainItems`` (this device only).
///
/// Every query names `synchronizable`, so it never matches, changes or deletes a this-device-only
/// item of the same key; writes add, and update what exists.
struct KeychainSynchronizedItems: SynchronizedStore {
    let location: KeychainLocation
    let calls: any SecItemCalls

    /// The items of the location that travel; `key` nil: all of them.
    static func query(_ key: String?, at location: KeychainLocation) -> [KeychainAttribute] {
        var query: [KeychainAttribute] = [.genericPassword, .service(location.service), .synchronizable]
        if let key { query.append(.account(key)) }
        if let group = location.accessGroup { query.append(.accessGroup(group)) }
        query.append(.dataProtectionKeychain)
        return query
    }

    static let protection: [KeychainAttribute] = [.accessibleAfterFirstUnlock]

    func readAll() throws -> [String: Data] {
        let (status, items) = calls.copyAll(Self.query(nil, at: location))
        switch status {
        case KeychainStatus.success:
            return Dictionary(items.map { ($0.account, $0.data) }, uniquingKeysWith: { first, _ in first })
        case KeychainStatus.itemNotFound:
            return [:]
        default:
            throw KeychainStatus.failure(status, "read", "synchronized items")
        }
    }

    func write(_ data: Data, for key: String) throws {
        let query = Self.query(key, at: location)
        var status = calls.add(query + Self.protection, data: data)
        if status == KeychainStatus.duplicateItem {
            status = calls.update(query, data: data, attributes: Self.protection)
            if status == KeychainStatus.itemNotFound { status = calls.add(query + Self.protection, data: data) }
        }
        guard status == KeychainStatus.success else { throw KeychainStatus.failure(status, "write", key) }
    }

    func remove(_ key: String) throws {
        let status = calls.delete(Self.query(key, at: location))
        guard status == KeychainStatus.success || status == KeychainStatus.itemNotFound else {
            throw KeychainStatus.failure(status, "delete", key)
        }
    }
}

/// Where ``TransferClient/standard(baseURL:keychain:appGroup:urlSession:headers:logger:migratingFrom:attestation:backupKeys:)``
/// keeps the account list: decisions kept out of the Apple-only code.
enum StandardLayout {
    /// The directory of the account list: in the App Group's container when there is one (an
    /// extension reads the same list), else in Application Support; on macOS inside a folder of
    /// the bundle identifier, since every app that is not sandboxed shares one Application Support.
    static func accountListDirectory(
        applicationSupport: URL, appGroupContainer: URL?, bundleIdentifier: String?, isMacOS: Bool
    ) -> URL {
        if let appGroupContainer {
            return appGroupContainer.appendingPathComponent("Library/Application Support/TransferKit", isDirectory: true)
        }
        var directory = applicationSupport
        if isMacOS { directory.appendPathComponent(bundleIdentifier ?? "TransferKit", isDirectory: true) }
        return directory.appendingPathComponent("TransferKit", isDirectory: true)
    }

    /// What is wrong with sharing through `appGroup` and `keychain`, in words for the developer;
    /// nil when nothing is. An App Group without a shared Keychain location shares the account
    /// list but not the identity: the extension reads a list of a device id it has no identity
    /// for, and reports a restore onto a new phone. A group whose container is not found is not
    /// in the app's entitlements: the list silently stays in the app's own container.
    static func misconfiguration(keychain: KeychainLocation, appGroup: String?, appGroupContainerFound: Bool) -> String? {
        guard let appGroup else { return nil }
        if !appGroupContainerFound {
            return "TransferKit: the App Group \(appGroup) has no container: add it to the app's and each extension's "
                + "App Groups capability (the account list stays in this process's own container until then)."
        }
        if keychain.accessGroup == nil {
            return "TransferKit: appGroup \(appGroup) shares the account list, but the Keychain location is the app's "
                + "own: pass keychain: .shared(accessGroup:service:) too, in the app and each extension, so that they "
                + "share the device identity (an extension would otherwise take the phone for a restored one)."
        }
        return nil
    }

    /// Whether sessions are shared with other processes: a shared Keychain group or an App Group.
    static func sharesSessions(keychain: KeychainLocation, appGroup: String?) -> Bool {
        keychain.accessGroup != nil || appGroup != nil
    }

    /// The Keychain locations to move items from: the ones given, without the new location.
    static func previousLocations(_ given: [KeychainLocation], current: KeychainLocation) -> [KeychainLocation] {
        given.filter { $0 != current }
    }
}
