#if canImport(Security)
import Foundation
import Security

/// A store in the Keychain: generic-password items of one service, one per key.
///
/// Items are `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly` (readable after the first unlock
/// since boot, never in backups or on another phone) and not synchronizable (no iCloud Keychain).
/// `errSecItemNotFound` reads as empty; `errSecInteractionNotAllowed` (locked before the first
/// unlock) and every other error throw ``CredentialStoreUnavailable``.
public struct KeychainCredentialStore: CredentialStore {
    /// The items' `kSecAttrService`.
    public let service: String
    /// A Keychain access group shared with app extensions, or nil for the app's default.
    public let accessGroup: String?

    /// A store of the items of `service`, in `accessGroup` (nil: the app's default group).
    public init(service: String, accessGroup: String? = nil) {
        self.service = service
        self.accessGroup = accessGroup
    }

    public func read(_ key: String) throws -> Data? {
        var query = self.query(key)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        switch status {
        case errSecSuccess:
            guard let data = result as? Data else { throw CredentialStoreUnavailable("Keychain item \(key) holds no data") }
            return data
        case errSecItemNotFound:
            return nil
        case errSecInteractionNotAllowed:
            throw CredentialStoreUnavailable("Keychain locked (errSecInteractionNotAllowed)")
        default:
            throw CredentialStoreUnavailable("Keychain read failed: OSStatus \(status)")
        }
    }

    public func write(_ data: Data, for key: String) throws {
        let attributes: [String: Any] = [
            kSecValueData as String: data,
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]
        var status = SecItemUpdate(query(key) as CFDictionary, attributes as CFDictionary)
        if status == errSecItemNotFound {
            let item = query(key).merging(attributes) { _, new in new }
            status = SecItemAdd(item as CFDictionary, nil)
        }
        guard status == errSecSuccess else { throw CredentialStoreUnavailable("Keychain write failed: OSStatus \(status)") }
    }

    public func remove(_ key: String) throws {
        let status = SecItemDelete(query(key) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else {
            throw CredentialStoreUnavailable("Keychain delete failed: OSStatus \(status)")
        }
    }

    private func query(_ key: String) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: key,
            kSecAttrSynchronizable as String: false,
        ]
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        return query
    }
}

extension TransferClient {
    /// The client for an iOS or macOS app: the device identity and tokens in the Keychain
    /// (``KeychainCredentialStore``, this device only), the account list in Application Support
    /// (``FileCredentialStore``, included in backups, which is how a restore onto a new phone is noticed).
    public static func standard(
        baseURL: URL, keychainService: String = "TransferKit", accessGroup: String? = nil
    ) -> TransferClient {
        let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
        return TransferClient(
            baseURL: baseURL,
            credentials: KeychainCredentialStore(service: keychainService, accessGroup: accessGroup),
            accountList: FileCredentialStore(directory: support.appendingPathComponent("TransferKit", isDirectory: true))
        )
    }
}

extension SiblingSession {
    /// The session of the sibling app `clientId` (its bundle id) for iOS or macOS: its tokens in
    /// the Keychain (``KeychainCredentialStore``, this device only), under a key of this client
    /// id, so that sibling apps sharing an `accessGroup` keep their sessions apart.
    public static func standard(
        baseURL: URL, clientId: String, keychainService: String = "TransferKit", accessGroup: String? = nil
    ) -> SiblingSession {
        SiblingSession(
            baseURL: baseURL, clientId: clientId,
            credentials: KeychainCredentialStore(service: keychainService, accessGroup: accessGroup))
    }
}
#endif
