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

    public static let standard = ServicePolicy()
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

/// The use cases of the contract, on top of a store, a password hasher and a clock. Each use
/// case is in `UseCases/`, top to bottom: the method here, and the store operation it runs.
public struct TransferService: Sendable {
    public let store: any TransferStore
    public let hasher: any PasswordHasher
    public let clock: any WallClock
    public let policy: ServicePolicy
    public let observer: any ServiceObserver
    /// A hash of a random password with the current parameters: an unknown email costs
    /// one real verification, like a known one.
    let dummyHash: String

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

    func newSession(now: Timestamp) -> (NewSession, String) {
        let token = RandomToken.make()
        let session = NewSession(
            sessionID: Identifier.make(), refreshTokenHash: SecretHash(of: token),
            refreshExpiresAt: now + policy.refreshTokenTTL)
        return (session, token)
    }
}
