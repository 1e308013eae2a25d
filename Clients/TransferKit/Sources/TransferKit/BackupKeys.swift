import Foundation

/// A store that follows the user to their next phone, end-to-end encrypted: on iOS iCloud
/// Keychain's synchronizable items (``KeychainCredentialStore/synchronized(location:)``). TransferKit
/// keeps each account's backup key there, one item per account.
///
/// As with ``CredentialStore``, `readAll` returns an empty dictionary only when nothing is stored,
/// and throws when the store cannot be read now (the phone locked before its first unlock).
public protocol SynchronizedStore: Sendable {
    /// Every item, by key. Throws when the store cannot be read.
    func readAll() throws -> [String: Data]
    /// Stores `data` under `key`, replacing what was there (on every phone of the user).
    func write(_ data: Data, for key: String) throws
    /// Removes what is stored under `key` (on every phone of the user); nothing stored is not an error.
    func remove(_ key: String) throws
}

/// An account's backup key as found in the synchronized store: what a new phone offers the user
/// ("Continue as …?") before ``TransferClient/claim(backup:existingAccounts:)``.
///
/// ``displayName`` is what the app gave with ``TransferClient/setDisplayName(_:of:)`` on the phone
/// that made the key; it is never fetched from the service, which lists no account by anything
/// a new phone holds. The key itself is not public and prints as `<redacted>`.
public struct AccountBackup: Sendable, Equatable, Identifiable, CustomStringConvertible, CustomReflectable {
    /// The account's id.
    public let accountId: String
    /// The name the app gave the account ("Continue as Mia?"); nil when it gave none.
    public let displayName: String?
    /// When the key was made.
    public let createdAt: Date
    /// The key (43 base64url characters): the claim's proof.
    let key: String

    public var id: String { accountId }

    /// A backup for previews and tests of the app's screens (its key works nowhere).
    public init(accountId: String, displayName: String?, createdAt: Date) {
        self.init(accountId: accountId, displayName: displayName, createdAt: createdAt, key: "")
    }

    init(accountId: String, displayName: String?, createdAt: Date, key: String) {
        self.accountId = accountId.lowercased()
        self.displayName = displayName
        self.createdAt = createdAt
        self.key = key
    }

    public var description: String {
        "AccountBackup(accountId: \(accountId), displayName: \(displayName.map { "\"\($0)\"" } ?? "nil"), key: \(Redacted.text))"
    }

    public var customMirror: Mirror {
        Mirror(self, children: [
            "accountId": accountId, "displayName": displayName as Any, "createdAt": createdAt, "key": Redacted.text,
        ])
    }
}

/// What one synchronized item holds: one account's backup key and the name to show.
struct StoredBackup: Codable, Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    var accountId: String
    var key: String
    var displayName: String?
    var createdAt: Date

    var backup: AccountBackup {
        AccountBackup(accountId: accountId, displayName: displayName, createdAt: createdAt, key: key)
    }

    var description: String { "StoredBackup(accountId: \(accountId), key: \(Redacted.text))" }

    var customMirror: Mirror {
        Mirror(self, children: [
            "accountId": accountId, "key": Redacted.text, "displayName": displayName as Any, "createdAt": createdAt,
        ])
    }
}

/// The backup-key decisions TransferKit makes over a ``SynchronizedStore``: which item names
/// which account, which items are offered, which are removed.
struct BackupShelf: Sendable {
    let store: any SynchronizedStore
    /// The store's name on the wire (`PUT /v1/me/backup-key {"store"}`).
    static let wireStore = "icloud-keychain"
    static let prefix = "transferkit.backup-key."

    static func key(_ accountId: String) -> String { prefix + accountId.lowercased() }

    /// Every backup the store holds, newest first. Items that are not TransferKit's, or do not
    /// decode, are left alone and not offered.
    func all() throws -> [StoredBackup] {
        try store.readAll()
            .filter { $0.key.hasPrefix(Self.prefix) }
            .compactMap { try? Wire.decoder().decode(StoredBackup.self, from: $0.value) }
            .sorted { ($0.createdAt, $0.accountId) > ($1.createdAt, $1.accountId) }
    }

    func backup(of accountId: String) throws -> StoredBackup? {
        try all().first { $0.accountId == accountId.lowercased() }
    }

    func write(_ backup: StoredBackup) throws {
        try store.write(Wire.encode(backup), for: Self.key(backup.accountId))
    }

    func remove(_ accountId: String) throws {
        try store.remove(Self.key(accountId))
    }

    /// Removes the account's item only while it still holds `key`: a key that failed on this
    /// phone may meanwhile have been replaced by the phone that holds the account.
    func remove(_ accountId: String, ifStill key: String) throws {
        guard try backup(of: accountId)?.key == key else { return }
        try remove(accountId)
    }
}

/// A synchronized store in memory: the items of one Apple account's iCloud Keychain, shared by
/// every phone that is signed in to it (give the same instance to each). For tests and
/// simulations. ``isAvailable`` set to false makes it act like a phone locked before its first unlock.
public final class MemorySynchronizedStore: SynchronizedStore, Sendable {
    private let memory: MemoryItems

    /// A store holding `items`.
    public init(_ items: [String: Data] = [:]) {
        memory = MemoryItems(items)
    }

    /// False makes every call throw ``StorageError/Kind/locked``.
    public var isAvailable: Bool {
        get { memory.isAvailable }
        set { memory.isAvailable = newValue }
    }

    /// Everything stored, by key.
    public var items: [String: Data] { memory.all }

    public func readAll() throws -> [String: Data] { try memory.withItems { $0 } }

    public func write(_ data: Data, for key: String) throws { try memory.withItems { $0[key] = data } }

    public func remove(_ key: String) throws { try memory.withItems { $0[key] = nil } }
}

/// A claim sent (or about to be sent) whose answer has not arrived: kept in the this-device-only
/// store before the request leaves, so that the next ``TransferClient/launch()`` repeats it (the
/// service answers the device that won with the session, for as long as the account is on it).
struct ClaimInFlight: Codable, Sendable, CustomStringConvertible, CustomReflectable {
    /// The claim's body as sent (its proof, this device's id and secret, the choice).
    var body: Data
    /// What the user chose for the phone's other accounts (``ClaimChoice``'s raw value; nil in a
    /// record made before it was kept: ``ClaimChoice/fail``), for the steps after the win.
    var choice: String?
    /// For a claim with a backup key: the account and the key, so that a refused key is removed
    /// and the account gets a new one; and the name to show with it.
    var backupAccountId: String?
    var backupKey: String?
    var displayName: String?

    /// The body holds the claim's proof and this device's secret; the key is a proof too.
    var description: String {
        "ClaimInFlight(body: \(Redacted.text), backupAccountId: \(backupAccountId ?? "nil"), backupKey: \(backupKey == nil ? "nil" : Redacted.text))"
    }

    var customMirror: Mirror {
        Mirror(self, children: [
            "body": Redacted.text, "choice": choice as Any, "backupAccountId": backupAccountId as Any,
            "backupKey": backupKey == nil ? "nil" : Redacted.text, "displayName": displayName as Any,
        ])
    }
}

/// Reads backups as a new phone would, for ``TransferKitTesting``'s phones. Not API for apps.
@_spi(TransferKitTesting)
public enum BackupShelfView {
    /// The backups `store` holds, newest first.
    public static func backups(in store: any SynchronizedStore) throws -> [AccountBackup] {
        try BackupShelf(store: store).all().map(\.backup)
    }
}
