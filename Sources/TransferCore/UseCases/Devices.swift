// A device's accounts: listing them, picking the current one, removing one
// (`/v1/devices/accounts`, `/v1/devices/current-account`), and support's revocation of a
// device (stolen phone).

extension TransferService {
    /// `GET /v1/devices/accounts`: the caller's device with its accounts.
    public func deviceAccounts(_ caller: Caller) async throws -> DeviceRecord {
        guard let device = try await store.device(caller.deviceID, at: clock.now()) else { throw TransferError.invalidToken }
        return device
    }

    /// `PUT /v1/devices/current-account`.
    public func setCurrentAccount(_ caller: Caller, accountID: String) async throws {
        try await store.execute(SetCurrentAccountCommand(deviceID: caller.deviceID, accountID: accountID, now: clock.now())).get()
    }

    /// `DELETE /v1/devices/accounts/{accountId}`.
    public func removeAccount(_ caller: Caller, accountID: String, abandon: Bool) async throws {
        try await store.execute(
            RemoveAccountCommand(deviceID: caller.deviceID, accountID: accountID, abandon: abandon, now: clock.now())
        ).get()
    }

    /// Retires an active device at once: every account leaves it, their sessions end, and its
    /// auto-login answers `403 device_revoked`. Returns the accounts it held (empty when it
    /// was unknown or already retired).
    public func revokeDevice(_ deviceID: DeviceID, by initiator: Initiator, reason: String) async throws -> [String] {
        try await store.execute(RevokeDeviceCommand(deviceID: deviceID.value, now: clock.now(), by: initiator, reason: reason)).get()
    }
}

public struct SetCurrentAccountCommand: StoreOperation {
    public var deviceID: String
    public var accountID: String
    public var now: Timestamp
    public init(deviceID: String, accountID: String, now: Timestamp) {
        self.deviceID = deviceID
        self.accountID = accountID
        self.now = now
    }

    public var reads: [FactKey] { [.device(deviceID)] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        guard let device = try facts.device(deviceID), device.account(accountID)?.state == .active else { return Plan(refusing: .accountNotOnDevice) }
        guard device.currentAccountID != accountID else { return Plan(()) }
        return Plan((), [.setCurrentAccount(deviceID: deviceID, accountID: accountID)])
    }
}

/// An account leaves a device at the app's request. An account is active on one device at
/// most, so leaving it strands the account unless a pending transfer or a linked Apple ID can
/// still bring it to a device: without either the app must say `abandon` (the account is kept
/// for support).
public struct RemoveAccountCommand: StoreOperation {
    public var deviceID: String
    public var accountID: String
    public var abandon: Bool
    public var now: Timestamp
    public init(deviceID: String, accountID: String, abandon: Bool, now: Timestamp) {
        self.deviceID = deviceID
        self.accountID = accountID
        self.abandon = abandon
        self.now = now
    }

    /// The account's ways back are read (and locked) too: a cancel, an unlink or a deletion
    /// racing this removal must not leave the account on no device with no way back.
    public var reads: [FactKey] { [.device(deviceID)] + WayBack.facts(of: accountID) }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        guard let device = try facts.device(deviceID), device.account(accountID)?.state == .active else {
            return Plan(refusing: .accountNotOnDevice)
        }
        guard try abandon || !WayBack.all(of: accountID, in: facts, at: now).isEmpty else { return Plan(refusing: .accountWouldBeLost) }
        var effects = device.leave(
            accountID, state: .removed, reason: abandon ? "removed by the app (abandoned)" : "removed by the app", at: now)
        effects.append(.audit(AuditEvent(
            at: now, kind: .accountRemoved, accountID: accountID, deviceID: deviceID, reason: abandon ? "abandon=true" : nil)))
        effects.append(.webhook(.accountRemovedFromDevice, accountID: accountID, at: now, ["deviceId": deviceID]))
        return Plan((), effects)
    }
}

extension WayBack {
    /// What tells an account's ways back: its pending transfers, Apple link, recovery code and
    /// backup keys. Read in an operation, they are locked (in rank order: the transfers before any device).
    public static func facts(of accountID: String) -> [FactKey] {
        [.pendingTransfers(.of(accountID)), .appleLink(.id(accountID)), .recoveryCode(.id(accountID)), .backupKeys(.id(accountID))]
    }

    /// What would still bring the account onto a device once it leaves the one it is on (an
    /// account is active on one device at most): a pending, unexpired transfer, a linked Apple
    /// ID, an unused recovery code, an unused backup key. None: leaving strands it (`account_would_be_lost`, unless
    /// the app abandons it), for a removal and for a claim that pushes it off alike.
    public static func all(of accountID: String, in facts: Facts, at now: Timestamp) throws -> [WayBack] {
        let transfer = try facts.pendingTransfers(.of(accountID)).contains { $0.accountID == accountID && $0.isOpen(at: now) }
        return (transfer ? [.transfer] : []) + (try facts.appleLink(accountID) != nil ? [.apple] : [])
            + (try facts.recoveryCode(accountID)?.isUsable == true ? [.recoveryCode] : [])
            + (try facts.backupKeys(accountID).contains(where: \.isUsable) ? [.backupKey] : [])
    }
}

public struct RevokeDeviceCommand: StoreOperation {
    public var deviceID: String
    public var now: Timestamp
    public var by: Initiator
    public var reason: String?
    public init(deviceID: String, now: Timestamp, by: Initiator, reason: String?) {
        self.deviceID = deviceID
        self.now = now
        self.by = by
        self.reason = reason
    }

    public var reads: [FactKey] { [.device(deviceID)] }

    public func plan(_ facts: Facts) throws -> Plan<[String]> {
        guard let device = try facts.device(deviceID), device.retiredAt == nil else { return Plan([]) }
        let accounts = device.active.map(\.account.accountID)
        var effects: [Effect] = []
        for account in accounts {
            effects += [
                .endPair(deviceID: deviceID, accountID: account, state: .revoked, reason: reason, at: now),
                .audit(AuditEvent(at: now, kind: .deviceRevoked, accountID: account, deviceID: deviceID, actor: by, reason: reason)),
                .webhook(.deviceRevoked, accountID: account, at: now, ["deviceId": deviceID]),
            ]
        }
        // The plain login must answer "revoked", also when the current account had moved away.
        if let first = accounts.first, device.currentAccountID.flatMap(device.account)?.state != .active {
            effects.append(.setCurrentAccount(deviceID: deviceID, accountID: first))
        }
        return Plan(accounts, effects + [.retireDevice(id: deviceID, at: now)])
    }
}
