// Backup keys (`PUT` / `DELETE /v1/me/backup-key`, contract v1.3): a way back the app keeps,
// without the user seeing it, in the platform's end-to-end-encrypted store that follows the
// user to a new phone (iCloud Keychain, Block Store). The claim with one is `BackupKeyProof`
// (`Claim/Proof+BackupKey.swift`), the same move as every other claim.

extension TransferService {
    /// Makes the account's backup key for `store`, replacing the one it had there; returned
    /// once, stored only as its SHA-256. It touches neither the recovery code nor a pending
    /// transfer, and raises no migration flag. Counted by `--setup-limit`, as a set-up is.
    public func makeBackupKey(accountID: String, store: BackupKeyStore, deviceID: String? = nil) async throws -> (key: BackupKey, createdAt: Timestamp) {
        try await withSetUpSlot(accountID: accountID, by: .device) {
            let key = BackupKey.make()
            let now = clock.now()
            try await self.store.execute(SetBackupKeyCommand(accountID: accountID, store: store, hash: key.hash, now: now, deviceID: deviceID)).get()
            return (key, now)
        }
    }

    /// Deletes the account's backup key for `store`; false when it had none there.
    @discardableResult
    public func deleteBackupKey(accountID: String, store: BackupKeyStore, deviceID: String? = nil) async throws -> Bool {
        try await withSetUpSlot(accountID: accountID, by: .device) {
            try await self.store.execute(DeleteBackupKeyCommand(accountID: accountID, store: store, now: clock.now(), deviceID: deviceID)).get()
        }
    }
}

public struct SetBackupKeyCommand: StoreOperation {
    public var accountID: String
    public var store: BackupKeyStore
    public var hash: SecretHash
    public var now: Timestamp
    /// The device that made it (for `account.ways_back_changed`).
    public var deviceID: String?
    public init(accountID: String, store: BackupKeyStore, hash: SecretHash, now: Timestamp, deviceID: String? = nil) {
        self.accountID = accountID
        self.store = store
        self.hash = hash
        self.now = now
        self.deviceID = deviceID
    }

    public var reads: [FactKey] { [.account(.id(accountID)), .backupKeys(.id(accountID))] }

    /// Refused (`accountDeleted`) when the account was deleted.
    public func plan(_ facts: Facts) throws -> Plan<Void> {
        guard let account = try facts.account(accountID), account.deletedAt == nil else { return Plan(refusing: .accountDeleted) }
        let replaces = try facts.backupKeys(accountID).contains { $0.store == store }
        return Plan((), [
            .setBackupKey(accountID: accountID, store: store, hash: hash, at: now),
            .audit(AuditEvent(
                at: now, kind: .backupKeySet, accountID: accountID, deviceID: deviceID,
                reason: store.rawValue + (replaces ? "; replaces the earlier key" : ""))),
            .waysBackChanged(replaces ? .backupKeyReplaced : .backupKeyCreated, accountID: accountID, deviceID: deviceID, at: now, store: store),
        ])
    }
}

public struct DeleteBackupKeyCommand: StoreOperation {
    public var accountID: String
    public var store: BackupKeyStore
    public var now: Timestamp
    public var deviceID: String?
    public init(accountID: String, store: BackupKeyStore, now: Timestamp, deviceID: String? = nil) {
        self.accountID = accountID
        self.store = store
        self.now = now
        self.deviceID = deviceID
    }

    public var reads: [FactKey] { [.backupKeys(.id(accountID))] }

    public func plan(_ facts: Facts) throws -> Plan<Bool> {
        guard try facts.backupKeys(accountID).contains(where: { $0.store == store }) else { return Plan(false) }
        return Plan(true, [
            .deleteBackupKey(accountID: accountID, store: store),
            .audit(AuditEvent(at: now, kind: .backupKeyDeleted, accountID: accountID, deviceID: deviceID, reason: store.rawValue)),
            .waysBackChanged(.backupKeyDeleted, accountID: accountID, deviceID: deviceID, at: now, store: store),
        ])
    }
}
