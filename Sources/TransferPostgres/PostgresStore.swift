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

    static func migrations() throws -> [(String, String)] {
        guard let url = Bundle.module.url(forResource: "schema.postgres", withExtension: "sql") else {
            throw MissingSchema()
        }
        return [("v1", try String(contentsOf: url, encoding: .utf8))]
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
        return try await transaction { conn in
            let device = c.deviceID.value
            let binding = try await currentBinding(conn, deviceID: device, lock: true)
            switch Rules.login(binding: binding, secretHash: c.secretHash) {
            case .create:
                guard c.allowCreate else { return .creationRefused }
                let account = c.newAccountID
                try await run(conn, "INSERT INTO accounts (id, user_name, created_at) VALUES (\(account), \(device), \(c.now.milliseconds))")
                try await insertBinding(conn, deviceID: device, accountID: account, secretHash: c.secretHash, at: c.now)
                try await openSession(conn, c.session, accountID: account, deviceID: device, at: c.now)
                try await audit(conn, AuditEvent(at: c.now, kind: .accountCreated, accountID: account, deviceID: device, clientAddress: c.clientAddress))
                return .loggedIn(SessionAccount(accountID: account, userName: device, migrationFlag: false), created: true)
            case .login(let account):
                try await run(conn, "UPDATE device_bindings SET last_login_at = \(c.now.milliseconds) WHERE device_id = \(device) AND state = 'active'")
                try await openSession(conn, c.session, accountID: account, deviceID: device, at: c.now)
                try await audit(conn, AuditEvent(at: c.now, kind: .login, accountID: account, deviceID: device, clientAddress: c.clientAddress))
                return .loggedIn(try await sessionAccount(conn, accountID: account, at: c.now), created: false)
            case .reject(let error):
                try await audit(conn, AuditEvent(at: c.now, kind: .loginFailed, accountID: binding?.accountID, deviceID: device, reason: error.code, clientAddress: c.clientAddress))
                return .rejected(error)
            }
        }
    }

    /// The common case of `Rules.login` — an active binding whose secret matches — as one
    /// statement, so one round trip instead of eight (BEGIN, lock, four writes, read, COMMIT).
    /// The UPDATE's row lock and WHERE clause are the check-then-act: a claim that retires the
    /// device at the same time either commits first (no row: the transaction path below then
    /// answers with the device's real state) or waits for this login. Parent rows of the
    /// sibling inserts exist when the foreign keys are checked, at the end of the statement.
    /// The secret is compared as SHA-256 digests, so the comparison's timing tells nothing.
    /// `nil`: not that case; the caller decides through `Rules` in a transaction.
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
                SELECT $1, '\(AuditEvent.Kind.login.rawValue)', account_id, $2, 'device', $7 FROM b
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

    public func refresh(_ c: RefreshCommand) async throws -> RefreshResult {
        try await transaction { conn in
            let hash = Data(c.tokenHash.bytes)
            let row = try await one(conn, """
                SELECT r.session_id, r.expires_at, r.used_at, s.account_id, s.device_id, s.revoked_at,
                       EXISTS (SELECT 1 FROM device_bindings b
                               WHERE b.device_id = s.device_id AND b.account_id = s.account_id AND b.state = 'active') AS active
                FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id
                WHERE r.token_hash = \(hash)
                FOR UPDATE OF r, s
                """)
            let state = try row.map {
                RefreshTokenState(
                    sessionID: try $0["session_id"].decode(String.self), accountID: try $0["account_id"].decode(String.self),
                    deviceID: try $0["device_id"].decode(String.self),
                    expiresAt: Timestamp(milliseconds: try $0["expires_at"].decode(Int64.self)),
                    used: try $0["used_at"].decode(Int64?.self) != nil, sessionRevoked: try $0["revoked_at"].decode(Int64?.self) != nil,
                    deviceActive: try $0["active"].decode(Bool.self))
            }
            switch Rules.refresh(state, now: c.now) {
            case .reject:
                return .rejected
            case .revokeFamily:
                guard let state else { return .rejected }
                try await run(conn, "UPDATE sessions SET revoked_at = \(c.now.milliseconds) WHERE id = \(state.sessionID) AND revoked_at IS NULL")
                try await audit(conn, AuditEvent(at: c.now, kind: .refreshReuse, accountID: state.accountID, deviceID: state.deviceID))
                return .rejected
            case .rotate:
                guard let state else { return .rejected }
                try await run(conn, "UPDATE refresh_tokens SET used_at = \(c.now.milliseconds) WHERE token_hash = \(hash)")
                try await insertRefreshToken(conn, hash: c.next, sessionID: state.sessionID, at: c.now, expiresAt: c.nextExpiresAt)
                return .rotated(try await sessionAccount(conn, accountID: state.accountID, at: c.now), deviceID: state.deviceID, sessionID: state.sessionID)
            }
        }
    }

    public func logout(accountID: String, deviceID: String, at: Timestamp) async throws {
        try await transaction { conn in
            try await revokeSessions(conn, accountID: accountID, deviceID: deviceID, at: at)
            try await audit(conn, AuditEvent(at: at, kind: .logout, accountID: accountID, deviceID: deviceID))
        }
    }

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
            guard let account = try await one(conn, "SELECT user_name, created_at, transfer_id FROM accounts WHERE id = \(accountID)") else {
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
                transferID: try account["transfer_id"].decode(String?.self), transfer: transfer, activeDevices: devices)
        }
    }

    public func revokeDevice(deviceID: String, at: Timestamp, actor: String, reason: String?) async throws -> String? {
        try await transaction { conn in
            guard let row = try await one(conn, """
                UPDATE device_bindings SET state = 'revoked', ended_at = \(at.milliseconds), ended_reason = \(reason)
                WHERE device_id = \(deviceID) AND state = 'active' RETURNING account_id
                """) else { return nil }
            let account = try row["account_id"].decode(String.self)
            try await revokeSessions(conn, accountID: account, deviceID: deviceID, at: at)
            try await audit(conn, AuditEvent(at: at, kind: .deviceRevoked, accountID: account, deviceID: deviceID, actor: actor, reason: reason))
            return account
        }
    }

    public func setUpTransfer(_ c: SetUpCommand) async throws -> SetUpResult {
        try await transaction { conn in
            let now = c.now.milliseconds
            try await run(conn, """
                UPDATE transfers SET state = 'expired', ended_at = \(now)
                WHERE state = 'pending' AND expires_at <= \(now) AND (email_key = \(c.email.key) OR account_id = \(c.accountID))
                """)
            if let holder = try await one(conn, "SELECT account_id FROM transfers WHERE email_key = \(c.email.key) AND state = 'pending' FOR UPDATE"),
                try holder["account_id"].decode(String.self) != c.accountID
            {
                return .emailInUse
            }
            try await run(conn, "UPDATE transfers SET state = 'replaced', ended_at = \(now) WHERE account_id = \(c.accountID) AND state = 'pending'")
            try await run(conn, """
                INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at, issued_by)
                VALUES (\(c.transferID), \(c.accountID), \(c.email.display), \(c.email.key), \(c.passwordHash), 'pending', \(now), \(c.expiresAt.milliseconds), \(c.actor))
                """)
            try await audit(conn, AuditEvent(
                at: c.now, kind: c.actor == "device" ? .transferSetUp : .transferIssued, accountID: c.accountID,
                transferID: c.transferID, actor: c.actor, reason: c.reason, clientAddress: c.clientAddress))
            return .created
        }
    }

    public func cancelTransfer(accountID: String, at: Timestamp, actor: String, reason: String?) async throws -> Bool {
        try await transaction { conn in
            let t = at.milliseconds
            guard let row = try await one(conn, """
                UPDATE transfers SET state = CASE WHEN expires_at <= \(t) THEN 'expired' ELSE 'cancelled' END, ended_at = \(t)
                WHERE account_id = \(accountID) AND state = 'pending' RETURNING id
                """) else { return false }
            try await audit(conn, AuditEvent(
                at: at, kind: .transferCancelled, accountID: accountID, transferID: try row["id"].decode(String.self), actor: actor, reason: reason))
            return true
        }
    }

    public func pendingTransfer(emailKey: String) async throws -> TransferRecord? {
        try await client.withConnection { conn in
            try await one(conn, "SELECT * FROM transfers WHERE email_key = \(emailKey) AND state = 'pending'").map(Self.transfer)
        }
    }

    public func recordFailedClaim(_ c: FailedClaimCommand) async throws -> FailedClaimResult {
        try await transaction { conn in
            let transfer = try await one(conn, "SELECT * FROM transfers WHERE id = \(c.transferID) FOR UPDATE").map(Self.transfer)
            switch Rules.failure(transfer: transfer, now: c.now, policy: c.policy) {
            case .notCounted(let error):
                return .notCounted(error)
            case .count(let consecutive, let total, let lockedUntil, let voided):
                let now = c.now.milliseconds
                try await run(conn, """
                    UPDATE transfers SET failed_consecutive = \(consecutive), failed_total = \(total), locked_until = \(lockedUntil?.milliseconds),
                        state = CASE WHEN \(voided) THEN 'voided' ELSE state END,
                        ended_at = CASE WHEN \(voided) THEN \(now) ELSE ended_at END
                    WHERE id = \(c.transferID)
                    """)
                let accountID = transfer?.accountID
                try await audit(conn, AuditEvent(at: c.now, kind: .claimFailed, accountID: accountID, transferID: c.transferID, clientAddress: c.clientAddress))
                if voided {
                    try await audit(conn, AuditEvent(at: c.now, kind: .transferVoided, accountID: accountID, transferID: c.transferID, actor: "system", reason: "\(total) wrong passwords"))
                    return .voided
                }
                if let lockedUntil {
                    try await audit(conn, AuditEvent(at: c.now, kind: .transferLocked, accountID: accountID, transferID: c.transferID, actor: "system", reason: "\(c.policy.consecutiveFailures) wrong passwords in a row"))
                    return .locked(until: lockedUntil)
                }
                return .counted
            }
        }
    }

    public func claim(_ c: ClaimCommand) async throws -> ClaimResult {
        try await transaction { conn in
            let transfer = try await one(conn, "SELECT * FROM transfers WHERE id = \(c.transferID) FOR UPDATE").map(Self.transfer)
            let newDevice = c.deviceID.value
            let device = try await currentBinding(conn, deviceID: newDevice, lock: true)
            let decision = Rules.claim(
                transfer: transfer, expectedTransferID: c.transferID, device: device, secretHash: c.secretHash,
                replaceExistingAccount: c.replaceExistingAccount, now: c.now)
            guard case .proceed(let takeOverFrom) = decision, let transfer else {
                if case .reject(let error) = decision { return .rejected(error) }
                return .rejected(.invalidTransferCredentials)
            }
            let now = c.now.milliseconds
            let account = transfer.accountID
            if let other = takeOverFrom {
                let why = "taken over by account \(account) (replaceExistingAccount)"
                try await run(conn, "UPDATE device_bindings SET state = 'replaced', ended_at = \(now), ended_reason = \(why) WHERE device_id = \(newDevice) AND state = 'active'")
                try await revokeSessions(conn, accountID: other, deviceID: newDevice, at: c.now)
                try await audit(conn, AuditEvent(at: c.now, kind: .deviceReplaced, accountID: other, deviceID: newDevice, transferID: transfer.id, reason: "claimed account \(account) with replaceExistingAccount", clientAddress: c.clientAddress))
            }
            let moved = "moved to device \(newDevice)"
            for row in try await all(conn, "SELECT device_id FROM device_bindings WHERE account_id = \(account) AND state = 'active' FOR UPDATE") {
                let old = try row["device_id"].decode(String.self)
                try await run(conn, "UPDATE device_bindings SET state = 'moved', ended_at = \(now), ended_reason = \(moved) WHERE account_id = \(account) AND device_id = \(old) AND state = 'active'")
                try await revokeSessions(conn, accountID: account, deviceID: old, at: c.now)
                try await audit(conn, AuditEvent(at: c.now, kind: .deviceMoved, accountID: account, deviceID: old, transferID: transfer.id, reason: moved, clientAddress: c.clientAddress))
            }
            try await insertBinding(conn, deviceID: newDevice, accountID: account, secretHash: c.secretHash, at: c.now)
            try await run(conn, "UPDATE transfers SET state = 'claimed', ended_at = \(now), claimed_by_device = \(newDevice) WHERE id = \(transfer.id) AND state = 'pending'")
            try await run(conn, "UPDATE accounts SET transfer_id = \(newDevice) WHERE id = \(account)")
            try await openSession(conn, c.session, accountID: account, deviceID: newDevice, at: c.now)
            try await audit(conn, AuditEvent(at: c.now, kind: .transferClaimed, accountID: account, deviceID: newDevice, transferID: transfer.id, clientAddress: c.clientAddress))
            let userName = try await one(conn, "SELECT user_name FROM accounts WHERE id = \(account)")?["user_name"].decode(String.self) ?? ""
            return .claimed(SessionAccount(accountID: account, userName: userName, migrationFlag: false))
        }
    }

    public func signingKeys(insertingIfNone candidate: SigningKeyRecord) async throws -> [SigningKeyRecord] {
        try await transaction { conn in
            try await run(conn, "SELECT pg_advisory_xact_lock(\(Self.advisoryLockKey + 1))")
            let select: PostgresQuery = "SELECT kid, algorithm, private_key, created_at FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at, kid"
            if try await one(conn, select) == nil {
                try await run(conn, """
                    INSERT INTO signing_keys (kid, algorithm, private_key, created_at)
                    VALUES (\(candidate.kid), \(candidate.algorithm), \(candidate.privateKey), \(candidate.createdAt.milliseconds))
                    """)
            }
            return try await all(conn, select).map {
                SigningKeyRecord(
                    kid: try $0["kid"].decode(String.self), algorithm: try $0["algorithm"].decode(String.self),
                    privateKey: try $0["private_key"].decode(String.self), createdAt: Timestamp(milliseconds: try $0["created_at"].decode(Int64.self)))
            }
        }
    }

    // MARK: Shared pieces

    func currentBinding(_ conn: PostgresConnection, deviceID: String, lock: Bool) async throws -> DeviceBinding? {
        let query: PostgresQuery = lock
            ? "SELECT * FROM device_bindings WHERE device_id = \(deviceID) AND state IN ('active', 'moved', 'revoked') FOR UPDATE"
            : "SELECT * FROM device_bindings WHERE device_id = \(deviceID) AND state IN ('active', 'moved', 'revoked')"
        return try await one(conn, query).map(Self.binding)
    }

    static func binding(_ row: PostgresRandomAccessRow) throws -> DeviceBinding {
        DeviceBinding(
            deviceID: try row["device_id"].decode(String.self), accountID: try row["account_id"].decode(String.self),
            secretHash: SecretHash(bytes: [UInt8](try row["secret_hash"].decode(Data.self))),
            state: DeviceState(rawValue: try row["state"].decode(String.self)) ?? .revoked,
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
            state: TransferState(rawValue: try row["state"].decode(String.self)) ?? .voided,
            createdAt: Timestamp(milliseconds: try row["created_at"].decode(Int64.self)),
            expiresAt: Timestamp(milliseconds: try row["expires_at"].decode(Int64.self)),
            failedConsecutive: Int(try row["failed_consecutive"].decode(Int32.self)), failedTotal: Int(try row["failed_total"].decode(Int32.self)),
            lockedUntil: try row["locked_until"].decode(Int64?.self).map(Timestamp.init(milliseconds:)))
    }

    func sessionAccount(_ conn: PostgresConnection, accountID: String, at now: Timestamp) async throws -> SessionAccount {
        let row = try await one(conn, """
            SELECT a.user_name,
                   EXISTS (SELECT 1 FROM transfers t WHERE t.account_id = a.id AND t.state = 'pending' AND t.expires_at > \(now.milliseconds)) AS flag
            FROM accounts a WHERE a.id = \(accountID)
            """)
        return SessionAccount(
            accountID: accountID, userName: try row?["user_name"].decode(String.self) ?? "", migrationFlag: try row?["flag"].decode(Bool.self) ?? false)
    }

    func insertBinding(_ conn: PostgresConnection, deviceID: String, accountID: String, secretHash: SecretHash, at: Timestamp) async throws {
        try await run(conn, """
            INSERT INTO device_bindings (id, device_id, account_id, secret_hash, state, bound_at, last_login_at)
            VALUES (\(Identifier.make()), \(deviceID), \(accountID), \(Data(secretHash.bytes)), 'active', \(at.milliseconds), \(at.milliseconds))
            """)
    }

    func openSession(_ conn: PostgresConnection, _ s: NewSession, accountID: String, deviceID: String, at: Timestamp) async throws {
        try await run(conn, "INSERT INTO sessions (id, account_id, device_id, created_at) VALUES (\(s.sessionID), \(accountID), \(deviceID), \(at.milliseconds))")
        try await insertRefreshToken(conn, hash: s.refreshTokenHash, sessionID: s.sessionID, at: at, expiresAt: s.refreshExpiresAt)
    }

    func insertRefreshToken(_ conn: PostgresConnection, hash: SecretHash, sessionID: String, at: Timestamp, expiresAt: Timestamp) async throws {
        try await run(conn, """
            INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at)
            VALUES (\(Data(hash.bytes)), \(sessionID), \(at.milliseconds), \(expiresAt.milliseconds))
            """)
    }

    func revokeSessions(_ conn: PostgresConnection, accountID: String, deviceID: String, at: Timestamp) async throws {
        try await run(conn, "UPDATE sessions SET revoked_at = \(at.milliseconds) WHERE account_id = \(accountID) AND device_id = \(deviceID) AND revoked_at IS NULL")
    }

    func audit(_ conn: PostgresConnection, _ e: AuditEvent) async throws {
        try await run(conn, """
            INSERT INTO audit_events (at, kind, account_id, device_id, transfer_id, actor, reason, client_address)
            VALUES (\(e.at.milliseconds), \(e.kind.rawValue), \(e.accountID), \(e.deviceID), \(e.transferID), \(e.actor), \(e.reason), \(e.clientAddress))
            """)
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
