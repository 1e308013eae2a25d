import Foundation
import GRDB
import PostgresNIO
import TransferCore
import TransferSQL
@testable import TransferPostgres
import TransferStorage

/// A value bound to a `?` of `RawDatabase.run`.
enum Value { case text(String), int(Int64), blob([UInt8]), null }

/// A database as a given store's migrations up to `version` left it, plus raw statements with `?` placeholders.
struct RawDatabase {
    let location: DatabaseLocation

    init(location: DatabaseLocation) { self.location = location }

    /// Waits for a running server's writes (its pruner, its group commits) instead of failing
    /// at once with "database is locked", as the server's own connections do.
    static var configuration: Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        return configuration
    }

    /// The database of a `--database` value (for files that do not import TransferCore).
    init(argument: String) throws { location = try DatabaseLocation.parse(argument) }

    /// Applies the store's migration files v1…`last` as the server of that version did (past
    /// v13, the shared migrations up to `last`).
    func migrate(through last: Int) async throws {
        let own = min(last, SchemaMigration.lastStoreOwnVersion)
        let shared = SchemaMigration.shared.prefix(max(0, last - SchemaMigration.lastStoreOwnVersion))
        switch location {
        case .sqlite(let path):
            var migrator = DatabaseMigrator()
            for n in 1...own {
                let sql = try Repository.file("Sources/TransferSQLite/Resources/migrations/v\(n).sql")
                migrator.registerMigration("v\(n)") { db in try db.execute(sql: sql) }
            }
            for migration in shared {
                let sql = migration.sql(.sqlite)
                migrator.registerMigration(migration.version) { db in try db.execute(sql: sql) }
            }
            let queue = try DatabaseQueue(path: path, configuration: Self.configuration)
            try migrator.migrate(queue)
            try queue.close()
        case .postgres(let url):
            try await TestPostgres.withClient(url) { client in
                _ = try await client.query("CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)")
                for n in 1...own {
                    let sql = try Repository.file("Sources/TransferPostgres/Resources/migrations/v\(n).sql")
                    for statement in PostgresStore.statements(sql) { _ = try await client.query(PostgresQuery(unsafeSQL: statement)) }
                    _ = try await client.query("INSERT INTO schema_migrations (version, applied_at) VALUES (\("v\(n)"), 0)")
                }
                for migration in shared {
                    for statement in PostgresStore.statements(migration.sql(.postgres)) {
                        _ = try await client.query(PostgresQuery(unsafeSQL: statement))
                    }
                    _ = try await client.query("INSERT INTO schema_migrations (version, applied_at) VALUES (\(migration.version), 0)")
                }
            }
        }
    }

    func run(_ statements: [(String, [Value])]) async throws {
        switch location {
        case .sqlite(let path):
            let queue = try DatabaseQueue(path: path, configuration: Self.configuration)
            try await queue.write { db in
                for (sql, values) in statements {
                    let arguments: [(any DatabaseValueConvertible)?] = values.map {
                        switch $0 {
                        case .text(let s): s
                        case .int(let n): n
                        case .blob(let b): Data(b)
                        case .null: nil
                        }
                    }
                    try db.execute(sql: sql, arguments: StatementArguments(arguments))
                }
            }
            try queue.close()
        case .postgres(let url):
            try await TestPostgres.withClient(url) { client in
                for (sql, values) in statements {
                    var n = 0
                    let numbered = sql.map { c -> String in
                        guard c == "?" else { return String(c) }
                        n += 1
                        return "$\(n)"
                    }.joined()
                    var bindings = PostgresBindings()
                    for value in values {
                        switch value {
                        case .text(let s): bindings.append(s)
                        case .int(let i): bindings.append(i)
                        case .blob(let b): try bindings.append(Data(b))
                        case .null: bindings.appendNull()
                        }
                    }
                    _ = try await client.query(PostgresQuery(unsafeSQL: numbered, binds: bindings))
                }
            }
        }
    }

    /// The first column of each row of `sql` (no parameters), as text.
    func strings(_ sql: String) async throws -> [String] {
        switch location {
        case .sqlite(let path):
            let queue = try DatabaseQueue(path: path, configuration: Self.configuration)
            defer { try? queue.close() }
            return try await queue.read { db in try String.fetchAll(db, sql: sql) }
        case .postgres(let url):
            return try await TestPostgres.withClient(url) { client in
                var out: [String] = []
                for try await value in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(String.self) { out.append(value) }
                return out
            }
        }
    }
}
