import Foundation
import PostgresNIO
import TransferCore
import TransferSQL

extension PostgresStore {
    /// The pruner. One node at a time: the first to take a session advisory lock prunes, the
    /// others find it taken and skip this round (nil). Every batch is a statement of its own
    /// (no long transaction); tables without an index for the condition are walked in key
    /// order, so every batch costs the same however much was pruned before it. Inactive accounts
    /// are erased last, one short transaction each (`SQLStore.eraseInactiveAccounts`).
    public func prune(_ cutoffs: PruneCutoffs, batchSize: Int) async throws -> PruneCounts? {
        try await withConnection { [self] conn in
            let key = Self.advisoryLockKey + 2
            guard try await one(conn, "SELECT pg_try_advisory_lock(\(key)) AS taken")?["taken"].decode(Bool.self) == true else {
                return nil
            }
            // The lock belongs to this pooled connection: if it cannot be released, the
            // connection is closed (which releases it) rather than returned holding it.
            func release() async {
                do { try await run(conn, "SELECT pg_advisory_unlock(\(key))") } catch { try? await conn.close() }
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

    private func prune(_ conn: PostgresConnection, _ cutoffs: PruneCutoffs, batchSize: Int) async throws -> PruneCounts {
        let now = cutoffs.now.milliseconds, since = cutoffs.retainedSince.milliseconds, limit = Int64(batchSize)
        var counts = PruneCounts()
        // Expired sessions lose their secrets, in windows of the primary key.
        var after = ("", "")
        while true {
            guard let row = try await one(conn, """
                WITH w AS (
                    SELECT device_id, account_id FROM device_accounts WHERE (device_id, account_id) > (\(after.0), \(after.1))
                    ORDER BY device_id, account_id LIMIT \(limit)
                ), x AS (
                    -- Rows a login or claim holds are skipped (next round), never waited for.
                    SELECT p.device_id, p.account_id FROM device_accounts p JOIN w USING (device_id, account_id)
                    WHERE p.session_id IS NOT NULL AND p.refresh_expires_at <= \(now)
                    FOR UPDATE OF p SKIP LOCKED
                ), u AS (
                    UPDATE device_accounts p SET \(unescaped: SQL.noSession.render(.postgres).text) FROM x
                    WHERE p.device_id = x.device_id AND p.account_id = x.account_id
                    RETURNING 1
                )
                SELECT (SELECT count(*) FROM u) AS n, last.device_id, last.account_id
                FROM (SELECT device_id, account_id FROM w ORDER BY device_id DESC, account_id DESC LIMIT 1) last
                """) else { break }
            counts.expiredSessions += Int(try row["n"].decode(Int64.self))
            after = (try row["device_id"].decode(String.self), try row["account_id"].decode(String.self))
        }
        counts.expiredSessions += try await batches(conn, limit, """
            WITH d AS (
                DELETE FROM sibling_sessions WHERE session_id IN (
                    SELECT session_id FROM sibling_sessions WHERE refresh_expires_at <= \(now) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
            ) SELECT count(*) AS n FROM d
            """)
        // Rotated refresh tokens that expired or whose session ended, in windows of the primary key.
        var afterToken = Data()
        while true {
            guard let row = try await one(conn, """
                WITH w AS (
                    SELECT token_hash FROM rotated_refresh_tokens WHERE token_hash > \(afterToken) ORDER BY token_hash LIMIT \(limit)
                ), d AS (
                    DELETE FROM rotated_refresh_tokens r USING w
                    WHERE r.token_hash = w.token_hash
                      AND (r.expires_at <= \(now)
                        OR (r.client_id IS NULL AND NOT EXISTS (
                          SELECT 1 FROM device_accounts p
                          WHERE p.device_id = r.device_id AND p.account_id = r.account_id AND p.session_id = r.session_id))
                        OR (r.client_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sibling_sessions s WHERE s.session_id = r.session_id)))
                    RETURNING 1
                )
                SELECT (SELECT count(*) FROM d) AS n, (SELECT token_hash FROM w ORDER BY token_hash DESC LIMIT 1) AS last
                """), let last = try row["last"].decode(Data?.self) else { break }
            counts.rotatedTokens += Int(try row["n"].decode(Int64.self))
            afterToken = last
        }
        counts.handoffCodes = try await batches(conn, limit, """
            WITH d AS (
                DELETE FROM handoff_codes WHERE code_hash IN (
                    SELECT code_hash FROM handoff_codes WHERE expires_at <= \(now) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
            ) SELECT count(*) AS n FROM d
            """)
        // Rate-limit windows that ended (a new event opens a new one).
        counts.rateSlots = try await batches(conn, limit, """
            WITH d AS (
                DELETE FROM rate_slots WHERE (kind, client) IN (
                    SELECT kind, client FROM rate_slots WHERE window_end <= \(now) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
            ) SELECT count(*) AS n FROM d
            """)
        // Attestation challenges that expired unused (v13).
        counts.attestationChallenges = try await batches(conn, limit, """
            WITH d AS (
                DELETE FROM attestation_challenges WHERE challenge_hash IN (
                    SELECT challenge_hash FROM attestation_challenges WHERE expires_at <= \(now) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
            ) SELECT count(*) AS n FROM d
            """)
        counts.expiredTransfers = try await batches(conn, limit, """
            WITH d AS (
                UPDATE transfers SET state = 'expired', ended_at = expires_at
                WHERE id IN (SELECT id FROM transfers WHERE state = 'pending' AND expires_at <= \(now) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
            ) SELECT count(*) AS n FROM d
            """)
        counts.endedTransfers = try await batches(conn, limit, """
            WITH d AS (
                DELETE FROM transfers WHERE id IN (SELECT id FROM transfers WHERE state <> 'pending' AND ended_at < \(since) LIMIT \(limit))
                RETURNING 1
            ) SELECT count(*) AS n FROM d
            """)
        counts.auditEvents = try await batches(conn, limit, """
            WITH d AS (
                DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at < \(since) ORDER BY at LIMIT \(limit))
                RETURNING 1
            ) SELECT count(*) AS n FROM d
            """)
        counts.outbox = try await batches(conn, limit, """
            WITH d AS (
                DELETE FROM outbox WHERE seq IN (
                    SELECT seq FROM outbox
                    WHERE (kind = 'webhook' AND state = 'pending' AND attempts = 0 AND give_up_at <= \(now)) OR (state = 'failed' AND failed_at < \(since))
                    LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
            ) SELECT count(*) AS n FROM d
            """)
        let notificationsSince = cutoffs.appleNotificationsSince.milliseconds
        counts.appleNotifications = try await batches(conn, limit, """
            WITH d AS (
                DELETE FROM apple_notifications WHERE jti IN (
                    SELECT jti FROM apple_notifications WHERE received_at < \(notificationsSince) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
            ) SELECT count(*) AS n FROM d
            """)
        if let retiredBefore = cutoffs.signingKeysRetiredBefore?.milliseconds {
            // A handful of rows: one statement, not batches.
            counts.signingKeys = Int(try await one(conn, """
                WITH d AS (DELETE FROM signing_keys WHERE retired_at IS NOT NULL AND retired_at < \(retiredBefore) RETURNING 1)
                SELECT count(*) AS n FROM d
                """)?["n"].decode(Int64.self) ?? 0)
        }
        // Inactive accounts, each erased in a transaction of its own on another pooled
        // connection (this one holds the pruner's lock), rechecked under the rows' locks; four
        // at a time, so the round hides round trips but leaves the pool to the logins.
        counts.inactiveAccounts = try await eraseInactiveAccounts(
            cutoffs, batchSize: min(batchSize, InactivityPolicy.batchSize), parallel: 4, erase: { [self] in try await execute($0) })
        return counts
    }

    /// Runs `query` (which answers `n`, the rows it changed, at most `limit`) until it changes fewer.
    private func batches(_ conn: PostgresConnection, _ limit: Int64, _ query: PostgresQuery) async throws -> Int {
        var changed = 0
        while true {
            let n = try await one(conn, query)?["n"].decode(Int64.self) ?? 0
            changed += Int(n)
            if n < limit { return changed }
        }
    }
}
