import Foundation
import Logging
import PostgresNIO
import Synchronization
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
    /// When a query last succeeded: tells a busy pool from an unreachable database.
    let health = QueryHealth()

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
                for (version, sql) in Self.migrations where !applied.contains(version) {
                    try await conn.query("BEGIN", logger: logger)
                    do {
                        for statement in Self.statements(String(decoding: sql, as: UTF8.self)) {
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

    /// Versioned migrations, `Resources/migrations/vN.sql`, compiled into the binary (SwiftPM's
    /// `embedInCode`: no resource bundle to deploy beside it); a new schema change is a new file
    /// appended here. `schema.postgres.sql` at the repository's root is what they add up to.
    static let migrations: [(version: String, sql: [UInt8])] = [
        ("v1", PackageResources.v1_sql), ("v2", PackageResources.v2_sql), ("v3", PackageResources.v3_sql),
        ("v4", PackageResources.v4_sql), ("v5", PackageResources.v5_sql), ("v6", PackageResources.v6_sql),
        ("v7", PackageResources.v7_sql), ("v8", PackageResources.v8_sql),
    ]

    /// A query that must answer a row answered none.
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
    /// (unique violation, serialization failure, deadlock). A connection lost before the
    /// COMMIT was sent leaves nothing behind (PostgreSQL rolls back); lost after it, the
    /// outcome is unknown, and the error says so.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await withConnection { [logger] conn in
                    try await conn.query("BEGIN", logger: logger)
                    let value: T
                    do {
                        value = try await body(conn)
                    } catch {
                        _ = try? await conn.query("ROLLBACK", logger: logger)
                        throw error
                    }
                    do {
                        try await conn.query("COMMIT", logger: logger)
                    } catch where Self.isConnectionLoss(error) {
                        throw TransferError.unavailable(outcomeUnknown: true)
                    }
                    return value
                }
            } catch let error as PSQLError where attempt < 8 && Self.isRace(error) {
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...(5 * attempt))))
            }
        }
    }

    /// How long a request waits for a pooled connection while no query succeeds. While
    /// PostgreSQL is unreachable the pool keeps trying to connect and a lease would wait for
    /// it; the contract wants `503` within 2 seconds instead.
    static let leaseTimeout = Duration.seconds(1)

    /// Runs `body` on a pooled connection, or throws `TransferError.unavailable` when the
    /// database cannot be reached: no connection is leased within `leaseTimeout` and no query
    /// succeeded meanwhile. A pool that is merely busy (queries keep succeeding) is waited for.
    /// Only the wait for the lease is cut short: once `body` has started it is never cancelled
    /// (a COMMIT already sent is not interrupted).
    func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let gate = LeaseGate()
        let client = client, health = health
        do {
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    try await client.withConnection { conn in
                        guard gate.start() else { throw TransferError.unavailable(outcomeUnknown: false) }
                        let value = try await body(conn)
                        health.succeeded()
                        return value
                    }
                }
                group.addTask {
                    try? await Task.sleep(for: Self.leaseTimeout)
                    while !Task.isCancelled && !gate.hasStarted && health.succeeded(within: Self.leaseTimeout) {
                        try? await Task.sleep(for: .milliseconds(100))
                    }
                    if gate.expire() { throw TransferError.unavailable(outcomeUnknown: false) }
                    return nil
                }
                while let result = try await group.next() {
                    if let value = result {
                        group.cancelAll()
                        return value
                    }
                }
                throw TransferError.unavailable(outcomeUnknown: false)
            }
        } catch let error as TransferError {
            throw error
        } catch where Self.isConnectionLoss(error) {
            throw TransferError.unavailable(outcomeUnknown: false)
        }
    }

    /// Whether `error` means the database could not be reached or the connection broke (as
    /// opposed to a statement the database refused, which is a bug or a race).
    static func isConnectionLoss(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError else {
            // The pool's and NIO's own errors (connection refused, circuit breaker, channel closed).
            // Our own errors and decoding failures are bugs, not outages: they stay 500s.
            return !(error is PostgresDecodingError) && !(error is UnknownStoredValue) && !(error is TransferError)
                && !(error is CancellationError) && !(error is DecodingError) && !(error is EncodingError) && !(error is MissingSchema)
        }
        switch error.code {
        case .server:
            // Connection exceptions, operator intervention (shutdown), insufficient resources, system errors.
            let state = error.serverInfo?[.sqlState] ?? ""
            return ["08", "57", "53", "58"].contains(String(state.prefix(2)))
        case .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown, .poolClosed,
            .sslUnsupported, .failedToAddSSLHandler:
            return true
        default:
            return false
        }
    }

    static func isRace(_ error: PSQLError) -> Bool {
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return ["23505", "40001", "40P01"].contains(state)
    }

    // Each statement that succeeds tells `health` the database answers (a long transaction or
    // the pruner holding connections is a busy pool, not an outage).
    func one(_ conn: PostgresConnection, _ query: PostgresQuery) async throws -> PostgresRandomAccessRow? {
        var first: PostgresRandomAccessRow?
        for try await row in try await conn.query(query, logger: logger) {
            first = row.makeRandomAccess()
            break
        }
        health.succeeded()  // not on a throw: a failing statement is no sign the database answers
        return first
    }

    func all(_ conn: PostgresConnection, _ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
        var rows: [PostgresRandomAccessRow] = []
        for try await row in try await conn.query(query, logger: logger) { rows.append(row.makeRandomAccess()) }
        health.succeeded()
        return rows
    }

    func run(_ conn: PostgresConnection, _ query: PostgresQuery) async throws {
        try await conn.query(query, logger: logger)
        health.succeeded()
    }

    // MARK: TransferStore

    /// Answers within 1.5 seconds, or throws: `/readyz` must not hang while the database is down.
    public func ping() async throws {
        let client = client
        try await Self.withTimeout(.milliseconds(1500)) {
            _ = try await client.query("SELECT 1")
        }
    }

    public func login(_ c: LoginCommand) async throws -> LoginResult {
        if let grant = try await renewOpenSession(c) { return .loggedIn(grant) }
        return try await execute(c)
    }

    /// The common case of `LoginCommand` (the device's secret matches, the account is on it
    /// and its session is open) as one statement: one round trip and one row written instead
    /// of a transaction. The UPDATE's row lock and WHERE clause are the check-then-act: a claim
    /// or removal that ends the pair at the same time either commits first (no row: the
    /// transaction path then answers with the real state) or waits for this login. The secret
    /// is compared as SHA-256 digests, so the comparison's timing tells nothing.
    /// `nil`: not that case; the caller runs `LoginCommand` through `execute`.
    func renewOpenSession(_ c: LoginCommand) async throws -> SessionGrant? {
        let account: String?
        switch c.target {
        case .current: account = nil
        case .account(let id): account = id
        case .newAccount: return nil
        }
        let renewed: RenewOpenSession.Row? = try await withConnection { [self] conn in
            for try await row in try await conn.execute(RenewOpenSession(c, account: account), logger: logger) { return row }
            return nil
        }
        guard let renewed, let token = renewed.session.currentToken(deviceSecret: c.deviceSecret) else { return nil }
        return SessionGrant(
            account: renewed.account, deviceID: c.deviceID.value, sessionID: renewed.session.sessionID, refreshToken: token,
            created: false, accounts: renewed.accounts)
    }

    /// A prepared statement: each pooled connection plans it once, not on every login.
    struct RenewOpenSession: PostgresPreparedStatement {
        static let sql = """
            WITH p AS (
                UPDATE device_accounts p SET refresh_expires_at = $1, last_login_at = $2, last_address = $3
                FROM devices d
                WHERE d.id = $4 AND d.secret_hash = $5 AND d.retired_at IS NULL
                  AND p.device_id = d.id AND p.account_id = COALESCE($6::text, d.current_account_id)
                  AND p.state = 'active' AND p.session_id IS NOT NULL AND p.refresh_expires_at > $2 AND p.key_by_device IS NOT NULL
                RETURNING p.account_id, p.session_id, p.session_started_at, p.refresh_generation, p.refresh_hash, p.key_by_device,
                          d.current_account_id
            )
            SELECT p.account_id, a.user_name,
                   EXISTS (SELECT 1 FROM transfers t WHERE t.account_id = a.id AND t.state = 'pending' AND t.expires_at > $2) AS flag,
                   p.session_id, p.session_started_at, p.refresh_generation, p.refresh_hash, p.key_by_device, p.current_account_id,
                   ARRAY(SELECT o.account_id FROM device_accounts o
                         WHERE o.device_id = $4 AND o.state = 'active' ORDER BY o.added_at, o.account_id) AS ids,
                   ARRAY(SELECT u.user_name FROM device_accounts o JOIN accounts u ON u.id = o.account_id
                         WHERE o.device_id = $4 AND o.state = 'active' ORDER BY o.added_at, o.account_id) AS names
            FROM p JOIN accounts a ON a.id = p.account_id
            """
        struct Row {
            var account: SessionAccount
            var session: PairSession
            var accounts: [DeviceAccountSummary]
        }
        let command: LoginCommand
        let account: String?
        init(_ command: LoginCommand, account: String?) {
            self.command = command
            self.account = account
        }

        func makeBindings() throws -> PostgresBindings {
            let c = command
            var bindings = PostgresBindings(capacity: 6)
            bindings.append(c.fresh.expiresAt.milliseconds)
            bindings.append(c.now.milliseconds)
            if let address = c.clientAddress { bindings.append(address) } else { bindings.appendNull() }
            bindings.append(c.deviceID.value)
            try bindings.append(Data(c.secretHash.bytes))
            if let account { bindings.append(account) } else { bindings.appendNull() }
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            let (id, userName, flag, sessionID, startedAt, generation, hash, key, current, ids, names) = try row.decode(
                (String, String, Bool, String, Int64, Int64, Data, Data, String?, [String], [String]).self)
            // The expiry is not read back: the session answer does not show it.
            let session = PairSession(
                sessionID: sessionID, startedAt: Timestamp(milliseconds: startedAt), generation: Int(generation),
                refreshHash: SecretHash(bytes: [UInt8](hash)), expiresAt: command.fresh.expiresAt, keyByDevice: [UInt8](key),
                keyByToken: nil)
            return Row(
                account: SessionAccount(accountID: id, userName: userName, migrationFlag: flag), session: session,
                accounts: zip(ids, names).map { DeviceAccountSummary(accountID: $0, userName: $1, current: $0 == current) })
        }
    }

    // MARK: Operations

    public func execute<Operation: StoreOperation>(_ operation: Operation) async throws -> Operation.Result {
        try await transaction { [self] conn in
            let plan = operation.plan(try await read(conn, operation.reads, at: operation.now))
            var outbox: [Effect] = []
            for effect in plan.effects {
                if case .enqueue = effect { outbox.append(effect) } else { try await apply(effect, conn) }
            }
            if !outbox.isEmpty { try await enqueue(outbox, conn) }
            return plan.result
        }
    }

    /// Writes outbox messages last, each account's under a lock held until the commit (taken in
    /// the order of the lock keys): an account's messages are numbered (`seq`) in the order their transactions
    /// commit, so a worker never delivers one before an older one that was still uncommitted.
    func enqueue(_ effects: [Effect], _ conn: PostgresConnection) async throws {
        let accounts = effects.compactMap { effect -> String? in
            if case .enqueue(let entry) = effect { return entry.accountID }
            return nil
        }
        // One statement, in the order of the lock keys (accounts whose hashes collide share one lock).
        try await run(conn, """
            SELECT pg_advisory_xact_lock(\(Self.outboxLockClass), k)
            FROM (SELECT DISTINCT hashtext(a) AS k FROM unnest(\(accounts)::text[]) AS a ORDER BY k) AS keys
            """)
        for effect in effects { try await apply(effect, conn) }
    }

    /// The first key of the per-account outbox locks ("outx").
    static let outboxLockClass: Int32 = 0x6F75_7478

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
        if let hash = reads.refreshToken {
            facts.refreshToken = try await one(conn, """
                SELECT device_id, account_id, session_id, NULL::text AS client_id FROM device_accounts WHERE refresh_hash = \(Data(hash.bytes))
                UNION ALL
                SELECT device_id, account_id, session_id, client_id FROM sibling_sessions WHERE refresh_hash = \(Data(hash.bytes))
                UNION ALL
                SELECT device_id, account_id, session_id, client_id FROM rotated_refresh_tokens WHERE token_hash = \(Data(hash.bytes))
                LIMIT 1
                """).map {
                RefreshTokenLookup(
                    deviceID: try $0["device_id"].decode(String.self), accountID: try $0["account_id"].decode(String.self),
                    sessionID: try $0["session_id"].decode(String.self), clientID: try $0["client_id"].decode(String?.self))
            }
            if let lookup = facts.refreshToken {
                facts.device = try await device(conn, lookup.deviceID, at: now, lock: true)
                if let client = lookup.clientID {
                    facts.siblingSession = try await one(conn, """
                        SELECT * FROM sibling_sessions
                        WHERE device_id = \(lookup.deviceID) AND account_id = \(lookup.accountID) AND client_id = \(client) FOR UPDATE
                        """).map(Self.siblingSession)
                }
            }
        }
        if let hash = reads.handoffCode,
            let device = try await one(conn, "SELECT device_id FROM handoff_codes WHERE code_hash = \(Data(hash.bytes))")
        {
            // The device first, as every other operation locks it (deletion erases codes after
            // locking it); then the code, locked: of concurrent redemptions, the second waits
            // and then sees the code used.
            facts.device = try await self.device(conn, try device["device_id"].decode(String.self), at: now, lock: true)
            facts.handoffCode = try await one(conn, "SELECT * FROM handoff_codes WHERE code_hash = \(Data(hash.bytes)) FOR UPDATE")
                .map(Self.handoffCode)
        }
        if let id = reads.device {
            facts.device = try await device(conn, id, at: now, lock: true)
        }
        if let account = reads.accountDevices {
            for row in try await all(conn, "SELECT device_id FROM device_accounts WHERE account_id = \(account) AND state = 'active'") {
                if let device = try await device(conn, try row["device_id"].decode(String.self), at: now, lock: true) {
                    facts.accountDevices.append(device)
                }
            }
        }
        if let account = reads.account,
            let row = try await one(conn, """
                SELECT a.id AS account_id, a.user_name, a.deleted_at, \(unescaped: flag) AS flag FROM accounts a WHERE a.id = \(account)
                FOR UPDATE
                """)
        {
            facts.account = try Self.sessionAccount(row)
            facts.accountDeletedAt = try row["deleted_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:))
        }
        if reads.signingKeys {
            // Nodes starting together on an empty table: one inserts the key, the others then read it.
            try await run(conn, "SELECT pg_advisory_xact_lock(\(Self.advisoryLockKey + 1))")
            facts.signingKeys = try await all(conn, Self.signingKeysQuery).map(Self.signingKey)
        }
        if let name = reads.serviceKey {
            facts.serviceKey = try await one(conn, "SELECT * FROM service_keys WHERE name = \(name) FOR UPDATE").map(Self.serviceKey)
        }
        if let hash = reads.appleNonce {
            facts.appleNonceExpiresAt = try await one(conn, "SELECT expires_at FROM apple_nonces WHERE nonce_hash = \(Data(hash.bytes)) FOR UPDATE")
                .map { Timestamp(milliseconds: try $0["expires_at"].decode(Int64.self)) }
        }
        if let sub = reads.appleSub {
            facts.appleLinkBySub = try await one(conn, "SELECT * FROM apple_links WHERE sub = \(sub) FOR UPDATE").map(Self.appleLink)
        }
        if let account = reads.appleLink {
            facts.appleLink = try await one(conn, "SELECT * FROM apple_links WHERE account_id = \(account) FOR UPDATE").map(Self.appleLink)
        }
        if let jti = reads.appleNotification {
            facts.appleNotificationSeen = try await one(conn, "SELECT 1 FROM apple_notifications WHERE jti = \(jti)") != nil
        }
        if let q = reads.dueOutbox {
            // Rows another node is leasing right now are skipped, not waited for; a later row of
            // the same account is not due while an earlier one is pending.
            let t = now.milliseconds
            facts.dueOutbox = try await all(conn, """
                SELECT * FROM outbox o
                WHERE o.kind = \(q.kind.rawValue) AND o.state = 'pending' AND o.next_attempt_at <= \(t)
                  AND (o.leased_until IS NULL OR o.leased_until <= \(t))
                  AND NOT EXISTS (
                    SELECT 1 FROM outbox p WHERE p.kind = o.kind AND p.account_id = o.account_id AND p.state = 'pending' AND p.seq < o.seq)
                ORDER BY o.seq LIMIT \(q.limit) FOR UPDATE SKIP LOCKED
                """).map(Self.outboxMessage)
        }
        if let id = reads.outboxMessage {
            facts.outboxMessage = try await one(conn, "SELECT * FROM outbox WHERE id = \(id) FOR UPDATE").map(Self.outboxMessage)
        }
        if reads.failedOutbox {
            facts.failedOutbox = try await all(conn, "SELECT * FROM outbox WHERE state = 'failed' ORDER BY seq FOR UPDATE").map(Self.outboxMessage)
        }
        return facts
    }

    /// A device with every account it holds or held, oldest first; with `lock`, the device
    /// row and its accounts' rows are locked (in that order) until the transaction ends.
    func device(_ conn: PostgresConnection, _ id: String, at now: Timestamp, lock: Bool) async throws -> DeviceRecord? {
        let forUpdate = lock ? " FOR UPDATE" : ""
        guard let row = try await one(conn, "SELECT * FROM devices WHERE id = \(id)\(unescaped: forUpdate)") else { return nil }
        let accounts = try await all(conn, """
            SELECT p.*, a.user_name, a.deleted_at IS NOT NULL AS deleted, \(unescaped: Self.migrationFlag(at: now)) AS flag
            FROM device_accounts p JOIN accounts a ON a.id = p.account_id
            WHERE p.device_id = \(id) ORDER BY p.added_at, p.account_id\(unescaped: lock ? " FOR UPDATE OF p" : "")
            """).map(Self.pair)
        return DeviceRecord(
            id: id, secretHash: SecretHash(bytes: [UInt8](try row["secret_hash"].decode(Data.self))),
            createdAt: Timestamp(milliseconds: try row["created_at"].decode(Int64.self)),
            currentAccountID: try row["current_account_id"].decode(String?.self),
            retiredAt: try row["retired_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)), accounts: accounts,
            pushMode: try UnknownStoredValue.decode(try row["push_mode"].decode(String.self), column: "devices.push_mode"))
    }

    /// `a`'s migration flag at `now`: a pending transfer that has not expired. `now` is an
    /// integer, so writing it into the SQL text is safe.
    static func migrationFlag(at now: Timestamp) -> String {
        "EXISTS (SELECT 1 FROM transfers t WHERE t.account_id = a.id AND t.state = 'pending' AND t.expires_at > \(now.milliseconds))"
    }

    /// The session columns of `device_accounts`, cleared.
    static let noSession = """
        session_id = NULL, session_started_at = NULL, refresh_hash = NULL, refresh_generation = NULL,
        refresh_expires_at = NULL, key_by_device = NULL, key_by_token = NULL
        """

    /// One effect as SQL.
    func apply(_ effect: Effect, _ conn: PostgresConnection) async throws {
        switch effect {
        case .createAccount(let id, let userName, let at):
            try await run(conn, "INSERT INTO accounts (id, user_name, created_at) VALUES (\(id), \(userName), \(at.milliseconds))")
        case .createDevice(let id, let secretHash, let at):
            try await run(conn, "INSERT INTO devices (id, secret_hash, created_at) VALUES (\(id), \(Data(secretHash.bytes)), \(at.milliseconds))")
        case .addAccount(let device, let account, let at):
            try await run(conn, """
                INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (\(device), \(account), 'active', \(at.milliseconds))
                ON CONFLICT (device_id, account_id) DO UPDATE
                SET state = 'active', added_at = excluded.added_at, ended_at = NULL, ended_reason = NULL, push_enabled = 1
                """)
        case .setCurrentAccount(let device, let account):
            try await run(conn, "UPDATE devices SET current_account_id = \(account) WHERE id = \(device)")
        case .endPair(let device, let account, let state, let reason, let at):
            try await run(conn, "DELETE FROM sibling_sessions WHERE device_id = \(device) AND account_id = \(account)")
            try await run(conn, """
                UPDATE device_accounts SET state = \(state.rawValue), ended_at = \(at.milliseconds), ended_reason = \(reason), \(unescaped: Self.noSession)
                WHERE device_id = \(device) AND account_id = \(account) AND state = 'active'
                """)
        case .retireDevice(let id, let at):
            try await run(conn, "UPDATE devices SET retired_at = \(at.milliseconds) WHERE id = \(id) AND retired_at IS NULL")
            try await run(conn, "DELETE FROM push_tokens WHERE device_id = \(id)")
        case .setMovedTo(let account, let device):
            try await run(conn, "UPDATE accounts SET moved_to_device_id = \(device) WHERE id = \(account)")
        case .openSession(let device, let account, let s, let at, let address):
            try await run(conn, """
                UPDATE device_accounts SET session_id = \(s.sessionID), session_started_at = \(s.startedAt.milliseconds),
                    refresh_hash = \(Data(s.refreshHash.bytes)), refresh_generation = \(Int64(s.generation)),
                    refresh_expires_at = \(s.expiresAt.milliseconds), key_by_device = \(s.keyByDevice.map { Data($0) }),
                    key_by_token = \(s.keyByToken.map { Data($0) }), last_login_at = \(at.milliseconds), last_address = \(address)
                WHERE device_id = \(device) AND account_id = \(account)
                """)
        case .renewSession(let device, let account, let expiresAt, let at, let address):
            try await run(conn, """
                UPDATE device_accounts SET refresh_expires_at = \(expiresAt.milliseconds), last_login_at = \(at.milliseconds), last_address = \(address)
                WHERE device_id = \(device) AND account_id = \(account)
                """)
        case .rotateSession(let device, let account, let s, let used, let usedExpiresAt):
            try await run(conn, """
                UPDATE device_accounts SET refresh_hash = \(Data(s.refreshHash.bytes)), refresh_generation = \(Int64(s.generation)),
                    refresh_expires_at = \(s.expiresAt.milliseconds), key_by_device = \(s.keyByDevice.map { Data($0) }),
                    key_by_token = \(s.keyByToken.map { Data($0) })
                WHERE device_id = \(device) AND account_id = \(account) AND session_id = \(s.sessionID)
                """)
            try await run(conn, """
                INSERT INTO rotated_refresh_tokens (token_hash, device_id, account_id, session_id, expires_at)
                VALUES (\(Data(used.bytes)), \(device), \(account), \(s.sessionID), \(usedExpiresAt.milliseconds))
                """)
        case .closeSession(let device, let account):
            try await run(conn, "UPDATE device_accounts SET \(unescaped: Self.noSession) WHERE device_id = \(device) AND account_id = \(account)")
            try await run(conn, "DELETE FROM sibling_sessions WHERE device_id = \(device) AND account_id = \(account)")
        case .addHandoffCode(let c):
            try await run(conn, """
                INSERT INTO handoff_codes (code_hash, device_id, account_id, host_session_id, client_id, challenge, created_at, expires_at)
                VALUES (\(Data(c.codeHash.bytes)), \(c.deviceID), \(c.accountID), \(c.hostSessionID), \(c.clientID), \(c.challenge),
                        \(c.createdAt.milliseconds), \(c.expiresAt.milliseconds))
                """)
        case .redeemHandoffCode(let hash, let at, let session):
            try await run(conn, """
                UPDATE handoff_codes SET redeemed_at = \(at.milliseconds), sibling_session_id = \(session)
                WHERE code_hash = \(Data(hash.bytes)) AND redeemed_at IS NULL
                """)
        case .openSiblingSession(let s):
            try await run(conn, """
                INSERT INTO sibling_sessions (device_id, account_id, client_id, session_id, started_at, refresh_hash, refresh_generation, refresh_expires_at)
                VALUES (\(s.deviceID), \(s.accountID), \(s.clientID), \(s.sessionID), \(s.startedAt.milliseconds), \(Data(s.refreshHash.bytes)),
                        \(Int32(s.generation)), \(s.expiresAt.milliseconds))
                ON CONFLICT (device_id, account_id, client_id) DO UPDATE SET session_id = excluded.session_id, started_at = excluded.started_at,
                    refresh_hash = excluded.refresh_hash, refresh_generation = excluded.refresh_generation,
                    refresh_expires_at = excluded.refresh_expires_at
                """)
        case .rotateSiblingSession(let s, let used, let usedExpiresAt):
            try await run(conn, """
                UPDATE sibling_sessions SET refresh_hash = \(Data(s.refreshHash.bytes)), refresh_generation = \(Int32(s.generation)),
                    refresh_expires_at = \(s.expiresAt.milliseconds)
                WHERE session_id = \(s.sessionID)
                """)
            try await run(conn, """
                INSERT INTO rotated_refresh_tokens (token_hash, device_id, account_id, session_id, expires_at, client_id)
                VALUES (\(Data(used.bytes)), \(s.deviceID), \(s.accountID), \(s.sessionID), \(usedExpiresAt.milliseconds), \(s.clientID))
                """)
        case .closeSiblingSession(let session):
            try await run(conn, "DELETE FROM sibling_sessions WHERE session_id = \(session)")
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
        case .retireSigningKey(let kid, let at):
            try await run(conn, "UPDATE signing_keys SET retired_at = \(at.milliseconds) WHERE kid = \(kid) AND retired_at IS NULL")
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
        case .setPushToken(let t):
            // Under the device's lock: its old token for the provider goes, then the token is
            // upserted on its own key, so a token another device holds moves here. Two devices
            // registering one token at once: the second waits for the first's row and moves it.
            try await run(conn, """
                DELETE FROM push_tokens WHERE device_id = \(t.deviceID) AND provider = \(t.provider.rawValue) AND token_hash <> \(Data(t.tokenHash.bytes))
                """)
            try await run(conn, """
                INSERT INTO push_tokens (device_id, provider, token, token_hash, environment, registered_at)
                VALUES (\(t.deviceID), \(t.provider.rawValue), \(t.token), \(Data(t.tokenHash.bytes)), \(t.environment?.rawValue), \(t.registeredAt.milliseconds))
                ON CONFLICT (provider, token_hash) DO UPDATE
                SET device_id = excluded.device_id, token = excluded.token, environment = excluded.environment, registered_at = excluded.registered_at
                """)
        case .removePushToken(let device, let provider):
            try await run(conn, "DELETE FROM push_tokens WHERE device_id = \(device) AND provider = \(provider.rawValue)")
        case .dropPushToken(let provider, let hash, let reportedAt):
            try await run(conn, """
                DELETE FROM push_tokens WHERE provider = \(provider.rawValue) AND token_hash = \(Data(hash.bytes)) AND registered_at <= \(reportedAt.milliseconds)
                """)
        case .setPushMode(let device, let mode):
            try await run(conn, "UPDATE devices SET push_mode = \(mode.rawValue) WHERE id = \(device)")
        case .setAccountPush(let device, let account, let enabled):
            try await run(conn, "UPDATE device_accounts SET push_enabled = \(enabled ? 1 : 0) WHERE device_id = \(device) AND account_id = \(account)")
        case .createServiceKey(let name, let hash, let at, let by):
            try await run(conn, """
                INSERT INTO service_keys (name, key_hash, created_at, created_by) VALUES (\(name), \(Data(hash.bytes)), \(at.milliseconds), \(by.description))
                """)
        case .revokeServiceKey(let name, let at, let by):
            try await run(conn, """
                UPDATE service_keys SET revoked_at = \(at.milliseconds), revoked_by = \(by.description) WHERE name = \(name) AND revoked_at IS NULL
                """)
        case .addAppleNonce(let hash, let expiresAt, let now):
            try await run(conn, "DELETE FROM apple_nonces WHERE expires_at <= \(now.milliseconds)")
            try await run(conn, "INSERT INTO apple_nonces (nonce_hash, expires_at) VALUES (\(Data(hash.bytes)), \(expiresAt.milliseconds))")
        case .consumeAppleNonce(let hash):
            try await run(conn, "DELETE FROM apple_nonces WHERE nonce_hash = \(Data(hash.bytes))")
        case .linkApple(let l):
            try await run(conn, """
                INSERT INTO apple_links (account_id, sub, email, is_private_email, linked_at, refresh_token, client_id, email_enabled)
                VALUES (\(l.accountID), \(l.sub), \(l.email), \(l.isPrivateEmail.map { Int32($0 ? 1 : 0) }), \(l.linkedAt.milliseconds),
                        \(l.refreshToken), \(l.clientID), \(Int32(l.emailEnabled ? 1 : 0)))
                ON CONFLICT (account_id) DO UPDATE SET sub = excluded.sub, email = excluded.email, is_private_email = excluded.is_private_email,
                    linked_at = excluded.linked_at, refresh_token = excluded.refresh_token, client_id = excluded.client_id,
                    email_enabled = excluded.email_enabled
                """)
        case .updateAppleEmail(let account, let email, let isPrivate):
            try await run(conn, """
                UPDATE apple_links SET email = COALESCE(\(email), email), is_private_email = COALESCE(\(isPrivate.map { Int32($0 ? 1 : 0) }), is_private_email)
                WHERE account_id = \(account)
                """)
        case .unlinkApple(let account):
            try await run(conn, "DELETE FROM apple_links WHERE account_id = \(account)")
        case .setAppleEmailEnabled(let account, let enabled):
            try await run(conn, "UPDATE apple_links SET email_enabled = \(Int32(enabled ? 1 : 0)) WHERE account_id = \(account)")
        case .recordAppleNotification(let jti, let at):
            // Two deliveries of one jti at once: the second meets the primary key, is retried, and finds it handled.
            try await run(conn, "INSERT INTO apple_notifications (jti, received_at) VALUES (\(jti), \(at.milliseconds))")
        case .eraseAccount(let id, let at):
            try await run(conn, "UPDATE accounts SET deleted_at = \(at.milliseconds) WHERE id = \(id) AND deleted_at IS NULL")
            try await run(conn, "DELETE FROM transfers WHERE account_id = \(id)")
            try await run(conn, "DELETE FROM rotated_refresh_tokens WHERE account_id = \(id)")
            try await run(conn, "DELETE FROM handoff_codes WHERE account_id = \(id)")
            try await run(conn, "DELETE FROM apple_links WHERE account_id = \(id)")
            try await run(conn, "UPDATE device_accounts SET last_address = NULL WHERE account_id = \(id)")
            try await run(conn, "DELETE FROM audit_events WHERE account_id = \(id)")
        case .enqueue(let e):
            try await run(conn, """
                INSERT INTO outbox (id, kind, account_id, type, body, created_at, next_attempt_at, give_up_at)
                VALUES (\(Identifier.make()), \(e.kind.rawValue), \(e.accountID), \(e.type), \(e.body), \(e.at.milliseconds),
                        \(e.at.milliseconds), \(e.giveUpAt.milliseconds))
                """)
        case .leaseOutbox(let id, let leaseID, let until):
            try await run(conn, "UPDATE outbox SET lease_id = \(leaseID), leased_until = \(until.milliseconds) WHERE id = \(id)")
        case .deleteOutbox(let id):
            try await run(conn, "DELETE FROM outbox WHERE id = \(id)")
        case .rescheduleOutbox(let id, let attempts, let next, let error):
            try await run(conn, """
                UPDATE outbox SET attempts = \(attempts), next_attempt_at = \(next.milliseconds), last_error = \(error),
                    lease_id = NULL, leased_until = NULL
                WHERE id = \(id)
                """)
        case .failOutbox(let id, let attempts, let error, let at):
            try await run(conn, """
                UPDATE outbox SET state = 'failed', attempts = \(attempts), last_error = \(error), failed_at = \(at.milliseconds),
                    lease_id = NULL, leased_until = NULL
                WHERE id = \(id)
                """)
        case .retryOutbox(let id, let at, let giveUpAt):
            try await run(conn, """
                UPDATE outbox SET state = 'pending', failed_at = NULL, attempts = 0, next_attempt_at = \(at.milliseconds), give_up_at = \(giveUpAt.milliseconds)
                WHERE id = \(id) AND state = 'failed'
                """)
        case .touchServiceKey(let name, let at, let olderThan):
            try await run(conn, """
                UPDATE service_keys SET last_used_at = \(at.milliseconds)
                WHERE name = \(name) AND (last_used_at IS NULL OR last_used_at <= \(olderThan.milliseconds))
                """)
        }
    }

    // MARK: Reads outside operations

    public func isSessionValid(sessionID: String, accountID: String, deviceID: String, clientID: String?) async throws -> Bool {
        try await withConnection { [self] conn in
            if let clientID {
                // A sibling session exists only while its pair is active (the schema's triggers).
                return try await one(conn, """
                    SELECT 1 FROM sibling_sessions
                    WHERE device_id = \(deviceID) AND account_id = \(accountID) AND client_id = \(clientID) AND session_id = \(sessionID)
                    """) != nil
            }
            return try await one(conn, """
                SELECT 1 FROM device_accounts
                WHERE device_id = \(deviceID) AND account_id = \(accountID) AND state = 'active' AND session_id = \(sessionID)
                """) != nil
        }
    }

    public func device(_ id: String, at now: Timestamp) async throws -> DeviceRecord? {
        try await withConnection { [self] conn in try await device(conn, id, at: now, lock: false) }
    }

    public func profile(accountID: String, at now: Timestamp) async throws -> AccountProfile? {
        try await withConnection { [self] conn in
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
                SELECT device_id, added_at, last_login_at FROM device_accounts
                WHERE account_id = \(accountID) AND state = 'active' ORDER BY added_at
                """).map {
                AccountProfile.Device(
                    deviceID: try $0["device_id"].decode(String.self), boundAt: Timestamp(milliseconds: try $0["added_at"].decode(Int64.self)),
                    lastLoginAt: try $0["last_login_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)))
            }
            let apple = try await one(conn, "SELECT * FROM apple_links WHERE account_id = \(accountID)").map(Self.appleLink)
            return AccountProfile(
                accountID: accountID, userName: try account["user_name"].decode(String.self),
                createdAt: Timestamp(milliseconds: try account["created_at"].decode(Int64.self)),
                movedToDeviceID: try account["moved_to_device_id"].decode(String?.self), transfer: transfer, activeDevices: devices,
                apple: apple)
        }
    }

    /// `DeviceRecord.routesPushes(to:)` in SQL: active pair, pushes on, mode `all` or the current account.
    public func pushRoutes(accountIDs: [String]) async throws -> [PushRoute] {
        try await withConnection { [self] conn in
            try await all(conn, """
                SELECT t.provider, t.token, t.environment, t.device_id, p.account_id
                FROM unnest(\(accountIDs)::text[]) AS j(id)
                JOIN device_accounts p ON p.account_id = j.id AND p.state = 'active' AND p.push_enabled = 1
                JOIN devices d ON d.id = p.device_id
                JOIN push_tokens t ON t.device_id = p.device_id
                WHERE d.push_mode = 'all' OR d.current_account_id = p.account_id
                ORDER BY t.device_id, t.provider, p.account_id
                """).map(Self.pushRoute)
        }
    }

    public func outboxStats(kind: OutboxKind) async throws -> OutboxStats {
        try await withConnection { [self] conn in
            let row = try await one(conn, """
                SELECT COUNT(*) FILTER (WHERE state = 'pending') AS pending, COUNT(*) FILTER (WHERE state = 'failed') AS failed,
                       MIN(created_at) FILTER (WHERE state = 'pending') AS oldest
                FROM outbox WHERE kind = \(kind.rawValue)
                """)
            return OutboxStats(
                pending: Int(try row?["pending"].decode(Int64.self) ?? 0), failed: Int(try row?["failed"].decode(Int64.self) ?? 0),
                oldestPendingAt: try row?["oldest"].decode(Int64?.self).map(Timestamp.init(milliseconds:)))
        }
    }

    public func signingKeys() async throws -> [SigningKeyRecord] {
        try await withConnection { [self] conn in try await all(conn, Self.signingKeysQuery).map(Self.signingKey) }
    }

    static var signingKeysQuery: PostgresQuery {
        "SELECT kid, algorithm, private_key, created_at, retired_at FROM signing_keys ORDER BY created_at, kid"
    }

    static func signingKey(_ row: PostgresRandomAccessRow) throws -> SigningKeyRecord {
        SigningKeyRecord(
            kid: try row["kid"].decode(String.self), algorithm: try row["algorithm"].decode(String.self),
            privateKey: try row["private_key"].decode(String.self), createdAt: Timestamp(milliseconds: try row["created_at"].decode(Int64.self)),
            retiredAt: try row["retired_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)))
    }

    public func appleLink(sub: String) async throws -> AppleLink? {
        try await withConnection { [self] conn in
            try await one(conn, "SELECT * FROM apple_links WHERE sub = \(sub)").map(Self.appleLink)
        }
    }

    public func serviceKey(hash: SecretHash) async throws -> ServiceKeyRecord? {
        try await withConnection { [self] conn in
            try await one(conn, "SELECT * FROM service_keys WHERE key_hash = \(Data(hash.bytes))").map(Self.serviceKey)
        }
    }

    public func pendingTransfer(emailKey: String) async throws -> TransferRecord? {
        try await withConnection { [self] conn in
            try await one(conn, "SELECT * FROM transfers WHERE email_key = \(emailKey) AND state = 'pending'").map(Self.transfer)
        }
    }

    // MARK: Rows

    static func pair(_ row: PostgresRandomAccessRow) throws -> DeviceAccount {
        var session: PairSession?
        if let id = try row["session_id"].decode(String?.self) {
            session = PairSession(
                sessionID: id, startedAt: Timestamp(milliseconds: try row["session_started_at"].decode(Int64.self)),
                generation: Int(try row["refresh_generation"].decode(Int64.self)),
                refreshHash: SecretHash(bytes: [UInt8](try row["refresh_hash"].decode(Data.self))),
                expiresAt: Timestamp(milliseconds: try row["refresh_expires_at"].decode(Int64.self)),
                keyByDevice: try row["key_by_device"].decode(Data?.self).map { [UInt8]($0) },
                keyByToken: try row["key_by_token"].decode(Data?.self).map { [UInt8]($0) })
        }
        return DeviceAccount(
            account: try sessionAccount(row),
            state: try UnknownStoredValue.decode(try row["state"].decode(String.self), column: "device_accounts.state"),
            addedAt: Timestamp(milliseconds: try row["added_at"].decode(Int64.self)),
            lastLoginAt: try row["last_login_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            endedAt: try row["ended_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            endedReason: try row["ended_reason"].decode(String?.self), session: session,
            pushEnabled: try row["push_enabled"].decode(Int32.self) != 0, accountDeleted: try row["deleted"].decode(Bool.self))
    }

    static func pushRoute(_ row: PostgresRandomAccessRow) throws -> PushRoute {
        PushRoute(
            provider: try UnknownStoredValue.decode(try row["provider"].decode(String.self), column: "push_tokens.provider"),
            token: try row["token"].decode(String.self),
            environment: try row["environment"].decode(String?.self).map { try UnknownStoredValue.decode($0, column: "push_tokens.environment") },
            deviceID: try row["device_id"].decode(String.self), accountID: try row["account_id"].decode(String.self))
    }

    static func pushToken(_ row: PostgresRandomAccessRow) throws -> PushToken {
        PushToken(
            deviceID: try row["device_id"].decode(String.self),
            provider: try UnknownStoredValue.decode(try row["provider"].decode(String.self), column: "push_tokens.provider"),
            token: try row["token"].decode(String.self),
            environment: try row["environment"].decode(String?.self).map { try UnknownStoredValue.decode($0, column: "push_tokens.environment") },
            registeredAt: Timestamp(milliseconds: try row["registered_at"].decode(Int64.self)))
    }

    static func siblingSession(_ row: PostgresRandomAccessRow) throws -> SiblingSession {
        SiblingSession(
            deviceID: try row["device_id"].decode(String.self), accountID: try row["account_id"].decode(String.self),
            clientID: try row["client_id"].decode(String.self), sessionID: try row["session_id"].decode(String.self),
            startedAt: Timestamp(milliseconds: try row["started_at"].decode(Int64.self)),
            generation: Int(try row["refresh_generation"].decode(Int32.self)),
            refreshHash: SecretHash(bytes: [UInt8](try row["refresh_hash"].decode(Data.self))),
            expiresAt: Timestamp(milliseconds: try row["refresh_expires_at"].decode(Int64.self)))
    }

    static func handoffCode(_ row: PostgresRandomAccessRow) throws -> HandoffCodeRecord {
        HandoffCodeRecord(
            codeHash: SecretHash(bytes: [UInt8](try row["code_hash"].decode(Data.self))), deviceID: try row["device_id"].decode(String.self),
            accountID: try row["account_id"].decode(String.self), hostSessionID: try row["host_session_id"].decode(String.self),
            clientID: try row["client_id"].decode(String.self), challenge: try row["challenge"].decode(String.self),
            createdAt: Timestamp(milliseconds: try row["created_at"].decode(Int64.self)),
            expiresAt: Timestamp(milliseconds: try row["expires_at"].decode(Int64.self)),
            redeemedAt: try row["redeemed_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            siblingSessionID: try row["sibling_session_id"].decode(String?.self))
    }

    static func appleLink(_ row: PostgresRandomAccessRow) throws -> AppleLink {
        AppleLink(
            accountID: try row["account_id"].decode(String.self), sub: try row["sub"].decode(String.self),
            email: try row["email"].decode(String?.self), isPrivateEmail: try row["is_private_email"].decode(Int32?.self).map { $0 != 0 },
            linkedAt: Timestamp(milliseconds: try row["linked_at"].decode(Int64.self)), refreshToken: try row["refresh_token"].decode(String?.self),
            clientID: try row["client_id"].decode(String?.self), emailEnabled: try row["email_enabled"].decode(Int32.self) != 0)
    }

    static func serviceKey(_ row: PostgresRandomAccessRow) throws -> ServiceKeyRecord {
        ServiceKeyRecord(
            name: try row["name"].decode(String.self), createdAt: Timestamp(milliseconds: try row["created_at"].decode(Int64.self)),
            createdBy: try row["created_by"].decode(String.self),
            lastUsedAt: try row["last_used_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            revokedAt: try row["revoked_at"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            revokedBy: try row["revoked_by"].decode(String?.self))
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
            lockedUntil: try row["locked_until"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            issuedBy: try Initiator(stored: try row["issued_by"].decode(String.self)))
    }

    static func outboxMessage(_ row: PostgresRandomAccessRow) throws -> OutboxMessage {
        OutboxMessage(
            id: try row["id"].decode(String.self),
            kind: try UnknownStoredValue.decode(try row["kind"].decode(String.self), column: "outbox.kind"),
            accountID: try row["account_id"].decode(String.self), type: try row["type"].decode(String.self),
            body: try row["body"].decode(String.self), createdAt: Timestamp(milliseconds: try row["created_at"].decode(Int64.self)),
            state: try UnknownStoredValue.decode(try row["state"].decode(String.self), column: "outbox.state"),
            attempts: Int(try row["attempts"].decode(Int32.self)),
            nextAttemptAt: Timestamp(milliseconds: try row["next_attempt_at"].decode(Int64.self)),
            giveUpAt: Timestamp(milliseconds: try row["give_up_at"].decode(Int64.self)), lastError: try row["last_error"].decode(String?.self),
            leasedUntil: try row["leased_until"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            leaseID: try row["lease_id"].decode(String?.self))
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

/// Who got there first: the lease (then the body runs to its end) or the lease timeout (then the body never starts).
final class LeaseGate: Sendable {
    private enum State { case waiting, started, expired }
    private let state = Mutex(State.waiting)

    /// True if the body may run: the timeout has not fired.
    func start() -> Bool {
        state.withLock { s in
            guard case .waiting = s else { return false }
            s = .started
            return true
        }
    }

    var hasStarted: Bool {
        state.withLock { s in
            if case .started = s { return true }
            return false
        }
    }

    /// True if the lease is abandoned: the body had not started.
    func expire() -> Bool {
        state.withLock { s in
            guard case .waiting = s else { return false }
            s = .expired
            return true
        }
    }
}

/// When a query last succeeded, on the monotonic clock.
final class QueryHealth: Sendable {
    /// From the store's creation: a node that just started is given the benefit of the doubt.
    private let last = Atomic<UInt64>(DispatchTime.now().uptimeNanoseconds)

    func succeeded() { last.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed) }

    func succeeded(within limit: Duration) -> Bool {
        // `last` first: a success stored after `now` was read counts as age 0, not as a wrap-around.
        let last = last.load(ordering: .relaxed)
        let now = DispatchTime.now().uptimeNanoseconds
        let age = now > last ? now - last : 0
        return Duration.nanoseconds(Int64(clamping: age)) < limit
    }
}
