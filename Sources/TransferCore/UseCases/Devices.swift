// Support's revocation of a device (stolen phone).

extension TransferService {
    /// Retires an active device at once: its sessions end and its auto-login answers
    /// `403 device_revoked`. Returns the account it was bound to, or nil when it was not active.
    public func revokeDevice(_ deviceID: DeviceID, by initiator: Initiator, reason: String) async throws -> String? {
        try await store.execute(RevokeDeviceCommand(deviceID: deviceID.value, now: clock.now(), by: initiator, reason: reason))
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

    public var reads: Reads { Reads(device: deviceID) }

    public func plan(_ facts: Facts) -> Plan<String?> {
        guard let (binding, _) = facts.device, binding.state == .active else { return Plan(nil) }
        let account = binding.accountID
        return Plan(account, [
            .endBinding(deviceID: deviceID, accountID: account, state: .revoked, reason: reason, at: now),
            .revokeSessions(accountID: account, deviceID: deviceID, at: now),
            .audit(AuditEvent(at: now, kind: .deviceRevoked, accountID: account, deviceID: deviceID, actor: by, reason: reason)),
        ])
    }
}
