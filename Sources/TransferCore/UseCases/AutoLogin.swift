// Auto-login: `POST /v1/devices/login`. An unknown device creates its account; a known one
// logs in, or learns that it moved away or was revoked, but only with its secret.

extension TransferService {
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
}

public struct LoginCommand: StoreOperation {
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

    public var reads: Reads { Reads(device: deviceID.value) }

    public func plan(_ facts: Facts) -> Plan<LoginResult> {
        let device = deviceID.value
        guard let (binding, account) = facts.device else {
            guard allowCreate else { return Plan(.creationRefused) }
            let created = SessionAccount(accountID: newAccountID, userName: device, migrationFlag: false)
            return Plan(.loggedIn(created, created: true), [
                .createAccount(id: newAccountID, userName: device, at: now),
                .bindDevice(deviceID: device, accountID: newAccountID, secretHash: secretHash, at: now),
                .openSession(session, accountID: newAccountID, deviceID: device, at: now),
                .audit(AuditEvent(at: now, kind: .accountCreated, accountID: newAccountID, deviceID: device, clientAddress: clientAddress)),
            ])
        }
        // The secret is checked first, so nobody learns a device's state without its secret.
        let refusal: TransferError
        if !binding.secretHash.matches(secretHash) {
            refusal = .invalidDeviceCredentials
        } else {
            switch binding.state {
            case .active:
                return Plan(.loggedIn(account, created: false), [
                    .recordLogin(deviceID: device, at: now),
                    .openSession(session, accountID: account.accountID, deviceID: device, at: now),
                    .audit(AuditEvent(at: now, kind: .login, accountID: account.accountID, deviceID: device, clientAddress: clientAddress)),
                ])
            case .moved: refusal = .deviceTransferred(at: binding.endedAt ?? binding.boundAt)
            case .revoked: refusal = .deviceRevoked
            // Replaced bindings are history and never read as the device's current one.
            case .replaced: refusal = .deviceRevoked
            }
        }
        return Plan(.rejected(refusal), [
            .audit(AuditEvent(
                at: now, kind: .loginFailed, accountID: binding.accountID, deviceID: device, reason: refusal.code,
                clientAddress: clientAddress))
        ])
    }
}

public enum LoginResult: Sendable, Equatable {
    case loggedIn(SessionAccount, created: Bool)
    /// The device is unknown and `allowCreate` was false: nothing was written.
    case creationRefused
    case rejected(TransferError)
}
