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

    /// Versioned migrations. `v1` is `schema.sql` as shipped; later versions are appended here.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in try db.execute(sql: try SQLiteStore.schemaSQL()) }
        return migrator
    }

    public static func schemaSQL() throws -> String {
        guard let url = Bundle.module.url(forResource: "schema", withExtension: "sql") else {
            throw StoreError.schemaMissing
        }
        return try String(contentsOf: url, encoding: .utf8)
    }

    public enum StoreError: Error { case schemaMissing }

    // MARK: TransferStore

    public func ping() async throws {
        _ = try await pool.read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT 1")) }
    }

    public func login(_ c: LoginCommand) async throws -> LoginResult {
        try await commits.write { db in
            let binding = try Self.currentBinding(db, deviceID: c.deviceID.value)
            switch Rules.login(binding: binding, secretHash: c.secretHash) {
            case .create:
                guard c.allowCreate else { return .creationRefused }
                let account = c.newAccountID
                try db.run(
                    "INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)",
                    [account, c.deviceID.value, c.now.milliseconds])
                try Self.insertBinding(db, deviceID: c.deviceID.value, accountID: account, secretHash: c.secretHash, at: c.now, loggedIn: true)
                try Self.openSession(db, c.session, accountID: account, deviceID: c.deviceID.value, at: c.now)
                try Self.audit(db, AuditEvent(at: c.now, kind: .accountCreated, accountID: account, deviceID: c.deviceID.value, clientAddress: c.clientAddress))
                return .loggedIn(SessionAccount(accountID: account, userName: c.deviceID.value, migrationFlag: false), created: true)
            case .login(let account):
                try db.run(
                    "UPDATE device_bindings SET last_login_at = ? WHERE device_id = ? AND state = 'active'",
                    [c.now.milliseconds, c.deviceID.value])
                try Self.openSession(db, c.session, accountID: account, deviceID: c.deviceID.value, at: c.now)
                try Self.audit(db, AuditEvent(at: c.now, kind: .login, accountID: account, deviceID: c.deviceID.value, clientAddress: c.clientAddress))
                return .loggedIn(try Self.sessionAccount(db, accountID: account, at: c.now), created: false)
            case .reject(let error):
                try Self.audit(db, AuditEvent(at: c.now, kind: .loginFailed, accountID: binding?.accountID, deviceID: c.deviceID.value, reason: error.code, clientAddress: c.clientAddress))
                return .rejected(error)
            }
        }
    }

    public func refresh(_ c: RefreshCommand) async throws -> RefreshResult {
        try await commits.write { db in
            let row = try db.one(
                """
                SELECT r.session_id, r.expires_at, r.used_at, s.account_id, s.device_id, s.revoked_at,
                       EXISTS (SELECT 1 FROM device_bindings b
                               WHERE b.device_id = s.device_id AND b.account_id = s.account_id AND b.state = 'active') AS active
                FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id
                WHERE r.token_hash = ?
                """, [Data(c.tokenHash.bytes)])
            let state = row.map {
                RefreshTokenState(
                    sessionID: $0["session_id"], accountID: $0["account_id"], deviceID: $0["device_id"],
                    expiresAt: Timestamp(milliseconds: $0["expires_at"]), used: $0["used_at"] as Int64? != nil,
                    sessionRevoked: $0["revoked_at"] as Int64? != nil, deviceActive: $0["active"])
            }
            switch Rules.refresh(state, now: c.now) {
            case .reject:
                return .rejected
            case .revokeFamily:
                guard let state else { return .rejected }
                try db.run("UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", [c.now.milliseconds, state.sessionID])
                try Self.audit(db, AuditEvent(at: c.now, kind: .refreshReuse, accountID: state.accountID, deviceID: state.deviceID))
                return .rejected
            case .rotate:
                guard let state else { return .rejected }
                try db.run("UPDATE refresh_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL", [c.now.milliseconds, Data(c.tokenHash.bytes)])
                guard db.changesCount == 1 else { return .rejected }
                try Self.insertRefreshToken(db, hash: c.next, sessionID: state.sessionID, at: c.now, expiresAt: c.nextExpiresAt)
                return .rotated(try Self.sessionAccount(db, accountID: state.accountID, at: c.now), deviceID: state.deviceID, sessionID: state.sessionID)
            }
        }
    }

    public func logout(accountID: String, deviceID: String, at: Timestamp) async throws {
        try await commits.write { db in
            try Self.revokeSessions(db, accountID: accountID, deviceID: deviceID, at: at)
            try Self.audit(db, AuditEvent(at: at, kind: .logout, accountID: accountID, deviceID: deviceID))
        }
    }

    public func isSessionValid(sessionID: String, accountID: String, deviceID: String) async throws -> Bool {
        try await pool.read { db in
            try db.one(
                """
                SELECT 1 FROM sessions s
                JOIN device_bindings b ON b.device_id = s.device_id AND b.account_id = s.account_id AND b.state = 'active'
                WHERE s.id = ? AND s.account_id = ? AND s.device_id = ? AND s.revoked_at IS NULL
                """, [sessionID, accountID, deviceID]) != nil
        }
    }

    public func profile(accountID: String, at now: Timestamp) async throws -> AccountProfile? {
        try await pool.read { db in
            guard let account = try db.one("SELECT user_name, created_at, transfer_id FROM accounts WHERE id = ?", [accountID]) else {
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
                "SELECT device_id, bound_at, last_login_at FROM device_bindings WHERE account_id = ? AND state = 'active' ORDER BY bound_at",
                [accountID]
            ).map {
                AccountProfile.Device(
                    deviceID: $0["device_id"], boundAt: Timestamp(milliseconds: $0["bound_at"]),
                    lastLoginAt: ($0["last_login_at"] as Int64?).map(Timestamp.init(milliseconds:)))
            }
            return AccountProfile(
                accountID: accountID, userName: account["user_name"], createdAt: Timestamp(milliseconds: account["created_at"]),
                transferID: account["transfer_id"], transfer: transfer, activeDevices: devices)
        }
    }

    public func revokeDevice(deviceID: String, at: Timestamp, actor: String, reason: String?) async throws -> String? {
        try await commits.write { db in
            guard let row = try db.one("SELECT account_id FROM device_bindings WHERE device_id = ? AND state = 'active'", [deviceID]) else {
                return nil
            }
            let account: String = row["account_id"]
            try db.run(
                "UPDATE device_bindings SET state = 'revoked', ended_at = ?, ended_reason = ? WHERE device_id = ? AND state = 'active'",
                [at.milliseconds, reason, deviceID])
            try Self.revokeSessions(db, accountID: account, deviceID: deviceID, at: at)
            try Self.audit(db, AuditEvent(at: at, kind: .deviceRevoked, accountID: account, deviceID: deviceID, actor: actor, reason: reason))
            return account
        }
    }

    public func setUpTransfer(_ c: SetUpCommand) async throws -> SetUpResult {
        try await commits.write { db in
            let now = c.now.milliseconds
            // A pending transfer past its expiry no longer holds its email.
            try db.run(
                """
                UPDATE transfers SET state = 'expired', ended_at = ?
                WHERE state = 'pending' AND expires_at <= ? AND (email_key = ? OR account_id = ?)
                """, [now, now, c.email.key, c.accountID])
            let holder = try db.one("SELECT account_id FROM transfers WHERE email_key = ? AND state = 'pending'", [c.email.key])
            if let holder, (holder["account_id"] as String) != c.accountID { return .emailInUse }
            try db.run("UPDATE transfers SET state = 'replaced', ended_at = ? WHERE account_id = ? AND state = 'pending'", [now, c.accountID])
            try db.run(
                """
                INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at, issued_by)
                VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)
                """, [c.transferID, c.accountID, c.email.display, c.email.key, c.passwordHash, now, c.expiresAt.milliseconds, c.actor])
            try Self.audit(db, AuditEvent(
                at: c.now, kind: c.actor == "device" ? .transferSetUp : .transferIssued, accountID: c.accountID,
                transferID: c.transferID, actor: c.actor, reason: c.reason, clientAddress: c.clientAddress))
            return .created
        }
    }

    public func cancelTransfer(accountID: String, at: Timestamp, actor: String, reason: String?) async throws -> Bool {
        try await commits.write { db in
            guard let row = try db.one("SELECT id FROM transfers WHERE account_id = ? AND state = 'pending'", [accountID]) else {
                return false
            }
            try db.run(
                "UPDATE transfers SET state = CASE WHEN expires_at <= ? THEN 'expired' ELSE 'cancelled' END, ended_at = ? WHERE id = ?",
                [at.milliseconds, at.milliseconds, row["id"] as String])
            try Self.audit(db, AuditEvent(at: at, kind: .transferCancelled, accountID: accountID, transferID: row["id"], actor: actor, reason: reason))
            return true
        }
    }

    public func pendingTransfer(emailKey: String) async throws -> TransferRecord? {
        try await pool.read { db in
            try db.one("SELECT * FROM transfers WHERE email_key = ? AND state = 'pending'", [emailKey]).map(Self.transfer)
        }
    }

    public func recordFailedClaim(_ c: FailedClaimCommand) async throws -> FailedClaimResult {
        try await commits.write { db in
            let transfer = try db.one("SELECT * FROM transfers WHERE id = ?", [c.transferID]).map(Self.transfer)
            switch Rules.failure(transfer: transfer, now: c.now, policy: c.policy) {
            case .notCounted(let error):
                return .notCounted(error)
            case .count(let consecutive, let total, let lockedUntil, let voided):
                let now = c.now.milliseconds
                try db.run(
                    """
                    UPDATE transfers SET failed_consecutive = ?, failed_total = ?, locked_until = ?,
                        state = CASE WHEN ? THEN 'voided' ELSE state END,
                        ended_at = CASE WHEN ? THEN ? ELSE ended_at END
                    WHERE id = ?
                    """, [consecutive, total, lockedUntil?.milliseconds, voided, voided, now, c.transferID])
                let accountID = transfer?.accountID
                try Self.audit(db, AuditEvent(at: c.now, kind: .claimFailed, accountID: accountID, transferID: c.transferID, clientAddress: c.clientAddress))
                if voided {
                    try Self.audit(db, AuditEvent(at: c.now, kind: .transferVoided, accountID: accountID, transferID: c.transferID, actor: "system", reason: "\(total) wrong passwords"))
                    return .voided
                }
                if let lockedUntil {
                    try Self.audit(db, AuditEvent(at: c.now, kind: .transferLocked, accountID: accountID, transferID: c.transferID, actor: "system", reason: "\(c.policy.consecutiveFailures) wrong passwords in a row"))
                    return .locked(until: lockedUntil)
                }
                return .counted
            }
        }
    }

    public func claim(_ c: ClaimCommand) async throws -> ClaimResult {
        try await commits.write { db in
            let transfer = try db.one("SELECT * FROM transfers WHERE id = ?", [c.transferID]).map(Self.transfer)
            let device = try Self.currentBinding(db, deviceID: c.deviceID.value)
            let decision = Rules.claim(
                transfer: transfer, expectedTransferID: c.transferID, device: device, secretHash: c.secretHash,
                replaceExistingAccount: c.replaceExistingAccount, now: c.now)
            guard case .proceed(let takeOverFrom) = decision, let transfer else {
                if case .reject(let error) = decision { return .rejected(error) }
                return .rejected(.invalidTransferCredentials)
            }
            let now = c.now.milliseconds
            let newDevice = c.deviceID.value
            let account = transfer.accountID
            if let other = takeOverFrom {
                try db.run(
                    "UPDATE device_bindings SET state = 'replaced', ended_at = ?, ended_reason = ? WHERE device_id = ? AND state = 'active'",
                    [now, "taken over by account \(account) (replaceExistingAccount)", newDevice])
                try Self.revokeSessions(db, accountID: other, deviceID: newDevice, at: c.now)
                try Self.audit(db, AuditEvent(at: c.now, kind: .deviceReplaced, accountID: other, deviceID: newDevice, transferID: transfer.id, reason: "claimed account \(account) with replaceExistingAccount", clientAddress: c.clientAddress))
            }
            for row in try db.all("SELECT device_id FROM device_bindings WHERE account_id = ? AND state = 'active'", [account]) {
                let old: String = row["device_id"]
                try db.run(
                    "UPDATE device_bindings SET state = 'moved', ended_at = ?, ended_reason = ? WHERE account_id = ? AND device_id = ? AND state = 'active'",
                    [now, "moved to device \(newDevice)", account, old])
                try Self.revokeSessions(db, accountID: account, deviceID: old, at: c.now)
                try Self.audit(db, AuditEvent(at: c.now, kind: .deviceMoved, accountID: account, deviceID: old, transferID: transfer.id, reason: "moved to device \(newDevice)", clientAddress: c.clientAddress))
            }
            try Self.insertBinding(db, deviceID: newDevice, accountID: account, secretHash: c.secretHash, at: c.now, loggedIn: true)
            try db.run(
                "UPDATE transfers SET state = 'claimed', ended_at = ?, claimed_by_device = ? WHERE id = ? AND state = 'pending'",
                [now, newDevice, transfer.id])
            try db.run("UPDATE accounts SET transfer_id = ? WHERE id = ?", [newDevice, account])
            try Self.openSession(db, c.session, accountID: account, deviceID: newDevice, at: c.now)
            try Self.audit(db, AuditEvent(at: c.now, kind: .transferClaimed, accountID: account, deviceID: newDevice, transferID: transfer.id, clientAddress: c.clientAddress))
            let userName = try db.one("SELECT user_name FROM accounts WHERE id = ?", [account])?["user_name"] as String? ?? ""
            return .claimed(SessionAccount(accountID: account, userName: userName, migrationFlag: false))
        }
    }

    public func signingKeys(insertingIfNone candidate: SigningKeyRecord) async throws -> [SigningKeyRecord] {
        try await commits.write { db in
            let sql = "SELECT kid, algorithm, private_key, created_at FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at, kid"
            if try db.one(sql, []) == nil {
                try db.run(
                    "INSERT INTO signing_keys (kid, algorithm, private_key, created_at) VALUES (?, ?, ?, ?)",
                    [candidate.kid, candidate.algorithm, candidate.privateKey, candidate.createdAt.milliseconds])
            }
            return try db.all(sql, []).map {
                SigningKeyRecord(kid: $0["kid"], algorithm: $0["algorithm"], privateKey: $0["private_key"], createdAt: Timestamp(milliseconds: $0["created_at"]))
            }
        }
    }

    // MARK: Shared pieces

    static func currentBinding(_ db: Database, deviceID: String) throws -> DeviceBinding? {
        try db.one(
            "SELECT * FROM device_bindings WHERE device_id = ? AND state IN ('active', 'moved', 'revoked')", [deviceID]
        ).map(binding)
    }

    static func binding(_ row: Row) -> DeviceBinding {
        DeviceBinding(
            deviceID: row["device_id"], accountID: row["account_id"],
            secretHash: SecretHash(bytes: [UInt8](row["secret_hash"] as Data)),
            state: DeviceState(rawValue: row["state"]) ?? .revoked, boundAt: Timestamp(milliseconds: row["bound_at"]),
            lastLoginAt: (row["last_login_at"] as Int64?).map(Timestamp.init(milliseconds:)),
            endedAt: (row["ended_at"] as Int64?).map(Timestamp.init(milliseconds:)), endedReason: row["ended_reason"])
    }

    static func transfer(_ row: Row) -> TransferRecord {
        TransferRecord(
            id: row["id"], accountID: row["account_id"], email: row["email"], emailKey: row["email_key"],
            passwordHash: row["password_hash"], state: TransferState(rawValue: row["state"]) ?? .voided,
            createdAt: Timestamp(milliseconds: row["created_at"]), expiresAt: Timestamp(milliseconds: row["expires_at"]),
            failedConsecutive: row["failed_consecutive"], failedTotal: row["failed_total"],
            lockedUntil: (row["locked_until"] as Int64?).map(Timestamp.init(milliseconds:)))
    }

    static func sessionAccount(_ db: Database, accountID: String, at now: Timestamp) throws -> SessionAccount {
        let row = try db.one(
            """
            SELECT a.user_name,
                   EXISTS (SELECT 1 FROM transfers t WHERE t.account_id = a.id AND t.state = 'pending' AND t.expires_at > ?) AS flag
            FROM accounts a WHERE a.id = ?
            """, [now.milliseconds, accountID])
        return SessionAccount(accountID: accountID, userName: row?["user_name"] ?? "", migrationFlag: row?["flag"] ?? false)
    }

    static func insertBinding(_ db: Database, deviceID: String, accountID: String, secretHash: SecretHash, at: Timestamp, loggedIn: Bool) throws {
        try db.run(
            "INSERT INTO device_bindings (id, device_id, account_id, secret_hash, state, bound_at, last_login_at) VALUES (?, ?, ?, ?, 'active', ?, ?)",
            [Identifier.make(), deviceID, accountID, Data(secretHash.bytes), at.milliseconds, loggedIn ? at.milliseconds : nil])
    }

    static func openSession(_ db: Database, _ s: NewSession, accountID: String, deviceID: String, at: Timestamp) throws {
        try db.run(
            "INSERT INTO sessions (id, account_id, device_id, created_at) VALUES (?, ?, ?, ?)",
            [s.sessionID, accountID, deviceID, at.milliseconds])
        try insertRefreshToken(db, hash: s.refreshTokenHash, sessionID: s.sessionID, at: at, expiresAt: s.refreshExpiresAt)
    }

    static func insertRefreshToken(_ db: Database, hash: SecretHash, sessionID: String, at: Timestamp, expiresAt: Timestamp) throws {
        try db.run(
            "INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
            [Data(hash.bytes), sessionID, at.milliseconds, expiresAt.milliseconds])
    }

    static func revokeSessions(_ db: Database, accountID: String, deviceID: String, at: Timestamp) throws {
        try db.run(
            "UPDATE sessions SET revoked_at = ? WHERE account_id = ? AND device_id = ? AND revoked_at IS NULL",
            [at.milliseconds, accountID, deviceID])
    }

    static func audit(_ db: Database, _ e: AuditEvent) throws {
        try db.run(
            """
            INSERT INTO audit_events (at, kind, account_id, device_id, transfer_id, actor, reason, client_address)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [e.at.milliseconds, e.kind.rawValue, e.accountID, e.deviceID, e.transferID, e.actor, e.reason, e.clientAddress])
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
