// Setting up a transfer on the old device (`PUT /v1/me/transfer`), or by support for a user
// who lost it (`transfer issue`); cancelling it; support's unlock after a lockout.

extension TransferService {
    /// Sets up (or replaces) the account's pending transfer. `password` must have passed
    /// `FieldRules.temporaryPassword`.
    public func setUpTransfer(
        accountID: String, email: Email, password: String, by initiator: Initiator = .device, reason: String? = nil,
        clientAddress: String? = nil, deviceID: String? = nil
    ) async throws -> (email: String, expiresAt: Timestamp) {
        try await withSetUpSlot(accountID: accountID, by: initiator) {
            let hash = try await hasher.hash(password)
            let expiresAt = try await setUp(
                accountID: accountID, proof: .password(email, hash: hash), by: initiator, reason: reason, clientAddress: clientAddress,
                deviceID: deviceID)
            return (email.display, expiresAt)
        }
    }

    /// Sets up (or replaces) the account's pending transfer with a transfer code, returned
    /// once and stored only as its SHA-256. No password hashing: no hash worker is involved.
    public func setUpTransferCode(
        accountID: String, by initiator: Initiator = .device, reason: String? = nil, clientAddress: String? = nil, deviceID: String? = nil
    ) async throws -> (code: OneTimeCode, expiresAt: Timestamp) {
        try await withSetUpSlot(accountID: accountID, by: initiator) {
            let code = OneTimeCode.make(characters: OneTimeCode.transferCodeLength)
            let expiresAt = try await setUp(
                accountID: accountID, proof: .code(code.hash), by: initiator, reason: reason, clientAddress: clientAddress, deviceID: deviceID)
            return (code, expiresAt)
        }
    }

    /// A set-up from the device holds a slot of `--setup-limit` for the account, taken before
    /// the password is hashed; support's set-ups (`transfer issue`) take none. Recovery-code
    /// changes take one too: each is a write a client could otherwise repeat at will.
    func withSetUpSlot<T>(accountID: String, by initiator: Initiator, _ work: () async throws -> T) async throws -> T {
        let slot = initiator == .device ? policy.limits.slot(.setup, account: accountID, now: clock.now()) : nil
        return try await withSlot(slot, keepsSlot: Self.wasTried, work)
    }

    /// The set-up of either kind: one pending transfer per account, the new one replacing the old.
    private func setUp(
        accountID: String, proof: TransferProof, by initiator: Initiator, reason: String?, clientAddress: String?, deviceID: String?
    ) async throws -> Timestamp {
        let now = clock.now()
        let transfer = NewTransfer(
            id: Identifier.make(), accountID: accountID, proof: proof, createdAt: now, expiresAt: now + policy.transferTTL,
            issuedBy: initiator)
        try await store.execute(SetUpCommand(transfer: transfer, reason: reason, clientAddress: clientAddress, deviceID: deviceID)).get()
        observer.transferSetUp()
        return transfer.expiresAt
    }

    /// Support: a transfer for a user who lost the old device, with a generated password
    /// that is returned once and stored only as its hash.
    public func issueTransfer(
        accountID: String, email: Email, by initiator: Initiator, reason: String
    ) async throws -> (password: String, email: String, expiresAt: Timestamp) {
        let password = GeneratedPassword.make()
        let result = try await setUpTransfer(
            accountID: accountID, email: email, password: try FieldRules.temporaryPassword(password, email: email),
            by: initiator, reason: reason)
        return (password, result.email, result.expiresAt)
    }

    /// Cancels the account's pending transfer; false when none was pending.
    public func cancelTransfer(
        accountID: String, by initiator: Initiator = .device, reason: String? = nil, deviceID: String? = nil
    ) async throws -> Bool {
        try await store.execute(CancelTransferCommand(accountID: accountID, now: clock.now(), by: initiator, reason: reason, deviceID: deviceID)).get()
    }

    /// Support: clears the lock and consecutive failures of the account's pending transfer.
    /// Returns the transfer as it was, or nil when none is pending.
    public func unlockTransfer(accountID: String, by initiator: Initiator, reason: String) async throws -> TransferRecord? {
        try await store.execute(UnlockTransferCommand(accountID: accountID, now: clock.now(), by: initiator, reason: reason)).get()
    }
}

public struct SetUpCommand: StoreOperation {
    public var transfer: NewTransfer
    public var reason: String?
    public var clientAddress: String?
    /// The device that set it up; nil for support's.
    public var deviceID: String?
    public init(transfer: NewTransfer, reason: String? = nil, clientAddress: String? = nil, deviceID: String? = nil) {
        self.deviceID = deviceID
        self.transfer = transfer
        self.reason = reason
        self.clientAddress = clientAddress
    }

    public var now: Timestamp { transfer.createdAt }
    var pending: PendingTransferQuery { PendingTransferQuery(emailKey: transfer.proof.emailKey, accountID: transfer.accountID) }
    public var reads: [FactKey] { [.pendingTransfers(pending), .account(.id(transfer.accountID))] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        // Support may issue a transfer for an account that is on no device; never for a deleted one.
        guard try facts.account(transfer.accountID)?.deletedAt == nil else { return Plan(refusing: .accountDeleted) }
        var effects: [Effect] = []
        var open: [TransferRecord] = []
        // A pending transfer past its expiry no longer holds its email.
        for pending in try facts.pendingTransfers(pending) {
            if pending.isOpen(at: now) {
                open.append(pending)
            } else {
                effects.append(pending.markedExpired)
            }
        }
        if let key = transfer.proof.emailKey, open.contains(where: { $0.emailKey == key && $0.accountID != transfer.accountID }) {
            return Plan(refusing: .emailInUse, effects)
        }
        // The account's earlier transfer, of either kind, gives way: new proof, new expiry, attempts reset.
        for earlier in open where earlier.accountID == transfer.accountID {
            effects.append(.endTransfer(id: earlier.id, state: .replaced, at: now))
        }
        effects.append(.createTransfer(transfer))
        effects.append(.audit(AuditEvent(
            at: now, kind: transfer.issuedBy == .device ? .transferSetUp : .transferIssued, accountID: transfer.accountID,
            transferID: transfer.id, actor: transfer.issuedBy, reason: reason, clientAddress: clientAddress)))
        effects.append(.webhook(
            .transferSetUp, accountID: transfer.accountID, at: now,
            ["transferId": transfer.id, "expiresAt": transfer.expiresAt.rfc3339, "method": transfer.method.rawValue]))
        effects.append(.waysBackChanged(.transferSetUp, accountID: transfer.accountID, deviceID: deviceID, at: now))
        return Plan((), effects)
    }
}

/// Cancels the account's pending transfer (marked expired if it already was); false when none.
public struct CancelTransferCommand: StoreOperation {
    public var accountID: String
    public var now: Timestamp
    public var by: Initiator
    public var reason: String?
    /// The device that cancelled it; nil for support.
    public var deviceID: String?
    public init(accountID: String, now: Timestamp, by: Initiator, reason: String?, deviceID: String? = nil) {
        self.accountID = accountID
        self.now = now
        self.by = by
        self.reason = reason
        self.deviceID = deviceID
    }

    public var reads: [FactKey] { [.pendingTransfers(.of(accountID))] }

    public func plan(_ facts: Facts) throws -> Plan<Bool> {
        guard let pending = try facts.pendingTransfers(.of(accountID)).first(where: { $0.accountID == accountID }) else { return Plan(false) }
        guard pending.isOpen(at: now) else { return Plan(true, [pending.markedExpired]) }
        return Plan(true, [
            .endTransfer(id: pending.id, state: .cancelled, at: now),
            .audit(AuditEvent(at: now, kind: .transferCancelled, accountID: accountID, transferID: pending.id, actor: by, reason: reason)),
            .webhook(.transferCancelled, accountID: accountID, at: now, ["transferId": pending.id]),
            .waysBackChanged(.transferCancelled, accountID: accountID, deviceID: deviceID, at: now),
        ])
    }
}

/// Support: clears the lock and the consecutive-failure count of the pending transfer.
public struct UnlockTransferCommand: StoreOperation {
    public var accountID: String
    public var now: Timestamp
    public var by: Initiator
    public var reason: String
    public init(accountID: String, now: Timestamp, by: Initiator, reason: String) {
        self.accountID = accountID
        self.now = now
        self.by = by
        self.reason = reason
    }

    public var reads: [FactKey] { [.pendingTransfers(.of(accountID))] }

    public func plan(_ facts: Facts) throws -> Plan<TransferRecord?> {
        guard let pending = try facts.pendingTransfers(.of(accountID)).first(where: { $0.accountID == accountID }) else { return Plan(nil) }
        return Plan(pending, [
            .unlockTransfer(id: pending.id),
            .audit(AuditEvent(at: now, kind: .transferUnlocked, accountID: accountID, transferID: pending.id, actor: by, reason: reason)),
        ])
    }
}
