import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing
import TransferCore
import TransferPostgres
import TransferSQLite
import TransferStorage

/// A temporary database file, removed with its WAL files at the end.
struct TempDatabase {
    let path: String
    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-test-\(UUID().uuidString).sqlite").path
    }
    func remove() {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }
}

extension SQLiteStore {
    /// `body` on a fresh, migrated SQLite store in a temporary file, closed and removed after.
    static func withTemporary<T>(_ body: (SQLiteStore) async throws -> T) async throws -> T {
        let file = TempDatabase()
        defer { file.remove() }
        let store = try SQLiteStore(path: file.path)
        defer { try? store.close() }
        return try await body(store)
    }
}

/// The throwaway PostgreSQL cluster `.ci/run` (or `./test`) starts. Under CI a missing URL
/// fails the PostgreSQL cases instead of skipping them.
enum TestPostgres {
    static var url: String? { ProcessInfo.processInfo.environment["TRANSFER_TEST_POSTGRES_URL"] }
    static var required: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

    struct Missing: Error, CustomStringConvertible {
        var description: String { "CI=true but TRANSFER_TEST_POSTGRES_URL is not set: PostgreSQL tests cannot run" }
    }

    /// Runs `body` with a running client for `url` (PostgresNIO's own, on the URL's first host:
    /// the tests' administration; the stores connect through `PostgresPool`).
    static func withClient<T: Sendable>(_ url: String, _ body: @Sendable (PostgresClient) async throws -> T) async throws -> T {
        var quiet = Logger(label: "test.postgres")
        quiet.logLevel = .error
        let parsed = try PostgresURL(parsing: url)
        var configuration = PostgresClient.Configuration(
            host: parsed.hosts[0].name, port: parsed.hosts[0].port, username: parsed.user, password: parsed.password,
            database: parsed.database, tls: .disable)
        configuration.options.maximumConnections = 4
        configuration.options.connectTimeout = .seconds(5)
        let client = PostgresClient(configuration: configuration, backgroundLogger: quiet)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    /// `host:port` of a PgBouncer in transaction pooling mode in front of the same server
    /// (`scripts/pgbouncer-conformance.sh`): the stores of `withDatabase` then connect through
    /// it with `--database-pooling transaction`, while databases are made and dropped directly.
    static var pooler: String? { ProcessInfo.processInfo.environment["TRANSFER_TEST_POSTGRES_POOLER"] }
    static var pooling: DatabasePooling { pooler == nil ? .session : .transaction }

    /// `url` as the stores reach it: through the pooler when there is one.
    static func storeURL(_ url: String) throws -> String {
        guard let pooler, var components = URLComponents(string: url) else { return url }
        let parts = pooler.split(separator: ":")
        components.host = String(parts[0])
        components.port = parts.count > 1 ? Int(parts[1]) : 6432
        guard let through = components.string else { throw TestFailure("no URL through the pooler \(pooler) for \(url)") }
        return through
    }

    /// The URL of database `name` on the admin URL's server, as the same user.
    static func url(of name: String, admin: String) throws -> String {
        guard var components = URLComponents(string: admin) else {
            throw TestFailure("TRANSFER_TEST_POSTGRES_URL is not a URL: \(admin)")
        }
        components.path = "/\(name)"
        guard let dbURL = components.string else { throw TestFailure("no URL for database \(name) from \(admin)") }
        return dbURL
    }

    /// A database that every migration has been applied to, made once per test process and
    /// copied for each test (`CREATE DATABASE … TEMPLATE`): dozens of tests migrating their own
    /// databases at once on 2 cores overran the server's 15-second start-up bound.
    static let template = TemplateDatabase()

    actor TemplateDatabase {
        private var made: Task<String, any Error>?

        func name(admin: String) async throws -> String {
            if let made { return try await made.value }
            let task = Task<String, any Error> {
                let name = "transfer_template_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
                try await withClient(admin) { client in _ = try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)")) }
                var quiet = Logger(label: "test.template")
                quiet.logLevel = .error
                // The store migrates the database as a server would, then closes every connection
                // (a template must have none while it is copied).
                try await Storage.withStore(.postgres(url: try TestPostgres.url(of: name, admin: admin)), logger: quiet) { _ in }
                return name
            }
            made = task
            return try await task.value
        }
    }

    /// How many tests hold a database of their own at once. Swift Testing starts every test
    /// at the same time; ~160 PostgreSQL cases with pools of their own overran the cluster's
    /// `max_connections` (300 in `.ci/run`: "sorry, too many clients already"), and the
    /// refused connections surfaced as `503`s in unrelated tests. The rest wait their turn.
    /// `TRANSFER_TEST_POSTGRES_DATABASES` sets it (a developer's own server may allow fewer
    /// connections than the throwaway cluster).
    static let databases = AsyncPermits(
        Int(ProcessInfo.processInfo.environment["TRANSFER_TEST_POSTGRES_DATABASES"] ?? "") ?? 12)

    /// Set inside a test that holds a permit, so a second database it opens (a migration test
    /// compares two) does not wait for a permit its own test holds.
    @TaskLocal static var holdsPermit = false

    /// A new database of its own, migrated (or empty, for tests that build the schema
    /// themselves); dropped after `body`.
    static func withDatabase<T: Sendable>(empty: Bool = false, _ body: @Sendable (String) async throws -> T) async throws -> T {
        if !holdsPermit {
            return try await databases.with { try await $holdsPermit.withValue(true) { try await withDatabase(empty: empty, body) } }
        }
        guard let admin = url else { throw Missing() }
        let name = "transfer_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        // The same server and user, another database: only the URL's path changes.
        let dbURL = try url(of: name, admin: admin)
        let template = empty ? nil : try await self.template.name(admin: admin)
        try await withClient(admin) { client in
            _ = try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)" + (template.map { " TEMPLATE \($0)" } ?? "")))
        }
        do {
            let result = try await body(storeURL(dbURL))
            try? await drop(name, admin: admin)
            return result
        } catch {
            try? await drop(name, admin: admin)
            throw error
        }
    }

    static func drop(_ name: String, admin: String) async throws {
        try await withClient(admin) { client in
            _ = try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
        }
    }
}

/// Every store implementation, opened fresh for one test.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite, postgres
    var testDescription: String { rawValue }

    /// The stores this run can test: PostgreSQL when a cluster is given, or when CI requires it.
    static var available: [StoreKind] {
        TestPostgres.url != nil || TestPostgres.required ? [.sqlite, .postgres] : [.sqlite]
    }

    /// Runs `body` on a fresh, migrated store.
    func withStore(_ body: @Sendable (any SupportStore) async throws -> Void) async throws {
        try await withDatabaseLocation { location, _ in
            var quiet = Logger(label: "test.store")
            quiet.logLevel = .error
            try await Storage.withStore(location, poolSize: 16, pooling: TestPostgres.pooling, logger: quiet, body)
        }
    }

    /// Runs `body` with the `--database` value of a fresh database.
    /// `empty`: a PostgreSQL database without the schema (SQLite files always start empty:
    /// the store migrates them in milliseconds).
    func withDatabaseLocation(empty: Bool = false, _ body: @Sendable (DatabaseLocation, TempDatabase) async throws -> Void) async throws {
        let file = TempDatabase()
        defer { file.remove() }
        switch self {
        case .sqlite: try await body(.sqlite(path: file.path), file)
        case .postgres: try await TestPostgres.withDatabase(empty: empty) { url in try await body(.postgres(url: url), file) }
        }
    }
}

/// A counting semaphore for async code: at most `count` bodies run at once, the rest wait in
/// the order they came.
final class AsyncPermits: Sendable {
    private let state: Mutex<(free: Int, waiting: [CheckedContinuation<Void, Never>])>

    init(_ count: Int) { state = Mutex((max(1, count), [])) }

    func with<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { continuation in
            let go = state.withLock { state in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if go { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state in
            if state.waiting.isEmpty {
                state.free += 1
                return nil as CheckedContinuation<Void, Never>?
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
