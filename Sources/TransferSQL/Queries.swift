import TransferCore

// The few places where the dialects differ, each spelled once.
extension SQLText {
    /// Locks the rows read until the transaction ends. PostgreSQL: `FOR UPDATE`, so concurrent
    /// operations on any node serialise on them. SQLite: nothing, its writer holds the only write lock.
    public static let forUpdate = SQLText(sqlite: "", postgres: " FOR UPDATE")
    /// `forUpdate` for a join: only the pair rows (`p`) are locked.
    public static let forUpdateOfPairs = SQLText(sqlite: "", postgres: " FOR UPDATE OF p")
    /// `forUpdate` for a join on push tokens (`t`): the device's pairs (the outer join's side) are not locked.
    public static let forUpdateOfTokens = SQLText(sqlite: "", postgres: " FOR UPDATE OF t")
    /// `forUpdate`, skipping rows another transaction holds instead of waiting for them.
    public static let forUpdateSkipLocked = SQLText(sqlite: "", postgres: " FOR UPDATE SKIP LOCKED")
    /// A NULL the union's other branches type as text (PostgreSQL cannot guess it).
    public static let nullText = SQLText(sqlite: "NULL", postgres: "NULL::text")

    /// The session columns of `device_accounts`, cleared.
    public static let noSession: SQLText = """
        session_id = NULL, session_started_at = NULL, refresh_hash = NULL, refresh_generation = NULL,
        refresh_expires_at = NULL, key_by_device = NULL, key_by_token = NULL
        """

    /// Account `a`'s migration flag at `now`: a pending transfer that has not expired
    /// (`TransferRecord.isOpen(at:)` in SQL).
    public static func migrationFlag(at now: Timestamp) -> SQLText { migrationFlag(now: "\(now)") }

    /// The same with `now` given as SQL: PostgreSQL's prepared login statement passes its own
    /// parameter (`"$2"`), so the flag is written here once for every statement that answers it.
    public static func migrationFlag(now: SQLText) -> SQLText {
        "EXISTS (SELECT 1 FROM transfers t WHERE t.account_id = a.id AND t.state = 'pending' AND t.expires_at > \(now))"
    }
}

/// The read statements outside facts, written once; the decoders are in `Rows`.
public enum Queries {
    /// 1 when the account has an open (pending, unexpired) transfer, else 0: its migration flag.
    public static func openTransferCount(accountID: String, at now: Timestamp) -> SQLText {
        "SELECT CASE WHEN \(SQLText.migrationFlag(at: now)) THEN 1 ELSE 0 END AS open FROM accounts a WHERE a.id = \(accountID)"
    }

    public static func device(_ id: String, lock: Bool) -> SQLText {
        "SELECT * FROM devices WHERE id = \(id)\(lock ? SQLText.forUpdate : "")"
    }

    /// A device's pairs, oldest first, each with its account's name, deletion and migration flag.
    public static func pairs(ofDevice id: String, at now: Timestamp, lock: Bool) -> SQLText {
        """
        SELECT p.*, a.user_name, a.deleted_at IS NOT NULL AS deleted, \(SQLText.migrationFlag(at: now)) AS flag
        FROM device_accounts p JOIN accounts a ON a.id = p.account_id
        WHERE p.device_id = \(id) ORDER BY p.added_at, p.account_id\(lock ? SQLText.forUpdateOfPairs : "")
        """
    }

    /// Account `a` is inactive at `now`, protection aside: not deleted, no pair of it bound,
    /// logged in or ended (moved away) since `before`, no device still holding it that logged
    /// in since then with any account, no open transfer (no migration flag), no Apple link.
    /// The same rule as `EraseInactiveAccountCommand.keeps`, which checks it again under lock.
    /// Each condition is a lookup by account (the pairs', transfers' and Apple links' account
    /// indexes) or, for a device's other pairs, by device (the pairs' primary key).
    static func inactive(before: Timestamp, at now: Timestamp) -> SQLText {
        """
        a.deleted_at IS NULL AND a.created_at < \(before)
          AND NOT EXISTS (
            SELECT 1 FROM device_accounts p
            WHERE p.account_id = a.id AND (COALESCE(p.last_login_at, p.added_at) >= \(before) OR p.ended_at >= \(before)
              OR (p.ended_at IS NULL AND EXISTS (
                SELECT 1 FROM device_accounts q WHERE q.device_id = p.device_id AND COALESCE(q.last_login_at, q.added_at) >= \(before)))))
          AND NOT \(SQLText.migrationFlag(at: now))
          AND NOT EXISTS (SELECT 1 FROM apple_links l WHERE l.account_id = a.id)
        """
    }

    /// The pruner's candidates, read without locking: the next `limit` accounts after `after`
    /// in id order (a window of the primary key), each with whether it is inactive and not
    /// protected. The window is a subquery, so that PostgreSQL plans the rule for its `limit`
    /// rows (an index lookup by account each) and every window costs the same however many
    /// accounts come before it; as a filter on the whole table, or evaluated on a plain
    /// `LIMIT`ed scan, it merged or hashed the whole pairs table in each batch.
    public static func inactiveWindow(before: Timestamp, at now: Timestamp, after: String, limit: Int) -> SQLText {
        """
        SELECT a.id, (a.protected_at IS NULL AND \(inactive(before: before, at: now))) AS inactive
        FROM (SELECT id FROM accounts WHERE id > \(after) ORDER BY id LIMIT \(limit)) w JOIN accounts a ON a.id = w.id
        ORDER BY a.id
        """
    }

    /// `transfer inactive`: the inactive accounts, erasable and protected, and every protected account.
    public static func inactiveCounts(before: Timestamp, at now: Timestamp) -> SQLText {
        """
        SELECT COALESCE(SUM(CASE WHEN a.protected_at IS NULL THEN 1 ELSE 0 END), 0) AS erasable,
               COALESCE(SUM(CASE WHEN a.protected_at IS NULL THEN 0 ELSE 1 END), 0) AS protected_inactive,
               (SELECT COUNT(*) FROM accounts WHERE protected_at IS NOT NULL AND deleted_at IS NULL) AS protected
        FROM accounts a WHERE \(inactive(before: before, at: now))
        """
    }

    /// Serialises writers that read the signing keys: nodes starting together on an empty
    /// table, one inserts the key and the others then read it. PostgreSQL only: SQLite's
    /// writer is already alone.
    public static let signingKeysLock: SQLText = "SELECT pg_advisory_xact_lock(\(advisoryLockKey + 1))"
    /// The first of this service's PostgreSQL advisory lock keys ("transfer"): + 0 migrations,
    /// + 1 signing keys, + 2 the pruner.
    public static let advisoryLockKey: Int64 = 0x7472_616E_7366_6572

    // Reads outside operations, each a single statement (the facts operations read are
    // declared in `FactSQL.swift`).

    public static func serviceKey(hash: SecretHash) -> SQLText { "SELECT * FROM service_keys WHERE key_hash = \(hash)" }

    public static func openSession(sessionID: String, accountID: String, deviceID: String, clientID: String?) -> SQLText {
        if let clientID {
            // A sibling session exists only while its pair is active (the schema's triggers).
            return """
                SELECT 1 AS open FROM sibling_sessions
                WHERE device_id = \(deviceID) AND account_id = \(accountID) AND client_id = \(clientID) AND session_id = \(sessionID)
                """
        }
        return """
            SELECT 1 AS open FROM device_accounts
            WHERE device_id = \(deviceID) AND account_id = \(accountID) AND state = 'active' AND session_id = \(sessionID)
            """
    }

    /// The push tokens of the devices these accounts are active on, with what
    /// `DeviceRecord.routesPushes(pushEnabled:mode:isCurrent:)` decides by (`Rows.pushRoute` applies it,
    /// reading the columns by position: keep their order).
    public static func pushRoutes(accountIDs: [String]) -> SQLText {
        """
        SELECT t.provider, t.token, t.environment, t.device_id, p.account_id,
               p.push_enabled, d.push_mode, CASE WHEN d.current_account_id = p.account_id THEN 1 ELSE 0 END AS is_current
        FROM \(idTable: accountIDs)
        JOIN device_accounts p ON p.account_id = j.value AND p.state = 'active'
        JOIN devices d ON d.id = p.device_id
        JOIN push_tokens t ON t.device_id = p.device_id
        ORDER BY t.device_id, t.provider, p.account_id
        """
    }

    public static func outboxStats(kind: OutboxKind) -> SQLText {
        """
        SELECT COUNT(*) FILTER (WHERE state = 'pending') AS pending, COUNT(*) FILTER (WHERE state = 'failed') AS failed,
               MIN(created_at) FILTER (WHERE state = 'pending') AS oldest
        FROM outbox WHERE kind = \(kind)
        """
    }

    public static func pendingTransfer(emailKey: String) -> SQLText { "SELECT * FROM transfers WHERE email_key = \(emailKey) AND state = 'pending'" }

    /// The latest transfer of the email that the device claimed (its claim may be repeated).
    public static func claimedTransfer(emailKey: String, by device: String) -> SQLText {
        """
        SELECT * FROM transfers
        WHERE claimed_by_device = \(device) AND email_key = \(emailKey) AND state = 'claimed'
        ORDER BY ended_at DESC LIMIT 1
        """
    }

    // Support (the `transfer` command line).

    /// Accounts `query` names, the first way each matched first.
    public static func findAccounts(lower: String, emailKey: String) -> SQLText {
        """
        SELECT m.account_id, m.field, a.user_name FROM (
            SELECT id AS account_id, 'accountId' AS field, 1 AS rank FROM accounts WHERE id = \(lower)
            UNION ALL SELECT id, 'userName', 2 FROM accounts WHERE user_name = \(lower)
            UNION ALL SELECT account_id, 'deviceId', 3 FROM device_accounts WHERE device_id = \(lower)
            UNION ALL SELECT account_id, 'email', 4 FROM transfers WHERE email_key = \(emailKey)
            UNION ALL SELECT account_id, 'appleEmail', 5 FROM apple_links WHERE lower(email) = \(emailKey)
        ) m JOIN accounts a ON a.id = m.account_id
        ORDER BY m.rank
        """
    }

    public static func history(ofAccount id: String) -> SQLText { "SELECT * FROM audit_events WHERE account_id = \(id) ORDER BY id" }

    public static func stats(at now: Timestamp) -> SQLText {
        let dayAgo = now - .seconds(86_400)
        return """
            SELECT
              (SELECT COUNT(*) FROM accounts WHERE deleted_at IS NULL) AS accounts,
              (SELECT COUNT(*) FROM devices WHERE retired_at IS NULL) AS active_devices,
              (SELECT COUNT(*) FROM transfers WHERE state = 'pending' AND expires_at > \(now)) AS pending,
              (SELECT COUNT(*) FROM transfers WHERE state = 'claimed') AS claimed,
              (SELECT COUNT(*) FROM transfers WHERE state = 'expired' OR (state = 'pending' AND expires_at <= \(now))) AS expired,
              (SELECT COUNT(*) FROM transfers WHERE state = 'cancelled') AS cancelled,
              (SELECT COUNT(*) FROM transfers WHERE state = 'voided') AS voided,
              (SELECT COUNT(*) FROM transfers WHERE state = 'pending' AND expires_at > \(now) AND locked_until > \(now)) AS locked,
              (SELECT COUNT(*) FROM audit_events WHERE kind IN ('transfer.claimed', 'recovery_code.used', 'backup_key.used') AND at > \(dayAgo)) AS won,
              (SELECT CAST(COALESCE(SUM(repeats), 0) AS BIGINT) FROM audit_events WHERE kind = 'transfer.claim_failed' AND at > \(dayAgo)) AS failed,
              (SELECT COUNT(*) FROM audit_events WHERE kind = 'account.created' AND at > \(dayAgo)
                 AND reason LIKE 'attestation: verified%') AS created_verified,
              (SELECT COUNT(*) FROM audit_events WHERE kind = 'account.created' AND at > \(dayAgo)
                 AND reason = 'attestation: missing') AS created_missing,
              (SELECT COUNT(*) FROM audit_events WHERE kind = 'account.created' AND at > \(dayAgo)
                 AND reason LIKE 'attestation: failed%') AS created_failed,
              (SELECT COUNT(*) FROM audit_events WHERE kind = 'account.created' AND at > \(dayAgo) AND reason IS NULL) AS created_unchecked
            """
    }

    public static let serviceKeys: SQLText = "SELECT * FROM service_keys ORDER BY created_at, name"
    public static func outbox(limit: Int) -> SQLText { "SELECT * FROM outbox ORDER BY seq LIMIT \(limit)" }
}
