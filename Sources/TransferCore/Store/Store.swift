/// The narrow storage interface. Every change is a `StoreOperation` that `execute` runs
/// atomically: one transaction that reads what the operation names, asks it for its plan and
/// applies the plan's effects, so every check-then-act holds under concurrency and crashes.
public protocol TransferStore: Sendable {
    /// Succeeds when the database answers.
    func ping() async throws

    /// Runs one operation in one transaction and returns its decision: the success value, or
    /// the refusal (whose effects were committed too). Throws when the store fails.
    func execute<Operation: StoreOperation>(_ operation: Operation) async throws -> Result<Operation.Success, TransferError>

    /// Auto-login. The default runs `LoginCommand` through `execute`; a store may answer the
    /// common case faster, with the same effects.
    func login(_ command: LoginCommand) async throws -> Result<SessionGrant, TransferError>

    /// True while the session is the open session of its (device, account) pair and the
    /// account is still on the device; with `clientID`, while it is that sibling app's open
    /// session on the pair.
    func isSessionValid(sessionID: String, accountID: String, deviceID: String, clientID: String?) async throws -> Bool
    /// Facts read on one snapshot, outside any operation: nothing is locked.
    func read(_ facts: [FactKey], at: Timestamp) async throws -> Facts
    /// A device with every account it holds or held, read without locking.
    func device(_ id: String, at: Timestamp) async throws -> DeviceRecord?
    /// What `/v1/me` shows; with `session`, only while that session is open (`isSessionValid`'s
    /// rule), checked in the read of the profile, first: one read for the whole request (on
    /// SQLite one snapshot; on PostgreSQL one connection, statement after statement).
    func profile(accountID: String, whileOpen session: OpenSession?, at: Timestamp) async throws -> AccountProfile?
    /// The pending transfer for an email key, if any (it may be expired or locked: the caller decides).
    func pendingTransfer(emailKey: String) async throws -> TransferRecord?
    /// The latest transfer of this email key that `device` claimed.
    func claimedTransfer(emailKey: String, by device: String) async throws -> TransferRecord?
    /// When the attestation challenge with this SHA-256 expires; nil when none is stored
    /// (never issued, or used). Read without a lock, before the proof is verified.
    func attestationChallengeExpiry(hash: SecretHash) async throws -> Timestamp?

    /// Who reaches which token, for the asked accounts (lower-case ids): one row per (token,
    /// account), ordered by device, provider and account. One query, whatever the number of ids.
    func pushRoutes(accountIDs: [String]) async throws -> [PushRoute]
    /// The service key with this SHA-256, revoked or not.
    func serviceKey(hash: SecretHash) async throws -> ServiceKeyRecord?
    /// The link of this Apple ID, read without locking.
    func appleLink(sub: String) async throws -> AppleLink?
    /// The token signing keys, oldest first, read without locking (nodes poll them for rotations).
    func signingKeys() async throws -> [SigningKeyRecord]

    /// How many messages of `kind` wait, and since when: the outbox metrics.
    func outboxStats(kind: OutboxKind) async throws -> OutboxStats

    /// One round of housekeeping, in batches of `batchSize` rows, so that storage grows with
    /// devices and accounts, not with launches. On PostgreSQL, nil when another node is pruning.
    func prune(_ cutoffs: PruneCutoffs, batchSize: Int) async throws -> PruneCounts?
}

public struct OutboxStats: Sendable, Equatable {
    public var pending: Int
    public var failed: Int
    public var oldestPendingAt: Timestamp?
    public init(pending: Int, failed: Int, oldestPendingAt: Timestamp?) {
        self.pending = pending
        self.failed = failed
        self.oldestPendingAt = oldestPendingAt
    }
}

/// What the pruner removes: sessions expired at `now` (their secrets; sibling apps' sessions
/// entirely), hand-off codes expired at `now`, rotated refresh tokens
/// expired at `now` or of sessions that ended, pending transfers expired at `now` (marked
/// expired), ended transfers and audit events from before `retainedSince`, webhook events no
/// worker attempted within their three days (no `--webhook-url`), failed outbox messages
/// from before `retainedSince`, Apple notification ids older than `AppleEvent.replayWindow`,
/// attestation challenges expired at `now`, and, with `inactiveBefore`, inactive accounts
/// (erased as `DELETE /v1/me` does).
public struct PruneCutoffs: Sendable, Equatable {
    public var now: Timestamp
    public var retainedSince: Timestamp
    /// Signing keys retired before this are deleted (nil: none). The server sets it past the
    /// time its access tokens' lifetime keeps a retired key published.
    public var signingKeysRetiredBefore: Timestamp?
    /// Accounts whose devices all last logged in before this are erased as inactive
    /// (`EraseInactiveAccountCommand`); nil (no `--inactive-account-ttl`): none.
    public var inactiveBefore: Timestamp?
    public init(now: Timestamp, retainedSince: Timestamp, signingKeysRetiredBefore: Timestamp? = nil, inactiveBefore: Timestamp? = nil) {
        self.now = now
        self.retainedSince = retainedSince
        self.signingKeysRetiredBefore = signingKeysRetiredBefore
        self.inactiveBefore = inactiveBefore
    }

    /// Apple notifications received before this are forgotten (older ones are refused by their `iat`).
    public var appleNotificationsSince: Timestamp { now - AppleEvent.replayWindow }
}

public struct PruneCounts: Sendable, Equatable, CustomStringConvertible {
    public var expiredSessions = 0
    public var rotatedTokens = 0
    public var expiredTransfers = 0
    public var endedTransfers = 0
    public var auditEvents = 0
    public var outbox = 0
    public var appleNotifications = 0
    public var signingKeys = 0
    public var handoffCodes = 0
    /// Rate-limit windows that ended.
    public var rateSlots = 0
    /// Attestation challenges that expired unused.
    public var attestationChallenges = 0
    /// Accounts erased as inactive.
    public var inactiveAccounts = 0
    public init() {}
    public var total: Int {
        expiredSessions + rotatedTokens + expiredTransfers + endedTransfers + auditEvents + outbox + appleNotifications + signingKeys
            + handoffCodes + rateSlots + attestationChallenges + inactiveAccounts
    }
    public var description: String {
        "sessions=\(expiredSessions) rotatedTokens=\(rotatedTokens) expiredTransfers=\(expiredTransfers) endedTransfers=\(endedTransfers) auditEvents=\(auditEvents) outbox=\(outbox) appleNotifications=\(appleNotifications) signingKeys=\(signingKeys) handoffCodes=\(handoffCodes) rateSlots=\(rateSlots) attestationChallenges=\(attestationChallenges) inactiveAccounts=\(inactiveAccounts)"
    }
}

extension TransferStore {
    public func login(_ command: LoginCommand) async throws -> Result<SessionGrant, TransferError> { try await execute(command) }
}

/// An account as a session answer names it: id, user name and migration flag.
public struct AccountSummary: Sendable, Equatable {
    public var accountID: String
    public var userName: String
    public var migrationFlag: Bool
    public init(accountID: String, userName: String, migrationFlag: Bool) {
        self.accountID = accountID
        self.userName = userName
        self.migrationFlag = migrationFlag
    }
}

/// Which session a presented refresh token is or was a token of: its current one, or one a
/// refresh rotated away. The plan tells which by comparing it with the locked session.
public struct RefreshTokenLookup: Sendable, Equatable {
    public var deviceID: String
    public var accountID: String
    public var sessionID: String
    /// The sibling app's client id, for a sibling session's token.
    public var clientID: String?
    public init(deviceID: String, accountID: String, sessionID: String, clientID: String? = nil) {
        self.clientID = clientID
        self.deviceID = deviceID
        self.accountID = accountID
        self.sessionID = sessionID
    }
}


/// A session named by a verified access token, before it is known to be open.
public struct OpenSession: Sendable, Equatable {
    public var sessionID: String
    public var deviceID: String
    /// A sibling app's session: its client id.
    public var clientID: String?
    public init(sessionID: String, deviceID: String, clientID: String?) {
        self.sessionID = sessionID
        self.deviceID = deviceID
        self.clientID = clientID
    }
}
