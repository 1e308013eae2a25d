// Recovery codes (`PUT` / `DELETE /v1/me/recovery-code`): a way back for an account whose
// phone is lost before a transfer was set up. The claim with one is `RecoveryCodeProof`
// (`Claim/Proof+RecoveryCode.swift`), the same move as every other claim.

extension TransferService {
    /// Makes the account's recovery code, replacing the one it had; returned once, stored
    /// only as its SHA-256. It does not raise the migration flag.
    public func makeRecoveryCode(accountID: String) async throws -> (code: OneTimeCode, createdAt: Timestamp) {
        let code = OneTimeCode.make(characters: RecoveryCodeRecord.length)
        let now = clock.now()
        try await store.execute(SetRecoveryCodeCommand(accountID: accountID, hash: code.hash, now: now)).get()
        return (code, now)
    }

    /// Deletes the account's recovery code; false when it had none.
    @discardableResult
    public func deleteRecoveryCode(accountID: String) async throws -> Bool {
        try await store.execute(DeleteRecoveryCodeCommand(accountID: accountID, now: clock.now())).get()
    }
}

public struct SetRecoveryCodeCommand: StoreOperation {
    public var accountID: String
    public var hash: SecretHash
    public var now: Timestamp
    public init(accountID: String, hash: SecretHash, now: Timestamp) {
        self.accountID = accountID
        self.hash = hash
        self.now = now
    }

    public var reads: [FactKey] { [.account(.id(accountID)), .recoveryCode(.id(accountID))] }

    /// Refused (`accountDeleted`) when the account was deleted.
    public func plan(_ facts: Facts) throws -> Plan<Void> {
        guard let account = try facts.account(accountID), account.deletedAt == nil else { return Plan(refusing: .accountDeleted) }
        return Plan((), [
            .setRecoveryCode(accountID: accountID, hash: hash, at: now),
            .audit(AuditEvent(
                at: now, kind: .recoveryCodeSet, accountID: accountID, reason: try facts.recoveryCode(accountID) == nil ? nil : "replaces the earlier code")),
        ])
    }
}

public struct DeleteRecoveryCodeCommand: StoreOperation {
    public var accountID: String
    public var now: Timestamp
    public init(accountID: String, now: Timestamp) {
        self.accountID = accountID
        self.now = now
    }

    public var reads: [FactKey] { [.recoveryCode(.id(accountID))] }

    public func plan(_ facts: Facts) throws -> Plan<Bool> {
        guard try facts.recoveryCode(accountID) != nil else { return Plan(false) }
        return Plan(true, [
            .deleteRecoveryCode(accountID: accountID),
            .audit(AuditEvent(at: now, kind: .recoveryCodeDeleted, accountID: accountID)),
        ])
    }
}
