import Foundation
import Logging
import PostgresNIO
import TransferCore
import TransferPostgres
import TransferSQLite

/// Opens the store a `--database` value names: the one place that knows every store, for
/// the server, the `transfer` command line, the tests and the benchmark.
public enum Storage {
    /// A store that could not be opened, said in one sentence.
    public struct OpenError: Error, CustomStringConvertible {
        public enum Reason: Sendable { case invalidURL, missingFile, cannotOpen }
        public let reason: Reason
        public let description: String
    }

    /// Opens the store. SQLite opens and migrates at once; PostgreSQL's pool (`client`) must
    /// run before the first query, and `migrate()` then applies pending migrations.
    /// `mustExist`: a missing SQLite file is an error instead of a new empty database.
    /// PostgreSQL only: `pooling`, how it is reached (`--database-pooling`); `statementTimeout`,
    /// how long a statement may go unanswered (a request's bound by default; the CLI's is longer).
    public static func open(
        _ location: DatabaseLocation, poolSize: Int = 20, pooling: DatabasePooling = .session,
        statementTimeout: Duration = PostgresStore.requestStatementTimeout, logger: Logger, mustExist: Bool = false
    ) throws(OpenError) -> OpenedStore {
        switch location {
        case .sqlite(let path):
            guard !mustExist || FileManager.default.fileExists(atPath: path) else {
                throw OpenError(reason: .missingFile, description: "there is no database at \(path)")
            }
            do {
                let store = try SQLiteStore(path: path)
                return OpenedStore(store: store, client: nil, migrateStore: {}, closeStore: { try store.close() })
            } catch {
                throw OpenError(reason: .cannotOpen, description: "the SQLite database at \(path) cannot be opened or migrated (\(error))")
            }
        case .postgres(let url):
            let client: PostgresPool
            do {
                client = try PostgresStore.makeClient(url: url, maxConnections: poolSize, logger: logger)
            } catch {
                throw OpenError(reason: .invalidURL, description: error.description)
            }
            let store = PostgresStore(client: client, pooling: pooling, statementTimeout: statementTimeout, logger: logger)
            return OpenedStore(store: store, client: client, migrateStore: { try await store.migrate() }, closeStore: {})
        }
    }

    /// Opens the store, runs its pool while `body` runs (after migrating, with `migrate`), then closes it.
    public static func withStore<T: Sendable>(
        _ location: DatabaseLocation, poolSize: Int = 20, pooling: DatabasePooling = .session,
        statementTimeout: Duration = PostgresStore.requestStatementTimeout, logger: Logger, mustExist: Bool = false,
        migrate: Bool = true, _ body: @Sendable (any SupportStore) async throws -> T
    ) async throws -> T {
        let opened = try open(
            location, poolSize: poolSize, pooling: pooling, statementTimeout: statementTimeout, logger: logger, mustExist: mustExist)
        defer { try? opened.close() }
        guard let client = opened.client else { return try await body(opened.store) }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            if migrate { try await opened.migrate() }
            return try await body(opened.store)
        }
    }
}

public struct OpenedStore: Sendable {
    public let store: any SupportStore
    /// PostgreSQL's connection pool: it must run (`run()`, as a service or in a task) while
    /// the store is used. Nil for SQLite.
    public let client: PostgresPool?
    let migrateStore: @Sendable () async throws -> Void
    let closeStore: @Sendable () throws -> Void

    /// Applies pending migrations (SQLite applied them when it opened).
    public func migrate() async throws { try await migrateStore() }
    public func close() throws { try closeStore() }
}
