/// Schema text (DDL) written once for both stores.
///
/// Unlike `SQLText` it binds nothing, since a schema statement takes no parameters: its only
/// interpolations are the column types whose spelling differs by dialect (`\(.integer)`,
/// `\(.blob)`, `\(.serialKey)`) and, for anything else that differs, `\(sqlite: …, postgres: …)`.
public struct DDL: Sendable, Equatable, ExpressibleByStringInterpolation {
    /// Each piece as each dialect spells it.
    var pieces: [Spelling]

    struct Spelling: Sendable, Equatable {
        var sqlite: String
        var postgres: String
    }

    public init(stringLiteral value: String) { pieces = [Spelling(sqlite: value, postgres: value)] }

    public init(stringInterpolation: StringInterpolation) { pieces = stringInterpolation.pieces }

    public struct StringInterpolation: StringInterpolationProtocol {
        var pieces: [Spelling] = []

        public init(literalCapacity: Int, interpolationCount: Int) {}

        public mutating func appendLiteral(_ literal: String) { pieces.append(Spelling(sqlite: literal, postgres: literal)) }

        public mutating func appendInterpolation(_ type: ColumnType) {
            pieces.append(Spelling(sqlite: type.sqlite, postgres: type.postgres))
        }

        /// Text that differs by dialect and is no column type (a trigger's body, a function).
        public mutating func appendInterpolation(sqlite: String, postgres: String) {
            pieces.append(Spelling(sqlite: sqlite, postgres: postgres))
        }
    }

    /// The text in `dialect`.
    public func render(_ dialect: SQLDialect) -> String {
        pieces.map { dialect == .sqlite ? $0.sqlite : $0.postgres }.joined()
    }
}

/// The column types the two dialects spell differently; `TEXT` and a 32-bit `INTEGER` are
/// spelled alike and written as they are.
public enum ColumnType: Sendable {
    /// A time (milliseconds since 1970), a counter, any integer that may pass 2³¹:
    /// SQLite `INTEGER` (always 64-bit), PostgreSQL `BIGINT`.
    case integer
    /// Bytes (a hash, a key): SQLite `BLOB`, PostgreSQL `BYTEA`.
    case blob
    /// An id the database numbers, in insertion order and never reused: SQLite
    /// `INTEGER PRIMARY KEY AUTOINCREMENT`, PostgreSQL `BIGSERIAL PRIMARY KEY`.
    case serialKey

    var sqlite: String {
        switch self {
        case .integer: "INTEGER"
        case .blob: "BLOB"
        case .serialKey: "INTEGER PRIMARY KEY AUTOINCREMENT"
        }
    }

    var postgres: String {
        switch self {
        case .integer: "BIGINT"
        case .blob: "BYTEA"
        case .serialKey: "BIGSERIAL PRIMARY KEY"
        }
    }
}

/// One schema change from v14 on, written once and applied by both stores after their own
/// v1…v13 (which predate this list and stay in each store's `Resources/migrations`).
public struct SchemaMigration: Sendable {
    /// `v14`, `v15`, …: the name both stores record it under (GRDB's `grdb_migrations`,
    /// PostgreSQL's `schema_migrations`), in the same sequence as their own files.
    public let version: String
    let ddl: DDL
    /// Set when the change is not the same statement in both dialects.
    let postgresOverride: DDL?

    /// A change whose statements are the same in both dialects but for their types.
    public init(_ version: String, _ ddl: DDL) {
        self.version = version
        self.ddl = ddl
        postgresOverride = nil
    }

    /// A change each dialect writes its own way (a trigger: SQLite's `WHEN … RAISE`,
    /// PostgreSQL's function): only where the statements truly differ.
    public init(_ version: String, sqlite: DDL, postgres: DDL) {
        self.version = version
        ddl = sqlite
        postgresOverride = postgres
    }

    /// The migration's statements in `dialect`, `;`-separated as in a migration file.
    public func sql(_ dialect: SQLDialect) -> String {
        switch dialect {
        case .sqlite: ddl.render(.sqlite)
        case .postgres: (postgresOverride ?? ddl).render(.postgres)
        }
    }
}

extension SchemaMigration {
    /// The version each store's own migration files end at; the shared list starts after it.
    public static let lastStoreOwnVersion = 13

    /// Checks that `migrations` number on from the stores' own files without a gap or a repeat:
    /// a store records a migration by its name, so a wrong one would be skipped or reapplied.
    public static func checkedSequence(_ migrations: [SchemaMigration]) -> [SchemaMigration] {
        for (offset, migration) in migrations.enumerated() {
            let expected = "v\(lastStoreOwnVersion + 1 + offset)"
            precondition(migration.version == expected, "shared migration \(offset) is named \(migration.version), expected \(expected)")
        }
        return migrations
    }
}
