/// The narrow storage interface. Each method is one atomic unit: a store runs it in one
/// transaction (or one conditional statement), reads what it needs, asks `Rules` for the
/// decision and applies it, so every check-then-act holds under concurrency and crashes.
public protocol TransferStore: Sendable {
    /// Succeeds when the database answers.
    func ping() async throws

    /// Auto-login: creates the account for an unknown device, or logs a known one in.
    func login(_ command: LoginCommand) async throws -> LoginResult
    /// Rotates a refresh token; reuse of a rotated one revokes its whole session family.
    func refresh(_ command: RefreshCommand) async throws -> RefreshResult
    /// Logout: revokes every session (refresh tokens and access tokens) of the device.
    func logout(accountID: String, deviceID: String, at: Timestamp) async throws
    /// True while the session is live and its device is still the account's active device.
    func isSessionValid(sessionID: String, accountID: String, deviceID: String) async throws -> Bool

    func profile(accountID: String, at: Timestamp) async throws -> AccountProfile?

    /// Support: retires an active device (stolen phone) and revokes its sessions at once.
    /// Returns the account it was bound to, or nil when the device was not active.
    func revokeDevice(deviceID: String, at: Timestamp, actor: String, reason: String?) async throws -> String?

    func setUpTransfer(_ command: SetUpCommand) async throws -> SetUpResult
    /// Cancels the account's pending transfer; false when none was pending.
    func cancelTransfer(accountID: String, at: Timestamp, actor: String, reason: String?) async throws -> Bool

    /// The pending transfer for an email key, if any (it may be expired or locked: the caller decides).
    func pendingTransfer(emailKey: String) async throws -> TransferRecord?
    /// Counts one wrong password against a transfer, locking or voiding it per `policy`.
    func recordFailedClaim(_ command: FailedClaimCommand) async throws -> FailedClaimResult
    /// Applies a claim whose password verified: binds the new device, retires the others,
    /// consumes the transfer and opens a session, or changes nothing.
    func claim(_ command: ClaimCommand) async throws -> ClaimResult

    /// The token signing keys, oldest first. When none is current, `candidate` is stored
    /// first (once, even when several nodes start together).
    func signingKeys(insertingIfNone candidate: SigningKeyRecord) async throws -> [SigningKeyRecord]
}

/// A session to open: its id, and the hash of its first refresh token.
public struct NewSession: Sendable {
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

public struct LoginCommand: Sendable {
    public var deviceID: DeviceID
    public var secretHash: SecretHash
    public var now: Timestamp
    /// Used only when the device is unknown and an account is created.
    public var newAccountID: String
    /// False when this client may not create more accounts right now.
    public var allowCreate: Bool
    public var session: NewSession
    public var clientAddress: String?
    public init(
        deviceID: DeviceID, secretHash: SecretHash, now: Timestamp, newAccountID: String, allowCreate: Bool = true,
        session: NewSession, clientAddress: String?
    ) {
        self.allowCreate = allowCreate
        self.deviceID = deviceID
        self.secretHash = secretHash
        self.now = now
        self.newAccountID = newAccountID
        self.session = session
        self.clientAddress = clientAddress
    }
}

public enum LoginResult: Sendable, Equatable {
    case loggedIn(SessionAccount, created: Bool)
    /// The device is unknown and `allowCreate` was false: nothing was written.
    case creationRefused
    case rejected(TransferError)
}

public struct RefreshCommand: Sendable {
    public var tokenHash: SecretHash
    public var now: Timestamp
    public var next: SecretHash
    public var nextExpiresAt: Timestamp
    public init(tokenHash: SecretHash, now: Timestamp, next: SecretHash, nextExpiresAt: Timestamp) {
        self.tokenHash = tokenHash
        self.now = now
        self.next = next
        self.nextExpiresAt = nextExpiresAt
    }
}

public enum RefreshResult: Sendable, Equatable {
    case rotated(SessionAccount, deviceID: String, sessionID: String)
    case rejected
}

/// A refresh token as a store reads it, with what decides whether it may rotate.
public struct RefreshTokenState: Sendable {
    public var sessionID: String
    public var accountID: String
    public var deviceID: String
    public var expiresAt: Timestamp
    public var used: Bool
    public var sessionRevoked: Bool
    public var deviceActive: Bool
    public init(
        sessionID: String, accountID: String, deviceID: String, expiresAt: Timestamp, used: Bool,
        sessionRevoked: Bool, deviceActive: Bool
    ) {
        self.sessionID = sessionID
        self.accountID = accountID
        self.deviceID = deviceID
        self.expiresAt = expiresAt
        self.used = used
        self.sessionRevoked = sessionRevoked
        self.deviceActive = deviceActive
    }
}

public struct SetUpCommand: Sendable {
    public var transferID: String
    public var accountID: String
    public var email: Email
    public var passwordHash: String
    public var now: Timestamp
    public var expiresAt: Timestamp
    public var actor: String
    public var reason: String?
    public var clientAddress: String?
    public init(
        transferID: String, accountID: String, email: Email, passwordHash: String, now: Timestamp,
        expiresAt: Timestamp, actor: String = "device", reason: String? = nil, clientAddress: String? = nil
    ) {
        self.transferID = transferID
        self.accountID = accountID
        self.email = email
        self.passwordHash = passwordHash
        self.now = now
        self.expiresAt = expiresAt
        self.actor = actor
        self.reason = reason
        self.clientAddress = clientAddress
    }
}

public enum SetUpResult: Sendable, Equatable {
    case created
    case emailInUse
}

public struct FailedClaimCommand: Sendable {
    public var transferID: String
    public var now: Timestamp
    public var policy: LockPolicy
    public var clientAddress: String?
    public init(transferID: String, now: Timestamp, policy: LockPolicy, clientAddress: String?) {
        self.transferID = transferID
        self.now = now
        self.policy = policy
        self.clientAddress = clientAddress
    }
}

public enum FailedClaimResult: Sendable, Equatable {
    /// Counted; the transfer stays open.
    case counted
    /// Counted, and this failure locked the transfer until the given time.
    case locked(until: Timestamp)
    /// Counted, and this failure voided the transfer.
    case voided
    /// Not counted: the transfer was locked, or no longer open, by the time it was recorded.
    case notCounted(TransferError)
}

public struct ClaimCommand: Sendable {
    public var transferID: String
    public var deviceID: DeviceID
    public var secretHash: SecretHash
    public var replaceExistingAccount: Bool
    public var now: Timestamp
    public var session: NewSession
    public var clientAddress: String?
    public init(
        transferID: String, deviceID: DeviceID, secretHash: SecretHash, replaceExistingAccount: Bool, now: Timestamp,
        session: NewSession, clientAddress: String?
    ) {
        self.transferID = transferID
        self.deviceID = deviceID
        self.secretHash = secretHash
        self.replaceExistingAccount = replaceExistingAccount
        self.now = now
        self.session = session
        self.clientAddress = clientAddress
    }
}

public enum ClaimResult: Sendable, Equatable {
    case claimed(SessionAccount)
    case rejected(TransferError)
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
