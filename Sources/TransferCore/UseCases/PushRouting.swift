// Push routing: the device registers its token and says which of its accounts it wants
// pushes for (`/v1/devices/push-token`, `/v1/devices/push-preferences`, `/v1/me/push`); app
// backends ask whom to send to and report dead tokens (`/v1/service/push-*`).

extension TransferService {
    /// `PUT /v1/devices/push-token`: `token` as `FieldRules.pushToken` returns it.
    public func registerPushToken(
        _ caller: Caller, provider: PushProvider, token: String, environment: PushEnvironment?
    ) async throws {
        let now = clock.now()
        let push = PushToken(
            deviceID: caller.deviceID, provider: provider, token: token,
            environment: provider == .apns ? environment ?? .production : nil, registeredAt: now)
        try await store.execute(
            RegisterPushTokenCommand(caller: caller, token: push, moveSlot: policy.limits.slot(.setup, account: caller.accountID, now: now))
        ).get()
    }

    /// `DELETE /v1/devices/push-token`.
    public func removePushToken(_ caller: Caller, provider: PushProvider) async throws {
        try await change(caller, now: clock.now(), [.removePushToken(deviceID: caller.deviceID, provider: provider)])
    }

    /// `PUT /v1/devices/push-preferences`.
    public func setPushMode(_ caller: Caller, _ mode: PushMode) async throws {
        try await change(caller, now: clock.now(), [.setPushMode(deviceID: caller.deviceID, mode)])
    }

    /// `PUT /v1/me/push`: the caller's account's pushes on the caller's device.
    public func setAccountPush(_ caller: Caller, enabled: Bool) async throws {
        try await change(
            caller, now: clock.now(), [.setAccountPush(deviceID: caller.deviceID, accountID: caller.accountID, enabled: enabled)])
    }

    private func change(_ caller: Caller, now: Timestamp, _ effects: [Effect]) async throws {
        try await store.execute(DevicePushCommand(caller: caller, effects: effects, now: now)).get()
    }

    /// `POST /v1/service/push-targets`: `accountIDs` lower-case, without repeats, at most
    /// `FieldRules.maxPushTargetAccounts`. Unknown accounts and accounts no token reaches are left out.
    public func pushTargets(accountIDs: [String]) async throws -> [PushTarget] {
        guard !accountIDs.isEmpty else { return [] }
        return PushTarget.grouping(try await store.pushRoutes(accountIDs: accountIDs))
    }

    /// `POST /v1/service/push-feedback`: the provider called the token dead at `reportedAt`. A
    /// time in the future counts as now: feedback cannot be about a registration yet to come.
    /// `token` as `FieldRules.pushToken` returns it (apns lower-case).
    public func pushFeedback(provider: PushProvider, token: String, reportedAt: Timestamp) async throws {
        let now = clock.now()
        try await store.execute(PushFeedbackCommand(
            provider: provider, tokenHash: SecretHash(of: token), reportedAt: min(reportedAt, now), now: now)
        ).get()
    }
}

/// A change a device makes to its push routing, for one of its accounts. The device is read
/// (and locked) so the change cannot land after the account left the device, and two
/// registrations of one device do not interleave.
public struct DevicePushCommand: StoreOperation {
    public var caller: Caller
    public var effects: [Effect]
    public var now: Timestamp
    public init(caller: Caller, effects: [Effect], now: Timestamp) {
        self.caller = caller
        self.effects = effects
        self.now = now
    }

    public var reads: [FactKey] { [.device(caller.deviceID)] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        guard let device = try facts.device(caller.deviceID), device.holds(caller.accountID) else { return Plan(refusing: .invalidToken) }
        return Plan((), effects)
    }
}

/// Registers the device's token. A token another device holds moves here (APNs and FCM tokens
/// belong to one install: seen on another device, the app was restored or reinstalled there),
/// but visibly and boundedly: the move takes a slot of `--setup-limit` for the registering
/// account, is audited for the accounts of both devices, and sends `push.token_moved`.
public struct RegisterPushTokenCommand: StoreOperation {
    public var caller: Caller
    public var token: PushToken
    /// The `--setup-limit` slot a move takes; nil while the limit is off.
    public var moveSlot: RateSlot?
    public init(caller: Caller, token: PushToken, moveSlot: RateSlot?) {
        self.caller = caller
        self.token = token
        self.moveSlot = moveSlot
    }

    public var now: Timestamp { token.registeredAt }
    public var reads: [FactKey] { [.device(caller.deviceID), .pushTokenHolder(token.provider, token.tokenHash)] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        guard let device = try facts.device(caller.deviceID), device.holds(caller.accountID) else { return Plan(refusing: .invalidToken) }
        guard let holder = try facts.pushTokenHolder(token.provider, token.tokenHash), holder.deviceID != caller.deviceID else {
            return Plan((), [.setPushToken(token)])
        }
        let from = holder.deviceID, to = caller.deviceID, provider = token.provider.rawValue
        let moved = { (account: String?, device: String, reason: String) in
            Effect.audit(AuditEvent(at: now, kind: .pushTokenMoved, accountID: account, deviceID: device, reason: reason))
        }
        var effects = moveSlot.map { [Effect.takeSlot($0)] } ?? []
        effects.append(.setPushToken(token))
        effects.append(moved(caller.accountID, to, "\(provider) token from device \(from)"))
        for account in holder.accountIDs { effects.append(moved(account, from, "\(provider) token to device \(to)")) }
        if holder.accountIDs.isEmpty { effects.append(moved(nil, from, "\(provider) token to device \(to)")) }
        effects.append(.webhook(.pushTokenMoved, accountID: caller.accountID, at: now, ["fromDeviceId": from, "toDeviceId": to, "provider": provider]))
        return Plan((), effects)
    }
}

public struct PushFeedbackCommand: StoreOperation {
    public var provider: PushProvider
    public var tokenHash: SecretHash
    public var reportedAt: Timestamp
    public var now: Timestamp
    public init(provider: PushProvider, tokenHash: SecretHash, reportedAt: Timestamp, now: Timestamp) {
        self.provider = provider
        self.tokenHash = tokenHash
        self.reportedAt = reportedAt
        self.now = now
    }

    /// The condition (registered again after the report?) is the statement's own, so nothing is read first.
    public var reads: [FactKey] { [] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        Plan((), [.dropPushToken(provider: provider, tokenHash: tokenHash, reportedAt: reportedAt)])
    }
}
