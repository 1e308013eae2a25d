// A move with Sign in with Apple (`POST /v1/transfers/apple`): the identity token was verified
// before the transaction (an outgoing HTTP call, never inside one); the transaction uses up
// its nonce and reads the account linked to the Apple ID, with the link, under lock.

/// A verified Apple ID and the nonce its identity token carried.
public struct AppleProof: ClaimProof {
    public var sub: String
    public var nonceHash: SecretHash
    public init(sub: String, nonceHash: SecretHash) {
        self.sub = sub
        self.nonceHash = nonceHash
    }

    public var account: AccountRef { .ofAppleID(sub) }
    /// The account's pending transfers too (the move cancels them), then the nonce and the link.
    public var reads: [FactKey] { [.pendingTransfers(.of(account)), .appleNonce(nonceHash), .appleLinkBySub(sub)] }
    public var accountGone: TransferError { .appleIDNotLinked }

    public func check(_ facts: Facts, target: ClaimTarget, now: Timestamp, clientAddress: String?) throws -> ProofCheck {
        if let refusal = try facts.appleNonceRefusal(nonceHash, at: now) { return .refused(refusal) }
        let used: [Effect] = [.consumeAppleNonce(hash: nonceHash)]
        // Unlinked since the token was issued: as if never linked.
        guard let link = try facts.appleLink(sub: sub) else { return .refused(.appleIDNotLinked, spent: used) }
        // Each statement names the account by the Apple ID, and the link is locked only after
        // them (its rank): a link moved to another account in between shows as facts of two
        // accounts. Refused as not linked (the app may try again); the one-active-device index
        // holds the rest (a retry, for an account whose old device went unread).
        let consistent = try facts.accountDevices(account).allSatisfy { $0.account(link.accountID)?.state == .active }
            && facts.pendingTransfers(.of(account)).allSatisfy { $0.accountID == link.accountID }
        guard consistent else { return .refused(.appleIDNotLinked, spent: used) }
        // The device holds the account by a move with this Apple ID: this is that move repeated
        // (its answer was lost), with a fresh nonce (`ClaimRepeat`). An account that came onto
        // the device another way is no Apple move to repeat (`device_already_bound`, below).
        if ClaimRepeat.holds(try facts.device(target.deviceID.value)?.account(link.accountID), wonAt: link.movedAt) {
            return .repeated(accountID: link.accountID, method: .apple, wonAt: link.movedAt, spent: used)
        }
        return .holds(accountID: link.accountID, method: .apple, spent: used)
    }

    public func won(_ facts: Facts, move: MoveToDevice) throws -> (effects: [Effect], method: WebhookEvent.ClaimMethod) {
        let cancelled = try facts.cancelPendingTransfers(
            .of(account), of: move.accountID, at: move.now, because: "the account moved with Sign in with Apple")
        return (
            cancelled + [
                .recordAppleMove(sub: sub, at: move.now),
                .audit(AuditEvent(
                    at: move.now, kind: .appleMoved, accountID: move.accountID, deviceID: move.target.deviceID.value,
                    clientAddress: move.clientAddress))
            ], .apple
        )
    }
}
