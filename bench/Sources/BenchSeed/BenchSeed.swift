import Foundation
import GRDB
import Logging
import PostgresNIO
import TransferArgon2
import TransferCore
import TransferSQLite
import TransferStorage

/// Seeds a SQLite database for the benchmark in bulk, in one transaction, through the
/// store's own pool and schema: ACCOUNTS accounts each on its own device, TRANSFERS
/// pending transfers (password `bench-password-1`, hashed once with the given argon2
/// parameters), and sessions: devices 0…ACCOUNTS-1 have an open session as a login leaves
/// it (so the benchmark's logins renew it, as every launch after a device's first does);
/// devices ACCOUNTS…SESSIONS-1 have one whose current refresh token is `bench-refresh-<i>`
/// (as sessions carried over from schema v2), for the refresh row. There are
/// max(ACCOUNTS, SESSIONS) devices.
/// Device i is `00000000-0000-4000-8000-<i as 12 digits>`, its secret `BenchSeed.secret`;
/// account i is `a0000000-0000-4000-8000-<i as 12 digits>`, active on device i.
/// For push routing (row 12), every device also has one apns token, `BenchSeed.pushToken(i)`
/// (the hex SHA-256 of `bench-push-<i>`, environment production), and the database has one
/// service key named `bench`, `BenchSeed.serviceKey`.
/// Usage: bench-seed PATH ACCOUNTS TRANSFERS SESSIONS MEMORY_KIB ITERATIONS
/// PATH may be a `postgres://` URL: the store migrates the database, then one transaction
/// of `INSERT … SELECT … generate_series` writes the same rows server-side.
///
/// `bench-seed --store-logins PATH ACCOUNTS TASKS SECONDS` instead measures auto-login
/// through the store alone (no HTTP, no JSON, no JWT): TASKS concurrent tasks log seeded
/// devices in for SECONDS and it prints the rate. It tells the store's share of the HTTP
/// figure apart from the rest.
///
/// `bench-seed --storage PATH DEVICES LAUNCHES` measures storage growth: DEVICES first
/// launches (each creates its account), then launches of random devices up to LAUNCHES in
/// all, through the store; it prints, as JSON, the file size and row counts after the first
/// launches and after all of them.
///
/// `bench-seed --prune PATH SESSIONS` seeds SESSIONS devices whose sessions expired a day
/// ago, each with one rotated refresh token, and times one pruner round over them (JSON).
///
/// `bench-seed --inactive PATH N` adds, to a database seeded as above (SQLite or PostgreSQL),
/// N accounts nobody used for 400 days, each on its own device without a session: account i
/// is `b0000000-0000-4000-8000-<i>`, device i `10000000-0000-4000-8000-<i>`. A server with
/// `--inactive-account-ttl 30d` erases them in its next pruner round (the login row measured
/// meanwhile shows what the round costs logins). `bench-seed --inactive-round PATH` instead
/// times one round of the store's erasure with a TTL of 30 days (JSON).
@main
struct BenchSeed {
    static let secret = "benchSecretBenchSecretBenchSecret01"
    /// The service key `bench/run` calls `/v1/service/*` with: `tsk_` and 43 base64url characters, as made keys are.
    static let serviceKey = "tsk_benchServiceKey0benchServiceKey0benchServic"

    /// Device i's apns token: 64 lower-case hex digits that look random.
    static func pushToken(_ i: Int) -> String { Hex.encode(SecretHash(of: "bench-push-\(i)").bytes) }

    static func id(_ prefix: String, _ i: Int) -> String {
        let digits = String(i)
        return prefix + String(repeating: "0", count: 12 - digits.count) + digits
    }

    static func main() async throws {
        let args = Array(CommandLine.arguments.dropFirst())
        if args.first == "--store-logins" { return try await storeLogins(Array(args.dropFirst())) }
        if args.first == "--storage" { return try await storage(Array(args.dropFirst())) }
        if args.first == "--prune" { return try await prune(Array(args.dropFirst())) }
        if args.first == "--inactive" { return try await inactive(Array(args.dropFirst())) }
        if args.first == "--inactive-round" { return try await inactiveRound(Array(args.dropFirst())) }
        guard args.count == 6, let accounts = Int(args[1]), let transfers = Int(args[2]), let sessions = Int(args[3]),
            let memory = UInt32(args[4]), let iterations = UInt32(args[5])
        else {
            FileHandle.standardError.write(Data("usage: bench-seed PATH ACCOUNTS TRANSFERS SESSIONS MEMORY_KIB ITERATIONS\n".utf8))
            exit(2)
        }
        let phc = try Argon2Hasher.hashNow("bench-password-1", parameters: Argon2Parameters(memoryKiB: memory, iterations: iterations))
        let secretHash = Data(SecretHash(of: secret).bytes)
        let now = Timestamp(Date()).milliseconds
        let start = ContinuousClock.now
        if args[0].hasPrefix("postgres://") || args[0].hasPrefix("postgresql://") {
            try await seedPostgres(
                url: args[0], accounts: accounts, transfers: transfers, sessions: sessions, phc: phc, secretHash: secretHash, now: now)
            print("seeded \(accounts) accounts, \(min(transfers, accounts)) transfers, \(sessions) sessions, \(max(accounts, sessions)) push tokens in \(ContinuousClock.now - start)")
            return
        }
        let store = try SQLiteStore(path: args[0])
        let raw = try DatabasePool(path: args[0])  // the store's schema, written in bulk beside it
        try await raw.write { db in
            // Devices name their current account before its row exists: checked at commit.
            try db.execute(sql: "PRAGMA defer_foreign_keys = ON")
            let account = try db.makeStatement(sql: "INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)")
            let device = try db.makeStatement(sql: "INSERT INTO devices (id, secret_hash, created_at, current_account_id) VALUES (?, ?, ?, ?)")
            let pair = try db.makeStatement(sql: """
                INSERT INTO device_accounts (device_id, account_id, state, added_at, last_login_at, session_id, session_started_at,
                    refresh_hash, refresh_generation, refresh_expires_at, key_by_device, key_by_token)
                VALUES (?, ?, 'active', ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            let transfer = try db.makeStatement(sql: "INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)")
            // BENCH_CODES=1: the transfers are transfer codes instead, code i being i in 16 decimal digits (bench/lua/claim_code.lua).
            let codes = ProcessInfo.processInfo.environment["BENCH_CODES"] == "1"
            let codeTransfer = try db.makeStatement(
                sql: "INSERT INTO transfers (id, account_id, method, code_hash, state, created_at, expires_at) VALUES (?, ?, 'code', ?, 'pending', ?, ?)")
            let push = try db.makeStatement(sql: """
                INSERT INTO push_tokens (device_id, provider, token, token_hash, environment, registered_at)
                VALUES (?, 'apns', ?, ?, 'production', ?)
                """)
            try db.execute(
                sql: "INSERT INTO service_keys (name, key_hash, created_at, created_by) VALUES ('bench', ?, ?, 'operator:bench')",
                arguments: [Data(SecretHash(of: serviceKey).bytes), now])
            for i in 0..<max(accounts, sessions) {
                let a = id("a0000000-0000-4000-8000-", i), d = id("00000000-0000-4000-8000-", i)
                try account.execute(arguments: [a, d, now])
                try device.execute(arguments: [d, secretHash, now, a])
                let p = session(i, accounts: accounts, now: now)
                try pair.execute(arguments: [
                    d, a, now, now, p.sessionID, now, Data(p.refreshHash.bytes), p.generation, p.expiresAt.milliseconds,
                    p.keyByDevice.map { Data($0) }, p.keyByToken.map { Data($0) },
                ])
                let token = pushToken(i)
                try push.execute(arguments: [d, token, Data(SecretHash(of: token).bytes), now])
                if i < transfers && codes {
                    let code = String(repeating: "0", count: 16 - String(i).count) + String(i)
                    try codeTransfer.execute(arguments: [id("c0000000-0000-4000-8000-", i), a, Data(SecretHash(of: code).bytes), now, now + 86_400_000])
                } else if i < transfers {
                    let email = "bench\(i)@example.com"
                    try transfer.execute(arguments: [id("c0000000-0000-4000-8000-", i), a, email, email, phc, now, now + 86_400_000])
                }
            }
        }
        try store.close()
        print("seeded \(accounts) accounts, \(min(transfers, accounts)) transfers, \(sessions) sessions, \(max(accounts, sessions)) push tokens in \(ContinuousClock.now - start)")
    }

    /// The rows `main` writes for SQLite, generated inside PostgreSQL.
    static func seedPostgres(
        url: String, accounts: Int, transfers: Int, sessions: Int, phc: String, secretHash: Data, now: Int64
    ) async throws {
        let logger = Logger(label: "bench-seed")
        let opened = try Storage.open(.postgres(url: url), poolSize: 2, logger: logger)
        guard let client = opened.client else { return }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            try await opened.migrate()
            let pad = { (prefix: String, column: String) in "'\(prefix)' || lpad((\(column))::text, 12, '0')" }
            try await client.withTransaction(logger: logger) { conn in
                let rows = max(accounts, sessions)
                try await conn.query(
                    """
                    INSERT INTO accounts (id, user_name, created_at)
                    SELECT \(unescaped: pad("a0000000-0000-4000-8000-", "i")), \(unescaped: pad("00000000-0000-4000-8000-", "i")), \(now)
                    FROM generate_series(0, \(rows - 1)) AS i
                    """, logger: logger)
                try await conn.query(
                    """
                    INSERT INTO devices (id, secret_hash, created_at)
                    SELECT \(unescaped: pad("00000000-0000-4000-8000-", "i")), \(secretHash), \(now)
                    FROM generate_series(0, \(rows - 1)) AS i
                    """, logger: logger)
                // Sessions need their keys wrapped by the device secret: built here, 1 000 rows a statement.
                let hex = { (bytes: [UInt8]?) in bytes.map { "'\\x" + Hex.encode($0) + "'::bytea" } ?? "NULL" }
                for low in stride(from: 0, to: rows, by: 1_000) {
                    let values = (low..<min(low + 1_000, rows)).map { i -> String in
                        let p = session(i, accounts: accounts, now: now)
                        return "('\(id("00000000-0000-4000-8000-", i))', '\(id("a0000000-0000-4000-8000-", i))', 'active', \(now), \(now), "
                            + "'\(p.sessionID)', \(now), \(hex(p.refreshHash.bytes)), 0, \(p.expiresAt.milliseconds), \(hex(p.keyByDevice)), \(hex(p.keyByToken)))"
                    }
                    try await conn.query(PostgresQuery(unsafeSQL: """
                        INSERT INTO device_accounts (device_id, account_id, state, added_at, last_login_at, session_id, session_started_at,
                            refresh_hash, refresh_generation, refresh_expires_at, key_by_device, key_by_token)
                        VALUES \(values.joined(separator: ",\n"))
                        """), logger: logger)
                }
                try await conn.query(
                    "UPDATE devices SET current_account_id = 'a0000000-0000-4000-8000-' || substr(id, 25)", logger: logger)
                try await conn.query(
                    """
                    INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at)
                    SELECT \(unescaped: pad("c0000000-0000-4000-8000-", "i")), \(unescaped: pad("a0000000-0000-4000-8000-", "i")),
                           'bench' || i || '@example.com', 'bench' || i || '@example.com', \(phc), 'pending', \(now), \(now + 86_400_000)
                    FROM generate_series(0, \(min(transfers, accounts) - 1)) AS i
                    """, logger: logger)
                // Tokens as `pushToken(i)` makes them; token_hash is SHA-256 of the token's UTF-8, as the store's.
                try await conn.query(
                    """
                    INSERT INTO push_tokens (device_id, provider, token, token_hash, environment, registered_at)
                    SELECT d, 'apns', t, sha256(convert_to(t, 'UTF8')), 'production', \(now)
                    FROM (SELECT \(unescaped: pad("00000000-0000-4000-8000-", "i")) AS d,
                                 encode(sha256(convert_to('bench-push-' || i, 'UTF8')), 'hex') AS t
                          FROM generate_series(0, \(rows - 1)) AS i) AS s
                    """, logger: logger)
                try await conn.query(
                    """
                    INSERT INTO service_keys (name, key_hash, created_at, created_by)
                    VALUES ('bench', \(Data(SecretHash(of: serviceKey).bytes)), \(now), 'operator:bench')
                    """, logger: logger)
            }
            _ = try await client.withConnection { conn in try await conn.query("ANALYZE", logger: logger) }
            group.cancelAll()
        }
    }

    static func storeLogins(_ args: [String]) async throws {
        guard args.count == 4, let accounts = Int(args[1]), let tasks = Int(args[2]), let seconds = Int(args[3]) else {
            FileHandle.standardError.write(Data("usage: bench-seed --store-logins PATH ACCOUNTS TASKS SECONDS\n".utf8))
            exit(2)
        }
        let store = try SQLiteStore(path: args[0])
        let deadline = ContinuousClock.now + .seconds(seconds)
        let count = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<tasks {
                group.addTask {
                    var done = 0
                    while ContinuousClock.now < deadline {
                        let now = Timestamp(Date())
                        let device = DeviceID(id("00000000-0000-4000-8000-", Int.random(in: 0..<accounts)))!
                        let result = try await store.login(
                            LoginCommand(
                                deviceID: device, deviceSecret: secret, now: now, newAccountID: Identifier.make(),
                                fresh: FreshSession(sessionID: Identifier.make(), key: .random(), expiresAt: now + .seconds(86_400)),
                                clientAddress: "127.0.0.1"))
                        guard case .success = result else { fatalError("login refused: \(result)") }
                        done += 1
                    }
                    return done
                }
            }
            return try await group.reduce(0, +)
        }
        try store.close()
        print(String(format: "%.1f", Double(count) / Double(seconds)))
    }

    /// The database file's size (after a checkpoint folds the WAL in) and every table's rows.
    /// Device i's session: opened by a login with the bench secret (i < accounts), or one
    /// from schema v2 whose refresh token is `bench-refresh-<i>`.
    static func session(_ i: Int, accounts: Int, now: Int64) -> PairSession {
        let sid = id("d0000000-0000-4000-8000-", i)
        let started = Timestamp(milliseconds: now), expires = Timestamp(milliseconds: now + 30 * 86_400_000)
        if i < accounts {
            return PairSession.open(sessionID: sid, key: .random(), deviceSecret: secret, at: started, expiresAt: expires).0
        }
        return PairSession(
            sessionID: sid, startedAt: started, generation: 0, refreshHash: SecretHash(of: "bench-refresh-\(i)"), expiresAt: expires,
            keyByDevice: nil, keyByToken: nil)
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// One line of JSON on standard output, for `bench/run` to read.
    static func printJSON(_ object: [String: Any]) throws {
        print(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self))
    }

    struct Footprint: Sendable {
        var bytes: Int
        var freePages: Int
        var rows: [String: Int]
        var json: [String: Any] { ["bytes": bytes, "free_pages": freePages, "rows": rows, "rows_total": rows.values.reduce(0, +)] }
    }

    static func footprint(_ raw: DatabasePool) async throws -> Footprint {
        try await raw.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        return try await raw.read { db in
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let size = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            let free = try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            var rows: [String: Int] = [:]
            for table in ["accounts", "devices", "device_accounts", "rotated_refresh_tokens", "transfers", "audit_events", "signing_keys"] {
                rows[table] = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0
            }
            return Footprint(bytes: pages * size, freePages: free, rows: rows)
        }
    }

    static func storage(_ args: [String]) async throws {
        guard args.count == 3, let devices = Int(args[1]), let launches = Int(args[2]), launches >= devices else {
            FileHandle.standardError.write(Data("usage: bench-seed --storage PATH DEVICES LAUNCHES\n".utf8))
            exit(2)
        }
        let store = try SQLiteStore(path: args[0])
        let raw = try DatabasePool(path: args[0])  // the store's schema, written in bulk beside it
        @Sendable func launch(_ i: Int) async throws {
            let now = Timestamp(Date())
            let result = try await store.login(
                LoginCommand(
                    deviceID: DeviceID(id("00000000-0000-4000-8000-", i))!, deviceSecret: secret, now: now, newAccountID: Identifier.make(),
                    fresh: FreshSession(sessionID: Identifier.make(), key: .random(), expiresAt: now + .seconds(30 * 86_400)),
                    clientAddress: "203.0.113.\(i % 250)"))
            guard case .success = result else { fatalError("launch refused: \(result)") }
        }
        @Sendable func run(_ count: Int, tasks: Int, _ device: @escaping @Sendable (Int) -> Int) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for t in 0..<tasks {
                    group.addTask { for n in stride(from: t, to: count, by: tasks) { try await launch(device(n)) } }
                }
                try await group.waitForAll()
            }
        }
        try await run(devices, tasks: 16) { $0 }
        let first = try await footprint(raw)
        let start = ContinuousClock.now
        try await run(launches - devices, tasks: 16) { _ in Int.random(in: 0..<devices) }
        let elapsed = ContinuousClock.now - start
        let all = try await footprint(raw)
        try store.close()
        let seconds = Self.seconds(elapsed)
        let ratio = Double(all.bytes) / Double(first.bytes)
        let out: [String: Any] = [
            "devices": devices, "launches": launches, "after_first_launches": first.json, "after_all_launches": all.json, "size_ratio": ratio,
            "launches_per_second": Double(launches - devices) / seconds,
        ]
        try printJSON(out)
    }

    static func prune(_ args: [String]) async throws {
        guard args.count == 2, let sessions = Int(args[1]) else {
            FileHandle.standardError.write(Data("usage: bench-seed --prune PATH SESSIONS\n".utf8))
            exit(2)
        }
        let store = try SQLiteStore(path: args[0])
        let raw = try DatabasePool(path: args[0])  // the store's schema, written in bulk beside it
        let now = Timestamp(Date())
        let expired = (now - .seconds(86_400)).milliseconds, then = (now - .seconds(31 * 86_400)).milliseconds
        let secretHash = Data(SecretHash(of: secret).bytes)
        try await raw.write { db in
            // Devices name their current account before its row exists: checked at commit.
            try db.execute(sql: "PRAGMA defer_foreign_keys = ON")
            let account = try db.makeStatement(sql: "INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)")
            let device = try db.makeStatement(sql: "INSERT INTO devices (id, secret_hash, created_at, current_account_id) VALUES (?, ?, ?, ?)")
            let pair = try db.makeStatement(sql: """
                INSERT INTO device_accounts (device_id, account_id, state, added_at, last_login_at, session_id, session_started_at,
                    refresh_hash, refresh_generation, refresh_expires_at, key_by_device, key_by_token)
                VALUES (?, ?, 'active', ?, ?, ?, ?, ?, 1, ?, ?, ?)
                """)
            let rotated = try db.makeStatement(sql: """
                INSERT INTO rotated_refresh_tokens (token_hash, device_id, account_id, session_id, expires_at) VALUES (?, ?, ?, ?, ?)
                """)
            let key = Data(RandomToken.randomBytes(32))
            for i in 0..<sessions {
                let a = id("a0000000-0000-4000-8000-", i), d = id("00000000-0000-4000-8000-", i), s = id("d0000000-0000-4000-8000-", i)
                try account.execute(arguments: [a, d, then])
                try device.execute(arguments: [d, secretHash, then, a])
                try pair.execute(arguments: [d, a, then, then, s, then, Data(SecretHash(of: "current-\(i)").bytes), expired, key, key])
                try rotated.execute(arguments: [Data(SecretHash(of: "rotated-\(i)").bytes), d, a, s, expired])
            }
        }
        let before = try await footprint(raw)
        let start = ContinuousClock.now
        let counts = try await store.prune(PruneCutoffs(now: now, retainedSince: now - .seconds(400 * 86_400)), batchSize: 5_000)
        let elapsed = ContinuousClock.now - start
        let after = try await footprint(raw)
        try store.close()
        let seconds = Self.seconds(elapsed)
        let out: [String: Any] = [
            "sessions": sessions, "seconds": seconds, "expired_sessions": counts?.expiredSessions ?? -1,
            "rotated_tokens": counts?.rotatedTokens ?? -1, "before": before.json, "after": after.json,
        ]
        try printJSON(out)
    }

    static func inactive(_ args: [String]) async throws {
        guard args.count == 2, let count = Int(args[1]), count > 0 else {
            FileHandle.standardError.write(Data("usage: bench-seed --inactive PATH N\n".utf8))
            exit(2)
        }
        let then = (Timestamp(Date()) - .seconds(400 * 86_400)).milliseconds
        let secretHash = Data(SecretHash(of: secret).bytes)
        let start = ContinuousClock.now
        if args[0].hasPrefix("postgres://") || args[0].hasPrefix("postgresql://") {
            let logger = Logger(label: "bench-seed")
            let opened = try Storage.open(.postgres(url: args[0]), poolSize: 2, logger: logger)
            guard let client = opened.client else { return }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await client.run() }
                try await opened.migrate()
                let pad = { (prefix: String) in "'\(prefix)' || lpad(i::text, 12, '0')" }
                try await client.withTransaction(logger: logger) { conn in
                    try await conn.query(
                        """
                        INSERT INTO accounts (id, user_name, created_at)
                        SELECT \(unescaped: pad("b0000000-0000-4000-8000-")), \(unescaped: pad("10000000-0000-4000-8000-")), \(then)
                        FROM generate_series(0, \(count - 1)) AS i
                        """, logger: logger)
                    try await conn.query(
                        """
                        INSERT INTO devices (id, secret_hash, created_at)
                        SELECT \(unescaped: pad("10000000-0000-4000-8000-")), \(secretHash), \(then) FROM generate_series(0, \(count - 1)) AS i
                        """, logger: logger)
                    try await conn.query(
                        """
                        INSERT INTO device_accounts (device_id, account_id, state, added_at, last_login_at)
                        SELECT \(unescaped: pad("10000000-0000-4000-8000-")), \(unescaped: pad("b0000000-0000-4000-8000-")), 'active', \(then), \(then)
                        FROM generate_series(0, \(count - 1)) AS i
                        """, logger: logger)
                    try await conn.query(
                        """
                        UPDATE devices SET current_account_id = 'b0000000-0000-4000-8000-' || substr(id, 25)
                        WHERE id LIKE '10000000-0000-4000-8000-%'
                        """, logger: logger)
                }
                _ = try await client.withConnection { conn in try await conn.query("ANALYZE", logger: logger) }
                group.cancelAll()
            }
        } else {
            let store = try SQLiteStore(path: args[0])
            let raw = try DatabasePool(path: args[0])  // the store's schema, written in bulk beside it
            try await raw.write { db in
                try db.execute(sql: "PRAGMA defer_foreign_keys = ON")
                let account = try db.makeStatement(sql: "INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)")
                let device = try db.makeStatement(sql: "INSERT INTO devices (id, secret_hash, created_at, current_account_id) VALUES (?, ?, ?, ?)")
                let pair = try db.makeStatement(
                    sql: "INSERT INTO device_accounts (device_id, account_id, state, added_at, last_login_at) VALUES (?, ?, 'active', ?, ?)")
                for i in 0..<count {
                    let a = id("b0000000-0000-4000-8000-", i), d = id("10000000-0000-4000-8000-", i)
                    try account.execute(arguments: [a, d, then])
                    try device.execute(arguments: [d, secretHash, then, a])
                    try pair.execute(arguments: [d, a, then, then])
                }
            }
            try store.close()
        }
        try printJSON(["inactive_accounts": count, "seconds": seconds(ContinuousClock.now - start)])
    }

    static func inactiveRound(_ args: [String]) async throws {
        guard args.count == 1 else {
            FileHandle.standardError.write(Data("usage: bench-seed --inactive-round PATH\n".utf8))
            exit(2)
        }
        let location: DatabaseLocation = args[0].hasPrefix("postgres") ? .postgres(url: args[0]) : .sqlite(path: args[0])
        let now = Timestamp(Date())
        let start = ContinuousClock.now
        let counts = try await Storage.withStore(location, logger: Logger(label: "bench-seed")) { store in
            try await store.prune(
                PruneCutoffs(now: now, retainedSince: now - .seconds(400 * 86_400), inactiveBefore: now - .seconds(30 * 86_400)),
                batchSize: 5_000)
        }
        let elapsed = seconds(ContinuousClock.now - start)
        try printJSON(["erased": counts?.inactiveAccounts ?? -1, "seconds": elapsed, "per_second": Double(counts?.inactiveAccounts ?? 0) / elapsed])
    }
}
