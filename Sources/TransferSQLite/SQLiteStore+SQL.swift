import Foundation
import GRDB
import TransferSQL

// How the SQL written once in TransferSQL runs on SQLite.

extension GRDB.Row: SQLRow {
    // GRDB's subscripts: a NULL or a value of another type in a non-optional column is a bug
    // of this version's schema, and stops the process as GRDB documents.
    public func text(_ column: String) throws -> String { self[column] }
    public func textOrNil(_ column: String) throws -> String? { self[column] }
    public func integer(_ column: String) throws -> Int64 { self[column] }
    public func integerOrNil(_ column: String) throws -> Int64? { self[column] }
    public func blob(_ column: String) throws -> [UInt8] { [UInt8](self[column] as Data) }
    public func blobOrNil(_ column: String) throws -> [UInt8]? { (self[column] as Data?).map { [UInt8]($0) } }
    public func bool(_ column: String) throws -> Bool { self[column] }
    public func text(at index: Int) throws -> String { self[index] }
    public func textOrNil(at index: Int) throws -> String? { self[index] }
    public func integer(at index: Int) throws -> Int64 { self[index] }
}

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

    func all(_ sql: SQLText) throws -> [Row] {
        let (statement, arguments) = try statement(sql)
        return try Row.fetchAll(statement, arguments: arguments)
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
