/// What support staff need beyond the app's calls: finding accounts and reading their
/// whole story. Changes (cancel, unlock, issue, revoke) are store operations run through
/// `TransferService`, so they follow the same rules and write the same audit trail as the API.
public protocol SupportStore: TransferStore {
    /// Every account `query` names: as accountId, userName, a device ever bound, or the
    /// email of a pending or past transfer.
    func findAccounts(_ query: String) async throws -> [AccountMatch]
    func report(accountID: String, at: Timestamp, recentEvents: Int) async throws -> AccountReport?
    /// The account's audit trail, oldest first.
    func history(accountID: String) async throws -> [AuditEvent]
    func stats(at: Timestamp) async throws -> SupportStats
    /// Every service key, oldest first.
    func serviceKeys() async throws -> [ServiceKeyRecord]
    /// Outbox messages pending and failed, oldest first, at most `limit`.
    func outbox(limit: Int) async throws -> [OutboxMessage]
    /// `transfer inactive`: how many accounts are inactive at `now` (every device's last login
    /// before `inactiveBefore`), erasable or kept by protection; reads only.
    func inactiveCounts(before inactiveBefore: Timestamp, at now: Timestamp) async throws -> InactiveCounts
}

public struct AccountMatch: Sendable, Equatable, Codable {
    public enum Field: String, Sendable, Codable { case accountId, userName, deviceId, email, appleEmail }
    public var accountID: String
    public var userName: String
    public var matchedBy: Field
    public init(accountID: String, userName: String, matchedBy: Field) {
        self.accountID = accountID
        self.userName = userName
        self.matchedBy = matchedBy
    }
}

public struct AccountReport: Sendable {
    public var accountID: String
    public var userName: String
    public var createdAt: Timestamp
    /// The device the account was last moved to (the contract's `transferId`).
    public var movedToDeviceID: String?
    /// Every device the account is or was on, in the order it was added, each with every
    /// account it holds or held and its current one.
    public var devices: [DeviceRecord]
    /// The pending transfer, also when it has expired but was not yet marked so.
    public var transfer: TransferRecord?
    /// The most recent events, oldest first.
    public var recentEvents: [AuditEvent]
    /// The push tokens of the devices the account is on; `DeviceRecord.routesPushes(to:)` tells which reach it.
    public var pushTokens: [PushToken]
    /// The linked Apple ID, if any.
    public var apple: AppleLink?
    /// When the account was deleted.
    public var deletedAt: Timestamp?
    /// Sibling apps' open sessions on the account's pairs, by device and client id.
    public var siblingSessions: [SiblingSession]
    /// Its recovery code (never the code: when it was made, and whether it was used).
    public var recoveryCode: RecoveryCodeRecord?
    /// Its backup keys by store, used or not (never the keys: when each was made and used).
    public var backupKeys: [BackupKeyRecord]
    /// Since when the app backend protects it from erasure as inactive (nil: not protected).
    public var protectedAt: Timestamp?

    public init(
        accountID: String, userName: String, createdAt: Timestamp, movedToDeviceID: String?, devices: [DeviceRecord],
        transfer: TransferRecord?, recentEvents: [AuditEvent], pushTokens: [PushToken] = [], apple: AppleLink? = nil,
        deletedAt: Timestamp? = nil, siblingSessions: [SiblingSession] = [], recoveryCode: RecoveryCodeRecord? = nil,
        backupKeys: [BackupKeyRecord] = [], protectedAt: Timestamp? = nil
    ) {
        self.backupKeys = backupKeys
        self.protectedAt = protectedAt
        self.recoveryCode = recoveryCode
        self.siblingSessions = siblingSessions
        self.deletedAt = deletedAt
        self.pushTokens = pushTokens
        self.apple = apple
        self.accountID = accountID
        self.userName = userName
        self.createdAt = createdAt
        self.movedToDeviceID = movedToDeviceID
        self.devices = devices
        self.transfer = transfer
        self.recentEvents = recentEvents
    }

    public func migrationFlag(at now: Timestamp) -> Bool { transfer?.isOpen(at: now) ?? false }
}

public struct SupportStats: Sendable, Equatable, Codable {
    /// Accounts that exist: a deleted account's tombstone is not counted.
    public var accounts: Int
    public var activeDevices: Int
    public var transfersPending: Int
    public var transfersClaimed: Int
    public var transfersExpired: Int
    public var transfersCancelled: Int
    public var transfersVoided: Int
    public var lockedNow: Int
    public var claimsWonLast24h: Int
    public var claimsFailedLast24h: Int
    /// Accounts created in the last 24 h, by the outcome of their device's attestation.
    public var accountsCreatedLast24h: CreationsByAttestation
    public init(
        accounts: Int, activeDevices: Int, transfersPending: Int, transfersClaimed: Int, transfersExpired: Int,
        transfersCancelled: Int, transfersVoided: Int, lockedNow: Int, claimsWonLast24h: Int, claimsFailedLast24h: Int,
        accountsCreatedLast24h: CreationsByAttestation = CreationsByAttestation()
    ) {
        self.accountsCreatedLast24h = accountsCreatedLast24h
        self.accounts = accounts
        self.activeDevices = activeDevices
        self.transfersPending = transfersPending
        self.transfersClaimed = transfersClaimed
        self.transfersExpired = transfersExpired
        self.transfersCancelled = transfersCancelled
        self.transfersVoided = transfersVoided
        self.lockedNow = lockedNow
        self.claimsWonLast24h = claimsWonLast24h
        self.claimsFailedLast24h = claimsFailedLast24h
    }
}

/// Account creations by the outcome of their attestation (`transfer stats`), as their
/// `account.created` events record it.
public struct CreationsByAttestation: Sendable, Equatable, Codable {
    /// Verified now, or by a device verified at an earlier creation.
    public var verified: Int
    public var missing: Int
    /// Failed one of the checks (monitor mode: created anyway).
    public var failed: Int
    /// Created while attestation was off.
    public var unchecked: Int
    public init(verified: Int = 0, missing: Int = 0, failed: Int = 0, unchecked: Int = 0) {
        self.verified = verified
        self.missing = missing
        self.failed = failed
        self.unchecked = unchecked
    }
}

/// Temporary passwords that support hands out (`transfer issue`).
public enum GeneratedPassword {
    /// No 0/O, 1/l/I: easy to read aloud and type.
    public static let alphabet = Array("abcdefghjkmnpqrstuvwxyz23456789")

    /// 16 random characters (about 79 bits) in four groups: `k7mq-2xrt-p9wd-h4nz`.
    public static func make() -> String {
        var rng = SystemRandomNumberGenerator()
        let chars = (0..<16).map { _ in alphabet.randomElement(using: &rng)! }
        return stride(from: 0, to: 16, by: 4).map { String(chars[$0..<$0 + 4]) }.joined(separator: "-")
    }
}
