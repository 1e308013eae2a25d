// Deleting an account (`DELETE /v1/me`, `transfer delete-account`): App Store guideline
// 5.1.1(v) and the GDPR's right to erasure. The account leaves its device like a removal,
// then everything it leaves behind that says something about the user is erased; a tombstone
// (the `account.deleted` audit event and the account's id, so the phone hears
// `410 account_deleted`) stays.

extension TransferService {
    /// `DELETE /v1/me`: the caller's account.
    public func deleteAccount(_ caller: Caller) async throws {
        do {
            try await store.execute(
                DeleteAccountCommand(accountID: caller.accountID, now: clock.now(), by: .device, reason: nil, cause: .requested)
            ).get()
        } catch TransferError.accountDeleted, TransferError.accountNotFound {
            // Deleted meanwhile (a concurrent request, support): the caller asked for no more.
        }
    }

    /// Support: `transfer delete-account`. Refused with `accountNotFound` (no such account) or
    /// `accountDeleted` (deleted already).
    public func deleteAccount(accountID: String, by initiator: Initiator, reason: String) async throws {
        try await store.execute(DeleteAccountCommand(accountID: accountID, now: clock.now(), by: initiator, reason: reason, cause: .support))
            .get()
    }
}

public struct DeleteAccountCommand: StoreOperation {
    public var accountID: String
    public var now: Timestamp
    public var by: Initiator
    public var reason: String?
    /// The webhook's `reason`: the app's request, support, or the pruner (inactive).
    public var cause: DeletionCause
    public init(accountID: String, now: Timestamp, by: Initiator, reason: String?, cause: DeletionCause) {
        self.accountID = accountID
        self.now = now
        self.by = by
        self.reason = reason
        self.cause = cause
    }

    /// What a claim of the account locks, in the same order, and its Apple link: a claim or a
    /// move racing the deletion either finishes first (and the account is deleted on its new
    /// device) or finds no transfer and no link left.
    public var reads: [FactKey] { [.pendingTransfers(.of(accountID)), .accountDevices(.id(accountID)), .account(.id(accountID)), .appleLink(.id(accountID))] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        guard let account = try facts.account(accountID) else { return Plan(refusing: .accountNotFound) }
        guard account.deletedAt == nil else { return Plan(refusing: .accountDeleted) }
        var effects: [Effect] = []
        // A device left with no account keeps this one as current: its login answers `account_deleted`.
        for device in try facts.accountDevices(accountID) where device.holds(accountID) {
            effects += device.leave(accountID, state: .removed, reason: "account deleted", at: now)
        }
        effects += (try facts.appleLink(accountID)?.revocation(at: now) ?? []) + [
            .eraseAccount(id: accountID, at: now),
            .audit(AuditEvent(at: now, kind: .accountDeleted, accountID: accountID, actor: by, reason: reason)),
            .webhook(.accountDeleted, accountID: accountID, at: now, ["reason": cause.rawValue]),
        ]
        return Plan((), effects)
    }
}
