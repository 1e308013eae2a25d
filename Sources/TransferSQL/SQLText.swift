import Foundation
import TransferCore

/// The two SQL dialects the stores speak.
public enum SQLDialect: Sendable, Equatable {
    case sqlite, postgres
}

/// A value bound to a statement's placeholder.
public enum SQLValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case text(String)
    case blob([UInt8])
}

/// One SQL statement, written once for both stores.
///
/// Interpolated values become bound parameters, never SQL text: `"… WHERE id = \(id)"` binds
/// `id`. A store renders the statement in its dialect (`?` placeholders and GRDB arguments
/// for SQLite, `$n` and PostgresNIO bindings for PostgreSQL), as sql-kit's `SQLQueryString`
/// and `SQLDialect.bindPlaceholder` do. The few places where the dialects differ are named
/// `SQLText(sqlite:postgres:)` fragments (`SQLText.forUpdate` and its neighbours in `Queries.swift`),
/// never two copies of a statement. Values are typed the way the schema stores them: times as integer milliseconds,
/// flags as integers 0/1, hashes as blobs, enums as their raw text.
public struct SQLText: Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    enum Piece: Sendable {
        case text(String)
        case bind(SQLValue)
        case dialectal(sqlite: String, postgres: String)
        /// A table of ids with one column, `value`, named `j`.
        case idTable([String])
    }

    var pieces: [Piece]

    init(pieces: [Piece]) { self.pieces = pieces }

    public init(stringLiteral value: String) { pieces = [.text(value)] }

    public init(stringInterpolation: StringInterpolation) { pieces = stringInterpolation.pieces }

    /// Text that differs by dialect (a lock clause, a cast).
    public init(sqlite: String, postgres: String) { pieces = [.dialectal(sqlite: sqlite, postgres: postgres)] }

    /// The statement as SQLite sees it, values shown as placeholders (for messages and tests).
    public var description: String { render(.sqlite).text }

    public struct StringInterpolation: StringInterpolationProtocol {
        var pieces: [Piece] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            pieces.reserveCapacity(2 * interpolationCount + 1)
        }

        public mutating func appendLiteral(_ literal: String) {
            if !literal.isEmpty { pieces.append(.text(literal)) }
        }

        /// A fragment of SQL (a clause written once, a dialectal part): its text and its binds.
        public mutating func appendInterpolation(_ fragment: SQLText) { pieces.append(contentsOf: fragment.pieces) }

        public mutating func appendInterpolation(_ value: SQLValue) { pieces.append(.bind(value)) }
        public mutating func appendInterpolation(_ value: String) { pieces.append(.bind(.text(value))) }
        public mutating func appendInterpolation(_ value: String?) { pieces.append(.bind(value.map(SQLValue.text) ?? .null)) }
        public mutating func appendInterpolation(_ value: Int) { pieces.append(.bind(.integer(Int64(value)))) }
        public mutating func appendInterpolation(_ value: Int64) { pieces.append(.bind(.integer(value))) }
        public mutating func appendInterpolation(_ value: Int64?) { pieces.append(.bind(value.map(SQLValue.integer) ?? .null)) }
        /// Integer milliseconds, as every time is stored.
        public mutating func appendInterpolation(_ value: Timestamp) { pieces.append(.bind(.integer(value.milliseconds))) }
        public mutating func appendInterpolation(_ value: Timestamp?) {
            pieces.append(.bind(value.map { .integer($0.milliseconds) } ?? .null))
        }
        /// 1 or 0: the schema keeps flags as integers on both stores.
        public mutating func appendInterpolation(_ value: Bool) { pieces.append(.bind(.integer(value ? 1 : 0))) }
        public mutating func appendInterpolation(_ value: Bool?) { pieces.append(.bind(value.map { .integer($0 ? 1 : 0) } ?? .null)) }
        public mutating func appendInterpolation(_ value: SecretHash) { pieces.append(.bind(.blob(value.bytes))) }
        public mutating func appendInterpolation(_ value: [UInt8]?) { pieces.append(.bind(value.map(SQLValue.blob) ?? .null)) }
        /// An enum as its stored text.
        public mutating func appendInterpolation<Value: RawRepresentable>(_ value: Value) where Value.RawValue == String {
            pieces.append(.bind(.text(value.rawValue)))
        }
        public mutating func appendInterpolation<Value: RawRepresentable>(_ value: Value?) where Value.RawValue == String {
            pieces.append(.bind(value.map { .text($0.rawValue) } ?? .null))
        }
        /// As the audit trail stores it: `device`, `system`, `operator:NAME`.
        public mutating func appendInterpolation(_ value: Initiator) { pieces.append(.bind(.text(value.description))) }
        /// A table `j` of these ids in one column `value`, bound as one parameter whatever their number.
        public mutating func appendInterpolation(idTable ids: [String]) { pieces.append(.idTable(ids)) }
    }

    /// The text with the dialect's placeholders, and the values in placeholder order.
    public func render(_ dialect: SQLDialect) -> (text: String, binds: [SQLValue]) {
        var text = ""
        var binds: [SQLValue] = []
        func placeholder() {
            switch dialect {
            case .sqlite: text.append("?")
            case .postgres: text.append("$\(binds.count)")
            }
        }
        for piece in pieces {
            switch piece {
            case .text(let literal):
                text.append(literal)
            case .bind(let value):
                binds.append(value)
                placeholder()
            case .dialectal(let sqlite, let postgres):
                text.append(dialect == .sqlite ? sqlite : postgres)
            case .idTable(let ids):
                // SQLite: one JSON array through json_each; PostgreSQL: one text[] through unnest.
                let json = String(decoding: (try? JSONEncoder().encode(ids)) ?? Data("[]".utf8), as: UTF8.self)
                binds.append(.text(json))
                switch dialect {
                case .sqlite: text.append("json_each(?) AS j")
                case .postgres: text.append("(SELECT value FROM json_array_elements_text($\(binds.count)::json)) AS j")
                }
            }
        }
        return (text, binds)
    }
}

extension SQLText {
    /// The text of a fragment that binds nothing, for a statement whose parameters another
    /// library numbers (PostgreSQL's prepared login statement). Stops the program if the
    /// fragment binds a value: spliced as text, its `$n` would be numbered against the wrong
    /// statement and bind something else, silently.
    public func unboundText(_ dialect: SQLDialect) -> String {
        let (text, binds) = render(dialect)
        precondition(binds.isEmpty, "this fragment binds \(binds.count) value(s) and cannot be spliced as text: \(text)")
        return text
    }

    /// Joins statements' fragments with `separator`.
    public static func join(_ fragments: [SQLText], separator: String) -> SQLText {
        var pieces: [Piece] = []
        for (i, fragment) in fragments.enumerated() {
            if i > 0 { pieces.append(.text(separator)) }
            pieces.append(contentsOf: fragment.pieces)
        }
        return SQLText(pieces: pieces)
    }
}
