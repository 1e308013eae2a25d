// A claim with an email and a temporary password: one argon2 verification before the
// transaction (wrong passwords counted against the transfer: `FailedClaimCommand`), then the
// transfer the password opened, checked again under lock.

/// The pending transfer whose password was verified.
public struct PasswordProof: ClaimProof {
    public var transferID: String
    /// The transfer's account, read with it before the verification.
    public var accountID: String
    public init(transferID: String, accountID: String) {
        self.transferID = transferID
        self.accountID = accountID
    }

    public var account: AccountRef { .id(accountID) }
    public var reads: [FactKey] { [.transfer(id: transferID)] }

    public func check(_ facts: Facts, target: ClaimTarget, now: Timestamp, clientAddress: String?) throws -> ProofCheck {
        let transfer = try facts.transfer(transferID).flatMap { $0.accountID == accountID ? $0 : nil }
        return TransferRecord.claimCheck(transfer, target: target, now: now, refusalSpends: [])
    }

    public func won(_ facts: Facts, move: MoveToDevice) throws -> (effects: [Effect], method: WebhookEvent.ClaimMethod) {
        guard let transfer = try facts.transfer(transferID) else { throw UndeclaredFact(key: .transfer(id: transferID)) }
        return transfer.claimed(by: move)
    }
}

extension TransferService {
    /// The password claim: the open password transfer of `email` whose password is
    /// `password`, or the latest one this device claimed (its repeat, which the claim's
    /// transaction holds only while the account is on the device by that claim: `ClaimRepeat`).
    /// Always exactly one verification, whichever it is.
    func claim(email: Email, password: String, _ target: ClaimTarget, clientAddress: String?) async throws -> SessionGrant {
        let transfer = try await store.pendingTransfer(emailKey: email.key)
        let before = clock.now()
        if let transfer, transfer.isOpen(at: before), let until = transfer.lock(at: before) {
            observer.claimFailed()
            throw TransferError.tooManyAttempts(retryAfterSeconds: before.secondsUntil(until))
        }
        // Unknown, expired, open and won transfers all cost one verification.
        var usable = transfer.flatMap { $0.isOpen(at: before) ? $0 : nil }
        var repeated = false
        if usable == nil, let won = try await store.claimedTransfer(emailKey: email.key, by: target.deviceID.value),
            won.wasClaimed(by: target.deviceID)
        {
            usable = won
            repeated = true
        }
        var hash = dummyHash
        if case .password(_, _, let stored) = usable?.proof { hash = stored }
        let verified = try await hasher.verify(password, against: hash)
        guard let usable, verified else {
            // Every wrong password costs the same work, whatever the email: the failure is
            // written for an open transfer, and the same statements run on no transfer for an
            // unknown email, so the answer's time does not tell which it was.
            observer.claimFailed()
            try await recordFailure(transferID: repeated ? nil : usable?.id, clientAddress: clientAddress)
            throw TransferError.invalidTransferCredentials
        }
        return try await claim(
            PasswordProof(transferID: usable.id, accountID: usable.accountID), target, slot: nil, clientAddress: clientAddress)
    }

    private func recordFailure(transferID: String?, clientAddress: String?) async throws {
        // Refused (not counted) when a concurrent attempt locked the transfer while this one was verifying.
        let counted = try await store.execute(
            FailedClaimCommand(transferID: transferID, now: clock.now(), policy: policy.lock, clientAddress: clientAddress)
        ).get()
        if case .locked = counted { observer.transferLocked() }
    }
}
