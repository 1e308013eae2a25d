/// The narrow storage interface. Every change is a `StoreOperation` that `execute` runs
/// atomically: one transaction that reads what the operation names, asks it for its plan and
/// applies the plan's effects, so every check-then-act holds under concurrency and crashes.
public protocol TransferStore: Sendable {
    /// Succeeds when the database answers.
    func ping() async throws

    /// Runs one operation in one transaction and returns its result.
    func execute<Operation: StoreOperation>(_ operation: Operation) async throws -> Operation.Result

    /// Auto-login. The default runs `LoginCommand` through `execute`; a store may answer the
    /// common case faster, with the same effects.
    func login(_ command: LoginCommand) async throws -> LoginResult

    /// True while the session is live and its device is still the account's active device.
    func isSessionValid(sessionID: String, accountID: String, deviceID: String) async throws -> Bool
    func profile(accountID: String, at: Timestamp) async throws -> AccountProfile?
    /// The pending transfer for an email key, if any (it may be expired or locked: the caller decides).
    func pendingTransfer(emailKey: String) async throws -> TransferRecord?
}

extension TransferStore {
    public func login(_ command: LoginCommand) async throws -> LoginResult { try await execute(command) }
}

/// A session to open: its id, and the hash of its first refresh token.
public struct NewSession: Sendable, Equatable {
    public var sessionID: String
    public var refreshTokenHash: SecretHash
    public var refreshExpiresAt: Timestamp
    public init(sessionID: String, refreshTokenHash: SecretHash, refreshExpiresAt: Timestamp) {
        self.sessionID = sessionID
        self.refreshTokenHash = refreshTokenHash
        self.refreshExpiresAt = refreshExpiresAt
    }
}

/// What a session answer needs to say about the account.
public struct SessionAccount: Sendable, Equatable {
    public var accountID: String
    public var userName: String
    public var migrationFlag: Bool
    public init(accountID: String, userName: String, migrationFlag: Bool) {
        self.accountID = accountID
        self.userName = userName
        self.migrationFlag = migrationFlag
    }
}

/// A refresh token as a store reads it, with what decides whether it may rotate.
public struct RefreshTokenState: Sendable, Equatable {
    public var sessionID: String
    public var account: SessionAccount
    public var deviceID: String
    public var expiresAt: Timestamp
    public var used: Bool
    public var sessionRevoked: Bool
    /// The session's device is still the account's active device.
    public var deviceActive: Bool
    public init(
        sessionID: String, account: SessionAccount, deviceID: String, expiresAt: Timestamp, used: Bool,
        sessionRevoked: Bool, deviceActive: Bool
    ) {
        self.sessionID = sessionID
        self.account = account
        self.deviceID = deviceID
        self.expiresAt = expiresAt
        self.used = used
        self.sessionRevoked = sessionRevoked
        self.deviceActive = deviceActive
    }
}

/// A token signing key as stored: an Ed25519 private key (raw 32 bytes, base64).
public struct SigningKeyRecord: Sendable, Equatable {
    public var kid: String
    public var algorithm: String
    public var privateKey: String
    public var createdAt: Timestamp
    public init(kid: String, algorithm: String, privateKey: String, createdAt: Timestamp) {
        self.kid = kid
        self.algorithm = algorithm
        self.privateKey = privateKey
        self.createdAt = createdAt
    }
}

/// The token signing keys, oldest first. When none is current, `candidate` becomes the key
/// (once, even when several nodes start together).
public struct SigningKeysCommand: StoreOperation {
    public var candidate: SigningKeyRecord
    public var now: Timestamp
    public init(candidate: SigningKeyRecord, now: Timestamp) {
        self.candidate = candidate
        self.now = now
    }

    public var reads: Reads { Reads(signingKeys: true) }

    public func plan(_ facts: Facts) -> Plan<[SigningKeyRecord]> {
        guard facts.signingKeys.isEmpty else { return Plan(facts.signingKeys) }
        return Plan([candidate], [.addSigningKey(candidate)])
    }
}
