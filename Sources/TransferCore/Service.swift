/// Hashes and verifies temporary passwords (argon2id in production). Implementations run
/// off the caller's thread on a bounded pool and throw `TransferError.overloaded` when full.
public protocol PasswordHasher: Sendable {
    /// A set-up's hash. May be refused (`overloaded`) while verifications are still taken.
    func hash(_ password: String) async throws -> String
    /// A claim's verification: claims come first.
    func verify(_ password: String, against phc: String) async throws -> Bool
}

public struct ServicePolicy: Sendable {
    public var transferTTL: Duration
    public var refreshTokenTTL: Duration
    public var lock: LockPolicy
    /// Accounts one device may hold (`--max-accounts-per-device`).
    public var maxAccountsPerDevice: Int
    /// Accounts one device may create in any 24 hours, its first included, however many it
    /// holds (not a flag: see `RateLimit.deviceCreations`).
    public var deviceCreations = RateLimit.deviceCreations
    /// Sibling-app hand-off; nil while off.
    public var handoff: HandoffPolicy?
    /// The per-client and per-account limits (`--*-limit`, `--ipv6-prefix`); off unless given.
    public var limits: RateLimits
    /// Device attestation for new accounts (`--attestation` and its platforms); off unless given.
    public var attestation: AttestationPolicy
    /// Whether a change of the account's ways back (and its deletion) needs the device's secret
    /// beside the access token (`--device-proof`, on unless turned off).
    public var deviceProof: Bool
    /// How finely the use of a session is recorded (`--activity-resolution`): a login within it
    /// of the pair's last recorded activity writes nothing.
    public var activityResolution: ActivityResolution

    public init(
        transferTTL: Duration = .seconds(24 * 3600), refreshTokenTTL: Duration = .seconds(30 * 24 * 3600),
        lock: LockPolicy = .standard, maxAccountsPerDevice: Int = 5, handoff: HandoffPolicy? = nil, limits: RateLimits = .off,
        attestation: AttestationPolicy = .off, deviceProof: Bool = true, activityResolution: ActivityResolution = .standard
    ) {
        self.activityResolution = activityResolution
        self.deviceProof = deviceProof
        self.attestation = attestation
        self.handoff = handoff
        self.limits = limits
        self.transferTTL = transferTTL
        self.refreshTokenTTL = refreshTokenTTL
        self.lock = lock
        self.maxAccountsPerDevice = maxAccountsPerDevice
    }

    public static let standard = ServicePolicy()
}

/// A session opened or renewed: the HTTP layer signs an access token for it and hands the
/// refresh token to the device. The refresh token exists in clear only here.
public struct SessionGrant: Sendable, Equatable {
    public var account: AccountSummary
    public var deviceID: String
    public var sessionID: String
    public var refreshToken: String
    public var created: Bool
    /// Every account on the device, and which is current (a sibling's: its one account).
    public var accounts: [ListedAccount]
    /// A sibling app's session: its client id, the access token's `azp`.
    public var clientID: String?
    /// The attestation of the account this grant created, while attestation is on.
    public var attestation: AttestationResult?
    /// Whether the login that made this grant wrote; false for a login of an open session
    /// within the activity resolution, which answered from what it read.
    public var wrote = true

    public init(
        account: AccountSummary, deviceID: String, sessionID: String, refreshToken: String, created: Bool,
        accounts: [ListedAccount], clientID: String? = nil
    ) {
        self.clientID = clientID
        self.account = account
        self.deviceID = deviceID
        self.sessionID = sessionID
        self.refreshToken = refreshToken
        self.created = created
        self.accounts = accounts
    }
}

/// What a plan needs to open a session: a new id and key, chosen outside the pure plan.
public struct FreshSession: Sendable, Equatable {
    public var sessionID: String
    public var key: SessionKey
    public var expiresAt: Timestamp
    public init(sessionID: String, key: SessionKey, expiresAt: Timestamp) {
        self.sessionID = sessionID
        self.key = key
        self.expiresAt = expiresAt
    }
}

/// The authenticated caller of an endpoint that needs a Bearer token.
public struct Caller: Sendable, Equatable {
    public var accountID: String
    public var deviceID: String
    public var sessionID: String
    /// Set for a sibling app's session (its token's `azp`); nil for the app on the device.
    public var clientID: String?
    public init(accountID: String, deviceID: String, sessionID: String, clientID: String? = nil) {
        self.clientID = clientID
        self.accountID = accountID
        self.deviceID = deviceID
        self.sessionID = sessionID
    }
}

/// Observes domain events for metrics; the HTTP layer plugs Prometheus counters in.
public protocol ServiceObserver: Sendable {
    /// A login succeeded: it created an account, or not; it wrote, or answered from what it read.
    func loggedIn(created: Bool, wrote: Bool)
    func transferSetUp()
    func claimWon()
    func claimFailed()
    func transferLocked()
    /// An account creation consulted its attestation (monitor or enforce), created or refused.
    func attestation(_ result: AttestationResult)
}

extension ServiceObserver {
    public func attestation(_ result: AttestationResult) {}
}

public struct NoObserver: ServiceObserver {
    public init() {}
    public func loggedIn(created: Bool, wrote: Bool) {}
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

    func freshSession(now: Timestamp) -> FreshSession {
        FreshSession(sessionID: Identifier.make(), key: .random(), expiresAt: now + policy.refreshTokenTTL)
    }
}
