import Foundation
import PostgresNIO
import TransferCore
import TransferSQL

extension PostgresStore {
    // MARK: Migrations

    static let advisoryLockKey = Queries.advisoryLockKey

    /// Applies pending versioned migrations. Nodes that start together wait on an advisory
    /// lock, so exactly one migrates and the others find the work done.
    public func migrate() async throws {
        try await client.withConnection { conn in
            try await conn.query("SELECT pg_advisory_lock(\(Self.advisoryLockKey))", logger: logger)
            do {
                try await conn.query(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)",
                    logger: logger)
                var applied = Set<String>()
                for try await version in try await conn.query("SELECT version FROM schema_migrations", logger: logger).decode(String.self) {
                    applied.insert(version)
                }
                for (version, sql) in Self.migrations where !applied.contains(version) {
                    try await conn.query("BEGIN", logger: logger)
                    do {
                        for statement in Self.statements(String(decoding: sql, as: UTF8.self)) {
                            try await conn.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                        }
                        let now = Timestamp(Date()).milliseconds
                        try await conn.query("INSERT INTO schema_migrations (version, applied_at) VALUES (\(version), \(now))", logger: logger)
                        try await conn.query("COMMIT", logger: logger)
                    } catch {
                        _ = try? await conn.query("ROLLBACK", logger: logger)
                        throw error
                    }
                }
            } catch {
                _ = try? await conn.query("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))", logger: logger)
                throw error
            }
            try await conn.query("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))", logger: logger)
        }
    }

    /// Versioned migrations, `Resources/migrations/vN.sql`, compiled into the binary (SwiftPM's
    /// `embedInCode`: no resource bundle to deploy beside it); a new schema change is a new file
    /// appended here. `schema.postgres.sql` at the repository's root is what they add up to.
    static let migrations: [(version: String, sql: [UInt8])] = [
        ("v1", PackageResources.v1_sql), ("v2", PackageResources.v2_sql), ("v3", PackageResources.v3_sql),
        ("v4", PackageResources.v4_sql), ("v5", PackageResources.v5_sql), ("v6", PackageResources.v6_sql),
        ("v7", PackageResources.v7_sql), ("v8", PackageResources.v8_sql), ("v9", PackageResources.v9_sql),
        ("v10", PackageResources.v10_sql), ("v11", PackageResources.v11_sql), ("v12", PackageResources.v12_sql),
        ("v13", PackageResources.v13_sql),
    ]

    /// The statements of a schema file: comments dropped, split at `;` ending a line.
    static func statements(_ sql: String) -> [String] {
        let lines = sql.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            if let dash = line.range(of: "--") { return line[..<dash.lowerBound] }
            return line
        }
        return lines.joined(separator: "\n").components(separatedBy: ";\n")
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines).trimmingCharacters(in: CharacterSet(charactersIn: ";")) }
            .filter { !$0.isEmpty }
    }
}
