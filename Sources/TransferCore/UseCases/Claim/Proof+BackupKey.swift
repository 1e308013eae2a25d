// A claim with one of the account's backup keys (from iCloud Keychain or Block Store): looked
// up by its hash inside the claim's transaction, which reads the keys and, through the key,
// the account (no read before it); used once.

/// A backup key as the new phone found it in the platform's store.
public struct BackupKeyProof: ClaimProof {
    /// The key's SHA-256 (a text that cannot be a key: a hash no key has).
    public var keyHash: SecretHash
    public init(key: String) {
        keyHash = BackupKey.lookupHash(of: key)
    }

    public var account: AccountRef { .ofBackupKey(keyHash) }
    /// The account's pending transfers too: the move cancels them.
    public var reads: [FactKey] { [.pendingTransfers(.of(account)), .backupKeys(account)] }

    /// The account's key with this hash.
    private func key(_ facts: Facts) throws -> BackupKeyRecord? {
        try facts.backupKeys(account).first { $0.keyHash.matches(keyHash) }
    }

    public func check(_ facts: Facts, target: ClaimTarget, now: Timestamp, clientAddress: String?) throws -> ProofCheck {
        .singleUse(try key(facts), method: .backupKey, target: target, now: now, clientAddress: clientAddress)
    }

    public func won(_ facts: Facts, move: MoveToDevice) throws -> (effects: [Effect], method: WebhookEvent.ClaimMethod) {
        guard let key = try key(facts) else { throw UndeclaredFact(key: .backupKeys(account)) }
        let device = move.target.deviceID.value
        let effects: [Effect] = [
            .useBackupKey(accountID: move.accountID, store: key.store, deviceID: device, at: move.now),
            .audit(AuditEvent(
                at: move.now, kind: .backupKeyUsed, accountID: move.accountID, deviceID: device, reason: key.store.rawValue,
                clientAddress: move.clientAddress)),
        ]
        let cancelled = try facts.cancelPendingTransfers(
            .of(account), of: move.accountID, at: move.now, because: "the account moved with a backup key")
        return (effects + cancelled, .backupKey)
    }
}
