// A claim with a transfer code: looked up by its hash inside the claim's transaction, which
// reads the code's transfer and, through it, the account (no read before the transaction).

/// A transfer code as the user typed or scanned it.
public struct TransferCodeProof: ClaimProof {
    /// The code's SHA-256; a text that cannot be a code gets a hash no code has: unknown, as
    /// one that is not stored, with the same answer.
    public var codeHash: SecretHash
    public init(typed: String) {
        codeHash = OneTimeCode(typed: typed, characters: OneTimeCode.transferCodeLength)?.hash ?? SecretHash(bytes: [])
    }

    public var account: AccountRef { .ofTransferCode(codeHash) }
    public var reads: [FactKey] { [.transferByCode(codeHash)] }

    public func check(_ facts: Facts, target: ClaimTarget, now: Timestamp, clientAddress: String?) throws -> ProofCheck {
        let transfer = try facts.transfer(codeHash: codeHash).flatMap { $0.method == .code ? $0 : nil }
        // A code that matches no open transfer is audited as a failed claim without an
        // account, as a wrong password for an unknown email is: `transfer stats` counts guesses.
        return TransferRecord.claimCheck(transfer, target: target, now: now, refusalSpends: [.guessedCode(at: now, clientAddress: clientAddress)])
    }

    public func won(_ facts: Facts, move: MoveToDevice) throws -> (effects: [Effect], method: WebhookEvent.ClaimMethod) {
        guard let transfer = try facts.transfer(codeHash: codeHash) else { throw UndeclaredFact(key: .transferByCode(codeHash)) }
        return transfer.claimed(by: move)
    }
}

extension Effect {
    /// A code (transfer or recovery) that opened nothing: a failed claim without an account.
    static func guessedCode(at now: Timestamp, clientAddress: String?) -> Effect {
        .audit(AuditEvent(at: now, kind: .claimFailed, accountID: nil, clientAddress: clientAddress))
    }
}
