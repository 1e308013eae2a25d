/// Hashes and verifies temporary passwords (argon2id in production). Implementations run
/// off the caller's thread on a bounded pool and throw `TransferError.overloaded` when full.
public protocol PasswordHasher: Sendable {
    func hash(_ password: String) async throws -> String
    func verify(_ password: String, against phc: String) async throws -> Bool
}

public struct ServicePolicy: Sendable {
    public var transferTTL: Duration
    public var refreshTokenTTL: Duration
    public var lock: LockPolicy

    public init(
        transferTTL: Duration = .seconds(24 * 3600), refreshTokenTTL: Duration = .seconds(30 * 24 * 3600),
        lock: LockPolicy = .standard
    ) {
        self.transferTTL = transferTTL
        self.refreshTokenTTL = refreshTokenTTL
        self.lock = lock
    }
}

/// A session the service opened: the HTTP layer signs an access token for it and hands
/// the refresh token to the device. The refresh token exists in clear only here.
public struct SessionGrant: Sendable {
    public var account: SessionAccount
    public var deviceID: String
    public var sessionID: String
    public var refreshToken: String
    public var created: Bool
}

/// The authenticated caller of an endpoint that needs a Bearer token.
public struct Caller: Sendable, Equatable {
    public var accountID: String
    public var deviceID: String
    public var sessionID: String
    public init(accountID: String, deviceID: String, sessionID: String) {
        self.accountID = accountID
        self.deviceID = deviceID
        self.sessionID = sessionID
    }
}

/// What a device sends to claim a transfer.
public struct ClaimRequest: Sendable {
    public var email: Email
    public var temporaryPassword: String
    public var deviceID: DeviceID
    public var deviceSecret: String
    public var replaceExistingAccount: Bool
    public init(
        email: Email, temporaryPassword: String, deviceID: DeviceID, deviceSecret: String,
        replaceExistingAccount: Bool
    ) {
        self.email = email
        self.temporaryPassword = temporaryPassword
        self.deviceID = deviceID
        self.deviceSecret = deviceSecret
        self.replaceExistingAccount = replaceExistingAccount
    }
}

/// Observes domain events for metrics; the HTTP layer plugs Prometheus counters in.
public protocol ServiceObserver: Sendable {
    func loggedIn(created: Bool)
    func transferSetUp()
    func claimWon()
    func claimFailed()
    func transferLocked()
}

public struct NoObserver: ServiceObserver {
    public init() {}
    public func loggedIn(created: Bool) {}
    public func transferSetUp() {}
    public func claimWon() {}
    public func claimFailed() {}
    public func transferLocked() {}
}

/// The use cases of the contract, on top of a store, a password hasher and a clock.
public struct TransferService: Sendable {
    public let store: any TransferStore
    public let hasher: any PasswordHasher
    public let clock: any WallClock
    public let policy: ServicePolicy
    public let observer: any ServiceObserver
    /// A hash of a random password with the current parameters: an unknown email costs
    /// one real verification, like a known one.
    private let dummyHash: String

    public init(
        store: any TransferStore, hasher: any PasswordHasher, clock: any WallClock = SystemWallClock(),
        policy: ServicePolicy = ServicePolicy(), observer: any ServiceObserver = NoObserver()
    ) async throws {
        self.store = store
        self.hasher = hasher
        self.clock = clock
        self.policy = policy
        self.observer = observer
        self.dummyHash = try await hasher.hash(RandomToken.make())
    }

    // MARK: Auto-login and sessions

    /// Auto-login. `creationRetryAfter` is set when this client may not create an account
    /// now (rate limit): an unknown device is then refused with `rateLimited`.
    public func login(
        deviceID: DeviceID, deviceSecret: String, clientAddress: String?, creationRetryAfter: Int? = nil
    ) async throws -> SessionGrant {
        let now = clock.now()
        let (session, refreshToken) = newSession(now: now)
        let result = try await store.login(
            LoginCommand(
                deviceID: deviceID, secretHash: SecretHash(of: deviceSecret), now: now,
                newAccountID: Identifier.make(), allowCreate: creationRetryAfter == nil, session: session,
                clientAddress: clientAddress))
        switch result {
        case .loggedIn(let account, let created):
            observer.loggedIn(created: created)
            return SessionGrant(
                account: account, deviceID: deviceID.value, sessionID: session.sessionID, refreshToken: refreshToken,
                created: created)
        case .creationRefused:
            throw TransferError.rateLimited(retryAfterSeconds: creationRetryAfter ?? 1)
        case .rejected(let error):
            throw error
        }
    }

    public func refresh(refreshToken: String) async throws -> SessionGrant {
        let now = clock.now()
        let next = RandomToken.make()
        let result = try await store.refresh(
            RefreshCommand(
                tokenHash: SecretHash(of: refreshToken), now: now, next: SecretHash(of: next),
                nextExpiresAt: now + policy.refreshTokenTTL))
        switch result {
        case .rotated(let account, let deviceID, let sessionID):
            return SessionGrant(
                account: account, deviceID: deviceID, sessionID: sessionID, refreshToken: next, created: false)
        case .rejected:
            throw TransferError.invalidRefreshToken
        }
    }

    public func logout(_ caller: Caller) async throws {
        try await store.logout(accountID: caller.accountID, deviceID: caller.deviceID, at: clock.now())
    }

    /// Checks that a verified access token's session and device are still live.
    public func authenticate(accountID: String, deviceID: String, sessionID: String) async throws -> Caller {
        guard try await store.isSessionValid(sessionID: sessionID, accountID: accountID, deviceID: deviceID) else {
            throw TransferError.invalidToken
        }
        return Caller(accountID: accountID, deviceID: deviceID, sessionID: sessionID)
    }

    public func profile(_ caller: Caller) async throws -> AccountProfile {
        guard let profile = try await store.profile(accountID: caller.accountID, at: clock.now()) else {
            throw TransferError.invalidToken
        }
        return profile
    }

    /// Support: revokes a device; its auto-login then answers `403 device_revoked`.
    public func revokeDevice(_ deviceID: DeviceID, actor: String, reason: String) async throws -> String? {
        try await store.revokeDevice(deviceID: deviceID.value, at: clock.now(), actor: actor, reason: reason)
    }

    // MARK: Transfers

    /// Sets up (or replaces) the caller's pending transfer. `password` must have passed
    /// `FieldRules.temporaryPassword`.
    public func setUpTransfer(
        accountID: String, email: Email, password: String, actor: String = "device", reason: String? = nil,
        clientAddress: String? = nil
    ) async throws -> (email: String, expiresAt: Timestamp) {
        let hash = try await hasher.hash(password)
        let now = clock.now()
        let expiresAt = now + policy.transferTTL
        let result = try await store.setUpTransfer(
            SetUpCommand(
                transferID: Identifier.make(), accountID: accountID, email: email, passwordHash: hash, now: now,
                expiresAt: expiresAt, actor: actor, reason: reason, clientAddress: clientAddress))
        switch result {
        case .created:
            observer.transferSetUp()
            return (email.display, expiresAt)
        case .emailInUse:
            throw TransferError.emailInUse
        }
    }

    /// Support: clears the lock and consecutive failures of the account's pending transfer.
    public func unlockTransfer(accountID: String, actor: String, reason: String) async throws -> TransferRecord? {
        guard let store = store as? any SupportStore else { return nil }
        return try await store.unlockTransfer(accountID: accountID, at: clock.now(), actor: actor, reason: reason)
    }

    /// Support: a transfer for a user who lost the old device, with a generated password
    /// that is returned once and stored only as its hash.
    public func issueTransfer(
        accountID: String, email: Email, actor: String, reason: String
    ) async throws -> (password: String, email: String, expiresAt: Timestamp) {
        let password = GeneratedPassword.make()
        let result = try await setUpTransfer(
            accountID: accountID, email: email, password: try FieldRules.temporaryPassword(password, email: email),
            actor: actor, reason: reason)
        return (password, result.email, result.expiresAt)
    }

    public func cancelTransfer(accountID: String, actor: String = "device", reason: String? = nil) async throws -> Bool {
        try await store.cancelTransfer(accountID: accountID, at: clock.now(), actor: actor, reason: reason)
    }

    /// The claim on the new device: one verification of the password, then one transaction.
    public func claim(_ request: ClaimRequest, clientAddress: String?) async throws -> SessionGrant {
        let transfer = try await store.pendingTransfer(emailKey: request.email.key)
        let before = clock.now()
        if let transfer, transfer.isOpen(at: before), let until = transfer.lockedUntil, before < until {
            observer.claimFailed()
            throw TransferError.tooManyAttempts(retryAfterSeconds: before.secondsUntil(until))
        }
        // Unknown, expired and open transfers all cost one verification.
        let usable = transfer.flatMap { $0.isOpen(at: before) ? $0 : nil }
        let verified = try await hasher.verify(request.temporaryPassword, against: usable?.passwordHash ?? dummyHash)
        guard let usable, verified else {
            observer.claimFailed()
            if let usable {
                try await recordFailure(transferID: usable.id, clientAddress: clientAddress)
            }
            throw TransferError.invalidTransferCredentials
        }

        let now = clock.now()
        let (session, refreshToken) = newSession(now: now)
        let result = try await store.claim(
            ClaimCommand(
                transferID: usable.id, deviceID: request.deviceID, secretHash: SecretHash(of: request.deviceSecret),
                replaceExistingAccount: request.replaceExistingAccount, now: now, session: session,
                clientAddress: clientAddress))
        switch result {
        case .claimed(let account):
            observer.claimWon()
            return SessionGrant(
                account: account, deviceID: request.deviceID.value, sessionID: session.sessionID,
                refreshToken: refreshToken, created: false)
        case .rejected(let error):
            if error == .invalidTransferCredentials { observer.claimFailed() }
            throw error
        }
    }

    private func recordFailure(transferID: String, clientAddress: String?) async throws {
        let result = try await store.recordFailedClaim(
            FailedClaimCommand(transferID: transferID, now: clock.now(), policy: policy.lock, clientAddress: clientAddress))
        switch result {
        case .counted, .voided: return
        case .locked: observer.transferLocked()
        // Locked by a concurrent attempt while this one was verifying: refused, not counted.
        case .notCounted(let error): throw error
        }
    }

    private func newSession(now: Timestamp) -> (NewSession, String) {
        let token = RandomToken.make()
        let session = NewSession(
            sessionID: Identifier.make(), refreshTokenHash: SecretHash(of: token),
            refreshExpiresAt: now + policy.refreshTokenTTL)
        return (session, token)
    }
}
