import GRDB
import TransferCore
import TransferSQL

extension SQLiteStore {
    /// The pruner: TransferSQL's rules (`PruneRule.all`), then inactive accounts. Each batch
    /// is a short write of its own through `GroupCommit`, so logins never wait behind a long
    /// delete; a rule whose condition no index serves walks its table in rowid windows, so
    /// every batch costs the same however much was pruned before it.
    public func prune(_ cutoffs: PruneCutoffs, batchSize: Int) async throws -> PruneCounts? {
        var counts = PruneCounts()
        for rule in PruneRule.all {
            guard let condition = rule.condition(cutoffs) else { continue }
            counts[keyPath: rule.counts] += try await prune(rule, condition, batchSize: batchSize)
        }
        // Inactive accounts, each erased in a short write of its own, 16 in flight (a group
        // commit takes them together, as it takes concurrent logins); the WAL is checkpointed
        // once a batch rather than once an account.
        counts.inactiveAccounts = try await eraseInactiveAccounts(
            cutoffs, batchSize: min(batchSize, InactivityPolicy.batchSize), parallel: 16, erase: { [self] in try await apply($0).result.get() },
            batchDone: { await eraseWAL() })
        return counts
    }

    /// Applies one of TransferSQL's rules (`PruneRule`) in batches of `batchSize` rows, each a
    /// write of its own; returns the rows changed.
    private func prune(_ rule: PruneRule, _ condition: SQLText, batchSize: Int) async throws -> Int {
        let table = rule.tableName
        @Sendable func change(_ rows: SQLText) -> SQLText {
            switch rule.change {
            case .delete: "DELETE FROM \(table) WHERE \(rows)"
            case .update(let assignments): "UPDATE \(table) SET \(assignments) WHERE \(rows)"
            }
        }
        switch rule.walk {
        case .atOnce:
            return try await commits.write { db in
                try db.run(change(condition))
                return db.changesCount
            }
        case .byCondition(let orderBy):
            let order: SQLText = orderBy.map { " ORDER BY \($0)" } ?? ""
            return try await batches(batchSize) { db in
                try db.run(change("rowid IN (SELECT rowid FROM \(table) WHERE (\(condition))\(order) LIMIT \(batchSize))"))
            }
        case .inKeyWindows:
            return try await windows(table: rule.table, batchSize: batchSize) { db, low, high in
                try db.run(change("rowid > \(low) AND rowid <= \(high) AND (\(condition))"))
            }
        }
    }

    /// Runs `body` on rowid windows of `batchSize` over the table's rowids; returns the rows changed.
    private func windows(
        table: String, batchSize: Int, _ body: @escaping @Sendable (Database, Int64, Int64) throws -> Void
    ) async throws -> Int {
        // From the smallest rowid: pruned rows leave the low end, and rowids only grow.
        let (first, last) = try await pool.read { db in
            let row = try Row.fetchOne(db, sql: "SELECT MIN(rowid) AS first, MAX(rowid) AS last FROM \(table)")
            return ((row?["first"] as Int64?) ?? 0, (row?["last"] as Int64?) ?? 0)
        }
        var changed = 0
        var low: Int64 = first - 1
        while low < last {
            let (from, to) = (low, low + Int64(batchSize))
            changed += try await commits.write { db in
                try body(db, from, to)
                return db.changesCount
            }
            low = to
        }
        return changed
    }

    /// Runs `body`, which changes at most `batchSize` rows, until it changes fewer.
    private func batches(_ batchSize: Int, _ body: @escaping @Sendable (Database) throws -> Void) async throws -> Int {
        var changed = 0
        while true {
            let n = try await commits.write { db in
                try body(db)
                return db.changesCount
            }
            changed += n
            if n < batchSize { return changed }
        }
    }
}
