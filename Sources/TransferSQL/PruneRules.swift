import TransferCore

/// One thing the pruner removes or clears, declared once for both stores: the table, which
/// rows, what is done to them, and which `PruneCounts` field counts them. A store only
/// batches: SQLite in short writes through its group commit, PostgreSQL in statements of
/// their own that skip rows a request holds. Inactive accounts are no rule: each is erased
/// as `DELETE /v1/me` erases one (`SQLStore.eraseInactiveAccounts`).
public struct PruneRule: Sendable {
    /// What happens to a row that meets the condition.
    public enum Change: Sendable {
        case delete
        /// `UPDATE … SET` these assignments: the row stays (a pair keeps its history).
        case update(SQLText)
    }

    /// How the rows are found, which decides how a store walks them.
    public enum Walk: Sendable {
        /// An index serves the condition: batches of the first matching rows (in `orderBy`,
        /// when given) until a batch finds fewer than it may take.
        case byCondition(orderBy: SQLText? = nil)
        /// No index serves the condition: the table is walked in windows of its key (SQLite:
        /// of its rowid), so every batch costs the same however much was pruned before it.
        case inKeyWindows
        /// A handful of rows: one statement.
        case atOnce
    }

    /// A column of the key that names a row (its primary key, or a unique one).
    public struct KeyColumn: Sendable {
        public enum Kind: Sendable { case text, blob, integer }
        public let name: String
        public let kind: Kind
        public static func text(_ name: String) -> KeyColumn { KeyColumn(name: name, kind: .text) }
        public static func blob(_ name: String) -> KeyColumn { KeyColumn(name: name, kind: .blob) }
        public static func integer(_ name: String) -> KeyColumn { KeyColumn(name: name, kind: .integer) }
        /// The column in a statement.
        public var column: SQLText { SQLText(stringLiteral: name) }
        /// A value below every key, where a walk in key order starts.
        public var lowest: SQLValue {
            switch kind {
            case .text: .text("")
            case .blob: .blob([])
            case .integer: .integer(.min)
            }
        }
    }

    public let table: String
    public let key: [KeyColumn]
    public let change: Change
    public let walk: Walk
    /// Requests lock these rows (a login's pair, a transfer being claimed): PostgreSQL skips
    /// the locked ones, left to the next round, rather than have the pruner wait behind requests.
    public let skipsLocked: Bool
    /// The field of `PruneCounts` the rows changed add to.
    public let counts: WritableKeyPath<PruneCounts, Int> & Sendable
    /// The rows' condition at these cutoffs, its columns unqualified or qualified with the
    /// table's own name (never an alias: each store writes its own statement around it);
    /// nil: this round leaves the table alone.
    public let condition: @Sendable (PruneCutoffs) -> SQLText?

    /// The table in a statement.
    public var tableName: SQLText { SQLText(stringLiteral: table) }
}

extension PruneRule {
    /// Every rule, in the order a round applies them (`PruneCutoffs` says what each keeps).
    /// Adding one: a rule here, a `PruneCounts` field if it counts something new, and a case
    /// in `PrunerTests` on both stores.
    public static let all: [PruneRule] = [
        // Expired sessions lose their secrets; the pair stays.
        PruneRule(
            table: "device_accounts", key: [.text("device_id"), .text("account_id")], change: .update(SQLText.noSession),
            walk: .inKeyWindows, skipsLocked: true, counts: \.expiredSessions
        ) { "session_id IS NOT NULL AND refresh_expires_at <= \($0.now)" },
        // Sibling apps' sessions are rows of their own: an expired one goes.
        PruneRule(
            table: "sibling_sessions", key: [.text("session_id")], change: .delete,
            walk: .byCondition(), skipsLocked: true, counts: \.expiredSessions
        ) { "refresh_expires_at <= \($0.now)" },
        // Rotated refresh tokens that expired, or whose session ended.
        PruneRule(
            table: "rotated_refresh_tokens", key: [.blob("token_hash")], change: .delete,
            walk: .inKeyWindows, skipsLocked: false, counts: \.rotatedTokens
        ) {
            """
            expires_at <= \($0.now)
              OR (client_id IS NULL AND NOT EXISTS (
                SELECT 1 FROM device_accounts p
                WHERE p.device_id = rotated_refresh_tokens.device_id AND p.account_id = rotated_refresh_tokens.account_id
                  AND p.session_id = rotated_refresh_tokens.session_id))
              OR (client_id IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM sibling_sessions s WHERE s.session_id = rotated_refresh_tokens.session_id))
            """
        },
        PruneRule(
            table: "handoff_codes", key: [.blob("code_hash")], change: .delete,
            walk: .byCondition(), skipsLocked: true, counts: \.handoffCodes
        ) { "expires_at <= \($0.now)" },
        // Rate-limit rows whose time has passed: the key's budget is whole again (a new event makes a new row).
        PruneRule(
            table: "rate_slots", key: [.text("kind"), .text("client")], change: .delete,
            walk: .byCondition(), skipsLocked: true, counts: \.rateSlots
        ) { "window_end <= \($0.now)" },
        // Attestation challenges that expired unused.
        PruneRule(
            table: "attestation_challenges", key: [.blob("challenge_hash")], change: .delete,
            walk: .byCondition(), skipsLocked: true, counts: \.attestationChallenges
        ) { "expires_at <= \($0.now)" },
        // Pending transfers past their expiry are marked expired, ended at their expiry.
        PruneRule(
            table: "transfers", key: [.text("id")], change: .update("state = 'expired', ended_at = expires_at"),
            walk: .byCondition(), skipsLocked: true, counts: \.expiredTransfers
        ) { "state = 'pending' AND expires_at <= \($0.now)" },
        // Ended transfers and audit events past the retention. A claimed transfer stays while
        // the account is on the device that claimed it by that claim (the pair came then): it is
        // the proof of the winner's repeat, which lasts as long (contract v1.3, `ClaimRepeat`).
        PruneRule(
            table: "transfers", key: [.text("id")], change: .delete,
            walk: .byCondition(), skipsLocked: false, counts: \.endedTransfers
        ) {
            """
            state <> 'pending' AND ended_at < \($0.retainedSince)
              AND NOT (state = 'claimed' AND EXISTS (
                SELECT 1 FROM device_accounts p
                WHERE p.device_id = transfers.claimed_by_device AND p.account_id = transfers.account_id
                  AND p.state = 'active' AND p.added_at = transfers.ended_at))
            """
        },
        PruneRule(
            table: "audit_events", key: [.integer("id")], change: .delete,
            walk: .byCondition(orderBy: "at"), skipsLocked: false, counts: \.auditEvents
        ) { "at < \($0.retainedSince)" },
        // Webhook events no worker attempted within their three days (no `--webhook-url`),
        // and failed messages past the retention.
        PruneRule(
            table: "outbox", key: [.integer("seq")], change: .delete,
            walk: .byCondition(), skipsLocked: true, counts: \.outbox
        ) {
            """
            (kind = 'webhook' AND state = 'pending' AND attempts = 0 AND give_up_at <= \($0.now))
            OR (state = 'failed' AND failed_at < \($0.retainedSince))
            """
        },
        PruneRule(
            table: "apple_notifications", key: [.text("jti")], change: .delete,
            walk: .byCondition(), skipsLocked: true, counts: \.appleNotifications
        ) { "received_at < \($0.appleNotificationsSince)" },
        // Signing keys retired long enough ago that no token they signed is still valid.
        PruneRule(
            table: "signing_keys", key: [.text("kid")], change: .delete,
            walk: .atOnce, skipsLocked: false, counts: \.signingKeys
        ) { cutoffs in cutoffs.signingKeysRetiredBefore.map { "retired_at IS NOT NULL AND retired_at < \($0)" } },
    ]
}
