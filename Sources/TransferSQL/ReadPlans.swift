import Foundation
import TransferCore

/// A read of one or more statements, written once for both stores as a small state machine:
/// the store asks for the `next()` statement, runs it on its connection (inside the
/// operation's transaction, or one read snapshot), hands the rows to `take`, and repeats
/// until there is none; then `finish()` answers. A statement may depend on the rows before
/// it (a refresh token names the device to read next), so SQLite's synchronous transactions
/// and PostgreSQL's asynchronous ones run the same plan.
public protocol ReadPlan: Sendable {
    associatedtype Output: Sendable
    mutating func next() -> SQLText?
    mutating func take<Row: SQLRow>(_ rows: [Row]) throws
    func finish() throws -> Output
}

/// One statement; its rows decoded one by one.
public struct AllRows<Value: Sendable>: ReadPlan {
    let sql: SQLText
    let decode: @Sendable (any SQLRow) throws -> Value
    var sent = false
    var values: [Value] = []

    public init(_ sql: SQLText, _ decode: @escaping @Sendable (any SQLRow) throws -> Value) {
        self.sql = sql
        self.decode = decode
    }

    public mutating func next() -> SQLText? {
        if sent { return nil }
        sent = true
        return sql
    }

    public mutating func take<Row: SQLRow>(_ rows: [Row]) throws {
        values.reserveCapacity(rows.count)
        for row in rows { values.append(try decode(row)) }
    }

    public func finish() -> [Value] { values }
}

/// One statement; its first row decoded, if any.
public struct FirstRow<Value: Sendable>: ReadPlan {
    var all: AllRows<Value>
    public init(_ sql: SQLText, _ decode: @escaping @Sendable (any SQLRow) throws -> Value) { all = AllRows(sql, decode) }
    public mutating func next() -> SQLText? { all.next() }
    public mutating func take<Row: SQLRow>(_ rows: [Row]) throws { try all.take(rows.prefix(1).map { $0 }) }
    public func finish() -> Value? { all.values.first }
}

/// A check's statement, then `plan`'s statements only when the check found a row, in the
/// same read: nil when it found none. An authenticated read checks its session and reads
/// its answer in one go.
public struct OnlyIf<Plan: ReadPlan>: ReadPlan {
    private enum Stage: Sendable { case check, checking, passed, refused }
    let check: SQLText
    var plan: Plan
    private var stage = Stage.check

    public init(_ check: SQLText, then plan: Plan) {
        self.check = check
        self.plan = plan
    }

    public mutating func next() -> SQLText? {
        switch stage {
        case .check:
            stage = .checking
            return check
        case .passed: return plan.next()
        case .checking, .refused: return nil
        }
    }

    public mutating func take<Row: SQLRow>(_ rows: [Row]) throws {
        if stage == .checking {
            stage = rows.isEmpty ? .refused : .passed
        } else {
            try plan.take(rows)
        }
    }

    public func finish() throws -> Plan.Output? { stage == .passed ? try plan.finish() : nil }
}

/// Devices by id, each with every account it holds or held: two statements a device.
struct DeviceReads: Sendable {
    enum Step: Sendable {
        case row(String)
        /// The device's row was read; its accounts come next.
        case pairs(DeviceRecord)
    }
    let now: Timestamp
    let lock: Bool
    var steps: [Step] = []
    var devices: [DeviceRecord] = []

    init(now: Timestamp, lock: Bool) {
        self.now = now
        self.lock = lock
    }

    mutating func add(_ id: String) { steps.append(.row(id)) }

    func next() -> SQLText? {
        switch steps.first {
        case .row(let id): Queries.device(id, lock: lock)
        case .pairs(let device): Queries.pairs(ofDevice: device.id, at: now, lock: lock)
        case nil: nil
        }
    }

    mutating func take<Row: SQLRow>(_ rows: [Row]) throws {
        switch steps.removeFirst() {
        case .row:
            guard let row = rows.first else { return }
            steps.insert(.pairs(try Rows.device(row, accounts: [])), at: 0)
        case .pairs(var device):
            device.accounts = try rows.map(Rows.pair)
            devices.append(device)
        }
    }
}

/// Any list of facts (`FactKey`), read by their declarations (`FactSQL.swift`) in rank order,
/// each chained fact after its source: an operation's reads inside its transaction (locked),
/// or a snapshot's outside one (not locked).
public struct FactsPlan: ReadPlan {
    let now: Timestamp
    let dialect: SQLDialect
    let lock: Bool
    /// The facts still to read, in rank order.
    var pending: [FactKey]
    var reading: FactReading?
    var facts = Facts()

    public init(_ keys: [FactKey], at now: Timestamp, lock: Bool, dialect: SQLDialect) {
        self.now = now
        self.lock = lock
        self.dialect = dialect
        var all: [FactKey] = []
        for key in keys {
            for needed in [key.source, key].compactMap({ $0 }) where !all.contains(needed) { all.append(needed) }
        }
        // A stable sort: facts of one rank keep the order listed (a source before what it chains).
        pending = all.enumerated().sorted { ($0.element.rank, $0.offset) < ($1.element.rank, $1.offset) }.map(\.element)
    }

    public mutating func next() -> SQLText? {
        while true {
            if reading == nil {
                guard !pending.isEmpty else { return nil }
                reading = FactReading(pending.removeFirst(), now: now, lock: lock)
            }
            if let sql = reading!.next(after: facts, dialect: dialect) { return sql }
            facts.record(reading!.key, reading!.value)
            reading = nil
        }
    }

    public mutating func take<Row: SQLRow>(_ rows: [Row]) throws { try reading?.take(rows) }

    public func finish() -> Facts { facts }
}
