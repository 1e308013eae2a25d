// A claim with the account's recovery code: looked up by its hash inside the claim's
// transaction, which reads the code and, through it, the account; used once.

/// A recovery code as the user typed it.
public struct RecoveryCodeProof: ClaimProof {
    /// The code's SHA-256 (a text that cannot be a code: a hash no code has).
    public var codeHash: SecretHash
    public init(typed: String) {
        codeHash = OneTimeCode(typed: typed, characters: RecoveryCodeRecord.length)?.hash ?? SecretHash(bytes: [])
    }

    public var account: AccountRef { .ofRecoveryCode(codeHash) }
    /// The account's pending transfers too: the move cancels them.
    public var reads: [FactKey] { [.pendingTransfers(.of(account)), .recoveryCode(account)] }

    public func check(_ facts: Facts, target: ClaimTarget, now: Timestamp, clientAddress: String?) throws -> ProofCheck {
        let code = try facts.recoveryCode(account).flatMap { $0.codeHash.matches(codeHash) ? $0 : nil }
        return .singleUse(code, method: .recoveryCode, target: target, now: now, clientAddress: clientAddress)
    }

    public func won(_ facts: Facts, move: MoveToDevice) throws -> (effects: [Effect], method: WebhookEvent.ClaimMethod) {
        let device = move.target.deviceID.value
        let effects: [Effect] = [
            .useRecoveryCode(accountID: move.accountID, deviceID: device, at: move.now),
            .audit(AuditEvent(at: move.now, kind: .recoveryCodeUsed, accountID: move.accountID, deviceID: device, clientAddress: move.clientAddress)),
        ]
        let cancelled = try facts.cancelPendingTransfers(
            .of(account), of: move.accountID, at: move.now, because: "the account moved with its recovery code")
        return (effects + cancelled, .recoveryCode)
    }
}
