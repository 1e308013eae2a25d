// Inactive accounts (contract v1.2): with `--inactive-account-ttl`, the pruner erases, as
// `DELETE /v1/me` does, each account whose devices have all not been used for that long,
// unless it holds something: a pending transfer, a linked Apple ID, or the app backend's
// protection (a purchase). The store reads candidates without locking; each is then erased in
// a transaction of its own that checks the rule again under the locks a login, a claim or an
// Apple link takes, so that one racing with the round wins, and an account is erased once
// however many nodes prune at the same time.
//
// "Used" is a pair's `lastLoginAt`: its last activity, which a login, a refresh of its session
// and a sibling app's hand-off or refresh on it record, to the activity resolution
// (`ActivityResolution`). A recovery code (or anything else the account merely holds) is no
// use: it keeps nothing.

/// Why an account was deleted: the `account.deleted` webhook's `reason`.
public enum DeletionCause: String, Sendable, Equatable {
    /// The app's own `DELETE /v1/me`.
    case requested
    /// Support's `transfer delete-account`.
    case support
    /// The pruner: nobody used it for `--inactive-account-ttl`.
    case inactive
}

/// `--inactive-account-ttl`: how long an account may go unused before the pruner erases it.
public struct InactivityPolicy: Sendable, Equatable {
    /// Shorter would erase accounts of people on a long holiday.
    public static let minimumTTL = Duration.seconds(30 * 86_400)
    /// Accounts checked and erased per batch: each is its own short transaction, so a batch
    /// bounds only how many ids one read returns.
    public static let batchSize = 500

    public var ttl: Duration
    public init(ttl: Duration) { self.ttl = ttl }

    /// Accounts whose devices all last logged in (or were bound) before this are inactive at `now`.
    public func inactiveBefore(_ now: Timestamp) -> Timestamp { now - ttl }
}

/// What `transfer inactive` reports: what the next rounds would erase, and what protection keeps.
public struct InactiveCounts: Sendable, Equatable, Codable {
    /// Inactive and not protected: the next rounds erase these.
    public var erasable: Int
    /// Inactive but protected: kept.
    public var protectedInactive: Int
    /// Every protected account (active or not).
    public var protected: Int
    public init(erasable: Int, protectedInactive: Int, protected: Int) {
        self.erasable = erasable
        self.protectedInactive = protectedInactive
        self.protected = protected
    }
}

/// Why the rule keeps an account (nil from `Inactivity.keeps`: it is erased).
public enum KeptBecause: String, Sendable, Equatable {
    case gone
    case protected
    case pendingTransfer
    case appleLink
    case recentLogin
}

/// An erasure found a transfer that was set up while it waited for the account's locks
/// (PostgreSQL): it rolled back, and the account stays.
public struct TransferSetUpMeanwhile: Error, Equatable {
    public init() {}
}

/// What the pruner's check of one inactive account did: erased it, or kept it (and why).
public enum Erasure: Sendable, Equatable {
    case erased
    case kept(KeptBecause)
}

/// The pruner's erasure of one inactive account: the rule checked again on what is read
/// under lock, then the plan of `DELETE /v1/me` with the reason `inactive`.
public struct EraseInactiveAccountCommand: StoreOperation {
    public var accountID: String
    public var now: Timestamp
    public var inactiveBefore: Timestamp
    public init(accountID: String, now: Timestamp, inactiveBefore: Timestamp) {
        self.accountID = accountID
        self.now = now
        self.inactiveBefore = inactiveBefore
    }

    private var deletion: DeleteAccountCommand {
        DeleteAccountCommand(
            accountID: accountID, now: now, by: .system, reason: "inactive: no login on any device since \(inactiveBefore.rfc3339)",
            cause: .inactive)
    }

    /// The deletion's reads (pending transfers, the account's device, the account, its Apple
    /// link), in its order: a login renewing the pair, a claim or a link waits for this
    /// transaction or is seen by it.
    public var reads: [FactKey] { deletion.reads }

    /// The same rule as the candidates' query (`Queries.inactiveAccounts`); what can change
    /// between that read and this transaction is checked here: protection, a transfer set up,
    /// an Apple ID linked, activity (of the account, or of another account on a device that
    /// still holds this one: the contract counts the account's devices, not its own logins).
    public func keeps(_ facts: Facts) throws -> KeptBecause? {
        guard let account = try facts.account(accountID), account.deletedAt == nil else { return .gone }
        if account.protectedAt != nil { return .protected }
        if try facts.pendingTransfers(.of(accountID)).contains(where: { $0.accountID == accountID && $0.isOpen(at: now) }) { return .pendingTransfer }
        if try facts.appleLink(accountID) != nil { return .appleLink }
        for device in try facts.accountDevices(accountID) {
            guard let pair = device.account(accountID) else { continue }
            // A pair that ended within the TTL is activity too: the account moved (a claim or a
            // recovery code that committed while this transaction waited for the old device).
            if max(pair.lastLoginAt ?? pair.addedAt, pair.endedAt ?? pair.addedAt) >= inactiveBefore { return .recentLogin }
            // The contract counts devices: a phone that still holds the account and logs in
            // daily with another of its accounts keeps this one (a second profile the user
            // has not opened for a while is still theirs).
            if pair.endedAt == nil, device.accounts.contains(where: { ($0.lastLoginAt ?? $0.addedAt) >= inactiveBefore }) {
                return .recentLogin
            }
        }
        return nil
    }

    /// The erasure begins by asking for open transfers again: the pending transfers were read
    /// before the account's lock, and a set-up (by the user or by support) may have committed
    /// in between; its transfer must not be deleted with the account.
    public func plan(_ facts: Facts) throws -> Plan<Erasure> {
        if let reason = try keeps(facts) { return Plan(.kept(reason)) }
        let plan = try deletion.plan(facts)
        guard case .success = plan.result else { return Plan(.kept(.gone)) }
        return Plan(.erased, [.requireNoOpenTransfer(accountID: accountID, at: now)] + plan.effects)
    }
}

/// `PUT /v1/service/accounts/{accountId}/protection`: the app backend protects an account
/// that holds something of value, or lifts the protection. Refused (`accountNotFound`): no such account (or deleted).
public struct SetProtectionCommand: StoreOperation {
    public var accountID: String
    public var protected: Bool
    public var now: Timestamp
    public init(accountID: String, protected: Bool, now: Timestamp) {
        self.accountID = accountID
        self.protected = protected
        self.now = now
    }

    public var reads: [FactKey] { [.account(.id(accountID))] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        guard let account = try facts.account(accountID), account.deletedAt == nil else { return Plan(refusing: .accountNotFound) }
        // Asked again: nothing changes (a protection keeps the time it began).
        guard protected != (account.protectedAt != nil) else { return Plan(()) }
        return Plan((), [.setProtection(accountID: accountID, since: protected ? now : nil)])
    }
}

extension TransferService {
    /// `PUT /v1/service/accounts/{accountId}/protection`.
    public func setProtection(accountID: String, protected: Bool) async throws {
        try await store.execute(SetProtectionCommand(accountID: accountID, protected: protected, now: clock.now())).get()
    }
}
