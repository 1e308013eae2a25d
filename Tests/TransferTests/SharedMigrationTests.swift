import Foundation
import GRDB
import Logging
import PostgresNIO
import Testing
import TransferSQL
@testable import TransferPostgres
@testable import TransferSQLite
@testable import TransferTestSupport

/// From v14 on a schema change is written once (`SchemaMigration.shared` in TransferSQL) and
/// each store applies it after its own v1…v13, in its own migrator.
@Suite("Shared migrations")
struct SharedMigrationTests {
    /// Two changes as later versions would add them: one written once, one in each dialect.
    static let probes = SchemaMigration.checkedSequence([
        SchemaMigration("v14", """
            CREATE TABLE shared_probe (
                id \(.serialKey),
                account_id TEXT NOT NULL REFERENCES accounts(id),
                at \(.integer) NOT NULL,
                bytes \(.blob)
            );
            CREATE INDEX shared_probe_by_at ON shared_probe(at);
            """),
        SchemaMigration(
            "v15", sqlite: "CREATE VIEW shared_probe_dialect AS SELECT 'sqlite' AS dialect;",
            postgres: "CREATE VIEW shared_probe_dialect AS SELECT 'postgres'::text AS dialect;"),
    ])

    @Test("a change is written once: its column types are spelled in each dialect")
    func rendering() {
        let ddl: DDL = "CREATE TABLE t (id \(.serialKey), at \(.integer) NOT NULL, hash \(.blob), n INTEGER, \(sqlite: "s", postgres: "p") TEXT)"
        #expect(ddl.render(.sqlite) == "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, hash BLOB, n INTEGER, s TEXT)")
        #expect(ddl.render(.postgres) == "CREATE TABLE t (id BIGSERIAL PRIMARY KEY, at BIGINT NOT NULL, hash BYTEA, n INTEGER, p TEXT)")
        #expect(Self.probes[1].sql(.sqlite).contains("'sqlite'") && Self.probes[1].sql(.postgres).contains("'postgres'"))
    }

    @Test("every vN.swift in Sources/TransferSQL/Migrations is in the shared list, in order, after v13")
    func listed() throws {
        let folder = "Sources/TransferSQL/Migrations"
        let files = try FileManager.default.contentsOfDirectory(atPath: Repository.root.appendingPathComponent(folder).path)
            .filter { $0.hasPrefix("v") && $0.hasSuffix(".swift") }
            .map { String($0.dropLast(6)) }
            .sorted { Int($0.dropFirst()) ?? 0 < Int($1.dropFirst()) ?? 0 }
        #expect(
            SchemaMigration.shared.map(\.version) == files,
            "\(folder) holds \(files) but SchemaMigration.shared lists \(SchemaMigration.shared.map(\.version)): add the new one to the list")
        #expect(SQLiteStore.migrations.last?.version == "v\(SchemaMigration.lastStoreOwnVersion)")
        #expect(PostgresStore.migrations.last?.version == "v\(SchemaMigration.lastStoreOwnVersion)")
    }

    @Test("SQLite applies the shared list after its own migrations, once")
    func sqlite() throws {
        let file = TempDatabase()
        defer { file.remove() }
        let queue = try DatabaseQueue(path: file.path)
        defer { try? queue.close() }
        try SQLiteStore.migrator(shared: Self.probes).migrate(queue)
        try SQLiteStore.migrator(shared: Self.probes).migrate(queue)  // nothing left to apply
        try queue.read { db in
            #expect(try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid").suffix(3) == ["v13", "v14", "v15"])
            let types = try Row.fetchAll(db, sql: "SELECT name, type FROM pragma_table_info('shared_probe') ORDER BY cid").map {
                "\($0["name"] as String) \($0["type"] as String)"
            }
            #expect(types == ["id INTEGER", "account_id TEXT", "at INTEGER", "bytes BLOB"])
            #expect(try String.fetchOne(db, sql: "SELECT dialect FROM shared_probe_dialect") == "sqlite")
        }
    }

    @Test(
        "PostgreSQL applies the shared list after its own migrations, once",
        .enabled(if: StoreKind.available.contains(.postgres), "needs PostgreSQL: set TRANSFER_TEST_POSTGRES_URL (CI does)"))
    func postgres() async throws {
        try await TestPostgres.withDatabase(empty: true) { url in
            try await TestPostgres.withClient(url) { client in
                var quiet = Logger(label: "test.migrations")
                quiet.logLevel = .error
                let pool = try PostgresStore.makeClient(url: url, maxConnections: 2, logger: quiet)
                let store = PostgresStore(client: pool, logger: quiet)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await pool.run() }
                    defer { group.cancelAll() }
                    try await store.migrate(shared: Self.probes)
                    try await store.migrate(shared: Self.probes)  // nothing left to apply
                }
                var versions: [String] = []
                for try await version in try await client.query("SELECT version FROM schema_migrations ORDER BY applied_at, version").decode(String.self) {
                    versions.append(version)
                }
                #expect(Set(versions) == Set((1...15).map { "v\($0)" }), "\(versions)")
                var types: [String] = []
                let columns: PostgresQuery = """
                    SELECT column_name::text || ' ' || data_type::text FROM information_schema.columns
                    WHERE table_name = 'shared_probe' ORDER BY ordinal_position
                    """
                for try await type in try await client.query(columns).decode(String.self) { types.append(type) }
                #expect(types == ["id bigint", "account_id text", "at bigint", "bytes bytea"])
                var dialects: [String] = []
                for try await dialect in try await client.query("SELECT dialect FROM shared_probe_dialect").decode(String.self) {
                    dialects.append(dialect)
                }
                #expect(dialects == ["postgres"])
            }
        }
    }

    @Test("the login's prepared statement splices only SQL that binds nothing")
    func preparedLoginSplicesNoBinds() {
        #expect(SQLText.migrationFlag(now: "$2").render(.postgres).binds.isEmpty, "the migration flag now binds a value: pass it as a parameter of RenewOpenSession")
        #expect(PostgresStore.RenewOpenSession.sql.contains("t.expires_at > $2"))
    }
}
