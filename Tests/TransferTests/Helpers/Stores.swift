import Foundation
import Logging
import PostgresNIO
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

/// The throwaway PostgreSQL cluster `.ci/run` (or `./test`) starts. Under CI a missing URL
/// fails the PostgreSQL cases instead of skipping them.
enum TestPostgres {
    static var url: String? { ProcessInfo.processInfo.environment["TRANSFER_TEST_POSTGRES_URL"] }
    static var required: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

    struct Missing: Error, CustomStringConvertible {
        var description: String { "CI=true but TRANSFER_TEST_POSTGRES_URL is not set: PostgreSQL tests cannot run" }
    }

    /// Runs `body` with a running client for `url`.
    static func withClient<T: Sendable>(_ url: String, _ body: @Sendable (PostgresClient) async throws -> T) async throws -> T {
        var quiet = Logger(label: "test.postgres")
        quiet.logLevel = .error
        let client = try PostgresStore.makeClient(url: url, maxConnections: 40, logger: quiet)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    /// A new, empty database of its own; dropped after `body`.
    static func withDatabase<T: Sendable>(_ body: @Sendable (String) async throws -> T) async throws -> T {
        guard let admin = url else { throw Missing() }
        let name = "transfer_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        // The same server and user, another database: only the URL's path changes.
        guard var components = URLComponents(string: admin) else {
            throw TestFailure("TRANSFER_TEST_POSTGRES_URL is not a URL: \(admin)")
        }
        components.path = "/\(name)"
        guard let dbURL = components.string else { throw TestFailure("no URL for database \(name) from \(admin)") }
        try await withClient(admin) { client in
            _ = try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        do {
            let result = try await body(dbURL)
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
            try await Storage.withStore(location, poolSize: 40, logger: quiet, body)
        }
    }

    /// Runs `body` with the `--database` value of a fresh database.
    func withDatabaseLocation(_ body: @Sendable (DatabaseLocation, TempDatabase) async throws -> Void) async throws {
        let file = TempDatabase()
        defer { file.remove() }
        switch self {
        case .sqlite: try await body(.sqlite(path: file.path), file)
        case .postgres: try await TestPostgres.withDatabase { url in try await body(.postgres(url: url), file) }
        }
    }
}
