import Foundation
import Logging
import PostgresNIO
import TransferCore

/// The multi-node store: every node talks to one PostgreSQL database through a pooled
/// `PostgresClient`, which must be running (`run()`, as a service of the server) before any query.
///
/// Each `TransferStore` method is one transaction at READ COMMITTED. Rows that a decision
/// depends on are read `FOR UPDATE`, so concurrent requests on any node serialise on them;
/// inserts that race (two first launches of one device, two set-ups of one email) meet the
/// schema's unique indexes, and the transaction is retried, then sees the winner's row.
public final class PostgresStore: TransferStore {
    public let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger = Logger(label: "transfer.postgres")) {
        self.client = client
        self.logger = logger
    }

    /// A client for a `postgres://user:pass@host:port/db` URL.
    public static func makeClient(url: String, maxConnections: Int = 20, logger: Logger) throws(InvalidDatabaseURL) -> PostgresClient {
        guard let components = URLComponents(string: url), let host = components.host, !host.isEmpty,
            let user = components.user, !user.isEmpty
        else {
            throw InvalidDatabaseURL(description: "'\(DatabaseLocation.redacted(url))' is not postgres://user:pass@host:5432/db")
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let query = Dictionary(
            (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let tls: PostgresClient.Configuration.TLS = query["sslmode"] == "require" ? .require(.makeClientConfiguration()) : .disable
        var config = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: user, password: components.password,
            database: database.isEmpty ? nil : database, tls: tls)
        config.options.maximumConnections = maxConnections
        config.options.connectTimeout = .seconds(5)
        return PostgresClient(configuration: config, backgroundLogger: logger)
    }

    // MARK: Migrations

    static let advisoryLockKey: Int64 = 0x7472_616E_7366_6572  // "transfer"

    /// Applies pending versioned migrations. Nodes that start together wait on an advisory
    /// lock, so exactly one migrates and the others find the work done.
    public func migrate() async throws {
        try await client.withConnection { conn in
            try await conn.query("SELECT pg_advisory_lock(\(Self.advisoryLockKey))", logger: logger)
            do {
                try await conn.query(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)",
                    logger: logger)
                var applied = Set<String>()
                for try await version in try await conn.query("SELECT version FROM schema_migrations", logger: logger).decode(String.self) {
                    applied.insert(version)
                }
                for (version, sql) in try Self.migrations() where !applied.contains(version) {
                    try await conn.query("BEGIN", logger: logger)
                    do {
                        for statement in Self.statements(sql) {
                            try await conn.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                        }
                        let now = Timestamp(Date()).milliseconds
                        try await conn.query("INSERT INTO schema_migrations (version, applied_at) VALUES (\(version), \(now))", logger: logger)
                        try await conn.query("COMMIT", logger: logger)
                    } catch {
                        _ = try? await conn.query("ROLLBACK", logger: logger)
                        throw error
                    }
                }
            } catch {
                _ = try? await conn.query("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))", logger: logger)
                throw error
            }
            try await conn.query("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))", logger: logger)
        }
    }

    /// Versioned migrations, `Resources/migrations/vN.sql`; a new schema change is a new file
    /// appended here. `schema.postgres.sql` at the repository's root is what they add up to.
    static func migrations() throws -> [(String, String)] {
        try ["v1", "v2"].map { version in
            guard let url = Bundle.module.url(forResource: version, withExtension: "sql", subdirectory: "migrations") else {
                throw MissingSchema()
            }
            return (version, try String(contentsOf: url, encoding: .utf8))
        }
    }

    struct MissingSchema: Error {}

    /// The statements of a schema file: comments dropped, split at `;` ending a line.
    static func statements(_ sql: String) -> [String] {
        let lines = sql.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            if let dash = line.range(of: "--") { return line[..<dash.lowerBound] }
            return line
        }
        return lines.joined(separator: "\n").components(separatedBy: ";\n")
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines).trimmingCharacters(in: CharacterSet(charactersIn: ";")) }
            .filter { !$0.isEmpty }
    }

    // MARK: Transactions

    /// Runs `body` in one transaction, retrying when a concurrent transaction won a race
    /// (unique violation, serialization failure, deadlock).
    func transaction<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await client.withConnection { conn in
                    try await conn.query("BEGIN", logger: logger)
                    do {
                        let value = try await body(conn)
                        try await conn.query("COMMIT", logger: logger)
                        return value
                    } catch {
                        _ = try? await conn.query("ROLLBACK", logger: logger)
                        throw error
                    }
                }
            } catch let error as PSQLError where attempt < 8 && Self.isRace(error) {
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...(5 * attempt))))
            }
        }
    }

    static func isRace(_ error: PSQLError) -> Bool {
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return ["23505", "40001", "40P01"].contains(state)
    }

    func one(_ conn: PostgresConnection, _ query: PostgresQuery) async throws -> PostgresRandomAccessRow? {
        for try await row in try await conn.query(query, logger: logger) {
            return row.makeRandomAccess()
        }
        return nil
    }

    func all(_ conn: PostgresConnection, _ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
        var rows: [PostgresRandomAccessRow] = []
        for try await row in try await conn.query(query, logger: logger) { rows.append(row.makeRandomAccess()) }
        return rows
    }

    func run(_ conn: PostgresConnection, _ query: PostgresQuery) async throws {
        try await conn.query(query, logger: logger)
    }

    // MARK: TransferStore

    /// Answers within 2 seconds, or throws: `/readyz` must not hang while the database is down.
    public func ping() async throws {
        let client = client
        try await Self.withTimeout(.seconds(2)) {
            _ = try await client.query("SELECT 1")
        }
    }

    public func login(_ c: LoginCommand) async throws -> LoginResult {
        if let account = try await loginActiveDevice(c) { return .loggedIn(account, created: false) }
        return try await execute(c)
    }

    /// The common case of `LoginCommand` — an active binding whose secret matches — as one
    /// statement, so one round trip instead of eight (BEGIN, lock, four writes, read, COMMIT).
    /// The UPDATE's row lock and WHERE clause are the check-then-act: a claim that retires the
    /// device at the same time either commits first (no row: the transaction path below then
    /// answers with the device's real state) or waits for this login. Parent rows of the
    /// sibling inserts exist when the foreign keys are checked, at the end of the statement.
    /// The secret is compared as SHA-256 digests, so the comparison's timing tells nothing.
    /// `nil`: not that case; the caller runs `LoginCommand` through `execute`.
    func loginActiveDevice(_ c: LoginCommand) async throws -> SessionAccount? {
        try await client.withConnection { conn in
            for try await row in try await conn.execute(LoginActiveDevice(c), logger: logger) { return row }
            return nil
        }
    }

    /// A prepared statement: each pooled connection plans it once, not on every login.
    struct LoginActiveDevice: PostgresPreparedStatement {
        static let sql = """
            WITH b AS (
                UPDATE device_bindings SET last_login_at = $1
                WHERE device_id = $2 AND state = 'active' AND secret_hash = $3
                RETURNING account_id
            ), s AS (
                INSERT INTO sessions (id, account_id, device_id, created_at)
                SELECT $4, account_id, $2, $1 FROM b
            ), r AS (
                INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at)
                SELECT $5, $4, $1, $6 FROM b
            ), e AS (
                INSERT INTO audit_events (at, kind, account_id, device_id, actor, client_address)
                SELECT $1, '\(AuditEvent.Kind.login.rawValue)', account_id, $2, '\(Initiator.device)', $7 FROM b
            )
            SELECT a.id, a.user_name,
                   EXISTS (SELECT 1 FROM transfers t WHERE t.account_id = a.id AND t.state = 'pending' AND t.expires_at > $1) AS flag
            FROM b JOIN accounts a ON a.id = b.account_id
            """
        typealias Row = SessionAccount
        let command: LoginCommand
        init(_ command: LoginCommand) { self.command = command }

        func makeBindings() throws -> PostgresBindings {
            let c = command
            var bindings = PostgresBindings(capacity: 7)
            bindings.append(c.now.milliseconds)
            bindings.append(c.deviceID.value)
            try bindings.append(Data(c.secretHash.bytes))
            bindings.append(c.session.sessionID)
            try bindings.append(Data(c.session.refreshTokenHash.bytes))
            bindings.append(c.session.refreshExpiresAt.milliseconds)
            if let address = c.clientAddress { bindings.append(address) } else { bindings.appendNull() }
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> SessionAccount {
            let (id, userName, flag) = try row.decode((String, String, Bool).self)
            return SessionAccount(accountID: id, userName: userName, migrationFlag: flag)
        }
    }

    // MARK: Operations

    public func execute<Operation: StoreOperation>(_ operation: Operation) async throws -> Operation.Result {
        try await transaction { conn in
            let plan = operation.plan(try await read(conn, operation.reads, at: operation.now))
            for effect in plan.effects { try await apply(effect, conn) }
            return plan.result
        }
    }

    /// Reads what an operation depends on, locking the rows its decision rests on, so a
    /// concurrent operation on any node waits until this one commits.
    func read(_ conn: PostgresConnection, _ reads: Reads, at now: Timestamp) async throws -> Facts {
        var facts = Facts()
        let flag = Self.migrationFlag(at: now)
        if let id = reads.transfer {
            facts.transfer = try await one(conn, "SELECT * FROM transfers WHERE id = \(id) FOR UPDATE").map(Self.transfer)
        }
        if let q = reads.pendingTransfers {
            facts.pendingTransfers = try await all(conn, """
                SELECT * FROM transfers WHERE state = 'pending' AND (account_id = \(q.accountID) OR email_key = \(q.emailKey))
                ORDER BY created_at, id FOR UPDATE
                """).map(Self.transfer)
        }
        if let device = reads.device {
            facts.device = try await one(conn, """
                SELECT b.*, a.user_name, \(unescaped: flag) AS flag
                FROM device_bindings b JOIN accounts a ON a.id = b.account_id
                WHERE b.device_id = \(device) AND b.state IN ('active', 'moved', 'revoked')
                FOR UPDATE OF b
                """).map { (try Self.binding($0), try Self.sessionAccount($0)) }
        }
        if let account = reads.accountDevices {
            facts.accountDevices = try await all(conn, """
                SELECT device_id FROM device_bindings WHERE account_id = \(account) AND state = 'active' ORDER BY bound_at, id FOR UPDATE
                """).map { try $0["device_id"].decode(String.self) }
        }
        if let account = reads.account {
            facts.account = try await one(conn, """
                SELECT a.id AS account_id, a.user_name, \(unescaped: flag) AS flag FROM accounts a WHERE a.id = \(account)
                """).map(Self.sessionAccount)
        }
        if let hash = reads.refreshToken {
            facts.refreshToken = try await one(conn, """
                SELECT r.session_id, r.expires_at, r.used_at, s.account_id, s.device_id, s.revoked_at, a.user_name,
                       \(unescaped: flag) AS flag,
                       EXISTS (SELECT 1 FROM device_bindings b
                               WHERE b.device_id = s.device_id AND b.account_id = s.account_id AND b.state = 'active') AS active
                FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id JOIN accounts a ON a.id = s.account_id
                WHERE r.token_hash = \(Data(hash.bytes))
                FOR UPDATE OF r, s
                """).map {
                RefreshTokenState(
                    sessionID: try $0["session_id"].decode(String.self), account: try Self.sessionAccount($0),
                    deviceID: try $0["device_id"].decode(String.self),
                    expiresAt: Timestamp(milliseconds: try $0["expires_at"].decode(Int64.self)),
                    used: try $0["used_at"].decode(Int64?.self) != nil, sessionRevoked: try $0["revoked_at"].decode(Int64?.self) != nil,
                    deviceActive: try $0["active"].decode(Bool.self))
            }
        }
        if reads.signingKeys {
            // Nodes starting together on an empty table: one inserts the key, the others then read it.
            try await run(conn, "SELECT pg_advisory_xact_lock(\(Self.advisoryLockKey + 1))")
            facts.signingKeys = try await all(conn, """
                SELECT kid, algorithm, private_key, created_at FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at, kid
                """).map {
                SigningKeyRecord(
                    kid: try $0["kid"].decode(String.self), algorithm: try $0["algorithm"].decode(String.self),
                    privateKey: try $0["private_key"].decode(String.self), createdAt: Timestamp(milliseconds: try $0["created_at"].decode(Int64.self)))
            }
        }
        return facts
    }

    /// `a`'s migration flag at `now`: a pending transfer that has not expired. `now` is an
    /// integer, so writing it into the SQL text is safe.
    static func migrationFlag(at now: Timestamp) -> String {
        "EXISTS (SELECT 1 FROM transfers t WHERE t.account_id = a.id AND t.state = 'pending' AND t.expires_at > \(now.milliseconds))"
    }

    /// One effect as SQL.
    func apply(_ effect: Effect, _ conn: PostgresConnection) async throws {
        switch effect {
        case .createAccount(let id, let userName, let at):
            try await run(conn, "INSERT INTO accounts (id, user_name, created_at) VALUES (\(id), \(userName), \(at.milliseconds))")
        case .bindDevice(let device, let account, let secretHash, let at):
            try await run(conn, """
                INSERT INTO device_bindings (id, device_id, account_id, secret_hash, state, bound_at, last_login_at)
                VALUES (\(Identifier.make()), \(device), \(account), \(Data(secretHash.bytes)), 'active', \(at.milliseconds), \(at.milliseconds))
                """)
        case .recordLogin(let device, let at):
            try await run(conn, "UPDATE device_bindings SET last_login_at = \(at.milliseconds) WHERE device_id = \(device) AND state = 'active'")
        case .endBinding(let device, let account, let state, let reason, let at):
            try await run(conn, """
                UPDATE device_bindings SET state = \(state.rawValue), ended_at = \(at.milliseconds), ended_reason = \(reason)
                WHERE device_id = \(device) AND account_id = \(account) AND state = 'active'
                """)
        case .setMovedTo(let account, let device):
            try await run(conn, "UPDATE accounts SET moved_to_device_id = \(device) WHERE id = \(account)")
        case .openSession(let s, let account, let device, let at):
            try await run(conn, "INSERT INTO sessions (id, account_id, device_id, created_at) VALUES (\(s.sessionID), \(account), \(device), \(at.milliseconds))")
            try await insertRefreshToken(conn, s.refreshTokenHash, sessionID: s.sessionID, at: at, expiresAt: s.refreshExpiresAt)
        case .rotateRefreshToken(let used, let next, let session, let at, let expiresAt):
            try await run(conn, "UPDATE refresh_tokens SET used_at = \(at.milliseconds) WHERE token_hash = \(Data(used.bytes)) AND used_at IS NULL")
            try await insertRefreshToken(conn, next, sessionID: session, at: at, expiresAt: expiresAt)
        case .revokeSession(let id, let at):
            try await run(conn, "UPDATE sessions SET revoked_at = \(at.milliseconds) WHERE id = \(id) AND revoked_at IS NULL")
        case .revokeSessions(let account, let device, let at):
            try await run(conn, """
                UPDATE sessions SET revoked_at = \(at.milliseconds) WHERE account_id = \(account) AND device_id = \(device) AND revoked_at IS NULL
                """)
        case .createTransfer(let t):
            try await run(conn, """
                INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at, issued_by)
                VALUES (\(t.id), \(t.accountID), \(t.email.display), \(t.email.key), \(t.passwordHash), 'pending',
                        \(t.createdAt.milliseconds), \(t.expiresAt.milliseconds), \(t.issuedBy.description))
                """)
        case .endTransfer(let id, let state, let at, let claimedBy):
            try await run(conn, """
                UPDATE transfers SET state = \(state.rawValue), ended_at = \(at.milliseconds), claimed_by_device = \(claimedBy)
                WHERE id = \(id) AND state = 'pending'
                """)
        case .countFailures(let id, let consecutive, let total, let lockedUntil):
            try await run(conn, """
                UPDATE transfers SET failed_consecutive = \(consecutive), failed_total = \(total), locked_until = \(lockedUntil?.milliseconds)
                WHERE id = \(id)
                """)
        case .unlockTransfer(let id):
            try await run(conn, "UPDATE transfers SET locked_until = NULL, failed_consecutive = 0 WHERE id = \(id)")
        case .addSigningKey(let key):
            try await run(conn, """
                INSERT INTO signing_keys (kid, algorithm, private_key, created_at)
                VALUES (\(key.kid), \(key.algorithm), \(key.privateKey), \(key.createdAt.milliseconds))
                """)
        case .audit(let e):
            try await run(conn, """
                INSERT INTO audit_events (at, kind, account_id, device_id, transfer_id, actor, reason, client_address)
                VALUES (\(e.at.milliseconds), \(e.kind.rawValue), \(e.accountID), \(e.deviceID), \(e.transferID), \(e.actor.description),
                        \(e.reason), \(e.clientAddress))
                """)
        }
    }

    func insertRefreshToken(_ conn: PostgresConnection, _ hash: SecretHash, sessionID: String, at: Timestamp, expiresAt: Timestamp) async throws {
        try await run(conn, """
            INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at)
            VALUES (\(Data(hash.bytes)), \(sessionID), \(at.milliseconds), \(expiresAt.milliseconds))
            """)
    }

    // MARK: Reads outside operations

    public func isSessionValid(sessionID: String, accountID: String, deviceID: String) async throws -> Bool {
        try await client.withConnection { conn in
            try await one(conn, """
                SELECT 1 FROM sessions s
                JOIN device_bindings b ON b.device_id = s.device_id AND b.account_id = s.account_id AND b.state = 'active'
                WHERE s.id = \(sessionID) AND s.account_id = \(accountID) AND s.device_id = \(deviceID) AND s.revoked_at IS NULL
                """) != nil
        }
    }

    public func profile(accountID: String, at now: Timestamp) async throws -> AccountProfile? {
        try await client.withConnection { conn in
            guard let account = try await one(conn, "SELECT user_name, created_at, moved_to_device_id FROM accounts WHERE id = \(accountID)") else {
                return nil
            }
            let transfer = try await one(conn, """
                SELECT email, created_at, expires_at FROM transfers
                WHERE account_id = \(accountID) AND state = 'pending' AND expires_at > \(now.milliseconds)
                """).map {
                AccountProfile.PendingTransfer(
                    email: try $0["email"].decode(String.self), createdAt: Timestamp(milliseconds: try $0["created_at"].decode(Int64.self)),
                    expiresAt: Timestamp(milliseconds: try $0["expires_at"].decode(Int64.self)))
            }
            let devices = try await all(conn, """
                SELECT device_id, bound_at, last_login_at FROM device_bindings
                WHERE account_id = \(accountID) AND state = 'active' ORDER BY bound_at
                """).map {
                AccountProfile.Device(
                    deviceID: try $0["device_id"].decode(String.self), boundAt: Timestamp(milliseconds: try $0["bound_at"].decode(Int64.self)),
                    lastLoginAt: try $0["last_login_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)))
            }
            return AccountProfile(
                accountID: accountID, userName: try account["user_name"].decode(String.self),
                createdAt: Timestamp(milliseconds: try account["created_at"].decode(Int64.self)),
                movedToDeviceID: try account["moved_to_device_id"].decode(String?.self), transfer: transfer, activeDevices: devices)
        }
    }

    public func pendingTransfer(emailKey: String) async throws -> TransferRecord? {
        try await client.withConnection { conn in
            try await one(conn, "SELECT * FROM transfers WHERE email_key = \(emailKey) AND state = 'pending'").map(Self.transfer)
        }
    }

    // MARK: Rows

    static func binding(_ row: PostgresRandomAccessRow) throws -> DeviceBinding {
        DeviceBinding(
            deviceID: try row["device_id"].decode(String.self), accountID: try row["account_id"].decode(String.self),
            secretHash: SecretHash(bytes: [UInt8](try row["secret_hash"].decode(Data.self))),
            state: try UnknownStoredValue.decode(try row["state"].decode(String.self), column: "device_bindings.state"),
            boundAt: Timestamp(milliseconds: try row["bound_at"].decode(Int64.self)),
            lastLoginAt: try row["last_login_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            endedAt: try row["ended_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            endedReason: try row["ended_reason"].decode(String?.self))
    }

    static func transfer(_ row: PostgresRandomAccessRow) throws -> TransferRecord {
        TransferRecord(
            id: try row["id"].decode(String.self), accountID: try row["account_id"].decode(String.self),
            email: try row["email"].decode(String.self), emailKey: try row["email_key"].decode(String.self),
            passwordHash: try row["password_hash"].decode(String.self),
            state: try UnknownStoredValue.decode(try row["state"].decode(String.self), column: "transfers.state"),
            createdAt: Timestamp(milliseconds: try row["created_at"].decode(Int64.self)),
            expiresAt: Timestamp(milliseconds: try row["expires_at"].decode(Int64.self)),
            failedConsecutive: Int(try row["failed_consecutive"].decode(Int32.self)), failedTotal: Int(try row["failed_total"].decode(Int32.self)),
            lockedUntil: try row["locked_until"].decode(Int64?.self).map(Timestamp.init(milliseconds:)))
    }

    /// `account_id`, `user_name` and `flag` of a row.
    static func sessionAccount(_ row: PostgresRandomAccessRow) throws -> SessionAccount {
        SessionAccount(
            accountID: try row["account_id"].decode(String.self), userName: try row["user_name"].decode(String.self),
            migrationFlag: try row["flag"].decode(Bool.self))
    }
}

extension PostgresStore {
    /// Runs `operation`, or throws `TimedOut` after `limit` (a database that does not answer
    /// makes connection leases wait; callers that must answer promptly bound them).
    public static func withTimeout<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try await Task.sleep(for: limit)
                throw TimedOut()
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    public struct TimedOut: Error, CustomStringConvertible {
        public var description: String { "timed out" }
    }

    /// A short, secret-free description of a database error for one-line messages.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            return "\(error.code)"
        }
        if error is TimedOut { return "timed out" }
        return "\(type(of: error))"
    }
}
