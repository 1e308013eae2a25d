// Sessions: refresh-token rotation, logout, and checking an access token's session.

extension TransferService {
    /// `POST /v1/tokens/refresh`: the session's next refresh token.
    public func refresh(refreshToken: String) async throws -> SessionGrant {
        let now = clock.now()
        return try await store.execute(
            RefreshCommand(
                token: refreshToken, now: now, expiresAt: now + policy.refreshTokenTTL, fallbackKey: .random(),
                siblingClients: policy.handoff?.clients ?? [], activityResolution: policy.activityResolution)
        ).get()
    }

    /// `POST /v1/logout`: ends the session of the caller's (device, account) pair, and the
    /// sibling apps' sessions on it; a sibling app's logout ends its own session only.
    public func logout(_ caller: Caller) async throws {
        try await store.execute(LogoutCommand(caller: caller, now: clock.now())).get()
    }

    /// Checks that a verified access token's session is still its pair's open session (or, with
    /// `clientID`, that sibling app's open session on the pair).
    public func authenticate(accountID: String, deviceID: String, sessionID: String, clientID: String? = nil) async throws -> Caller {
        try refuseRemovedSibling(clientID)
        guard try await store.isSessionValid(sessionID: sessionID, accountID: accountID, deviceID: deviceID, clientID: clientID) else {
            throw TransferError.invalidToken
        }
        return Caller(accountID: accountID, deviceID: deviceID, sessionID: sessionID, clientID: clientID)
    }

    /// Checks the device's secret that a change of the account's ways back (or its deletion)
    /// carries beside the access token: a stolen token alone cannot set up a transfer to another
    /// email or replace the user's way back. A device's secret never changes, so a read without
    /// a lock decides as well as the change's own transaction would. Nothing to check while
    /// `--device-proof off`.
    public func proveDevice(_ caller: Caller, secret: String?) async throws {
        guard policy.deviceProof else { return }
        guard let secret, (try? FieldRules.deviceSecret(secret)) != nil,
            let device = try await store.device(caller.deviceID, at: clock.now()), device.secretHash.matches(SecretHash(of: secret))
        else { throw TransferError.deviceProofRequired }
    }

    /// A sibling app taken off `--handoff-clients` is shut out at once, whatever its session.
    private func refuseRemovedSibling(_ clientID: String?) throws {
        if let clientID, policy.handoff?.clients.contains(clientID) != true { throw TransferError.invalidToken }
    }

    /// `GET /v1/me`: the session of a verified access token is checked, as `authenticate`
    /// checks it, in the read of the profile, before it (one read for the request).
    public func profile(accountID: String, deviceID: String, sessionID: String, clientID: String? = nil) async throws -> (Caller, AccountProfile) {
        try refuseRemovedSibling(clientID)
        let session = OpenSession(sessionID: sessionID, deviceID: deviceID, clientID: clientID)
        guard let profile = try await store.profile(accountID: accountID, whileOpen: session, at: clock.now()) else {
            throw TransferError.invalidToken
        }
        return (Caller(accountID: accountID, deviceID: deviceID, sessionID: sessionID, clientID: clientID), profile)
    }
}

/// Rotates a session's refresh token in place; a rotated token presented again ends the
/// session, whichever earlier token of it it is. A refresh is a use of the session: it records
/// activity on the pair (a sibling app's too), at the activity resolution.
public struct RefreshCommand: StoreOperation {
    public let token: String
    /// SHA-256 of `token`, computed once: the read looks it up, the plan compares it.
    public let tokenHash: SecretHash
    public var now: Timestamp
    /// The lifetime of the next token.
    public var expiresAt: Timestamp
    /// The key of a session carried over from schema v2, which has none yet.
    public var fallbackKey: SessionKey
    /// The next token, should the token be a sibling app's.
    public var siblingToken: String
    /// The sibling client ids configured now: a session of a client taken off the list stops
    /// refreshing (it is kept, should the client come back).
    public var siblingClients: Set<String>
    public var activityResolution: ActivityResolution
    public init(
        token: String, now: Timestamp, expiresAt: Timestamp, fallbackKey: SessionKey, siblingToken: String = RandomToken.make(),
        siblingClients: Set<String> = [], activityResolution: ActivityResolution = .standard
    ) {
        self.activityResolution = activityResolution
        self.siblingToken = siblingToken
        self.siblingClients = siblingClients
        self.token = token
        self.tokenHash = SecretHash(of: token)
        self.now = now
        self.expiresAt = expiresAt
        self.fallbackKey = fallbackKey
    }

    public var reads: [FactKey] { [.refreshToken(tokenHash), .refreshTokenDevice(tokenHash), .refreshTokenSiblingSession(tokenHash)] }

    public func plan(_ facts: Facts) throws -> Plan<SessionGrant> {
        guard let lookup = try facts.refreshToken(tokenHash), let device = try facts.refreshTokenDevice(tokenHash), let pair = device.account(lookup.accountID),
            pair.state == .active
        else { return Plan(refusing: .invalidRefreshToken) }
        if lookup.clientID != nil { return planSibling(try facts.refreshTokenSiblingSession(tokenHash), lookup: lookup, pair: pair) }
        guard let session = pair.session, session.sessionID == lookup.sessionID else { return Plan(refusing: .invalidRefreshToken) }
        let hash = tokenHash
        guard session.refreshHash.matches(hash) else {
            // A rotated token came back (perhaps rotated a moment ago by a concurrent refresh):
            // someone else may hold the session. End it.
            return Plan(refusing: .invalidRefreshToken, [
                .closeSession(deviceID: device.id, accountID: lookup.accountID),
                .audit(AuditEvent(at: now, kind: .refreshReuse, accountID: lookup.accountID, deviceID: device.id)),
            ])
        }
        guard now < session.expiresAt else { return Plan(refusing: .invalidRefreshToken) }
        let (next, nextToken) = session.rotated(by: token, fallbackKey: fallbackKey, expiresAt: expiresAt)
        let grant = SessionGrant(
            account: pair.account, deviceID: device.id, sessionID: session.sessionID, refreshToken: nextToken, created: false,
            accounts: device.summaries)
        return Plan(grant, [
            // A rotated token is remembered for a whole refresh lifetime after its rotation.
            .rotateSession(deviceID: device.id, accountID: lookup.accountID, next: next, used: hash, usedExpiresAt: expiresAt)
        ] + activityResolution.record(pair, deviceID: device.id, at: now))
    }
}

extension RefreshCommand {
    /// A sibling app's session: its token is random each generation, kept only as a hash.
    func planSibling(_ session: SiblingSession?, lookup: RefreshTokenLookup, pair: PairRecord) -> Plan<SessionGrant> {
        guard let session, session.sessionID == lookup.sessionID else { return Plan(refusing: .invalidRefreshToken) }
        guard session.refreshHash.matches(tokenHash) else {
            // A rotated token came back: end this sibling session (the host's stays).
            return Plan(refusing: .invalidRefreshToken, [
                .closeSiblingSession(sessionID: session.sessionID),
                .audit(AuditEvent(at: now, kind: .refreshReuse, accountID: session.accountID, deviceID: session.deviceID, reason: session.clientID)),
            ])
        }
        guard now < session.expiresAt, siblingClients.contains(session.clientID) else { return Plan(refusing: .invalidRefreshToken) }
        let nextToken = siblingToken
        var next = session
        next.generation += 1
        next.refreshHash = SecretHash(of: nextToken)
        next.expiresAt = expiresAt
        let grant = SessionGrant.sibling(
            pair.account, deviceID: session.deviceID, sessionID: session.sessionID, refreshToken: nextToken, clientID: session.clientID)
        return Plan(
            grant,
            [.rotateSiblingSession(next: next, used: tokenHash, usedExpiresAt: expiresAt)]
                + activityResolution.record(pair, deviceID: session.deviceID, at: now))
    }
}

/// Logout: ends the session of the (device, account) pair; the account stays on the device.
public struct LogoutCommand: StoreOperation {
    public var caller: Caller
    public var now: Timestamp
    public init(caller: Caller, now: Timestamp) {
        self.caller = caller
        self.now = now
    }

    public var reads: [FactKey] { [] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        let close: Effect =
            caller.clientID == nil
            ? .closeSession(deviceID: caller.deviceID, accountID: caller.accountID) : .closeSiblingSession(sessionID: caller.sessionID)
        return Plan((), [
            close,
            .audit(AuditEvent(at: now, kind: .logout, accountID: caller.accountID, deviceID: caller.deviceID, reason: caller.clientID)),
        ])
    }
}
