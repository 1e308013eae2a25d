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

    /// Versioned migrations, `Resources/migrations/vN.sql`; a new schema change is a new file
    /// appended here. `schema.sql` at the repository's root is the schema they add up to.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for version in ["v1", "v2"] {
            migrator.registerMigration(version) { db in try db.execute(sql: try SQLiteStore.migrationSQL(version)) }
        }
        return migrator
    }

    static func migrationSQL(_ version: String) throws -> String {
        guard let url = Bundle.module.url(forResource: version, withExtension: "sql", subdirectory: "migrations") else {
            throw MissingMigration(version: version)
        }
        return try String(contentsOf: url, encoding: .utf8)
    }

    struct MissingMigration: Error { let version: String }

    // MARK: Operations

    public func execute<Operation: StoreOperation>(_ operation: Operation) async throws -> Operation.Result {
        try await commits.write { db in
            let plan = operation.plan(try Self.read(db, operation.reads, at: operation.now))
            for effect in plan.effects { try Self.apply(effect, to: db) }
            return plan.result
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
        if let device = reads.device {
            facts.device = try db.one(
                """
                SELECT b.*, a.user_name, \(migrationFlag) AS flag
                FROM device_bindings b JOIN accounts a ON a.id = b.account_id
                WHERE b.device_id = ? AND b.state IN ('active', 'moved', 'revoked')
                """, [t, device]
            ).map { (try binding($0), SessionAccount(accountID: $0["account_id"], userName: $0["user_name"], migrationFlag: $0["flag"])) }
        }
        if let account = reads.accountDevices {
            facts.accountDevices = try db.all(
                "SELECT device_id FROM device_bindings WHERE account_id = ? AND state = 'active' ORDER BY bound_at, id", [account]
            ).map { $0["device_id"] }
        }
        if let account = reads.account {
            facts.account = try db.one("SELECT a.user_name, \(migrationFlag) AS flag FROM accounts a WHERE a.id = ?", [t, account])
                .map { SessionAccount(accountID: account, userName: $0["user_name"], migrationFlag: $0["flag"]) }
        }
        if let hash = reads.refreshToken {
            facts.refreshToken = try db.one(
                """
                SELECT r.session_id, r.expires_at, r.used_at, s.account_id, s.device_id, s.revoked_at, a.user_name,
                       \(migrationFlag) AS flag,
                       EXISTS (SELECT 1 FROM device_bindings b
                               WHERE b.device_id = s.device_id AND b.account_id = s.account_id AND b.state = 'active') AS active
                FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id JOIN accounts a ON a.id = s.account_id
                WHERE r.token_hash = ?
                """, [t, Data(hash.bytes)]
            ).map {
                RefreshTokenState(
                    sessionID: $0["session_id"],
                    account: SessionAccount(accountID: $0["account_id"], userName: $0["user_name"], migrationFlag: $0["flag"]),
                    deviceID: $0["device_id"], expiresAt: Timestamp(milliseconds: $0["expires_at"]),
                    used: $0["used_at"] as Int64? != nil, sessionRevoked: $0["revoked_at"] as Int64? != nil, deviceActive: $0["active"])
            }
        }
        if reads.signingKeys {
            facts.signingKeys = try db.all(
                "SELECT kid, algorithm, private_key, created_at FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at, kid", []
            ).map {
                SigningKeyRecord(kid: $0["kid"], algorithm: $0["algorithm"], privateKey: $0["private_key"], createdAt: Timestamp(milliseconds: $0["created_at"]))
            }
        }
        return facts
    }

    /// `a`'s migration flag at the first argument's time: a pending transfer that has not expired.
    static let migrationFlag = "EXISTS (SELECT 1 FROM transfers t WHERE t.account_id = a.id AND t.state = 'pending' AND t.expires_at > ?)"

    /// One effect as SQL.
    static func apply(_ effect: Effect, to db: Database) throws {
        switch effect {
        case .createAccount(let id, let userName, let at):
            try db.run("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [id, userName, at.milliseconds])
        case .bindDevice(let device, let account, let secretHash, let at):
            try db.run(
                "INSERT INTO device_bindings (id, device_id, account_id, secret_hash, state, bound_at, last_login_at) VALUES (?, ?, ?, ?, 'active', ?, ?)",
                [Identifier.make(), device, account, Data(secretHash.bytes), at.milliseconds, at.milliseconds])
        case .recordLogin(let device, let at):
            try db.run("UPDATE device_bindings SET last_login_at = ? WHERE device_id = ? AND state = 'active'", [at.milliseconds, device])
        case .endBinding(let device, let account, let state, let reason, let at):
            try db.run(
                "UPDATE device_bindings SET state = ?, ended_at = ?, ended_reason = ? WHERE device_id = ? AND account_id = ? AND state = 'active'",
                [state.rawValue, at.milliseconds, reason, device, account])
        case .setMovedTo(let account, let device):
            try db.run("UPDATE accounts SET moved_to_device_id = ? WHERE id = ?", [device, account])
        case .openSession(let s, let account, let device, let at):
            try db.run("INSERT INTO sessions (id, account_id, device_id, created_at) VALUES (?, ?, ?, ?)", [s.sessionID, account, device, at.milliseconds])
            try insertRefreshToken(db, s.refreshTokenHash, sessionID: s.sessionID, at: at, expiresAt: s.refreshExpiresAt)
        case .rotateRefreshToken(let used, let next, let session, let at, let expiresAt):
            try db.run("UPDATE refresh_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL", [at.milliseconds, Data(used.bytes)])
            try insertRefreshToken(db, next, sessionID: session, at: at, expiresAt: expiresAt)
        case .revokeSession(let id, let at):
            try db.run("UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", [at.milliseconds, id])
        case .revokeSessions(let account, let device, let at):
            try db.run(
                "UPDATE sessions SET revoked_at = ? WHERE account_id = ? AND device_id = ? AND revoked_at IS NULL",
                [at.milliseconds, account, device])
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
        }
    }

    static func insertRefreshToken(_ db: Database, _ hash: SecretHash, sessionID: String, at: Timestamp, expiresAt: Timestamp) throws {
        try db.run(
            "INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
            [Data(hash.bytes), sessionID, at.milliseconds, expiresAt.milliseconds])
    }

    // MARK: Reads outside operations

    public func ping() async throws {
        _ = try await pool.read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT 1")) }
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
                "SELECT device_id, bound_at, last_login_at FROM device_bindings WHERE account_id = ? AND state = 'active' ORDER BY bound_at",
                [accountID]
            ).map {
                AccountProfile.Device(
                    deviceID: $0["device_id"], boundAt: Timestamp(milliseconds: $0["bound_at"]),
                    lastLoginAt: ($0["last_login_at"] as Int64?).map(Timestamp.init(milliseconds:)))
            }
            return AccountProfile(
                accountID: accountID, userName: account["user_name"], createdAt: Timestamp(milliseconds: account["created_at"]),
                movedToDeviceID: account["moved_to_device_id"], transfer: transfer, activeDevices: devices)
        }
    }

    public func pendingTransfer(emailKey: String) async throws -> TransferRecord? {
        try await pool.read { db in
            try db.one("SELECT * FROM transfers WHERE email_key = ? AND state = 'pending'", [emailKey]).map(Self.transfer)
        }
    }

    // MARK: Rows

    static func binding(_ row: Row) throws -> DeviceBinding {
        DeviceBinding(
            deviceID: row["device_id"], accountID: row["account_id"],
            secretHash: SecretHash(bytes: [UInt8](row["secret_hash"] as Data)),
            state: try UnknownStoredValue.decode(row["state"], column: "device_bindings.state"),
            boundAt: Timestamp(milliseconds: row["bound_at"]),
            lastLoginAt: (row["last_login_at"] as Int64?).map(Timestamp.init(milliseconds:)),
            endedAt: (row["ended_at"] as Int64?).map(Timestamp.init(milliseconds:)), endedReason: row["ended_reason"])
    }

    static func transfer(_ row: Row) throws -> TransferRecord {
        TransferRecord(
            id: row["id"], accountID: row["account_id"], email: row["email"], emailKey: row["email_key"],
            passwordHash: row["password_hash"], state: try UnknownStoredValue.decode(row["state"], column: "transfers.state"),
            createdAt: Timestamp(milliseconds: row["created_at"]), expiresAt: Timestamp(milliseconds: row["expires_at"]),
            failedConsecutive: row["failed_consecutive"], failedTotal: row["failed_total"],
            lockedUntil: (row["locked_until"] as Int64?).map(Timestamp.init(milliseconds:)))
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
