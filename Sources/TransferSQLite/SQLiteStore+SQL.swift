import Foundation
import GRDB
import GRDBSQLite
import TransferSQL

// How the SQL written once in TransferSQL runs on SQLite.

extension SQLValue {
    /// As GRDB binds it. (Built as an array of values, not through `StatementArguments`'
    /// generic sequence initialiser, which cost more than the statement on the login path.)
    var argument: (any DatabaseValueConvertible)? {
        switch self {
        case .null: nil
        case .integer(let value): value
        case .text(let value): value
        case .blob(let bytes): Data(bytes)
        }
    }
}

extension Database {
    /// The statement, prepared once per connection and cached by its text.
    func statement(_ sql: SQLText) throws -> (Statement, StatementArguments) {
        let (text, binds) = sql.render(.sqlite)
        return (try cachedStatement(sql: text), StatementArguments(binds.map(\.argument)))
    }

    /// The rows of a statement. A read-only one is bound through GRDB (which resets it and
    /// knows what is bound) and stepped through SQLite's C API: GRDB's copied rows found a
    /// column by lowercasing every column name on each lookup, and decoded each value through
    /// generic metadata (together about 5 % of a login's CPU). A statement that writes (an
    /// effect's `INSERT … RETURNING`) runs through GRDB, which tracks the transaction and its
    /// failures around it.
    func all(_ sql: SQLText) throws -> [SQLiteRow] {
        let (statement, arguments) = try statement(sql)
        guard statement.isReadonly else {
            return try Row.fetchAll(statement, arguments: arguments).map(SQLiteRow.init)
        }
        try statement.setArguments(arguments)
        let handle = statement.sqliteStatement
        defer { sqlite3_reset(handle) }
        let columns = statement.columnNames
        var rows: [SQLiteRow] = []
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return rows }
            guard code == SQLITE_ROW else { throw failure(code, statement) }
            var values: [SQLiteRow.Value] = []
            values.reserveCapacity(columns.count)
            for index in 0..<Int32(columns.count) { values.append(try SQLiteRow.value(handle, index)) }
            rows.append(SQLiteRow(columns: columns, values: values))
        }
    }

    /// As GRDB reports a failed statement (its SQL, never its arguments).
    private func failure(_ code: Int32, _ statement: Statement) -> DatabaseError {
        let reported = sqlite3_extended_errcode(sqliteConnection)
        return DatabaseError(
            resultCode: ResultCode(rawValue: reported == SQLITE_OK ? code : reported),
            message: sqliteConnection.map { String(cString: sqlite3_errmsg($0)) }, sql: statement.sql)
    }

    func run(_ sql: SQLText) throws {
        let (statement, arguments) = try statement(sql)
        try statement.execute(arguments: arguments)
    }

    /// Runs a read plan to its end on this connection.
    func read<Plan: ReadPlan>(_ plan: Plan) throws -> Plan.Output {
        var plan = plan
        while let sql = plan.next() { try plan.take(all(sql)) }
        return try plan.finish()
    }
}

/// A row as `Database.all` reads it: its values, and the statement's column names (one array
/// per statement, shared by its rows). A column is found by its exact name, as TransferSQL
/// writes it, or else without regard to case, as SQLite compares names. A NULL or a value of
/// another type in a non-optional column is a bug of this version's schema, and throws.
struct SQLiteRow: SQLRow {
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

    init(columns: [String], values: [Value]) {
        self.columns = columns
        self.values = values
    }

    /// The current row's value in column `index`. SQLite answers no pointer for a text or a
    /// non-empty blob only when it is out of memory: that fails, it is not an empty value.
    static func value(_ handle: OpaquePointer, _ index: Int32) throws -> Value {
        switch sqlite3_column_type(handle, index) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, index))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(handle, index) else { throw DatabaseError(resultCode: .SQLITE_NOMEM) }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, index))), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, index))
            guard count > 0 else { return .blob([]) }
            guard let bytes = sqlite3_column_blob(handle, index) else { throw DatabaseError(resultCode: .SQLITE_NOMEM) }
            return .blob([UInt8](UnsafeRawBufferPointer(start: bytes, count: count)))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, index))
        default: return .null
        }
    }

    /// A row GRDB read (a statement that writes and returns rows).
    init(_ row: Row) {
        columns = Array(row.columnNames)
        values = row.databaseValues.map { value in
            switch value.storage {
            case .null: .null
            case .int64(let number): .integer(number)
            case .double(let number): .real(number)
            case .string(let text): .text(text)
            case .blob(let data): .blob([UInt8](data))
            }
        }
    }

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

    // The conversions GRDB made: text from a blob of UTF-8, an integer from a real (truncated),
    // a boolean from any number; anything else is a mismatch. Unlike GRDB's, a column the
    // statement does not have is a mismatch even for `…OrNil`, as it is on PostgreSQL.
    private static func text(_ value: Value, _ column: String) throws -> String? {
        switch value {
        case .null: return nil
        case .text(let text): return text
        case .blob(let bytes):
            guard let text = String(validating: bytes, as: UTF8.self) else { throw Mismatch(column: column, expected: "text") }
            return text
        default: throw Mismatch(column: column, expected: "text")
        }
    }

    private static func integer(_ value: Value, _ column: String) throws -> Int64? {
        switch value {
        case .null: return nil
        case .integer(let number): return number
        case .real(let number):
            // Truncated toward zero, as GRDB read a real as an integer.
            guard let whole = Int64(exactly: number.rounded(.towardZero)) else { throw Mismatch(column: column, expected: "an integer") }
            return whole
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
    func bool(_ column: String) throws -> Bool {
        switch try value(column) {
        case .integer(let number): return number != 0
        case .real(let number): return number != 0
        default: throw Mismatch(column: column, expected: "a boolean")
        }
    }
    func text(at index: Int) throws -> String { try Self.some(try Self.text(value(at: index), "#\(index)"), "#\(index)", "text") }
    func textOrNil(at index: Int) throws -> String? { try Self.text(value(at: index), "#\(index)") }
    func integer(at index: Int) throws -> Int64 {
        try Self.some(try Self.integer(value(at: index), "#\(index)"), "#\(index)", "an integer")
    }
}
