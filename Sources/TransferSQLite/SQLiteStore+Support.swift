import Foundation
import GRDB
import TransferCore

extension SQLiteStore: SupportStore {
    public func findAccounts(_ query: String) async throws -> [AccountMatch] {
        let q = query.trimmingCharacters(in: .whitespacesAndNewlines)
        let lower = q.lowercased()
        let emailKey = q.precomposedStringWithCanonicalMapping.lowercased()
        return try await pool.read { db in
            let rows = try db.all(
                """
                SELECT m.account_id, m.field, a.user_name FROM (
                    SELECT id AS account_id, 'accountId' AS field, 1 AS rank FROM accounts WHERE id = ?1
                    UNION ALL SELECT id, 'userName', 2 FROM accounts WHERE user_name = ?1
                    UNION ALL SELECT account_id, 'deviceId', 3 FROM device_accounts WHERE device_id = ?1
                    UNION ALL SELECT account_id, 'email', 4 FROM transfers WHERE email_key = ?2
                ) m JOIN accounts a ON a.id = m.account_id
                ORDER BY m.rank
                """, [lower, emailKey])
            var matches: [AccountMatch] = []
            for row in rows {
                let id: String = row["account_id"]
                // One line per account: the first way it matched, in the order above.
                guard !matches.contains(where: { $0.accountID == id }) else { continue }
                let field: AccountMatch.Field = try UnknownStoredValue.decode(row["field"], column: "field")
                matches.append(AccountMatch(accountID: id, userName: row["user_name"], matchedBy: field))
            }
            return matches
        }
    }

    public func report(accountID: String, at now: Timestamp, recentEvents: Int) async throws -> AccountReport? {
        try await pool.read { db in
            guard let account = try db.one("SELECT * FROM accounts WHERE id = ?", [accountID]) else { return nil }
            let devices = try db.all("SELECT device_id FROM device_accounts WHERE account_id = ? ORDER BY added_at, device_id", [accountID])
                .compactMap { try Self.device(db, $0["device_id"], at: now.milliseconds) }
            let transfer = try db.one("SELECT * FROM transfers WHERE account_id = ? AND state = 'pending'", [accountID]).map(Self.transfer)
            let events = try db.all(
                "SELECT * FROM (SELECT * FROM audit_events WHERE account_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id",
                [accountID, recentEvents]
            ).map(Self.event)
            let tokens = try db.all(
                """
                SELECT t.* FROM push_tokens t JOIN device_accounts p ON p.device_id = t.device_id
                WHERE p.account_id = ? AND p.state = 'active' ORDER BY t.device_id, t.provider
                """, [accountID]
            ).map(Self.pushToken)
            return AccountReport(
                accountID: accountID, userName: account["user_name"], createdAt: Timestamp(milliseconds: account["created_at"]),
                movedToDeviceID: account["moved_to_device_id"], devices: devices, transfer: transfer, recentEvents: events,
                pushTokens: tokens, apple: try db.one("SELECT * FROM apple_links WHERE account_id = ?", [accountID]).map(Self.appleLink),
                deletedAt: (account["deleted_at"] as Int64?).map(Timestamp.init(milliseconds:)),
                siblingSessions: try db.all(
                    "SELECT * FROM sibling_sessions WHERE account_id = ? ORDER BY device_id, client_id", [accountID]
                ).map(Self.siblingSession))
        }
    }

    public func history(accountID: String) async throws -> [AuditEvent] {
        try await pool.read { db in
            try db.all("SELECT * FROM audit_events WHERE account_id = ? ORDER BY id", [accountID]).map(Self.event)
        }
    }

    public func stats(at now: Timestamp) async throws -> SupportStats {
        try await pool.read { db in
            let t = now.milliseconds
            let dayAgo = t - 86_400_000
            let row = try db.one(
                """
                SELECT
                  (SELECT COUNT(*) FROM accounts WHERE deleted_at IS NULL) AS accounts,
                  (SELECT COUNT(*) FROM devices WHERE retired_at IS NULL) AS active_devices,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'pending' AND expires_at > ?1) AS pending,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'claimed') AS claimed,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'expired' OR (state = 'pending' AND expires_at <= ?1)) AS expired,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'cancelled') AS cancelled,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'voided') AS voided,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'pending' AND expires_at > ?1 AND locked_until > ?1) AS locked,
                  (SELECT COUNT(*) FROM audit_events WHERE kind = 'transfer.claimed' AND at > ?2) AS won,
                  (SELECT COUNT(*) FROM audit_events WHERE kind = 'transfer.claim_failed' AND at > ?2) AS failed
                """, [t, dayAgo])!
            return SupportStats(
                accounts: row["accounts"], activeDevices: row["active_devices"], transfersPending: row["pending"],
                transfersClaimed: row["claimed"], transfersExpired: row["expired"], transfersCancelled: row["cancelled"],
                transfersVoided: row["voided"], lockedNow: row["locked"], claimsWonLast24h: row["won"],
                claimsFailedLast24h: row["failed"])
        }
    }

    public func serviceKeys() async throws -> [ServiceKeyRecord] {
        try await pool.read { db in try db.all("SELECT * FROM service_keys ORDER BY created_at, name", []).map(Self.serviceKey) }
    }

    public func outbox(limit: Int) async throws -> [OutboxMessage] {
        try await pool.read { db in try db.all("SELECT * FROM outbox ORDER BY seq LIMIT ?", [limit]).map(Self.outboxMessage) }
    }

    static func event(_ row: Row) throws -> AuditEvent {
        AuditEvent(
            at: Timestamp(milliseconds: row["at"]), kind: try UnknownStoredValue.decode(row["kind"], column: "audit_events.kind"),
            accountID: row["account_id"], deviceID: row["device_id"], transferID: row["transfer_id"],
            actor: try Initiator(stored: row["actor"]),
            reason: row["reason"], clientAddress: row["client_address"])
    }
}
