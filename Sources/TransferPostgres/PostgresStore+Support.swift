import Foundation
import PostgresNIO
import TransferCore

extension PostgresStore: SupportStore {
    public func findAccounts(_ query: String) async throws -> [AccountMatch] {
        let q = query.trimmingCharacters(in: .whitespacesAndNewlines)
        let lower = q.lowercased()
        let emailKey = q.precomposedStringWithCanonicalMapping.lowercased()
        return try await withConnection { [self] conn in
            let rows = try await all(conn, """
                SELECT m.account_id, m.field, a.user_name FROM (
                    SELECT id AS account_id, 'accountId' AS field, 1 AS rank FROM accounts WHERE id = \(lower)
                    UNION ALL SELECT id, 'userName', 2 FROM accounts WHERE user_name = \(lower)
                    UNION ALL SELECT account_id, 'deviceId', 3 FROM device_accounts WHERE device_id = \(lower)
                    UNION ALL SELECT account_id, 'email', 4 FROM transfers WHERE email_key = \(emailKey)
                ) m JOIN accounts a ON a.id = m.account_id
                ORDER BY m.rank
                """)
            var matches: [AccountMatch] = []
            for row in rows {
                let id = try row["account_id"].decode(String.self)
                guard !matches.contains(where: { $0.accountID == id }) else { continue }
                let field: AccountMatch.Field = try UnknownStoredValue.decode(try row["field"].decode(String.self), column: "field")
                matches.append(AccountMatch(accountID: id, userName: try row["user_name"].decode(String.self), matchedBy: field))
            }
            return matches
        }
    }

    public func report(accountID: String, at now: Timestamp, recentEvents: Int) async throws -> AccountReport? {
        try await withConnection { [self] conn in
            guard let account = try await one(conn, "SELECT * FROM accounts WHERE id = \(accountID)") else { return nil }
            var devices: [DeviceRecord] = []
            for row in try await all(conn, "SELECT device_id FROM device_accounts WHERE account_id = \(accountID) ORDER BY added_at, device_id") {
                if let device = try await device(conn, try row["device_id"].decode(String.self), at: now, lock: false) { devices.append(device) }
            }
            let transfer = try await one(conn, "SELECT * FROM transfers WHERE account_id = \(accountID) AND state = 'pending'").map(Self.transfer)
            let events = try await all(conn, """
                SELECT * FROM (SELECT * FROM audit_events WHERE account_id = \(accountID) ORDER BY id DESC LIMIT \(recentEvents)) e ORDER BY id
                """).map(Self.event)
            let tokens = try await all(conn, """
                SELECT t.* FROM push_tokens t JOIN device_accounts p ON p.device_id = t.device_id
                WHERE p.account_id = \(accountID) AND p.state = 'active' ORDER BY t.device_id, t.provider
                """).map(Self.pushToken)
            return AccountReport(
                accountID: accountID, userName: try account["user_name"].decode(String.self),
                createdAt: Timestamp(milliseconds: try account["created_at"].decode(Int64.self)),
                movedToDeviceID: try account["moved_to_device_id"].decode(String?.self), devices: devices, transfer: transfer, recentEvents: events,
                pushTokens: tokens, apple: try await one(conn, "SELECT * FROM apple_links WHERE account_id = \(accountID)").map(Self.appleLink),
                deletedAt: try account["deleted_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
                siblingSessions: try await all(
                    conn, "SELECT * FROM sibling_sessions WHERE account_id = \(accountID) ORDER BY device_id, client_id"
                ).map(Self.siblingSession))
        }
    }

    public func serviceKeys() async throws -> [ServiceKeyRecord] {
        try await withConnection { [self] conn in
            try await all(conn, "SELECT * FROM service_keys ORDER BY created_at, name").map(Self.serviceKey)
        }
    }

    public func outbox(limit: Int) async throws -> [OutboxMessage] {
        try await withConnection { [self] conn in
            try await all(conn, "SELECT * FROM outbox ORDER BY seq LIMIT \(limit)").map(Self.outboxMessage)
        }
    }

    public func history(accountID: String) async throws -> [AuditEvent] {
        try await withConnection { [self] conn in
            try await all(conn, "SELECT * FROM audit_events WHERE account_id = \(accountID) ORDER BY id").map(Self.event)
        }
    }

    public func stats(at now: Timestamp) async throws -> SupportStats {
        try await withConnection { [self] conn in
            let t = now.milliseconds
            let dayAgo = t - 86_400_000
            guard let row = try await one(conn, """
                SELECT
                  (SELECT COUNT(*) FROM accounts WHERE deleted_at IS NULL) AS accounts,
                  (SELECT COUNT(*) FROM devices WHERE retired_at IS NULL) AS active_devices,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'pending' AND expires_at > \(t)) AS pending,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'claimed') AS claimed,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'expired' OR (state = 'pending' AND expires_at <= \(t))) AS expired,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'cancelled') AS cancelled,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'voided') AS voided,
                  (SELECT COUNT(*) FROM transfers WHERE state = 'pending' AND expires_at > \(t) AND locked_until > \(t)) AS locked,
                  (SELECT COUNT(*) FROM audit_events WHERE kind = 'transfer.claimed' AND at > \(dayAgo)) AS won,
                  (SELECT COUNT(*) FROM audit_events WHERE kind = 'transfer.claim_failed' AND at > \(dayAgo)) AS failed
                """) else { throw MissingSchema() }
            func n(_ name: String) throws -> Int { Int(try row[name].decode(Int64.self)) }
            return SupportStats(
                accounts: try n("accounts"), activeDevices: try n("active_devices"), transfersPending: try n("pending"),
                transfersClaimed: try n("claimed"), transfersExpired: try n("expired"), transfersCancelled: try n("cancelled"),
                transfersVoided: try n("voided"), lockedNow: try n("locked"), claimsWonLast24h: try n("won"), claimsFailedLast24h: try n("failed"))
        }
    }

    static func event(_ row: PostgresRandomAccessRow) throws -> AuditEvent {
        AuditEvent(
            at: Timestamp(milliseconds: try row["at"].decode(Int64.self)),
            kind: try UnknownStoredValue.decode(try row["kind"].decode(String.self), column: "audit_events.kind"),
            accountID: try row["account_id"].decode(String?.self), deviceID: try row["device_id"].decode(String?.self),
            transferID: try row["transfer_id"].decode(String?.self), actor: try Initiator(stored: try row["actor"].decode(String.self)),
            reason: try row["reason"].decode(String?.self), clientAddress: try row["client_address"].decode(String?.self))
    }
}
