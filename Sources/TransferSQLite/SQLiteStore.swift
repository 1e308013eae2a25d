import Foundation
import GRDB
import TransferCore
import TransferSQL

/// The embedded store: SQLite through GRDB, one `DatabasePool` in WAL mode.
/// Every `TransferStore` method is one `read`, or one write applied atomically in a savepoint
/// of a transaction it may share with concurrent writes (`GroupCommit`), with cached
/// statements, so a request touches the database once.
public final class SQLiteStore: SQLStore {
    public let pool: DatabasePool
    /// Every write goes through here: concurrent requests share a transaction (see `GroupCommit`).
    let commits: GroupCommit
    private let checkpointer: Checkpointer

    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    public init(path: String) throws {
        var config = Configuration()
        // Writers queue behind each other instead of failing with "database is locked",
        // also when the support CLI writes to the same file.
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            // WAL + NORMAL: a committed transaction survives a crash of the process;
            // an OS crash or power loss may lose the last commits, never corrupt the file.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            if !db.configuration.readonly {
                // Deleted rows and replaced values are overwritten in the file, not left in free
                // space: an erased account's email and addresses must not stay readable in it.
                try db.execute(sql: "PRAGMA secure_delete = ON")
                // `Checkpointer` copies WAL pages off the writer and has the writer restart the
                // WAL past 4 000 frames (16 MiB); SQLite's own checkpoint on commit is only the
                // last resort, should that thread ever stall (256 MiB).
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 65536")
                // Every login touches a few random index pages; with SQLite's default 2 MiB
                // cache the writer re-read them with pread (6 % of server CPU in the profile).
                try db.execute(sql: "PRAGMA cache_size = -32768")
            }
        }
        pool = try DatabasePool(path: path, configuration: config)
        commits = GroupCommit(writer: pool)
        try Self.migrator.migrate(pool)
        checkpointer = try Checkpointer(
            path: path, interval: .milliseconds(25), commits: commits, writer: pool, restartFrames: 4000)
    }

    public func close() throws {
        try checkpointer.stop()
        try pool.close()
    }

    /// Versioned migrations, `Resources/migrations/vN.sql`, compiled into the binary (SwiftPM's
    /// `embedInCode`: no resource bundle to deploy beside it); a new schema change is a new file
    /// appended here. `schema.sql` at the repository's root is the schema they add up to.
    static let migrations: [(version: String, sql: [UInt8])] = [
        ("v1", PackageResources.v1_sql), ("v2", PackageResources.v2_sql), ("v3", PackageResources.v3_sql),
        ("v4", PackageResources.v4_sql), ("v5", PackageResources.v5_sql), ("v6", PackageResources.v6_sql),
        ("v7", PackageResources.v7_sql), ("v8", PackageResources.v8_sql), ("v9", PackageResources.v9_sql),
        ("v10", PackageResources.v10_sql), ("v11", PackageResources.v11_sql), ("v12", PackageResources.v12_sql),
        ("v13", PackageResources.v13_sql),
    ]

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for (version, sql) in migrations {
            migrator.registerMigration(version) { db in try db.execute(sql: String(decoding: sql, as: UTF8.self)) }
        }
        return migrator
    }

    // MARK: Operations

    public func execute<Operation: StoreOperation>(_ operation: Operation) async throws -> Operation.Result {
        let (result, erased) = try await apply(operation)
        if erased { await eraseWAL() }
        return result
    }

    /// Runs the operation in one write transaction; also says whether it erased an account (then
    /// the WAL still holds what was erased: `execute` checkpoints it, the pruner once a batch).
    func apply<Operation: StoreOperation>(_ operation: Operation) async throws -> (result: Operation.Result, erased: Bool) {
        try await commits.write { db in
            // The writer holds the only write lock, so nothing read here changes before the effects are applied.
            let plan = try operation.plan(try db.read(FactsPlan(operation.reads, at: operation.now, lock: true, dialect: .sqlite)))
            for effect in plan.effects {
                if let checked = effect.checkedStatement {
                    try effect.check(db.all(checked))
                } else {
                    for statement in effect.statements { try db.run(statement) }
                }
            }
            return (plan.result, plan.effects.contains { if case .eraseAccount = $0 { true } else { false } })
        }
    }

    /// After an account is erased, the WAL still holds the pages as they were before: copy it
    /// into the database file (where `secure_delete` zeroed what was deleted) and truncate it.
    /// Best effort: a reader holding an old snapshot makes it retry, then give up (the WAL is
    /// overwritten as it is reused).
    func eraseWAL() async {
        for _ in 0..<20 {
            if (try? await pool.writeWithoutTransaction({ db in try db.checkpoint(.truncate) })) != nil { return }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    // MARK: Reads outside operations (written once in TransferSQL's `SQLStore`)

    public func read<Plan: ReadPlan>(_ plan: Plan) async throws -> Plan.Output {
        try await pool.read { db in try db.read(plan) }
    }

    public var dialect: SQLDialect { .sqlite }

    public func ping() async throws {
        _ = try await pool.read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT 1")) }
    }
}
