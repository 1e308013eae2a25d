import GRDB
import TransferCore
import TransferSQL

extension SQLiteStore {
    /// The pruner. Each batch is a short write of its own through `GroupCommit`, so logins
    /// never wait behind a long delete; tables without an index for the condition are walked
    /// in rowid windows, so every batch costs the same however much was pruned before it.
    public func prune(_ cutoffs: PruneCutoffs, batchSize: Int) async throws -> PruneCounts? {
        let now = cutoffs.now, since = cutoffs.retainedSince
        var counts = PruneCounts()
        counts.expiredSessions = try await windows(table: "device_accounts", batchSize: batchSize) { db, low, high in
            try db.run(
                """
                UPDATE device_accounts SET \(SQL.noSession)
                WHERE rowid > \(low) AND rowid <= \(high) AND session_id IS NOT NULL AND refresh_expires_at <= \(now)
                """)
        }
        counts.expiredSessions += try await batches(batchSize) { db in
            try db.run(
                """
                DELETE FROM sibling_sessions WHERE rowid IN (SELECT rowid FROM sibling_sessions WHERE refresh_expires_at <= \(now) LIMIT \(batchSize))
                """)
        }
        counts.rotatedTokens = try await windows(table: "rotated_refresh_tokens", batchSize: batchSize) { db, low, high in
            try db.run(
                """
                DELETE FROM rotated_refresh_tokens
                WHERE rowid > \(low) AND rowid <= \(high)
                  AND (expires_at <= \(now)
                    OR (client_id IS NULL AND NOT EXISTS (
                      SELECT 1 FROM device_accounts p
                      WHERE p.device_id = rotated_refresh_tokens.device_id AND p.account_id = rotated_refresh_tokens.account_id
                        AND p.session_id = rotated_refresh_tokens.session_id))
                    OR (client_id IS NOT NULL AND NOT EXISTS (
                      SELECT 1 FROM sibling_sessions s WHERE s.session_id = rotated_refresh_tokens.session_id)))
                """)
        }
        counts.handoffCodes = try await batches(batchSize) { db in
            try db.run(
                "DELETE FROM handoff_codes WHERE code_hash IN (SELECT code_hash FROM handoff_codes WHERE expires_at <= \(now) LIMIT \(batchSize))")
        }
        // Rate-limit windows that ended (a new event opens a new one).
        counts.rateSlots = try await batches(batchSize) { db in
            try db.run(
                """
                DELETE FROM rate_slots WHERE (kind, client) IN (
                    SELECT kind, client FROM rate_slots WHERE window_end <= \(now) LIMIT \(batchSize))
                """)
        }
        // Attestation challenges that expired unused (v13).
        counts.attestationChallenges = try await batches(batchSize) { db in
            try db.run(
                """
                DELETE FROM attestation_challenges WHERE challenge_hash IN (
                    SELECT challenge_hash FROM attestation_challenges WHERE expires_at <= \(now) LIMIT \(batchSize))
                """)
        }
        counts.expiredTransfers = try await batches(batchSize) { db in
            try db.run(
                """
                UPDATE transfers SET state = 'expired', ended_at = expires_at
                WHERE rowid IN (SELECT rowid FROM transfers WHERE state = 'pending' AND expires_at <= \(now) LIMIT \(batchSize))
                """)
        }
        counts.endedTransfers = try await batches(batchSize) { db in
            try db.run(
                "DELETE FROM transfers WHERE rowid IN (SELECT rowid FROM transfers WHERE state <> 'pending' AND ended_at < \(since) LIMIT \(batchSize))")
        }
        counts.auditEvents = try await batches(batchSize) { db in
            try db.run("DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at < \(since) ORDER BY at LIMIT \(batchSize))")
        }
        counts.outbox = try await batches(batchSize) { db in
            try db.run(
                """
                DELETE FROM outbox WHERE seq IN (
                    SELECT seq FROM outbox
                    WHERE (kind = 'webhook' AND state = 'pending' AND attempts = 0 AND give_up_at <= \(now)) OR (state = 'failed' AND failed_at < \(since))
                    LIMIT \(batchSize))
                """)
        }
        let notificationsSince = cutoffs.appleNotificationsSince
        counts.appleNotifications = try await batches(batchSize) { db in
            try db.run(
                "DELETE FROM apple_notifications WHERE jti IN (SELECT jti FROM apple_notifications WHERE received_at < \(notificationsSince) LIMIT \(batchSize))")
        }
        if let retiredBefore = cutoffs.signingKeysRetiredBefore {
            counts.signingKeys = try await commits.write { db in
                try db.run("DELETE FROM signing_keys WHERE retired_at IS NOT NULL AND retired_at < \(retiredBefore)")
                return db.changesCount
            }
        }
        // Inactive accounts, each erased in a short write of its own, 16 in flight (a group
        // commit takes them together, as it takes concurrent logins); the WAL is checkpointed
        // once a batch rather than once an account.
        counts.inactiveAccounts = try await eraseInactiveAccounts(
            cutoffs, batchSize: min(batchSize, InactivityPolicy.batchSize), parallel: 16, erase: { [self] in try await apply($0).result },
            batchDone: { await eraseWAL() })
        return counts
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
