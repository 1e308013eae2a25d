// Sessions: refresh-token rotation, logout, and checking an access token's session.

extension TransferService {
    /// `POST /v1/tokens/refresh`: the session's next refresh token.
    public func refresh(refreshToken: String) async throws -> SessionGrant {
        let now = clock.now()
        let result = try await store.execute(
            RefreshCommand(token: refreshToken, now: now, expiresAt: now + policy.refreshTokenTTL, fallbackKey: .random()))
        switch result {
        case .rotated(let grant): return grant
        case .rejected: throw TransferError.invalidRefreshToken
        }
    }

    /// `POST /v1/logout`: ends the session of the caller's (device, account) pair.
    public func logout(_ caller: Caller) async throws {
        try await store.execute(LogoutCommand(accountID: caller.accountID, deviceID: caller.deviceID, now: clock.now()))
    }

    /// Checks that a verified access token's session is still its pair's open session.
    public func authenticate(accountID: String, deviceID: String, sessionID: String) async throws -> Caller {
        guard try await store.isSessionValid(sessionID: sessionID, accountID: accountID, deviceID: deviceID) else {
            throw TransferError.invalidToken
        }
        return Caller(accountID: accountID, deviceID: deviceID, sessionID: sessionID)
    }

    /// `GET /v1/me`.
    public func profile(_ caller: Caller) async throws -> AccountProfile {
        guard let profile = try await store.profile(accountID: caller.accountID, at: clock.now()) else {
            throw TransferError.invalidToken
        }
        return profile
    }
}

/// Rotates a session's refresh token in place; a rotated token presented again ends the
/// session, whichever earlier token of it it is.
public struct RefreshCommand: StoreOperation {
    public let token: String
    /// SHA-256 of `token`, computed once: the read looks it up, the plan compares it.
    public let tokenHash: SecretHash
    public var now: Timestamp
    /// The lifetime of the next token.
    public var expiresAt: Timestamp
    /// The key of a session carried over from schema v2, which has none yet.
    public var fallbackKey: SessionKey
    public init(token: String, now: Timestamp, expiresAt: Timestamp, fallbackKey: SessionKey) {
        self.token = token
        self.tokenHash = SecretHash(of: token)
        self.now = now
        self.expiresAt = expiresAt
        self.fallbackKey = fallbackKey
    }

    public var reads: Reads { Reads(refreshToken: tokenHash) }

    public func plan(_ facts: Facts) -> Plan<RefreshResult> {
        guard let lookup = facts.refreshToken, let device = facts.device, let pair = device.account(lookup.accountID),
            pair.state == .active, let session = pair.session, session.sessionID == lookup.sessionID
        else { return Plan(.rejected) }
        let hash = tokenHash
        guard session.refreshHash.matches(hash) else {
            // A rotated token came back (perhaps rotated a moment ago by a concurrent refresh):
            // someone else may hold the session. End it.
            return Plan(.rejected, [
                .closeSession(deviceID: device.id, accountID: lookup.accountID),
                .audit(AuditEvent(at: now, kind: .refreshReuse, accountID: lookup.accountID, deviceID: device.id)),
            ])
        }
        guard now < session.expiresAt else { return Plan(.rejected) }
        let (next, nextToken) = session.rotated(by: token, fallbackKey: fallbackKey, expiresAt: expiresAt)
        let grant = SessionGrant(
            account: pair.account, deviceID: device.id, sessionID: session.sessionID, refreshToken: nextToken, created: false,
            accounts: device.summaries)
        return Plan(.rotated(grant), [
            // A rotated token is remembered for a whole refresh lifetime after its rotation.
            .rotateSession(deviceID: device.id, accountID: lookup.accountID, next: next, used: hash, usedExpiresAt: expiresAt)
        ])
    }
}

public enum RefreshResult: Sendable, Equatable {
    case rotated(SessionGrant)
    case rejected
}

/// Logout: ends the session of the (device, account) pair; the account stays on the device.
public struct LogoutCommand: StoreOperation {
    public var accountID: String
    public var deviceID: String
    public var now: Timestamp
    public init(accountID: String, deviceID: String, now: Timestamp) {
        self.accountID = accountID
        self.deviceID = deviceID
        self.now = now
    }

    public var reads: Reads { Reads() }

    public func plan(_ facts: Facts) -> Plan<Void> {
        Plan((), [
            .closeSession(deviceID: deviceID, accountID: accountID),
            .audit(AuditEvent(at: now, kind: .logout, accountID: accountID, deviceID: deviceID)),
        ])
    }
}
