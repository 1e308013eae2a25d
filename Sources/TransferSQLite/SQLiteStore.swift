import Foundation
import GRDB
import TransferCore

/// The embedded store: SQLite through GRDB, one `DatabasePool` in WAL mode.
/// Every `TransferStore` method is one `read`, or one write applied atomically in a savepoint
/// of a transaction it may share with concurrent writes (`GroupCommit`), with cached
/// statements, so a request touches the database once.
public final class SQLiteStore: TransferStore {
    public let pool: DatabasePool
    /// Every write goes through here: concurrent requests share a transaction (see `GroupCommit`).
    let commits: GroupCommit
    private let checkpointer: Checkpointer

    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    public init(path: String) throws {
        var config = Configuration()
        // Writers queue behind each other instead of failing with "database is locked",
        // also when the support CLI writes to the same file.
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            // WAL + NORMAL: a committed transaction survives a crash of the process;
            // an OS crash or power loss may lose the last commits, never corrupt the file.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            if !db.configuration.readonly {
                // Deleted rows and replaced values are overwritten in the file, not left in free
                // space: an erased account's email and addresses must not stay readable in it.
                try db.execute(sql: "PRAGMA secure_delete = ON")
                // `Checkpointer` copies WAL pages off the writer and has the writer restart the
                // WAL past 4 000 frames (16 MiB); SQLite's own checkpoint on commit is only the
                // last resort, should that thread ever stall (256 MiB).
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 65536")
                // Every login touches a few random index pages; with SQLite's default 2 MiB
                // cache the writer re-read them with pread (6 % of server CPU in the profile).
                try db.execute(sql: "PRAGMA cache_size = -32768")
            }
        }
        pool = try DatabasePool(path: path, configuration: config)
        commits = GroupCommit(writer: pool)
        try Self.migrator.migrate(pool)
        checkpointer = try Checkpointer(
            path: path, interval: .milliseconds(25), commits: commits, writer: pool, restartFrames: 4000)
    }

    public func close() throws {
        try checkpointer.stop()
        try pool.close()
    }

    /// Versioned migrations, `Resources/migrations/vN.sql`, compiled into the binary (SwiftPM's
    /// `embedInCode`: no resource bundle to deploy beside it); a new schema change is a new file
    /// appended here. `schema.sql` at the repository's root is the schema they add up to.
    static let migrations: [(version: String, sql: [UInt8])] = [
        ("v1", PackageResources.v1_sql), ("v2", PackageResources.v2_sql), ("v3", PackageResources.v3_sql),
        ("v4", PackageResources.v4_sql), ("v5", PackageResources.v5_sql), ("v6", PackageResources.v6_sql),
        ("v7", PackageResources.v7_sql), ("v8", PackageResources.v8_sql),
    ]

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for (version, sql) in migrations {
            migrator.registerMigration(version) { db in try db.execute(sql: String(decoding: sql, as: UTF8.self)) }
        }
        return migrator
    }

    // MARK: Operations

    public func execute<Operation: StoreOperation>(_ operation: Operation) async throws -> Operation.Result {
        let (result, erased) = try await commits.write { db in
            let plan = operation.plan(try Self.read(db, operation.reads, at: operation.now))
            for effect in plan.effects { try Self.apply(effect, to: db) }
            return (plan.result, plan.effects.contains { if case .eraseAccount = $0 { true } else { false } })
        }
        if erased { await eraseWAL() }
        return result
    }

    /// After an account is erased, the WAL still holds the pages as they were before: copy it
    /// into the database file (where `secure_delete` zeroed what was deleted) and truncate it.
    /// Best effort: a reader holding an old snapshot makes it retry, then give up (the WAL is
    /// overwritten as it is reused).
    func eraseWAL() async {
        for _ in 0..<20 {
            if (try? await pool.writeWithoutTransaction({ db in try db.checkpoint(.truncate) })) != nil { return }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Reads what an operation depends on. The writer holds the only write lock, so nothing
    /// read here changes before the effects are applied.
    static func read(_ db: Database, _ reads: Reads, at now: Timestamp) throws -> Facts {
        var facts = Facts()
        let t = now.milliseconds
        if let id = reads.transfer {
            facts.transfer = try db.one("SELECT * FROM transfers WHERE id = ?", [id]).map(transfer)
        }
        if let q = reads.pendingTransfers {
            facts.pendingTransfers = try db.all(
                "SELECT * FROM transfers WHERE state = 'pending' AND (account_id = ? OR email_key = ?) ORDER BY created_at, id",
                [q.accountID, q.emailKey]
            ).map(transfer)
        }
        if let hash = reads.refreshToken {
            facts.refreshToken = try db.one(
                """
                SELECT device_id, account_id, session_id, NULL AS client_id FROM device_accounts WHERE refresh_hash = ?1
                UNION ALL
                SELECT device_id, account_id, session_id, client_id FROM sibling_sessions WHERE refresh_hash = ?1
                UNION ALL
                SELECT device_id, account_id, session_id, client_id FROM rotated_refresh_tokens WHERE token_hash = ?1
                LIMIT 1
                """, [Data(hash.bytes)]
            ).map {
                RefreshTokenLookup(deviceID: $0["device_id"], accountID: $0["account_id"], sessionID: $0["session_id"], clientID: $0["client_id"])
            }
            if let lookup = facts.refreshToken {
                facts.device = try device(db, lookup.deviceID, at: t)
                if let client = lookup.clientID {
                    facts.siblingSession = try db.one(
                        "SELECT * FROM sibling_sessions WHERE device_id = ? AND account_id = ? AND client_id = ?",
                        [lookup.deviceID, lookup.accountID, client]
                    ).map(siblingSession)
                }
            }
        }
        if let hash = reads.handoffCode {
            facts.handoffCode = try db.one("SELECT * FROM handoff_codes WHERE code_hash = ?", [Data(hash.bytes)]).map(handoffCode)
            if let code = facts.handoffCode { facts.device = try device(db, code.deviceID, at: t) }
        }
        if let id = reads.device {
            facts.device = try device(db, id, at: t)
        }
        if let account = reads.accountDevices {
            facts.accountDevices = try db.all(
                "SELECT device_id FROM device_accounts WHERE account_id = ? AND state = 'active'", [account]
            ).compactMap { try device(db, $0["device_id"], at: t) }
        }
        if let account = reads.account,
            let row = try db.one("SELECT a.user_name, a.deleted_at, \(migrationFlag) AS flag FROM accounts a WHERE a.id = ?", [t, account])
        {
            facts.account = SessionAccount(accountID: account, userName: row["user_name"], migrationFlag: row["flag"])
            facts.accountDeletedAt = (row["deleted_at"] as Int64?).map(Timestamp.init(milliseconds:))
        }
        if reads.signingKeys {
            facts.signingKeys = try db.all(Self.signingKeysQuery, []).map(Self.signingKey)
        }
        if let name = reads.serviceKey {
            facts.serviceKey = try db.one("SELECT * FROM service_keys WHERE name = ?", [name]).map(serviceKey)
        }
        if let hash = reads.appleNonce {
            facts.appleNonceExpiresAt = try db.one("SELECT expires_at FROM apple_nonces WHERE nonce_hash = ?", [Data(hash.bytes)])
                .map { Timestamp(milliseconds: $0["expires_at"]) }
        }
        if let sub = reads.appleSub {
            facts.appleLinkBySub = try db.one("SELECT * FROM apple_links WHERE sub = ?", [sub]).map(appleLink)
        }
        if let account = reads.appleLink {
            facts.appleLink = try db.one("SELECT * FROM apple_links WHERE account_id = ?", [account]).map(appleLink)
        }
        if let jti = reads.appleNotification {
            facts.appleNotificationSeen = try db.one("SELECT 1 FROM apple_notifications WHERE jti = ?", [jti]) != nil
        }
        if let q = reads.dueOutbox {
            facts.dueOutbox = try db.all(
                """
                SELECT * FROM outbox o
                WHERE o.kind = ?1 AND o.state = 'pending' AND o.next_attempt_at <= ?2 AND (o.leased_until IS NULL OR o.leased_until <= ?2)
                  AND NOT EXISTS (
                    SELECT 1 FROM outbox p WHERE p.kind = o.kind AND p.account_id = o.account_id AND p.state = 'pending' AND p.seq < o.seq)
                ORDER BY o.seq LIMIT ?3
                """, [q.kind.rawValue, t, q.limit]
            ).map(outboxMessage)
        }
        if let id = reads.outboxMessage {
            facts.outboxMessage = try db.one("SELECT * FROM outbox WHERE id = ?", [id]).map(outboxMessage)
        }
        if reads.failedOutbox {
            facts.failedOutbox = try db.all("SELECT * FROM outbox WHERE state = 'failed' ORDER BY seq", []).map(outboxMessage)
        }
        return facts
    }

    /// A device with every account it holds or held, oldest first.
    static func device(_ db: Database, _ id: String, at t: Int64) throws -> DeviceRecord? {
        guard let row = try db.one("SELECT * FROM devices WHERE id = ?", [id]) else { return nil }
        let accounts = try db.all(
            """
            SELECT p.*, a.user_name, a.deleted_at IS NOT NULL AS deleted, \(migrationFlag) AS flag
            FROM device_accounts p JOIN accounts a ON a.id = p.account_id
            WHERE p.device_id = ? ORDER BY p.added_at, p.account_id
            """, [t, id]
        ).map(pair)
        return DeviceRecord(
            id: id, secretHash: SecretHash(bytes: [UInt8](row["secret_hash"] as Data)), createdAt: Timestamp(milliseconds: row["created_at"]),
            currentAccountID: row["current_account_id"], retiredAt: (row["retired_at"] as Int64?).map(Timestamp.init(milliseconds:)),
            accounts: accounts, pushMode: try UnknownStoredValue.decode(row["push_mode"], column: "devices.push_mode"))
    }

    /// `a`'s migration flag at the first argument's time: a pending transfer that has not expired.
    static let migrationFlag = "EXISTS (SELECT 1 FROM transfers t WHERE t.account_id = a.id AND t.state = 'pending' AND t.expires_at > ?)"

    /// The session columns of `device_accounts`, cleared.
    static let noSession = """
        session_id = NULL, session_started_at = NULL, refresh_hash = NULL, refresh_generation = NULL,
        refresh_expires_at = NULL, key_by_device = NULL, key_by_token = NULL
        """

    /// One effect as SQL.
    static func apply(_ effect: Effect, to db: Database) throws {
        switch effect {
        case .createAccount(let id, let userName, let at):
            try db.run("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [id, userName, at.milliseconds])
        case .createDevice(let id, let secretHash, let at):
            try db.run("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)", [id, Data(secretHash.bytes), at.milliseconds])
        case .addAccount(let device, let account, let at):
            try db.run(
                """
                INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)
                ON CONFLICT (device_id, account_id) DO UPDATE
                SET state = 'active', added_at = excluded.added_at, ended_at = NULL, ended_reason = NULL, push_enabled = 1
                """, [device, account, at.milliseconds])
        case .setCurrentAccount(let device, let account):
            try db.run("UPDATE devices SET current_account_id = ? WHERE id = ?", [account, device])
        case .endPair(let device, let account, let state, let reason, let at):
            try db.run("DELETE FROM sibling_sessions WHERE device_id = ? AND account_id = ?", [device, account])
            try db.run(
                "UPDATE device_accounts SET state = ?, ended_at = ?, ended_reason = ?, \(noSession) WHERE device_id = ? AND account_id = ? AND state = 'active'",
                [state.rawValue, at.milliseconds, reason, device, account])
        case .retireDevice(let id, let at):
            try db.run("UPDATE devices SET retired_at = ? WHERE id = ? AND retired_at IS NULL", [at.milliseconds, id])
            try db.run("DELETE FROM push_tokens WHERE device_id = ?", [id])
        case .setMovedTo(let account, let device):
            try db.run("UPDATE accounts SET moved_to_device_id = ? WHERE id = ?", [device, account])
        case .openSession(let device, let account, let s, let at, let address):
            try db.run(
                """
                UPDATE device_accounts SET session_id = ?, session_started_at = ?, refresh_hash = ?, refresh_generation = ?,
                    refresh_expires_at = ?, key_by_device = ?, key_by_token = ?, last_login_at = ?, last_address = ?
                WHERE device_id = ? AND account_id = ?
                """,
                [s.sessionID, s.startedAt.milliseconds, Data(s.refreshHash.bytes), s.generation, s.expiresAt.milliseconds,
                 s.keyByDevice.map { Data($0) }, s.keyByToken.map { Data($0) }, at.milliseconds, address, device, account])
        case .renewSession(let device, let account, let expiresAt, let at, let address):
            try db.run(
                "UPDATE device_accounts SET refresh_expires_at = ?, last_login_at = ?, last_address = ? WHERE device_id = ? AND account_id = ?",
                [expiresAt.milliseconds, at.milliseconds, address, device, account])
        case .rotateSession(let device, let account, let s, let used, let usedExpiresAt):
            try db.run(
                """
                UPDATE device_accounts SET refresh_hash = ?, refresh_generation = ?, refresh_expires_at = ?, key_by_device = ?, key_by_token = ?
                WHERE device_id = ? AND account_id = ? AND session_id = ?
                """,
                [Data(s.refreshHash.bytes), s.generation, s.expiresAt.milliseconds, s.keyByDevice.map { Data($0) },
                 s.keyByToken.map { Data($0) }, device, account, s.sessionID])
            try db.run(
                "INSERT INTO rotated_refresh_tokens (token_hash, device_id, account_id, session_id, expires_at) VALUES (?, ?, ?, ?, ?)",
                [Data(used.bytes), device, account, s.sessionID, usedExpiresAt.milliseconds])
        case .closeSession(let device, let account):
            try db.run("UPDATE device_accounts SET \(noSession) WHERE device_id = ? AND account_id = ?", [device, account])
            try db.run("DELETE FROM sibling_sessions WHERE device_id = ? AND account_id = ?", [device, account])
        case .addHandoffCode(let c):
            try db.run(
                """
                INSERT INTO handoff_codes (code_hash, device_id, account_id, host_session_id, client_id, challenge, created_at, expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [Data(c.codeHash.bytes), c.deviceID, c.accountID, c.hostSessionID, c.clientID, c.challenge, c.createdAt.milliseconds,
                 c.expiresAt.milliseconds])
        case .redeemHandoffCode(let hash, let at, let session):
            try db.run(
                "UPDATE handoff_codes SET redeemed_at = ?, sibling_session_id = ? WHERE code_hash = ? AND redeemed_at IS NULL",
                [at.milliseconds, session, Data(hash.bytes)])
        case .openSiblingSession(let s):
            try db.run(
                """
                INSERT INTO sibling_sessions (device_id, account_id, client_id, session_id, started_at, refresh_hash, refresh_generation, refresh_expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (device_id, account_id, client_id) DO UPDATE SET session_id = excluded.session_id, started_at = excluded.started_at,
                    refresh_hash = excluded.refresh_hash, refresh_generation = excluded.refresh_generation,
                    refresh_expires_at = excluded.refresh_expires_at
                """,
                [s.deviceID, s.accountID, s.clientID, s.sessionID, s.startedAt.milliseconds, Data(s.refreshHash.bytes), s.generation,
                 s.expiresAt.milliseconds])
        case .rotateSiblingSession(let s, let used, let usedExpiresAt):
            try db.run(
                "UPDATE sibling_sessions SET refresh_hash = ?, refresh_generation = ?, refresh_expires_at = ? WHERE session_id = ?",
                [Data(s.refreshHash.bytes), s.generation, s.expiresAt.milliseconds, s.sessionID])
            try db.run(
                """
                INSERT INTO rotated_refresh_tokens (token_hash, device_id, account_id, session_id, expires_at, client_id)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
                [Data(used.bytes), s.deviceID, s.accountID, s.sessionID, usedExpiresAt.milliseconds, s.clientID])
        case .closeSiblingSession(let session):
            try db.run("DELETE FROM sibling_sessions WHERE session_id = ?", [session])
        case .createTransfer(let t):
            try db.run(
                """
                INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at, issued_by)
                VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)
                """,
                [t.id, t.accountID, t.email.display, t.email.key, t.passwordHash, t.createdAt.milliseconds, t.expiresAt.milliseconds,
                 t.issuedBy.description])
        case .endTransfer(let id, let state, let at, let claimedBy):
            try db.run(
                "UPDATE transfers SET state = ?, ended_at = ?, claimed_by_device = ? WHERE id = ? AND state = 'pending'",
                [state.rawValue, at.milliseconds, claimedBy, id])
        case .countFailures(let id, let consecutive, let total, let lockedUntil):
            try db.run(
                "UPDATE transfers SET failed_consecutive = ?, failed_total = ?, locked_until = ? WHERE id = ?",
                [consecutive, total, lockedUntil?.milliseconds, id])
        case .unlockTransfer(let id):
            try db.run("UPDATE transfers SET locked_until = NULL, failed_consecutive = 0 WHERE id = ?", [id])
        case .retireSigningKey(let kid, let at):
            try db.run("UPDATE signing_keys SET retired_at = ? WHERE kid = ? AND retired_at IS NULL", [at.milliseconds, kid])
        case .addSigningKey(let key):
            try db.run(
                "INSERT INTO signing_keys (kid, algorithm, private_key, created_at) VALUES (?, ?, ?, ?)",
                [key.kid, key.algorithm, key.privateKey, key.createdAt.milliseconds])
        case .audit(let e):
            try db.run(
                """
                INSERT INTO audit_events (at, kind, account_id, device_id, transfer_id, actor, reason, client_address)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [e.at.milliseconds, e.kind.rawValue, e.accountID, e.deviceID, e.transferID, e.actor.description, e.reason, e.clientAddress])
        case .setPushToken(let t):
            // The device's old token for the provider goes; the token is upserted on its own key,
            // so a token another device holds moves here.
            try db.run(
                "DELETE FROM push_tokens WHERE device_id = ? AND provider = ? AND token_hash <> ?",
                [t.deviceID, t.provider.rawValue, Data(t.tokenHash.bytes)])
            try db.run(
                """
                INSERT INTO push_tokens (device_id, provider, token, token_hash, environment, registered_at) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (provider, token_hash) DO UPDATE
                SET device_id = excluded.device_id, token = excluded.token, environment = excluded.environment, registered_at = excluded.registered_at
                """, [t.deviceID, t.provider.rawValue, t.token, Data(t.tokenHash.bytes), t.environment?.rawValue, t.registeredAt.milliseconds])
        case .removePushToken(let device, let provider):
            try db.run("DELETE FROM push_tokens WHERE device_id = ? AND provider = ?", [device, provider.rawValue])
        case .dropPushToken(let provider, let hash, let reportedAt):
            try db.run(
                "DELETE FROM push_tokens WHERE provider = ? AND token_hash = ? AND registered_at <= ?",
                [provider.rawValue, Data(hash.bytes), reportedAt.milliseconds])
        case .setPushMode(let device, let mode):
            try db.run("UPDATE devices SET push_mode = ? WHERE id = ?", [mode.rawValue, device])
        case .setAccountPush(let device, let account, let enabled):
            try db.run("UPDATE device_accounts SET push_enabled = ? WHERE device_id = ? AND account_id = ?", [enabled ? 1 : 0, device, account])
        case .createServiceKey(let name, let hash, let at, let by):
            try db.run(
                "INSERT INTO service_keys (name, key_hash, created_at, created_by) VALUES (?, ?, ?, ?)",
                [name, Data(hash.bytes), at.milliseconds, by.description])
        case .revokeServiceKey(let name, let at, let by):
            try db.run(
                "UPDATE service_keys SET revoked_at = ?, revoked_by = ? WHERE name = ? AND revoked_at IS NULL",
                [at.milliseconds, by.description, name])
        case .addAppleNonce(let hash, let expiresAt, let now):
            try db.run("DELETE FROM apple_nonces WHERE expires_at <= ?", [now.milliseconds])
            try db.run("INSERT INTO apple_nonces (nonce_hash, expires_at) VALUES (?, ?)", [Data(hash.bytes), expiresAt.milliseconds])
        case .consumeAppleNonce(let hash):
            try db.run("DELETE FROM apple_nonces WHERE nonce_hash = ?", [Data(hash.bytes)])
        case .linkApple(let l):
            try db.run(
                """
                INSERT INTO apple_links (account_id, sub, email, is_private_email, linked_at, refresh_token, client_id, email_enabled)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (account_id) DO UPDATE SET sub = excluded.sub, email = excluded.email, is_private_email = excluded.is_private_email,
                    linked_at = excluded.linked_at, refresh_token = excluded.refresh_token, client_id = excluded.client_id,
                    email_enabled = excluded.email_enabled
                """, [l.accountID, l.sub, l.email, l.isPrivateEmail.map { $0 ? 1 : 0 }, l.linkedAt.milliseconds, l.refreshToken, l.clientID, l.emailEnabled ? 1 : 0])
        case .updateAppleEmail(let account, let email, let isPrivate):
            try db.run(
                "UPDATE apple_links SET email = COALESCE(?, email), is_private_email = COALESCE(?, is_private_email) WHERE account_id = ?",
                [email, isPrivate.map { $0 ? 1 : 0 }, account])
        case .unlinkApple(let account):
            try db.run("DELETE FROM apple_links WHERE account_id = ?", [account])
        case .setAppleEmailEnabled(let account, let enabled):
            try db.run("UPDATE apple_links SET email_enabled = ? WHERE account_id = ?", [enabled ? 1 : 0, account])
        case .recordAppleNotification(let jti, let at):
            try db.run("INSERT INTO apple_notifications (jti, received_at) VALUES (?, ?)", [jti, at.milliseconds])
        case .eraseAccount(let id, let at):
            try db.run("UPDATE accounts SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL", [at.milliseconds, id])
            try db.run("DELETE FROM transfers WHERE account_id = ?", [id])
            try db.run("DELETE FROM rotated_refresh_tokens WHERE account_id = ?", [id])
            try db.run("DELETE FROM handoff_codes WHERE account_id = ?", [id])
            try db.run("DELETE FROM apple_links WHERE account_id = ?", [id])
            try db.run("UPDATE device_accounts SET last_address = NULL WHERE account_id = ?", [id])
            try db.run("DELETE FROM audit_events WHERE account_id = ?", [id])
        case .enqueue(let e):
            try db.run(
                """
                INSERT INTO outbox (id, kind, account_id, type, body, created_at, next_attempt_at, give_up_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [Identifier.make(), e.kind.rawValue, e.accountID, e.type, e.body, e.at.milliseconds, e.at.milliseconds,
                 e.giveUpAt.milliseconds])
        case .leaseOutbox(let id, let leaseID, let until):
            try db.run("UPDATE outbox SET lease_id = ?, leased_until = ? WHERE id = ?", [leaseID, until.milliseconds, id])
        case .deleteOutbox(let id):
            try db.run("DELETE FROM outbox WHERE id = ?", [id])
        case .rescheduleOutbox(let id, let attempts, let next, let error):
            try db.run(
                "UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_error = ?, lease_id = NULL, leased_until = NULL WHERE id = ?",
                [attempts, next.milliseconds, error, id])
        case .failOutbox(let id, let attempts, let error, let at):
            try db.run(
                """
                UPDATE outbox SET state = 'failed', attempts = ?, last_error = ?, failed_at = ?, lease_id = NULL, leased_until = NULL
                WHERE id = ?
                """, [attempts, error, at.milliseconds, id])
        case .retryOutbox(let id, let at, let giveUpAt):
            try db.run(
                "UPDATE outbox SET state = 'pending', failed_at = NULL, attempts = 0, next_attempt_at = ?, give_up_at = ? WHERE id = ? AND state = 'failed'",
                [at.milliseconds, giveUpAt.milliseconds, id])
        case .touchServiceKey(let name, let at, let olderThan):
            try db.run(
                "UPDATE service_keys SET last_used_at = ? WHERE name = ? AND (last_used_at IS NULL OR last_used_at <= ?)",
                [at.milliseconds, name, olderThan.milliseconds])
        }
    }

    // MARK: Reads outside operations

    public func ping() async throws {
        _ = try await pool.read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT 1")) }
    }

    public func isSessionValid(sessionID: String, accountID: String, deviceID: String, clientID: String?) async throws -> Bool {
        try await pool.read { db in
            if let clientID {
                // A sibling session exists only while its pair is active (the schema's triggers).
                return try db.one(
                    "SELECT 1 FROM sibling_sessions WHERE device_id = ? AND account_id = ? AND client_id = ? AND session_id = ?",
                    [deviceID, accountID, clientID, sessionID]) != nil
            }
            return try db.one(
                "SELECT 1 FROM device_accounts WHERE device_id = ? AND account_id = ? AND state = 'active' AND session_id = ?",
                [deviceID, accountID, sessionID]) != nil
        }
    }

    public func device(_ id: String, at now: Timestamp) async throws -> DeviceRecord? {
        try await pool.read { db in try Self.device(db, id, at: now.milliseconds) }
    }

    public func profile(accountID: String, at now: Timestamp) async throws -> AccountProfile? {
        try await pool.read { db in
            guard let account = try db.one("SELECT user_name, created_at, moved_to_device_id FROM accounts WHERE id = ?", [accountID]) else {
                return nil
            }
            let transfer = try db.one(
                "SELECT email, created_at, expires_at FROM transfers WHERE account_id = ? AND state = 'pending' AND expires_at > ?",
                [accountID, now.milliseconds]
            ).map {
                AccountProfile.PendingTransfer(
                    email: $0["email"], createdAt: Timestamp(milliseconds: $0["created_at"]),
                    expiresAt: Timestamp(milliseconds: $0["expires_at"]))
            }
            let devices = try db.all(
                "SELECT device_id, added_at, last_login_at FROM device_accounts WHERE account_id = ? AND state = 'active' ORDER BY added_at",
                [accountID]
            ).map {
                AccountProfile.Device(
                    deviceID: $0["device_id"], boundAt: Timestamp(milliseconds: $0["added_at"]),
                    lastLoginAt: ($0["last_login_at"] as Int64?).map(Timestamp.init(milliseconds:)))
            }
            let apple = try db.one("SELECT * FROM apple_links WHERE account_id = ?", [accountID]).map(Self.appleLink)
            return AccountProfile(
                accountID: accountID, userName: account["user_name"], createdAt: Timestamp(milliseconds: account["created_at"]),
                movedToDeviceID: account["moved_to_device_id"], transfer: transfer, activeDevices: devices, apple: apple)
        }
    }

    public func pushRoutes(accountIDs: [String]) async throws -> [PushRoute] {
        // The ids travel as one JSON array: one cached statement, whatever their number.
        let ids = String(decoding: try JSONEncoder().encode(accountIDs), as: UTF8.self)
        return try await pool.read { db in
            try db.all(Self.pushRoutesSQL, [ids]).map(Self.pushRoute)
        }
    }

    /// `DeviceRecord.routesPushes(to:)` in SQL: active pair, pushes on, mode `all` or the current account.
    static let pushRoutesSQL = """
        SELECT t.provider, t.token, t.environment, t.device_id, p.account_id
        FROM json_each(?) j
        JOIN device_accounts p ON p.account_id = j.value AND p.state = 'active' AND p.push_enabled = 1
        JOIN devices d ON d.id = p.device_id
        JOIN push_tokens t ON t.device_id = p.device_id
        WHERE d.push_mode = 'all' OR d.current_account_id = p.account_id
        ORDER BY t.device_id, t.provider, p.account_id
        """

    public func outboxStats(kind: OutboxKind) async throws -> OutboxStats {
        try await pool.read { db in
            let row = try db.one(
                """
                SELECT COUNT(*) FILTER (WHERE state = 'pending') AS pending, COUNT(*) FILTER (WHERE state = 'failed') AS failed,
                       MIN(created_at) FILTER (WHERE state = 'pending') AS oldest
                FROM outbox WHERE kind = ?
                """, [kind.rawValue])
            return OutboxStats(
                pending: row?["pending"] ?? 0, failed: row?["failed"] ?? 0,
                oldestPendingAt: (row?["oldest"] as Int64?).map(Timestamp.init(milliseconds:)))
        }
    }

    public func signingKeys() async throws -> [SigningKeyRecord] {
        try await pool.read { db in try db.all(Self.signingKeysQuery, []).map(Self.signingKey) }
    }

    static let signingKeysQuery = "SELECT kid, algorithm, private_key, created_at, retired_at FROM signing_keys ORDER BY created_at, kid"

    static func signingKey(_ row: Row) -> SigningKeyRecord {
        SigningKeyRecord(
            kid: row["kid"], algorithm: row["algorithm"], privateKey: row["private_key"], createdAt: Timestamp(milliseconds: row["created_at"]),
            retiredAt: (row["retired_at"] as Int64?).map(Timestamp.init(milliseconds:)))
    }

    public func appleLink(sub: String) async throws -> AppleLink? {
        try await pool.read { db in try db.one("SELECT * FROM apple_links WHERE sub = ?", [sub]).map(Self.appleLink) }
    }

    public func serviceKey(hash: SecretHash) async throws -> ServiceKeyRecord? {
        try await pool.read { db in try db.one("SELECT * FROM service_keys WHERE key_hash = ?", [Data(hash.bytes)]).map(Self.serviceKey) }
    }

    public func pendingTransfer(emailKey: String) async throws -> TransferRecord? {
        try await pool.read { db in
            try db.one("SELECT * FROM transfers WHERE email_key = ? AND state = 'pending'", [emailKey]).map(Self.transfer)
        }
    }

    // MARK: Rows

    static func pair(_ row: Row) throws -> DeviceAccount {
        let session: PairSession? = (row["session_id"] as String?).map { id in
            PairSession(
                sessionID: id, startedAt: Timestamp(milliseconds: row["session_started_at"]), generation: row["refresh_generation"],
                refreshHash: SecretHash(bytes: [UInt8](row["refresh_hash"] as Data)),
                expiresAt: Timestamp(milliseconds: row["refresh_expires_at"]),
                keyByDevice: (row["key_by_device"] as Data?).map { [UInt8]($0) }, keyByToken: (row["key_by_token"] as Data?).map { [UInt8]($0) })
        }
        return DeviceAccount(
            account: SessionAccount(accountID: row["account_id"], userName: row["user_name"], migrationFlag: row["flag"]),
            state: try UnknownStoredValue.decode(row["state"], column: "device_accounts.state"),
            addedAt: Timestamp(milliseconds: row["added_at"]),
            lastLoginAt: (row["last_login_at"] as Int64?).map(Timestamp.init(milliseconds:)),
            endedAt: (row["ended_at"] as Int64?).map(Timestamp.init(milliseconds:)), endedReason: row["ended_reason"], session: session,
            pushEnabled: row["push_enabled"] as Int64 != 0, accountDeleted: row["deleted"])
    }

    /// A row of `pushRoutesSQL`, by position: a name lookup per column costs more than the row (1 000 rows a request).
    static func pushRoute(_ row: Row) throws -> PushRoute {
        PushRoute(
            provider: try UnknownStoredValue.decode(row[0], column: "push_tokens.provider"), token: row[1],
            environment: try (row[2] as String?).map { try UnknownStoredValue.decode($0, column: "push_tokens.environment") },
            deviceID: row[3], accountID: row[4])
    }

    static func pushToken(_ row: Row) throws -> PushToken {
        PushToken(
            deviceID: row["device_id"], provider: try UnknownStoredValue.decode(row["provider"], column: "push_tokens.provider"),
            token: row["token"],
            environment: try (row["environment"] as String?).map { try UnknownStoredValue.decode($0, column: "push_tokens.environment") },
            registeredAt: Timestamp(milliseconds: row["registered_at"]))
    }

    static func siblingSession(_ row: Row) -> SiblingSession {
        SiblingSession(
            deviceID: row["device_id"], accountID: row["account_id"], clientID: row["client_id"], sessionID: row["session_id"],
            startedAt: Timestamp(milliseconds: row["started_at"]), generation: row["refresh_generation"],
            refreshHash: SecretHash(bytes: [UInt8](row["refresh_hash"] as Data)), expiresAt: Timestamp(milliseconds: row["refresh_expires_at"]))
    }

    static func handoffCode(_ row: Row) -> HandoffCodeRecord {
        HandoffCodeRecord(
            codeHash: SecretHash(bytes: [UInt8](row["code_hash"] as Data)), deviceID: row["device_id"], accountID: row["account_id"],
            hostSessionID: row["host_session_id"], clientID: row["client_id"], challenge: row["challenge"],
            createdAt: Timestamp(milliseconds: row["created_at"]), expiresAt: Timestamp(milliseconds: row["expires_at"]),
            redeemedAt: (row["redeemed_at"] as Int64?).map(Timestamp.init(milliseconds:)), siblingSessionID: row["sibling_session_id"])
    }

    static func appleLink(_ row: Row) -> AppleLink {
        AppleLink(
            accountID: row["account_id"], sub: row["sub"], email: row["email"],
            isPrivateEmail: (row["is_private_email"] as Int64?).map { $0 != 0 }, linkedAt: Timestamp(milliseconds: row["linked_at"]),
            refreshToken: row["refresh_token"], clientID: row["client_id"], emailEnabled: row["email_enabled"] as Int64 != 0)
    }

    static func serviceKey(_ row: Row) -> ServiceKeyRecord {
        ServiceKeyRecord(
            name: row["name"], createdAt: Timestamp(milliseconds: row["created_at"]), createdBy: row["created_by"],
            lastUsedAt: (row["last_used_at"] as Int64?).map(Timestamp.init(milliseconds:)),
            revokedAt: (row["revoked_at"] as Int64?).map(Timestamp.init(milliseconds:)), revokedBy: row["revoked_by"])
    }

    static func transfer(_ row: Row) throws -> TransferRecord {
        TransferRecord(
            id: row["id"], accountID: row["account_id"], email: row["email"], emailKey: row["email_key"],
            passwordHash: row["password_hash"], state: try UnknownStoredValue.decode(row["state"], column: "transfers.state"),
            createdAt: Timestamp(milliseconds: row["created_at"]), expiresAt: Timestamp(milliseconds: row["expires_at"]),
            failedConsecutive: row["failed_consecutive"], failedTotal: row["failed_total"],
            lockedUntil: (row["locked_until"] as Int64?).map(Timestamp.init(milliseconds:)),
            issuedBy: try Initiator(stored: row["issued_by"]))
    }

    static func outboxMessage(_ row: Row) throws -> OutboxMessage {
        OutboxMessage(
            id: row["id"], kind: try UnknownStoredValue.decode(row["kind"], column: "outbox.kind"), accountID: row["account_id"],
            type: row["type"], body: row["body"], createdAt: Timestamp(milliseconds: row["created_at"]),
            state: try UnknownStoredValue.decode(row["state"], column: "outbox.state"), attempts: row["attempts"],
            nextAttemptAt: Timestamp(milliseconds: row["next_attempt_at"]), giveUpAt: Timestamp(milliseconds: row["give_up_at"]),
            lastError: row["last_error"], leasedUntil: (row["leased_until"] as Int64?).map(Timestamp.init(milliseconds:)),
            leaseID: row["lease_id"])
    }
}

extension Database {
    /// One row from a cached statement.
    func one(_ sql: String, _ arguments: StatementArguments) throws -> Row? {
        try Row.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }

    func all(_ sql: String, _ arguments: StatementArguments) throws -> [Row] {
        try Row.fetchAll(cachedStatement(sql: sql), arguments: arguments)
    }

    func run(_ sql: String, _ arguments: StatementArguments) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}
