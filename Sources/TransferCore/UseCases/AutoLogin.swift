// Auto-login: `POST /v1/devices/login`. An unknown device creates its account; a known one
// logs in to its current account, to another account it holds (`accountId`), or creates one
// more (`newAccount`); or learns that the account moved away or was revoked, but only with
// the device's secret. A login of an open session renews it in place (one row written), or,
// within the activity resolution of the pair's last recorded activity, writes nothing and
// answers from what it read (`LoginCommand.writes`).

/// Which account a login is for.
public enum LoginTarget: Sendable, Equatable {
    /// The device's current account (v1's login).
    case current
    /// An account on the device; the current account does not change.
    case account(String)
    /// A new account on the device, which becomes current.
    case newAccount
}

extension TransferService {
    /// Auto-login. A login that creates an account takes a slot of `--account-creation-limit`
    /// for the client in the same transaction (`rateLimited` when it is spent, and nothing is
    /// created); a login of an existing account takes none.
    ///
    /// While `--attestation` is on, `attestation` (the request's proof, if it carried one) is
    /// verified here, before the transaction, and consulted by the transaction only when the
    /// login creates an account (see `AttestationGate`).
    public func login(
        deviceID: DeviceID, deviceSecret: String, target: LoginTarget = .current, attestation proof: AttestationProof? = nil,
        clientAddress: String?
    ) async throws -> SessionGrant {
        let now = clock.now()
        let gate = try await attestationGate(proof, target: target, now: now)
        // What a login may need (a new account's id, a new session's id and key), from one
        // CSPRNG call: most logins renew an open session and use none of it.
        let random = RandomToken.randomBytes(64)
        let wall = SystemWallClock().now()  // ids sort by when they were made, as `Identifier.make()`'s
        let fresh = FreshSession(
            sessionID: Identifier.make(at: wall, random: random[0..<16]), key: SessionKey(bytes: Array(random[32..<64])),
            expiresAt: now + policy.refreshTokenTTL)
        let result = try await store.login(
            LoginCommand(
                deviceID: deviceID, deviceSecret: deviceSecret, target: target, now: now,
                newAccountID: Identifier.make(at: wall, random: random[16..<32]),
                creationSlot: policy.limits.slot(.accountCreation, client: clientAddress, now: now),
                maxAccounts: policy.maxAccountsPerDevice, deviceCreations: policy.deviceCreations, fresh: fresh,
                clientAddress: clientAddress, attestation: gate, activityResolution: policy.activityResolution))
        switch result {
        case .success(let grant):
            observer.loggedIn(created: grant.created, wrote: grant.wrote)
            if let result = grant.attestation, !result.earlier { observer.attestation(result) }
            return grant
        case .failure(let error):
            switch error {
            case .attestationRequired: observer.attestation(AttestationResult(platform: nil, outcome: .missing))
            case .invalidAttestation(let check, _):
                observer.attestation(AttestationResult(platform: gate?.proof?.platform, outcome: .failed(check: check)))
            default: break
            }
            throw error
        }
    }
}

public struct LoginCommand: StoreOperation {
    public var deviceID: DeviceID
    /// In clear: it unwraps the session key (see `SessionKey`). Only its hash is stored.
    public var deviceSecret: String
    public var target: LoginTarget
    public var now: Timestamp
    /// Used only when an account is created.
    public var newAccountID: String
    /// Taken (in the same transaction) when an account is created; nil while the limit is off.
    public var creationSlot: RateSlot?
    public var maxAccounts: Int
    /// The accounts a known device may create in a rolling window (`newAccount`).
    public var deviceCreations: RateLimit
    /// Used only when the pair has no open session.
    public var fresh: FreshSession
    public var clientAddress: String?
    /// Consulted only when an account is created; nil while attestation is off.
    public var attestation: AttestationGate?
    /// A login of an open session within this of the pair's last recorded activity writes nothing.
    public var activityResolution: ActivityResolution

    public init(
        deviceID: DeviceID, deviceSecret: String, target: LoginTarget = .current, now: Timestamp, newAccountID: String,
        creationSlot: RateSlot? = nil, maxAccounts: Int = 5, deviceCreations: RateLimit = .deviceCreations, fresh: FreshSession,
        clientAddress: String?, attestation: AttestationGate? = nil, activityResolution: ActivityResolution = .standard
    ) {
        self.deviceCreations = deviceCreations
        self.activityResolution = activityResolution
        self.attestation = attestation
        self.deviceID = deviceID
        self.deviceSecret = deviceSecret
        self.target = target
        self.now = now
        self.newAccountID = newAccountID
        self.creationSlot = creationSlot
        self.maxAccounts = maxAccounts
        self.fresh = fresh
        self.clientAddress = clientAddress
    }

    public var secretHash: SecretHash { SecretHash(of: deviceSecret) }

    /// The device, and for a `newAccount` the accounts it created within `deviceCreations`'
    /// period (a plain login, nearly all of them, reads the device alone).
    public var reads: [FactKey] {
        var reads: [FactKey] = [.device(deviceID.value)]
        if target == .newAccount { reads.append(.accountsCreated(onDevice: deviceID.value, since: creationsSince)) }
        if let challenge = attestation?.proof?.challengeHash { reads.append(.attestationChallenge(challenge)) }
        return reads
    }

    /// The start of the window a device's creations are counted in.
    var creationsSince: Timestamp { now - deviceCreations.period }

    public func plan(_ facts: Facts) throws -> Plan<SessionGrant> {
        guard let device = try facts.device(deviceID.value) else {
            if case .account = target { return Plan(refusing: .accountNotOnDevice) }
            return try create(on: nil, facts)
        }
        // The secret is checked first, so nobody learns a device's state without its secret.
        guard device.secretHash.matches(secretHash) else { return Plan(refusing: .invalidDeviceCredentials) }
        switch target {
        case .current:
            return logIn(device, device.currentAccountID.flatMap(device.account))
        case .account(let id):
            return logIn(device, device.account(id))
        case .newAccount:
            // A retired device holds nothing new: it answers as its plain login does.
            if device.retiredAt != nil { return logIn(device, device.currentAccountID.flatMap(device.account)) }
            guard device.active.count < maxAccounts else { return Plan(refusing: .deviceAccountLimit(maxAccounts)) }
            // Before attestation and the client's slot: refused, nothing is written or used up.
            let created = try facts.accountsCreated(onDevice: device.id, since: creationsSince)
            if let refusal = deviceCreations.refusal(after: created, at: now) { return Plan(refusing: refusal) }
            return try create(on: device, facts)
        }
    }

    /// A new account, on a new device or beside the device's others; it becomes current. The
    /// creation slot is taken in the same transaction, last: spent, it rolls the whole
    /// transaction back, and until the commit it holds the client's window row (on
    /// PostgreSQL, a row lock), so creations from one client (a carrier NAT's address) wait
    /// for each other only from that statement to the commit. While attestation is on, its
    /// gate decides first: refused, nothing is created (the challenge is still used up) and no
    /// slot is taken.
    func create(on device: DeviceRecord?, _ facts: Facts) throws -> Plan<SessionGrant> {
        let id = deviceID.value
        var attested: AttestationResult?
        var attestationEffects: [Effect] = []
        if let gate = attestation {
            let expiresAt = try gate.proof.flatMap { try facts.attestationChallengeExpiry($0.challengeHash) }
            let decision = gate.decide(device: device, challengeExpiresAt: expiresAt, now: now)
            if let refusal = decision.refusal { return Plan(refusing: refusal, decision.effects) }
            attested = decision.result
            attestationEffects = decision.effects + (decision.record.map { [.recordDeviceAttestation(deviceID: id, $0)] } ?? [])
        }
        let account = AccountSummary(accountID: newAccountID, userName: device == nil ? id : newAccountID, migrationFlag: false)
        let (session, token) = PairSession.open(
            sessionID: fresh.sessionID, key: fresh.key, deviceSecret: deviceSecret, at: now, expiresAt: fresh.expiresAt)
        let others = (device?.active ?? []).map {
            ListedAccount(accountID: $0.account.accountID, userName: $0.account.userName, current: false)
        }
        var grant = SessionGrant(
            account: account, deviceID: id, sessionID: session.sessionID, refreshToken: token, created: true,
            accounts: others + [ListedAccount(accountID: account.accountID, userName: account.userName, current: true)])
        grant.attestation = attested
        return Plan(grant, (device == nil ? [.createDevice(id: id, secretHash: secretHash, at: now)] : []) + attestationEffects + [
            .createAccount(id: account.accountID, userName: account.userName, device: id, at: now),
            .addAccount(deviceID: id, accountID: account.accountID, at: now),
            .setCurrentAccount(deviceID: id, accountID: account.accountID),
            .openSession(deviceID: id, accountID: account.accountID, session, at: now, clientAddress: clientAddress),
            .audit(AuditEvent(
                at: now, kind: .accountCreated, accountID: account.accountID, deviceID: id, reason: attested?.auditReason,
                clientAddress: clientAddress)),
            .webhook(.accountCreated, accountID: account.accountID, at: now, ["deviceId": id]),
        ] + (creationSlot.map { [.takeSlot($0)] } ?? []))
    }

    /// Whether a login of the pair's open session writes (extends the session, records the
    /// login and the client address): when the pair's recorded activity is older than the
    /// resolution, or the session would otherwise end sooner than the refresh lifetime minus
    /// the resolution (its expiry was last extended before activity recorded since, by a
    /// sibling app's refresh). Otherwise the login writes nothing and answers the same: the
    /// session's current refresh token follows from its key, which the login does not change.
    /// PostgreSQL's fast path asks this of the one row it read.
    public func writes(lastLoginAt: Timestamp?, sessionExpiresAt: Timestamp) -> Bool {
        activityResolution.isDue(last: lastLoginAt, now: now) || sessionExpiresAt + activityResolution.duration < fresh.expiresAt
    }

    /// A session for an account on the device: the open one renewed (or, within the activity
    /// resolution, answered as it is), or a new one.
    func logIn(_ device: DeviceRecord, _ pair: PairRecord?) -> Plan<SessionGrant> {
        guard let pair else { return Plan(refusing: .accountNotOnDevice) }
        if pair.accountDeleted { return Plan(refusing: .accountDeleted) }
        switch pair.state {
        case .active: break
        case .moved: return Plan(refusing: .deviceTransferred(at: pair.endedAt ?? pair.addedAt, accounts: device.summaries))
        case .revoked: return Plan(refusing: .deviceRevoked)
        case .replaced, .removed: return Plan(refusing: .accountNotOnDevice)
        }
        let accountID = pair.account.accountID
        if let session = pair.session, now < session.expiresAt, let token = session.currentToken(deviceSecret: deviceSecret) {
            var grant = SessionGrant(
                account: pair.account, deviceID: device.id, sessionID: session.sessionID, refreshToken: token, created: false,
                accounts: device.summaries)
            guard writes(lastLoginAt: pair.lastLoginAt, sessionExpiresAt: session.expiresAt) else {
                grant.wrote = false
                return Plan(grant)
            }
            return Plan(grant, [
                .renewSession(deviceID: device.id, accountID: accountID, expiresAt: fresh.expiresAt, at: now, clientAddress: clientAddress)
            ])
        }
        let (session, token) = PairSession.open(
            sessionID: fresh.sessionID, key: fresh.key, deviceSecret: deviceSecret, at: now, expiresAt: fresh.expiresAt)
        let grant = SessionGrant(
            account: pair.account, deviceID: device.id, sessionID: session.sessionID, refreshToken: token, created: false,
            accounts: device.summaries)
        return Plan(grant, [
            .openSession(deviceID: device.id, accountID: accountID, session, at: now, clientAddress: clientAddress)
        ])
    }
}

extension RateLimit {
    /// The accounts one device may create in any 24 hours, its first included (contract v1.3,
    /// security round 3): one attestation, one genuine device, must not mint accounts without
    /// end through `newAccount` and `DELETE /v1/devices/accounts/{id}?abandon=true`, which keep
    /// it under `--max-accounts-per-device`. 10: a person sets up a handful of accounts on a
    /// phone in its life (5 at once by default); 10 a day lets them fill it twice over in one
    /// day, while a farm of genuine devices gets 10 accounts a day from each, not thousands. A
    /// fixed rule, not a flag: no deployment needs more, and `--account-creation-limit` is the
    /// knob for how fast accounts are made.
    public static let deviceCreations = RateLimit(count: 10, period: .seconds(86_400))
}

extension RateLimit {
    /// Refused once `count` events happened within the `period` before `now` (`recent`, oldest
    /// first: a rolling window, counted from what the store holds, not a budget row):
    /// `rateLimited`, with the seconds until the oldest of the last `count` leaves the window.
    func refusal(after recent: [Timestamp], at now: Timestamp) -> TransferError? {
        guard recent.count >= count else { return nil }
        return .rateLimited(retryAfterSeconds: now.secondsUntil(recent[recent.count - count] + period))
    }
}
