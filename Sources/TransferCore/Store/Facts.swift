/// What operations read before they decide, declared once.
///
/// An operation lists the facts it needs (`StoreOperation.reads`); the store reads them in its
/// transaction, locking each in the order of its rank, and hands them to `plan` as `Facts`,
/// where each is read back by a typed accessor below. A fact the operation did not list is
/// not a silent nil: reading it throws `UndeclaredFact` (and traps in debug builds, so a test
/// names it at once).
///
/// A new read is a case here with its accessor (the type of its value), and its SQL in
/// TransferSQL's `FactSQL.swift`: statements, decoder, lock rank and the fact it chains from,
/// in one switch the compiler keeps complete.
public enum FactKey: Sendable, Equatable, CustomStringConvertible {
    /// A transfer by id.
    case transfer(id: String)
    /// The transfer whose code has this SHA-256, in whatever state.
    case transferByCode(SecretHash)
    /// The pending transfers (expired ones too) with this email key or of this account, oldest first.
    case pendingTransfers(PendingTransferQuery)
    /// Which session a refresh token is or was the token of.
    case refreshToken(SecretHash)
    /// The device of the session a refresh token names (chains from `refreshToken`).
    case refreshTokenDevice(SecretHash)
    /// The sibling app's session a refresh token names, if it is one's (chains from `refreshToken`).
    case refreshTokenSiblingSession(SecretHash)
    /// The device of a hand-off code, read before the code itself (every operation locks the device first).
    case handoffCodeDevice(SecretHash)
    /// A hand-off code by its SHA-256.
    case handoffCode(SecretHash)
    /// A device with every account it holds or held (and their sessions).
    case device(String)
    /// The devices an account is active on (at most one), each with all its accounts.
    case accountDevices(AccountRef)
    /// An account's row and migration flag.
    case account(AccountRef)
    /// When the accounts created on a device after `since` were created, oldest first (read
    /// after the device, whose lock holds back other creations on it; not locked itself).
    case accountsCreated(onDevice: String, since: Timestamp)
    /// The token signing keys, oldest first; serialised among writers (and nodes).
    case signingKeys
    /// A service key by name.
    case serviceKey(name: String)
    /// When an Apple nonce expires; nil when it was never issued or is used.
    case appleNonce(SecretHash)
    /// The Apple link of an Apple ID (`sub`).
    case appleLinkBySub(String)
    /// The Apple link of an account.
    case appleLink(AccountRef)
    /// Whether Apple's notification with this `jti` was handled already.
    case appleNotificationSeen(jti: String)
    /// Outbox messages due for delivery, the oldest of their (kind, account) each, oldest
    /// first, not leased; rows another transaction holds are skipped.
    case dueOutbox(DueOutboxQuery)
    /// An outbox message by id.
    case outboxMessage(id: String)
    /// Every failed outbox message.
    case failedOutbox
    /// An account's recovery code, used or not.
    case recoveryCode(AccountRef)
    /// An account's backup keys, used or not, one per store at most, by store.
    case backupKeys(AccountRef)
    /// When an attestation challenge expires; nil when it was never issued or is used.
    case attestationChallenge(SecretHash)
    /// The device that holds the push token of this provider with this hash, and the accounts
    /// active on it: a registration of the token elsewhere moves it from there.
    case pushTokenHolder(PushProvider, SecretHash)

    // Read only outside operations (profile and report reads): never locked.

    /// The devices an account is bound to now, as `GET /v1/me` lists them.
    case boundDevices(account: String)
    /// Every device the account is or was on, each with all its accounts, in the order it was added.
    case devicesEver(account: String)
    /// The account's latest audit events, oldest first.
    case recentEvents(account: String, limit: Int)
    /// The push tokens of the devices the account is active on.
    case pushTokens(account: String)
    /// The sibling apps' sessions of the account.
    case siblingSessions(account: String)
}

extension FactKey {
    /// The fact's kind only: its arguments are lookup keys (a code's or token's hash, an Apple
    /// ID, an email key) that no log or error message needs.
    public var description: String {
        switch self {
        case .signingKeys: return "the fact signingKeys"
        case .failedOutbox: return "the fact failedOutbox"
        default: return "the fact \(Mirror(reflecting: self).children.first?.label ?? "?")"
        }
    }
}

/// An account named by id, or by a code that leads to it: a code claim reads its account's
/// facts in the same transaction as the code, without knowing the id beforehand.
public enum AccountRef: Sendable, Equatable, CustomStringConvertible {
    case id(String)
    /// The account of the transfer whose code has this SHA-256.
    case ofTransferCode(SecretHash)
    /// The account of the recovery code with this SHA-256.
    case ofRecoveryCode(SecretHash)
    /// The account linked to this Apple ID (`sub`).
    case ofAppleID(String)
    /// The account of the backup key with this SHA-256.
    case ofBackupKey(SecretHash)

    public var description: String {
        switch self {
        case .id(let id): id
        case .ofTransferCode: "the account of a transfer code"
        case .ofRecoveryCode: "the account of a recovery code"
        case .ofAppleID: "the account of an Apple ID"
        case .ofBackupKey: "the account of a backup key"
        }
    }
}

public struct PendingTransferQuery: Sendable, Equatable {
    public var emailKey: String?
    public var account: AccountRef
    public init(emailKey: String?, account: AccountRef) {
        self.emailKey = emailKey
        self.account = account
    }
    public init(emailKey: String?, accountID: String) { self.init(emailKey: emailKey, account: .id(accountID)) }
    /// The account's pending transfers.
    public static func of(_ account: AccountRef) -> PendingTransferQuery { PendingTransferQuery(emailKey: nil, account: account) }
    public static func of(_ accountID: String) -> PendingTransferQuery { of(.id(accountID)) }
}

/// An account as a decision reads it.
public struct AccountRecord: Sendable, Equatable {
    /// Id, user name and migration flag, as a session answer names the account.
    public var summary: AccountSummary
    public var createdAt: Timestamp
    /// The device the account was last moved to (the contract's `transferId`).
    public var movedToDeviceID: String?
    public var deletedAt: Timestamp?
    /// Since when the app backend protects the account (nil: not protected).
    public var protectedAt: Timestamp?
    public init(
        summary: AccountSummary, createdAt: Timestamp, movedToDeviceID: String? = nil, deletedAt: Timestamp? = nil, protectedAt: Timestamp? = nil
    ) {
        self.summary = summary
        self.createdAt = createdAt
        self.movedToDeviceID = movedToDeviceID
        self.deletedAt = deletedAt
        self.protectedAt = protectedAt
    }
    public var id: String { summary.accountID }
}

/// A fact an operation read without listing it: a mistake in the operation, never in the data.
public struct UndeclaredFact: Error, CustomStringConvertible {
    public let key: FactKey
    public init(key: FactKey) { self.key = key }
    public var description: String { "the operation read \(key) without listing it in its reads" }
}

/// What a store read for an operation's `reads`.
public struct Facts: Sendable {
    /// Few per operation: a list searched in order costs less than hashing the keys.
    private var values: [(key: FactKey, value: any Sendable)] = []

    public init() {}

    /// Files what was read for `key` (the store, or a test building facts by hand).
    public mutating func record(_ key: FactKey, _ value: any Sendable) {
        if let i = values.firstIndex(where: { $0.key == key }) {
            values[i].value = value
        } else {
            values.append((key, value))
        }
    }

    /// The value read for `key`; one that was not read fails loudly.
    public func value<Value>(_ key: FactKey, as: Value.Type = Value.self) throws -> Value {
        guard let found = values.first(where: { $0.key == key }), let value = found.value as? Value else {
            assertionFailure("the operation read \(key) without listing it in its reads")
            throw UndeclaredFact(key: key)
        }
        return value
    }

    // The typed accessors: one per fact, its value's type written once.

    public func transfer(_ id: String) throws -> TransferRecord? { try value(.transfer(id: id)) }
    public func transfer(codeHash: SecretHash) throws -> TransferRecord? { try value(.transferByCode(codeHash)) }
    /// Oldest first.
    public func pendingTransfers(_ query: PendingTransferQuery) throws -> [TransferRecord] { try value(.pendingTransfers(query)) }
    public func refreshToken(_ hash: SecretHash) throws -> RefreshTokenLookup? { try value(.refreshToken(hash)) }
    public func refreshTokenDevice(_ hash: SecretHash) throws -> DeviceRecord? { try value(.refreshTokenDevice(hash)) }
    public func refreshTokenSiblingSession(_ hash: SecretHash) throws -> SiblingSession? { try value(.refreshTokenSiblingSession(hash)) }
    public func handoffCodeDevice(_ hash: SecretHash) throws -> DeviceRecord? { try value(.handoffCodeDevice(hash)) }
    public func handoffCode(_ hash: SecretHash) throws -> HandoffCodeRecord? { try value(.handoffCode(hash)) }
    public func device(_ id: String) throws -> DeviceRecord? { try value(.device(id)) }
    /// At most one: an account is active on one device.
    public func accountDevices(_ account: AccountRef) throws -> [DeviceRecord] { try value(.accountDevices(account)) }
    public func accountDevices(_ id: String) throws -> [DeviceRecord] { try accountDevices(.id(id)) }
    public func account(_ account: AccountRef) throws -> AccountRecord? { try value(.account(account)) }
    public func account(_ id: String) throws -> AccountRecord? { try account(.id(id)) }
    /// Oldest first.
    public func accountsCreated(onDevice device: String, since: Timestamp) throws -> [Timestamp] {
        try value(.accountsCreated(onDevice: device, since: since))
    }
    /// Oldest first.
    public func signingKeys() throws -> [SigningKeyRecord] { try value(.signingKeys) }
    public func serviceKey(name: String) throws -> ServiceKeyRecord? { try value(.serviceKey(name: name)) }
    public func appleNonceExpiry(_ hash: SecretHash) throws -> Timestamp? { try value(.appleNonce(hash)) }
    public func appleLink(sub: String) throws -> AppleLink? { try value(.appleLinkBySub(sub)) }
    public func appleLink(_ account: AccountRef) throws -> AppleLink? { try value(.appleLink(account)) }
    public func appleLink(_ id: String) throws -> AppleLink? { try appleLink(.id(id)) }
    public func appleNotificationSeen(jti: String) throws -> Bool { try value(.appleNotificationSeen(jti: jti)) }
    public func dueOutbox(_ query: DueOutboxQuery) throws -> [OutboxMessage] { try value(.dueOutbox(query)) }
    public func outboxMessage(_ id: String) throws -> OutboxMessage? { try value(.outboxMessage(id: id)) }
    public func failedOutbox() throws -> [OutboxMessage] { try value(.failedOutbox) }
    public func recoveryCode(_ account: AccountRef) throws -> RecoveryCodeRecord? { try value(.recoveryCode(account)) }
    public func recoveryCode(_ id: String) throws -> RecoveryCodeRecord? { try recoveryCode(.id(id)) }
    /// By store.
    public func backupKeys(_ account: AccountRef) throws -> [BackupKeyRecord] { try value(.backupKeys(account)) }
    public func backupKeys(_ id: String) throws -> [BackupKeyRecord] { try backupKeys(.id(id)) }
    public func attestationChallengeExpiry(_ hash: SecretHash) throws -> Timestamp? { try value(.attestationChallenge(hash)) }
    public func pushTokenHolder(_ provider: PushProvider, _ hash: SecretHash) throws -> PushTokenHolder? {
        try value(.pushTokenHolder(provider, hash))
    }
    public func boundDevices(account: String) throws -> [AccountProfile.Device] { try value(.boundDevices(account: account)) }
    public func devicesEver(account: String) throws -> [DeviceRecord] { try value(.devicesEver(account: account)) }
    public func recentEvents(account: String, limit: Int) throws -> [AuditEvent] { try value(.recentEvents(account: account, limit: limit)) }
    public func pushTokens(account: String) throws -> [PushToken] { try value(.pushTokens(account: account)) }
    public func siblingSessions(account: String) throws -> [SiblingSession] { try value(.siblingSessions(account: account)) }
}
