// A wrong password counted against its transfer: a lock after 5 in a row, void at 20.

/// Brute-force limits on one transfer.
public struct LockPolicy: Sendable, Equatable {
    /// Wrong passwords in a row that lock the transfer.
    public var consecutiveFailures: Int
    public var lockDuration: Duration
    /// Wrong passwords in total that void the transfer.
    public var totalFailures: Int

    public init(consecutiveFailures: Int = 5, lockDuration: Duration = .seconds(15 * 60), totalFailures: Int = 20) {
        self.consecutiveFailures = consecutiveFailures
        self.lockDuration = lockDuration
        self.totalFailures = totalFailures
    }

    public static let standard = LockPolicy()
}

/// Counts one wrong password against a transfer. Attempts during a lock, or on a transfer no
/// longer open, are not counted. The lock restarts the consecutive count, so after it ends
/// the user has another full series.
public struct FailedClaimCommand: StoreOperation {
    /// nil: the password matched no open transfer (an unknown email). The same statements
    /// then run on `nobody`, a transfer id no transfer has, and the failure is audited without
    /// an account: the same work as a counted failure, so its time tells nothing.
    public var transferID: String?
    public var now: Timestamp
    public var policy: LockPolicy
    public var clientAddress: String?
    public init(transferID: String?, now: Timestamp, policy: LockPolicy, clientAddress: String?) {
        self.transferID = transferID
        self.now = now
        self.policy = policy
        self.clientAddress = clientAddress
    }

    /// Not a UUID: no transfer has it.
    static let nobody = "no-transfer"

    public var reads: [FactKey] { [.transfer(id: transferID ?? Self.nobody)] }

    public func plan(_ facts: Facts) throws -> Plan<CountedFailure> {
        guard let transferID, let transfer = try facts.transfer(transferID) else {
            return Plan(refusing: .invalidTransferCredentials, [
                .countFailures(transferID: Self.nobody, consecutive: 1, total: 1, lockedUntil: nil),
                .audit(AuditEvent(at: now, kind: .claimFailed, accountID: nil, clientAddress: clientAddress)),
            ])
        }
        guard transfer.isOpen(at: now) else { return Plan(refusing: .invalidTransferCredentials) }
        if let until = transfer.lock(at: now) {
            return Plan(refusing: .tooManyAttempts(retryAfterSeconds: now.secondsUntil(until)))
        }
        let account = transfer.accountID
        let total = transfer.failedTotal + 1
        let consecutive = transfer.failedConsecutive + 1
        let failed = Effect.audit(AuditEvent(
            at: now, kind: .claimFailed, accountID: account, transferID: transferID, clientAddress: clientAddress))
        if total >= policy.totalFailures {
            return Plan(.voided, [
                .countFailures(transferID: transferID, consecutive: consecutive, total: total, lockedUntil: nil),
                .endTransfer(id: transferID, state: .voided, at: now),
                failed,
                .audit(AuditEvent(
                    at: now, kind: .transferVoided, accountID: account, transferID: transferID, actor: .system,
                    reason: "\(total) wrong passwords")),
                .webhook(.transferVoided, accountID: account, at: now, ["transferId": transferID]),
            ])
        }
        if consecutive >= policy.consecutiveFailures {
            let until = now + policy.lockDuration
            return Plan(.locked(until: until), [
                .countFailures(transferID: transferID, consecutive: 0, total: total, lockedUntil: until),
                failed,
                .audit(AuditEvent(
                    at: now, kind: .transferLocked, accountID: account, transferID: transferID, actor: .system,
                    reason: "\(policy.consecutiveFailures) wrong passwords in a row")),
                .webhook(.transferLocked, accountID: account, at: now, ["transferId": transferID, "lockedUntil": until.rfc3339]),
            ])
        }
        return Plan(.counted, [
            .countFailures(transferID: transferID, consecutive: consecutive, total: total, lockedUntil: nil), failed,
        ])
    }
}

/// A wrong password counted against its transfer. One that is not counted (the transfer was
/// locked, or no longer open, by the time it was recorded) is the plan's refusal.
public enum CountedFailure: Sendable, Equatable {
    /// Counted; the transfer stays open.
    case counted
    /// Counted, and this failure locked the transfer until the given time.
    case locked(until: Timestamp)
    /// Counted, and this failure voided the transfer.
    case voided
}
