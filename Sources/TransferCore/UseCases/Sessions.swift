// Sessions: refresh-token rotation, logout, and checking an access token's session.

extension TransferService {
    /// `POST /v1/tokens/refresh`: a new refresh token for the same session.
    public func refresh(refreshToken: String) async throws -> SessionGrant {
        let now = clock.now()
        let next = RandomToken.make()
        let result = try await store.execute(
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

    /// `POST /v1/logout`: revokes every session of the caller's device.
    public func logout(_ caller: Caller) async throws {
        try await store.execute(LogoutCommand(accountID: caller.accountID, deviceID: caller.deviceID, now: clock.now()))
    }

    /// Checks that a verified access token's session and device are still live.
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

/// Rotates a refresh token; reuse of a rotated one revokes its whole session family.
public struct RefreshCommand: StoreOperation {
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

    public var reads: Reads { Reads(refreshToken: tokenHash) }

    public func plan(_ facts: Facts) -> Plan<RefreshResult> {
        guard let token = facts.refreshToken, !token.sessionRevoked else { return Plan(.rejected) }
        if token.used {
            // A rotated token came back: someone else may hold the session. End it.
            return Plan(.rejected, [
                .revokeSession(id: token.sessionID, at: now),
                .audit(AuditEvent(at: now, kind: .refreshReuse, accountID: token.account.accountID, deviceID: token.deviceID)),
            ])
        }
        guard now < token.expiresAt, token.deviceActive else { return Plan(.rejected) }
        return Plan(.rotated(token.account, deviceID: token.deviceID, sessionID: token.sessionID), [
            .rotateRefreshToken(used: tokenHash, next: next, sessionID: token.sessionID, at: now, expiresAt: nextExpiresAt)
        ])
    }
}

public enum RefreshResult: Sendable, Equatable {
    case rotated(SessionAccount, deviceID: String, sessionID: String)
    case rejected
}

/// Logout: revokes every session (refresh tokens and access tokens) of the device.
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
            .revokeSessions(accountID: accountID, deviceID: deviceID, at: now),
            .audit(AuditEvent(at: now, kind: .logout, accountID: accountID, deviceID: deviceID)),
        ])
    }
}
