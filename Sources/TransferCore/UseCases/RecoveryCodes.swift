// Recovery codes (`PUT` / `DELETE /v1/me/recovery-code`): a way back for an account whose
// phone is lost before a transfer was set up. The claim with one is `RecoveryCodeProof`
// (`Claim/Proof+RecoveryCode.swift`), the same move as every other claim.

extension TransferService {
    /// Makes the account's recovery code, replacing the one it had; returned once, stored
    /// only as its SHA-256. It does not raise the migration flag.
    /// Counted by `--setup-limit`, as a set-up is.
    public func makeRecoveryCode(accountID: String, deviceID: String? = nil) async throws -> (code: OneTimeCode, createdAt: Timestamp) {
        try await withSetUpSlot(accountID: accountID, by: .device) {
            let code = OneTimeCode.make(characters: RecoveryCodeRecord.length)
            let now = clock.now()
            try await store.execute(SetRecoveryCodeCommand(accountID: accountID, hash: code.hash, now: now, deviceID: deviceID)).get()
            return (code, now)
        }
    }

    /// Deletes the account's recovery code; false when it had none.
    @discardableResult
    public func deleteRecoveryCode(accountID: String, deviceID: String? = nil) async throws -> Bool {
        try await withSetUpSlot(accountID: accountID, by: .device) {
            try await store.execute(DeleteRecoveryCodeCommand(accountID: accountID, now: clock.now(), deviceID: deviceID)).get()
        }
    }
}

public struct SetRecoveryCodeCommand: StoreOperation {
    public var accountID: String
    public var hash: SecretHash
    public var now: Timestamp
    /// The device that made it (for `account.ways_back_changed`).
    public var deviceID: String?
    public init(accountID: String, hash: SecretHash, now: Timestamp, deviceID: String? = nil) {
        self.accountID = accountID
        self.hash = hash
        self.now = now
        self.deviceID = deviceID
    }

    public var reads: [FactKey] { [.account(.id(accountID)), .recoveryCode(.id(accountID))] }

    /// Refused (`accountDeleted`) when the account was deleted.
    public func plan(_ facts: Facts) throws -> Plan<Void> {
        guard let account = try facts.account(accountID), account.deletedAt == nil else { return Plan(refusing: .accountDeleted) }
        let replaces = try facts.recoveryCode(accountID) != nil
        return Plan((), [
            .setRecoveryCode(accountID: accountID, hash: hash, at: now),
            .audit(AuditEvent(at: now, kind: .recoveryCodeSet, accountID: accountID, reason: replaces ? "replaces the earlier code" : nil)),
            .waysBackChanged(replaces ? .recoveryCodeReplaced : .recoveryCodeCreated, accountID: accountID, deviceID: deviceID, at: now),
        ])
    }
}

public struct DeleteRecoveryCodeCommand: StoreOperation {
    public var accountID: String
    public var now: Timestamp
    public var deviceID: String?
    public init(accountID: String, now: Timestamp, deviceID: String? = nil) {
        self.accountID = accountID
        self.now = now
        self.deviceID = deviceID
    }

    public var reads: [FactKey] { [.recoveryCode(.id(accountID))] }

    public func plan(_ facts: Facts) throws -> Plan<Bool> {
        guard try facts.recoveryCode(accountID) != nil else { return Plan(false) }
        return Plan(true, [
            .deleteRecoveryCode(accountID: accountID),
            .audit(AuditEvent(at: now, kind: .recoveryCodeDeleted, accountID: accountID)),
            .waysBackChanged(.recoveryCodeDeleted, accountID: accountID, deviceID: deviceID, at: now),
        ])
    }
}
