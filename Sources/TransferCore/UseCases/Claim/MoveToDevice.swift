// Moving an account onto a new device: what every claim does once its proof holds.

/// How an account moves onto a new device: the method as a value.
public enum MoveMethod: Sendable, Equatable {
    /// A claimed transfer (password or code).
    case transfer(id: String)
    case apple
    case recoveryCode
    case backupKey

    /// The transfer claimed, for the audit trail (none for the other methods).
    public var transferID: String? {
        if case .transfer(let id) = self { return id }
        return nil
    }

    /// Added to the reason the old device records.
    var how: String {
        switch self {
        case .transfer: ""
        case .apple: " with Sign in with Apple"
        case .recoveryCode: " with its recovery code"
        case .backupKey: " with a backup key"
        }
    }
}

/// What a claim, a move with Sign in with Apple and a claim with a recovery code share: the
/// new device's checks, the account taken off its old device (which keeps its other accounts,
/// and is retired when none is left) and put on the new one as its current account, and a
/// session opened there.
public struct MoveToDevice: Sendable {
    /// The account as the claim's reads name it, and its id.
    public var account: AccountRef
    public var accountID: String
    public var target: ClaimTarget
    public var maxAccounts: Int
    public var now: Timestamp
    public var fresh: FreshSession
    public var clientAddress: String?
    public var method: MoveMethod
    /// The accounts whose ways back were read (`WayBack.facts`): those the new device held when
    /// the service looked, before the transaction. An account it holds now that is not among
    /// them (it came onto the device meanwhile) has no way back as far as this move knows.
    public var replacing: [String]

    public init(
        account: AccountRef, accountID: String, target: ClaimTarget, maxAccounts: Int, now: Timestamp, fresh: FreshSession,
        clientAddress: String?, method: MoveMethod, replacing: [String] = []
    ) {
        self.replacing = replacing
        self.account = account
        self.accountID = accountID
        self.target = target
        self.maxAccounts = maxAccounts
        self.now = now
        self.fresh = fresh
        self.clientAddress = clientAddress
        self.method = method
    }

    var deviceID: DeviceID { target.deviceID }
    var deviceSecret: String { target.deviceSecret }

    var transferID: String? { method.transferID }
    var how: String { method.how }

    /// `transfer.claimed` for the app backend: from the device the account was on (none when
    /// it was on no device), to the new one.
    public func claimedEvent(_ facts: Facts, method: WebhookEvent.ClaimMethod) throws -> Effect {
        let from = try facts.accountDevices(account).first { $0.account(accountID)?.state == .active }?.id
        return .webhook(
            .transferClaimed, accountID: accountID, at: now,
            ["transferId": transferID, "fromDeviceId": from, "toDeviceId": deviceID.value, "method": method.rawValue])
    }

    /// The effects and the session, or the device error a claim answers. `facts` holds the
    /// new device and the account's device.
    public func plan(_ facts: Facts, account summary: AccountSummary) throws -> Result<([Effect], SessionGrant), TransferError> {
        let newDevice = deviceID.value
        var effects: [Effect] = []
        var staying: [ListedAccount] = []
        if let device = try facts.device(newDevice) {
            guard device.retiredAt == nil else { return .failure(.deviceRetired) }
            guard device.secretHash.matches(SecretHash(of: deviceSecret)) else { return .failure(.invalidDeviceCredentials) }
            if device.account(accountID)?.state == .active { return .failure(.deviceAlreadyBound) }
            if target.addAccount {
                guard device.active.count < maxAccounts else { return .failure(.deviceAccountLimit(maxAccounts)) }
                staying = device.summaries.map { ListedAccount(accountID: $0.accountID, userName: $0.userName, current: false) }
            } else if !device.active.isEmpty {
                guard target.replaceExistingAccount else { return .failure(.deviceHasAccount) }
                // The device's accounts lose it (kept, reachable by support). This is their only
                // device: one with no way back would be stranded, so it goes only when the
                // request abandons it, as a removal's (contract v1.3).
                let others = device.active.map(\.account.accountID)
                let lost = try others.filter { try !replacing.contains($0) || WayBack.all(of: $0, in: facts, at: now).isEmpty }
                guard lost.isEmpty || target.abandonExisting else { return .failure(.accountWouldBeLost) }
                for other in others {
                    let abandoning = lost.contains(other)
                    effects += [
                        .endPair(
                            deviceID: newDevice, accountID: other, state: .replaced,
                            reason: "taken over by account \(accountID) (replaceExistingAccount\(abandoning ? ", abandoned" : ""))", at: now),
                        .audit(AuditEvent(
                            at: now, kind: .deviceReplaced, accountID: other, deviceID: newDevice, transferID: transferID,
                            reason: (transferID == nil ? "account \(accountID) moved here\(how)" : "claimed account \(accountID)")
                                + " with replaceExistingAccount" + (abandoning ? "; abandoned with no way back (abandonExisting=true)" : ""),
                            clientAddress: clientAddress)),
                        .webhook(.accountRemovedFromDevice, accountID: other, at: now, ["deviceId": newDevice]),
                    ]
                }
            }
        } else {
            effects.append(.createDevice(id: newDevice, secretHash: SecretHash(of: deviceSecret), at: now))
        }
        let moved = "moved to device \(newDevice)\(how)"
        // Read before its row was locked: skip a device the account left meanwhile.
        for old in try facts.accountDevices(self.account) where old.account(accountID)?.state == .active {
            effects += [
                .endPair(deviceID: old.id, accountID: accountID, state: .moved, reason: moved, at: now),
                .audit(AuditEvent(
                    at: now, kind: .deviceMoved, accountID: accountID, deviceID: old.id, transferID: transferID, reason: moved,
                    clientAddress: clientAddress)),
            ]
            // It stays the old device's current account, so that device's plain login says it moved.
            if old.active.allSatisfy({ $0.account.accountID == accountID }) { effects.append(.retireDevice(id: old.id, at: now)) }
        }
        let (session, token) = PairSession.open(
            sessionID: fresh.sessionID, key: fresh.key, deviceSecret: deviceSecret, at: now, expiresAt: fresh.expiresAt)
        effects += [
            .addAccount(deviceID: newDevice, accountID: accountID, at: now),
            .setCurrentAccount(deviceID: newDevice, accountID: accountID),
            .setMovedTo(accountID: accountID, deviceID: newDevice),
            .openSession(deviceID: newDevice, accountID: accountID, session, at: now, clientAddress: clientAddress),
        ]
        let claimed = AccountSummary(accountID: accountID, userName: summary.userName, migrationFlag: false)
        let grant = SessionGrant(
            account: claimed, deviceID: newDevice, sessionID: session.sessionID, refreshToken: token, created: false,
            accounts: staying + [ListedAccount(accountID: accountID, userName: summary.userName, current: true)])
        return .success((effects, grant))
    }
}
