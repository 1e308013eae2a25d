import Foundation
import PostgresNIO
import TransferCore
import TransferSQL

extension PostgresStore {
    /// The pruner: TransferSQL's rules (`PruneRule.all`), then inactive accounts. One node at a
    /// time: the first to take an advisory lock prunes, the others find it taken and skip this
    /// round (nil). Every batch is a statement of its own (no long transaction); a rule whose
    /// condition no index serves walks its table in key order, so every batch costs the same
    /// however much was pruned before it. Inactive accounts are erased last, one short
    /// transaction each (`SQLStore.eraseInactiveAccounts`). Its statements may take up to
    /// `pruneStatementTimeout` each (a request's take `statementTimeout`).
    ///
    /// The lock is the session's, on the connection that prunes; through a pooler in
    /// transaction mode, where a session lock would stay with whichever server session took
    /// it, it is a transaction's instead, held open on a connection of its own for the round.
    public func prune(_ cutoffs: PruneCutoffs, batchSize: Int) async throws -> PruneCounts? {
        try await Self.$statementTimeoutOverride.withValue(Self.pruneStatementTimeout) {
            switch pooling {
            case .session: try await pruneHoldingSessionLock(cutoffs, batchSize: batchSize)
            case .transaction: try await pruneHoldingTransactionLock(cutoffs, batchSize: batchSize)
            }
        }
    }

    static let pruneStatementTimeout = Duration.seconds(30)
    static let pruneLockKey = advisoryLockKey + 2

    private func pruneHoldingSessionLock(_ cutoffs: PruneCutoffs, batchSize: Int) async throws -> PruneCounts? {
        try await withConnection { [self] conn in
            let key = Self.pruneLockKey
            guard try await one(conn, "SELECT pg_try_advisory_lock(\(key)) AS taken")?["taken"].decode(Bool.self) == true else {
                return nil
            }
            // The lock belongs to this pooled connection: if it cannot be released, the
            // connection is closed (which releases it) rather than returned holding it.
            func release() async {
                do { try await run(conn, "SELECT pg_advisory_unlock(\(key))") } catch { Self.drop(conn) }
            }
            do {
                let counts = try await prune(conn, cutoffs, batchSize: batchSize)
                await release()
                return counts
            } catch {
                await release()
                throw error
            }
        }
    }

    private func pruneHoldingTransactionLock(_ cutoffs: PruneCutoffs, batchSize: Int) async throws -> PruneCounts? {
        try await withConnection { [self] lock in
            try await run(lock, "BEGIN")
            do {
                guard try await one(lock, "SELECT pg_try_advisory_xact_lock(\(Self.pruneLockKey)) AS taken")?["taken"].decode(Bool.self) == true
                else {
                    try await run(lock, "ROLLBACK")
                    return nil
                }
                let counts = try await withConnection { [self] conn in try await prune(conn, cutoffs, batchSize: batchSize) }
                try await run(lock, "COMMIT")
                return counts
            } catch {
                // A transaction left open would hold the lock: close the connection if it cannot end it.
                do { try await run(lock, "ROLLBACK") } catch { Self.drop(lock) }
                throw error
            }
        }
    }

    private func prune(_ conn: PostgresConnection, _ cutoffs: PruneCutoffs, batchSize: Int) async throws -> PruneCounts {
        var counts = PruneCounts()
        for rule in PruneRule.all {
            guard let condition = rule.condition(cutoffs) else { continue }
            counts[keyPath: rule.counts] += try await prune(conn, rule, condition, limit: Int64(batchSize))
        }
        // Inactive accounts, each erased in a transaction of its own on another pooled
        // connection (this one holds the pruner's lock), rechecked under the rows' locks; four
        // at a time, so the round hides round trips but leaves the pool to the logins.
        counts.inactiveAccounts = try await eraseInactiveAccounts(
            cutoffs, batchSize: min(batchSize, InactivityPolicy.batchSize), parallel: 4, erase: { [self] in try await execute($0).get() })
        return counts
    }

    /// Applies one of TransferSQL's rules (`PruneRule`) in statements of at most `limit` rows,
    /// each counting what it changed as `n`; returns the rows changed.
    private func prune(_ conn: PostgresConnection, _ rule: PruneRule, _ condition: SQLText, limit: Int64) async throws -> Int {
        let table = rule.tableName
        let key = SQLText.join(rule.key.map(\.column), separator: ", ")
        let lock: SQLText = rule.skipsLocked ? " FOR UPDATE SKIP LOCKED" : ""
        func change(_ rows: SQLText) -> SQLText {
            switch rule.change {
            case .delete: "DELETE FROM \(table) WHERE \(rows) RETURNING 1"
            case .update(let assignments): "UPDATE \(table) SET \(assignments) WHERE \(rows) RETURNING 1"
            }
        }
        switch rule.walk {
        case .atOnce:
            return Int(try await one(conn, Self.query("WITH d AS (\(change(condition))) SELECT count(*) AS n FROM d"))?["n"].decode(Int64.self) ?? 0)
        case .byCondition(let orderBy):
            let order: SQLText = orderBy.map { " ORDER BY \($0)" } ?? ""
            return try await batches(conn, limit, """
                WITH d AS (
                    \(change("(\(key)) IN (SELECT \(key) FROM \(table) WHERE (\(condition))\(order) LIMIT \(limit)\(lock))"))
                ) SELECT count(*) AS n FROM d
                """)
        case .inKeyWindows:
            // Windows of the key, in key order; the statement answers the window's last key.
            let descending = SQLText.join(rule.key.map { "\($0.column) DESC" }, separator: ", ")
            let changed: SQLText =
                rule.skipsLocked
                ? """
                x AS (
                    -- Rows a request holds are skipped (next round), never waited for.
                    SELECT \(key) FROM \(table) JOIN w USING (\(key)) WHERE (\(condition)) FOR UPDATE OF \(table) SKIP LOCKED
                ), d AS (\(change("(\(key)) IN (SELECT \(key) FROM x)")))
                """
                : "d AS (\(change("(\(key)) IN (SELECT \(key) FROM w) AND (\(condition))")))"
            var after = rule.key.map(\.lowest), total = 0
            while true {
                let position = SQLText.join(after.map { "\($0)" }, separator: ", ")
                guard let row = try await one(conn, Self.query("""
                    WITH w AS (
                        SELECT \(key) FROM \(table) WHERE (\(key)) > (\(position)) ORDER BY \(key) LIMIT \(limit)
                    ), \(changed)
                    SELECT (SELECT count(*) FROM d) AS n, last.* FROM (SELECT \(key) FROM w ORDER BY \(descending) LIMIT 1) last
                    """)) else { return total }
                total += Int(try row["n"].decode(Int64.self))
                after = try rule.key.map { column in
                    switch column.kind {
                    case .text: .text(try row[column.name].decode(String.self))
                    case .blob: .blob([UInt8](try row[column.name].decode(Data.self)))
                    case .integer: .integer(try row[column.name].decode(Int64.self))
                    }
                }
            }
        }
    }

    /// Runs `query` (which answers `n`, the rows it changed, at most `limit`) until it changes fewer.
    private func batches(_ conn: PostgresConnection, _ limit: Int64, _ query: SQLText) async throws -> Int {
        var changed = 0
        while true {
            let n = try await one(conn, Self.query(query))?["n"].decode(Int64.self) ?? 0
            changed += Int(n)
            if n < limit { return changed }
        }
    }
}
