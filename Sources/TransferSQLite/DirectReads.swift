import Foundation
import GRDBSQLite
import Synchronization
import TransferSQL

/// Reads on the calling thread, on SQLite connections of their own.
///
/// A login that writes nothing, and the lookups of an authenticated request, are a few index
/// lookups: tens of microseconds of CPU, less than the hop to one of GRDB's reader queues and
/// back (`GroupRead`: two thread switches, shared by a batch). Here such a read runs where its
/// request runs: it takes an idle connection (one lock, never a wait), reads in a transaction
/// of its own begun after the call (a WAL snapshot that holds every commit made before it: a
/// claim, revocation, removal or deletion answered a moment ago is seen), and puts the
/// connection back. It never blocks: with every connection in use, or when SQLite answers
/// anything but rows (busy while a WAL is reset or recovered, an I/O error), `read` answers nil
/// and the caller reads through `GroupRead`, where GRDB waits and reports errors as everywhere
/// else. A connection that failed is closed, not reused.
///
/// The connections are read-only (`SQLITE_OPEN_READONLY`), keep 8 MiB of pages as the pool's
/// readers do, and decode rows without GRDB (`DirectRow`).
final class DirectReads: Sendable {
    private struct State {
        var idle: [DirectReader] = []
        var open = 0
        var closed = false
    }

    private enum Take {
        case reuse(DirectReader)
        case open
        case none
    }

    private let path: String
    private let limit: Int
    private let state = Mutex(State())

    /// At most `limit` connections: about one per thread that runs requests at once.
    init(path: String, limit: Int = max(2, ProcessInfo.processInfo.activeProcessorCount) + 2) {
        self.path = path
        self.limit = limit
    }

    /// `body` on an idle connection, in a read transaction begun now; nil when no connection is
    /// free or SQLite did not answer (the caller then reads through `GroupRead`). An error
    /// `body` throws of its own (a row it cannot decode, a refusal) is thrown.
    func read<T>(_ body: (DirectReader) throws -> T) throws -> T? {
        guard let reader = take() else { return nil }
        do {
            let value = try reader.transaction { try body(reader) }
            giveBack(reader, keep: true)
            return value
        } catch let failure as DirectReader.Failure {
            giveBack(reader, keep: failure.isBusy)
            return nil
        } catch {
            giveBack(reader, keep: reader.isIdle)
            throw error
        }
    }

    /// Closes the idle connections now, and the others when they are given back.
    func close() {
        let idle = state.withLock { state in
            state.closed = true
            state.open -= state.idle.count
            defer { state.idle = [] }
            return state.idle
        }
        for reader in idle { reader.close() }
    }

    private func take() -> DirectReader? {
        let take = state.withLock { state -> Take in
            if state.closed { return .none }
            if let reader = state.idle.popLast() { return .reuse(reader) }
            guard state.open < limit else { return .none }
            state.open += 1
            return .open
        }
        switch take {
        case .reuse(let reader): return reader
        case .none: return nil
        case .open:
            if let reader = try? DirectReader(path: path) { return reader }
            state.withLock { $0.open -= 1 }
            return nil
        }
    }

    private func giveBack(_ reader: DirectReader, keep: Bool) {
        let close = state.withLock { state in
            guard keep, !state.closed else {
                state.open -= 1
                return true
            }
            state.idle.append(reader)
            return false
        }
        if close { reader.close() }
    }
}

/// One read-only SQLite connection with its prepared statements. Not thread-safe: it is used
/// by one thread at a time, the one that took it from `DirectReads`.
final class DirectReader: @unchecked Sendable {
    /// SQLite answered something other than rows (its result code and message).
    struct Failure: Error, CustomStringConvertible {
        var code: Int32
        var message: String
        var isBusy: Bool { code & 0xff == SQLITE_BUSY || code & 0xff == SQLITE_LOCKED }
        var description: String { "SQLite error \(code): \(message)" }
    }

    private struct Prepared {
        let handle: OpaquePointer
        let columns: [String]
    }

    private let db: OpaquePointer
    private var statements: [String: Prepared] = [:]

    init(path: String) throws {
        var handle: OpaquePointer?
        let code = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let handle else {
            sqlite3_close_v2(handle)
            throw Failure(code: code, message: "cannot open the database")
        }
        db = handle
        // No busy timeout: a busy answer is handed to `GroupRead` at once instead of blocking this thread.
        guard sqlite3_exec(db, "PRAGMA cache_size = -8192", nil, nil, nil) == SQLITE_OK else {
            let failure = self.failure(sqlite3_errcode(db))
            sqlite3_close_v2(db)
            throw failure
        }
    }

    /// No transaction is open (nothing is left to roll back).
    var isIdle: Bool { sqlite3_get_autocommit(db) != 0 }

    func transaction<T>(_ body: () throws -> T) throws -> T {
        try run("BEGIN DEFERRED")
        do {
            let value = try body()
            try run("COMMIT")
            return value
        } catch {
            if !isIdle { try? run("ROLLBACK") }
            throw error
        }
    }

    /// Runs a read plan to its end on this connection.
    func read<Plan: ReadPlan>(_ plan: Plan) throws -> Plan.Output {
        var plan = plan
        while let sql = plan.next() { try plan.take(all(sql)) }
        return try plan.finish()
    }

    func all(_ sql: SQLText) throws -> [DirectRow] {
        let (text, binds) = sql.render(.sqlite)
        let statement = try prepared(text)
        let handle = statement.handle
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        for (offset, value) in binds.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .null: code = sqlite3_bind_null(handle, index)
            case .integer(let number): code = sqlite3_bind_int64(handle, index, number)
            case .text(let string): code = sqlite3_bind_text(handle, index, string, -1, transient)
            case .blob(let bytes):
                code = bytes.isEmpty
                    ? sqlite3_bind_zeroblob(handle, index, 0)
                    : bytes.withUnsafeBytes { sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count), transient) }
            }
            guard code == SQLITE_OK else { throw failure(code) }
        }
        var rows: [DirectRow] = []
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return rows }
            guard code == SQLITE_ROW else { throw failure(code) }
            rows.append(DirectRow(columns: statement.columns, values: (0..<Int32(statement.columns.count)).map { value(handle, $0) }))
        }
    }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement.handle) }
        statements = [:]
        sqlite3_close_v2(db)
    }

    private func run(_ sql: String) throws {
        let handle = try prepared(sql).handle
        defer { sqlite3_reset(handle) }
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE || code == SQLITE_ROW else { throw failure(code) }
    }

    private func prepared(_ sql: String) throws -> Prepared {
        if let statement = statements[sql] { return statement }
        var handle: OpaquePointer?
        let code = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
        guard code == SQLITE_OK, let handle else { throw failure(code) }
        let columns = (0..<sqlite3_column_count(handle)).map { String(cString: sqlite3_column_name(handle, $0)) }
        let statement = Prepared(handle: handle, columns: columns)
        statements[sql] = statement
        return statement
    }

    private func value(_ handle: OpaquePointer, _ index: Int32) -> DirectRow.Value {
        switch sqlite3_column_type(handle, index) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, index))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(handle, index) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, index))), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, index))
            guard count > 0, let bytes = sqlite3_column_blob(handle, index) else { return .blob([]) }
            return .blob([UInt8](UnsafeRawBufferPointer(start: bytes, count: count)))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, index))
        default: return .null
        }
    }

    private func failure(_ code: Int32) -> Failure {
        Failure(code: sqlite3_extended_errcode(db), message: String(cString: sqlite3_errmsg(db)))
    }

    /// SQLite copies what is bound (`SQLITE_TRANSIENT`).
    private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// A row `DirectReader` read: its values, and the statement's column names (one array per
/// statement, shared by its rows). A column is found by its exact name, as TransferSQL writes
/// it, or else without regard to case, as SQLite compares names.
struct DirectRow: SQLRow {
    enum Value {
        case null
        case integer(Int64)
        case real(Double)
        case text(String)
        case blob([UInt8])
    }

    /// A column the statement does not have, or a value of another type than the row's decoder expects.
    struct Mismatch: Error, CustomStringConvertible {
        var column: String
        var expected: String
        var description: String { "column \(column): not \(expected)" }
    }

    let columns: [String]
    let values: [Value]

    private func value(_ column: String) throws -> Value {
        if let index = columns.firstIndex(of: column) { return values[index] }
        let lowercased = column.lowercased()
        guard let index = columns.firstIndex(where: { $0.lowercased() == lowercased }) else {
            throw Mismatch(column: column, expected: "in the statement")
        }
        return values[index]
    }

    private func value(at index: Int) throws -> Value {
        guard values.indices.contains(index) else { throw Mismatch(column: "#\(index)", expected: "in the statement") }
        return values[index]
    }

    private static func text(_ value: Value, _ column: String) throws -> String? {
        switch value {
        case .null: return nil
        case .text(let text): return text
        default: throw Mismatch(column: column, expected: "text")
        }
    }

    private static func integer(_ value: Value, _ column: String) throws -> Int64? {
        switch value {
        case .null: return nil
        case .integer(let number): return number
        default: throw Mismatch(column: column, expected: "an integer")
        }
    }

    private static func blob(_ value: Value, _ column: String) throws -> [UInt8]? {
        switch value {
        case .null: return nil
        case .blob(let bytes): return bytes
        case .text(let text): return Array(text.utf8)
        default: throw Mismatch(column: column, expected: "a blob")
        }
    }

    private static func some<T>(_ value: T?, _ column: String, _ expected: String) throws -> T {
        guard let value else { throw Mismatch(column: column, expected: expected + ", but NULL") }
        return value
    }

    func text(_ column: String) throws -> String { try Self.some(try Self.text(value(column), column), column, "text") }
    func textOrNil(_ column: String) throws -> String? { try Self.text(value(column), column) }
    func integer(_ column: String) throws -> Int64 { try Self.some(try Self.integer(value(column), column), column, "an integer") }
    func integerOrNil(_ column: String) throws -> Int64? { try Self.integer(value(column), column) }
    func blob(_ column: String) throws -> [UInt8] { try Self.some(try Self.blob(value(column), column), column, "a blob") }
    func blobOrNil(_ column: String) throws -> [UInt8]? { try Self.blob(value(column), column) }
    func bool(_ column: String) throws -> Bool { try integer(column) != 0 }
    func text(at index: Int) throws -> String { try Self.some(try Self.text(value(at: index), "#\(index)"), "#\(index)", "text") }
    func textOrNil(at index: Int) throws -> String? { try Self.text(value(at: index), "#\(index)") }
    func integer(at index: Int) throws -> Int64 {
        try Self.some(try Self.integer(value(at: index), "#\(index)"), "#\(index)", "an integer")
    }
}
