// Auto-login: `POST /v1/devices/login`. An unknown device creates its account; a known one
// logs in to its current account, to another account it holds (`accountId`), or creates one
// more (`newAccount`); or learns that the account moved away or was revoked, but only with
// the device's secret. A login of an open session renews it in place: one row written.

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
    /// Auto-login. `creationRetryAfter` is set when this client may not create an account
    /// now (rate limit): a login that would create one is then refused with `rateLimited`.
    public func login(
        deviceID: DeviceID, deviceSecret: String, target: LoginTarget = .current, clientAddress: String?,
        creationRetryAfter: Int? = nil
    ) async throws -> SessionGrant {
        let now = clock.now()
        let result = try await store.login(
            LoginCommand(
                deviceID: deviceID, deviceSecret: deviceSecret, target: target, now: now, newAccountID: Identifier.make(),
                allowCreate: creationRetryAfter == nil, maxAccounts: policy.maxAccountsPerDevice,
                fresh: freshSession(now: now), clientAddress: clientAddress))
        switch result {
        case .loggedIn(let grant):
            observer.loggedIn(created: grant.created)
            return grant
        case .creationRefused:
            throw TransferError.rateLimited(retryAfterSeconds: creationRetryAfter ?? 1)
        case .rejected(let error):
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
    /// False when this client may not create more accounts right now.
    public var allowCreate: Bool
    public var maxAccounts: Int
    /// Used only when the pair has no open session.
    public var fresh: FreshSession
    public var clientAddress: String?

    public init(
        deviceID: DeviceID, deviceSecret: String, target: LoginTarget = .current, now: Timestamp, newAccountID: String,
        allowCreate: Bool = true, maxAccounts: Int = 5, fresh: FreshSession, clientAddress: String?
    ) {
        self.deviceID = deviceID
        self.deviceSecret = deviceSecret
        self.target = target
        self.now = now
        self.newAccountID = newAccountID
        self.allowCreate = allowCreate
        self.maxAccounts = maxAccounts
        self.fresh = fresh
        self.clientAddress = clientAddress
    }

    public var secretHash: SecretHash { SecretHash(of: deviceSecret) }

    public var reads: Reads { Reads(device: deviceID.value) }

    public func plan(_ facts: Facts) -> Plan<LoginResult> {
        guard let device = facts.device else {
            if case .account = target { return Plan(.rejected(.accountNotOnDevice)) }
            return create(on: nil)
        }
        // The secret is checked first, so nobody learns a device's state without its secret.
        guard device.secretHash.matches(secretHash) else { return Plan(.rejected(.invalidDeviceCredentials)) }
        switch target {
        case .current:
            return logIn(device, device.currentAccountID.flatMap(device.account))
        case .account(let id):
            return logIn(device, device.account(id))
        case .newAccount:
            // A retired device holds nothing new: it answers as its plain login does.
            if device.retiredAt != nil { return logIn(device, device.currentAccountID.flatMap(device.account)) }
            guard device.active.count < maxAccounts else { return Plan(.rejected(.deviceAccountLimit(maxAccounts))) }
            return create(on: device)
        }
    }

    /// A new account, on a new device or beside the device's others; it becomes current.
    func create(on device: DeviceRecord?) -> Plan<LoginResult> {
        guard allowCreate else { return Plan(.creationRefused) }
        let id = deviceID.value
        let account = SessionAccount(accountID: newAccountID, userName: device == nil ? id : newAccountID, migrationFlag: false)
        let (session, token) = PairSession.open(
            sessionID: fresh.sessionID, key: fresh.key, deviceSecret: deviceSecret, at: now, expiresAt: fresh.expiresAt)
        let others = (device?.active ?? []).map {
            DeviceAccountSummary(accountID: $0.account.accountID, userName: $0.account.userName, current: false)
        }
        let grant = SessionGrant(
            account: account, deviceID: id, sessionID: session.sessionID, refreshToken: token, created: true,
            accounts: others + [DeviceAccountSummary(accountID: account.accountID, userName: account.userName, current: true)])
        return Plan(.loggedIn(grant), (device == nil ? [.createDevice(id: id, secretHash: secretHash, at: now)] : []) + [
            .createAccount(id: account.accountID, userName: account.userName, at: now),
            .addAccount(deviceID: id, accountID: account.accountID, at: now),
            .setCurrentAccount(deviceID: id, accountID: account.accountID),
            .openSession(deviceID: id, accountID: account.accountID, session, at: now, clientAddress: clientAddress),
            .audit(AuditEvent(at: now, kind: .accountCreated, accountID: account.accountID, deviceID: id, clientAddress: clientAddress)),
            .webhook(.accountCreated, accountID: account.accountID, at: now, ["deviceId": id]),
        ])
    }

    /// A session for an account on the device: the open one renewed, or a new one.
    func logIn(_ device: DeviceRecord, _ pair: DeviceAccount?) -> Plan<LoginResult> {
        guard let pair else { return Plan(.rejected(.accountNotOnDevice)) }
        if pair.accountDeleted { return Plan(.rejected(.accountDeleted)) }
        switch pair.state {
        case .active: break
        case .moved: return Plan(.rejected(.deviceTransferred(at: pair.endedAt ?? pair.addedAt, accounts: device.summaries)))
        case .revoked: return Plan(.rejected(.deviceRevoked))
        case .replaced, .removed: return Plan(.rejected(.accountNotOnDevice))
        }
        let accountID = pair.account.accountID
        if let session = pair.session, now < session.expiresAt, let token = session.currentToken(deviceSecret: deviceSecret) {
            let grant = SessionGrant(
                account: pair.account, deviceID: device.id, sessionID: session.sessionID, refreshToken: token, created: false,
                accounts: device.summaries)
            return Plan(.loggedIn(grant), [
                .renewSession(deviceID: device.id, accountID: accountID, expiresAt: fresh.expiresAt, at: now, clientAddress: clientAddress)
            ])
        }
        let (session, token) = PairSession.open(
            sessionID: fresh.sessionID, key: fresh.key, deviceSecret: deviceSecret, at: now, expiresAt: fresh.expiresAt)
        let grant = SessionGrant(
            account: pair.account, deviceID: device.id, sessionID: session.sessionID, refreshToken: token, created: false,
            accounts: device.summaries)
        return Plan(.loggedIn(grant), [
            .openSession(deviceID: device.id, accountID: accountID, session, at: now, clientAddress: clientAddress)
        ])
    }
}

public enum LoginResult: Sendable, Equatable {
    case loggedIn(SessionGrant)
    /// An account would have been created but `allowCreate` was false: nothing was written.
    case creationRefused
    case rejected(TransferError)
}
