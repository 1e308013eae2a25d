#if canImport(Security)
import Foundation
import Security

// Compiled only on Apple platforms (never built in this repository's Linux CI). Everything here
// is a one-to-one translation; every decision (which attributes, add or update, status kinds,
// moving items from an earlier location) is in KeychainItems.swift, tested on every platform.

/// A store in the Keychain: generic-password items at a ``KeychainLocation``, one per key,
/// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly` (readable after the first unlock since
/// boot, never in backups or on another phone), not synchronizable, in the data protection
/// Keychain (also on macOS). `errSecItemNotFound` reads as empty; every other failure throws a
/// ``StorageError`` whose kind says which (``StorageError/Kind/locked``,
/// ``StorageError/Kind/missingEntitlement``, …) and whose status is the `OSStatus`.
public struct KeychainCredentialStore: CredentialStore {
    /// Where the items are.
    public let location: KeychainLocation
    private let items: KeychainItems

    /// A store at `location`; an item missing there is moved from the first of `previous` that has it.
    public init(location: KeychainLocation = .thisApp, migratingFrom previous: [KeychainLocation] = []) {
        self.location = location
        self.items = KeychainItems(location: location, previous: previous, calls: SecItemBridge())
    }

    /// A store of the items of `service`, in `accessGroup` (TransferKit 1's initialiser).
    public init(service: String, accessGroup: String? = nil) {
        self.init(location: KeychainLocation(service: service, accessGroup: accessGroup))
    }

    public func read(_ key: String) throws -> Data? { try items.read(key) }
    public func write(_ data: Data, for key: String) throws { try items.write(data, for: key) }
    public func remove(_ key: String) throws { try items.remove(key) }
    /// `SecItemAdd`; on `errSecDuplicateItem`, the item that is there (see ``CredentialStore/add(_:for:)``).
    public func add(_ data: Data, for key: String) throws -> Data? { try items.add(data, for: key) }

    /// The items at `location` that iCloud Keychain carries to the user's other devices
    /// (synchronizable, readable after first unlock): where TransferKit keeps backup keys.
    public static func synchronized(location: KeychainLocation = .thisApp) -> any SynchronizedStore {
        KeychainSynchronizedItems(location: location, calls: SecItemBridge())
    }
}

/// The four `SecItem` calls, each attribute mapped to its one `kSec…` key.
struct SecItemBridge: SecItemCalls {
    func copyMatching(_ query: [KeychainAttribute]) -> (status: Int32, data: Data?) {
        var dictionary = Self.dictionary(query)
        dictionary[kSecReturnData as String] = true
        dictionary[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(dictionary as CFDictionary, &result)
        return (status, result as? Data)
    }

    func copyAll(_ query: [KeychainAttribute]) -> (status: Int32, items: [(account: String, data: Data)]) {
        var dictionary = Self.dictionary(query)
        dictionary[kSecReturnData as String] = true
        dictionary[kSecReturnAttributes as String] = true
        dictionary[kSecMatchLimit as String] = kSecMatchLimitAll
        var result: CFTypeRef?
        let status = SecItemCopyMatching(dictionary as CFDictionary, &result)
        let found = (result as? [[String: Any]] ?? []).compactMap { item -> (account: String, data: Data)? in
            guard let account = item[kSecAttrAccount as String] as? String, let data = item[kSecValueData as String] as? Data
            else { return nil }
            return (account, data)
        }
        return (status, found)
    }

    func add(_ attributes: [KeychainAttribute], data: Data) -> Int32 {
        var dictionary = Self.dictionary(attributes)
        dictionary[kSecValueData as String] = data
        return SecItemAdd(dictionary as CFDictionary, nil)
    }

    func update(_ query: [KeychainAttribute], data: Data, attributes: [KeychainAttribute]) -> Int32 {
        var changes = Self.dictionary(attributes)
        changes[kSecValueData as String] = data
        return SecItemUpdate(Self.dictionary(query) as CFDictionary, changes as CFDictionary)
    }

    func delete(_ query: [KeychainAttribute]) -> Int32 {
        SecItemDelete(Self.dictionary(query) as CFDictionary)
    }

    func defaultAccessGroup(dataProtection: Bool) -> String? {
        #if os(macOS)
        guard dataProtection else { return nil }  // the file-based Keychain has no access groups
        #endif
        return Self.probedDefaultGroup
    }

    /// The group of an item added without one, read back from a probe item (then deleted); once
    /// per process.
    static let probedDefaultGroup: String? = {
        var probe = dictionary([
            .genericPassword, .service("transferkit.default-group-probe"), .account(UUID().uuidString), .notSynchronizable,
            .dataProtectionKeychain, .accessibleAfterFirstUnlockThisDeviceOnly,
        ])
        probe[kSecReturnAttributes as String] = true
        var result: CFTypeRef?
        guard SecItemAdd(probe as CFDictionary, &result) == errSecSuccess else { return nil }
        probe[kSecReturnAttributes as String] = nil
        probe[kSecAttrAccessible as String] = nil
        _ = SecItemDelete(probe as CFDictionary)
        return (result as? [String: Any])?[kSecAttrAccessGroup as String] as? String
    }()

    static func dictionary(_ attributes: [KeychainAttribute]) -> [String: Any] {
        var dictionary: [String: Any] = [:]
        for attribute in attributes {
            switch attribute {
            case .genericPassword:
                dictionary[kSecClass as String] = kSecClassGenericPassword
            case .service(let service):
                dictionary[kSecAttrService as String] = service
            case .account(let account):
                dictionary[kSecAttrAccount as String] = account
            case .accessGroup(let group):
                dictionary[kSecAttrAccessGroup as String] = group
            case .notSynchronizable:
                dictionary[kSecAttrSynchronizable as String] = false
            case .synchronizable:
                dictionary[kSecAttrSynchronizable as String] = true
            case .dataProtectionKeychain:
                if #available(iOS 13, macOS 10.15, tvOS 13, watchOS 6, *) {
                    dictionary[kSecUseDataProtectionKeychain as String] = true
                }
            case .accessibleAfterFirstUnlockThisDeviceOnly:
                dictionary[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            case .accessibleAfterFirstUnlock:
                dictionary[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
            }
        }
        return dictionary
    }
}

extension TransferClient {
    /// The client for an iOS or macOS app: the device identity and tokens in the Keychain
    /// (``KeychainCredentialStore``, this device only), the account list in Application Support
    /// (``FileCredentialStore``, included in backups, which is how a restore onto a new phone is noticed).
    ///
    /// - Parameters:
    ///   - keychain: where the identity and tokens are: the app's own by default
    ///     (``KeychainLocation/thisApp``); ``KeychainLocation/shared(accessGroup:service:)`` in the
    ///     app and each extension that shares the account.
    ///   - appGroup: an App Group identifier: the account list goes in its container, where
    ///     extensions find it. With a shared Keychain or an App Group, renewals log in instead
    ///     of refreshing (`sharesSessions`), so processes never revoke each other's tokens.
    ///     An App Group needs a shared Keychain too (the extension would find the list without
    ///     the identity, and take the phone for a restored one), and the group in the app's
    ///     entitlements: otherwise a debug build stops here with what to fix (an assertion), and
    ///     `logger` is told in every build.
    ///   - urlSession: the session requests go through.
    ///   - headers: added to every request (e.g. your app's version).
    ///   - logger: one line per request (method, path, status, duration), and nothing secret.
    ///   - migratingFrom: earlier Keychain locations of this app, whose items are moved on first
    ///     read (TransferKit 1's default location by default), so changing the location never
    ///     loses the identity.
    ///   - attestation: attests this device when a login would create an account
    ///     (``AppAttestProvider``); nil never attests.
    ///   - backupKeys: keep a backup key of each account in iCloud Keychain (synchronizable items
    ///     at `keychain`'s service and group), so that the user's next phone finds it
    ///     (``StartingPoint/backupsFound(_:)``). False turns them off: the next launch deletes
    ///     the ones this phone made (on the service and in iCloud Keychain).
    public static func standard(
        baseURL: URL, keychain: KeychainLocation = .thisApp, appGroup: String? = nil,
        urlSession: URLSession = .shared, headers: [String: String] = [:],
        logger: (@Sendable (String) -> Void)? = nil,
        migratingFrom previous: [KeychainLocation] = [.transferKit1],
        attestation: (any AttestationProvider)? = nil,
        backupKeys: Bool = true
    ) -> TransferClient {
        let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
        let container = appGroup.flatMap { FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: $0) }
        if let problem = StandardLayout.misconfiguration(
            keychain: keychain, appGroup: appGroup, appGroupContainerFound: container != nil)
        {
            logger?(problem)
            assertionFailure(problem)
        }
        #if os(macOS)
        let isMacOS = true
        #else
        let isMacOS = false
        #endif
        let directory = StandardLayout.accountListDirectory(
            applicationSupport: support, appGroupContainer: container,
            bundleIdentifier: Bundle.main.bundleIdentifier, isMacOS: isMacOS)
        return TransferClient(
            baseURL: baseURL,
            credentials: KeychainCredentialStore(
                location: keychain, migratingFrom: StandardLayout.previousLocations(previous, current: keychain)),
            accountList: FileCredentialStore(directory: directory),
            sharesSessions: StandardLayout.sharesSessions(keychain: keychain, appGroup: appGroup),
            transport: Transport.urlSession(urlSession, headers: headers).logging(logger),
            attestation: attestation,
            synchronizedStore: KeychainCredentialStore.synchronized(location: keychain),
            backupKeys: backupKeys
        )
    }
}

extension SiblingSession {
    /// The session of the sibling app `clientId` (its bundle id) for iOS or macOS: its tokens in
    /// the Keychain (``KeychainCredentialStore``, this device only, the app's own location by
    /// default), under a key of this client id, so that sibling apps sharing an access group
    /// keep their sessions apart. Its items are moved from `migratingFrom` on first read. With a
    /// shared location (an access group the app shares with its extensions), the session is
    /// read from the Keychain at every call (`sharesSession`), so that the app and its
    /// extensions never refresh over each other's renewals.
    public static func standard(
        baseURL: URL, clientId: String, keychain: KeychainLocation = .thisApp,
        urlSession: URLSession = .shared, headers: [String: String] = [:],
        migratingFrom previous: [KeychainLocation] = [.transferKit1]
    ) -> SiblingSession {
        SiblingSession(
            baseURL: baseURL, clientId: clientId,
            credentials: KeychainCredentialStore(
                location: keychain, migratingFrom: StandardLayout.previousLocations(previous, current: keychain)),
            transport: .urlSession(urlSession, headers: headers),
            sharesSession: StandardLayout.sharesSessions(keychain: keychain, appGroup: nil))
    }
}
#endif
