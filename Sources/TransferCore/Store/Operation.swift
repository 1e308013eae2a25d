/// How every change reaches the database.
///
/// A use case is a `StoreOperation`: it lists the facts its decision depends on (`reads`,
/// declared in `Facts.swift`), and `plan` decides from what was read (`Facts`) and lists the
/// changes to make (`Effect`s, in `Effect.swift`), as a pure function. The decision is the
/// operation's `Success`, or a refusal (a `TransferError`); a refusal may still change
/// something (a used-up challenge or nonce, a counted failure, an audit row). A store runs each
/// operation in one transaction: it reads (locking what it read), calls `plan`, applies the
/// effects in order, and commits. The rules, the order of
/// steps and every audit text therefore live once, in the use case; a store only translates
/// reads and effects into its SQL dialect.
public protocol StoreOperation: Sendable {
    /// What the operation answers when it is not refused.
    associatedtype Success: Sendable
    /// The time the operation happens at; reads that depend on time (the migration flag) use it.
    var now: Timestamp { get }
    /// What `plan` depends on. The store reads it inside the transaction and locks it, in
    /// the facts' rank order (whatever the order listed here).
    var reads: [FactKey] { get }
    /// The decision and its effects. Pure: the same facts give the same plan. Throws only
    /// when it reads a fact it did not list (`UndeclaredFact`).
    func plan(_ facts: Facts) throws -> Plan<Success>
}

/// A decision: the answer (the success value or the refusal), and the changes that make it
/// true. A refusal keeps its effects: they are applied and committed like a success's.
public struct Plan<Success: Sendable>: Sendable {
    public var result: Result<Success, TransferError>
    public var effects: [Effect]
    public init(_ success: Success, _ effects: [Effect] = []) {
        self.result = .success(success)
        self.effects = effects
    }
    public init(refusing error: TransferError, _ effects: [Effect] = []) {
        self.result = .failure(error)
        self.effects = effects
    }
}

