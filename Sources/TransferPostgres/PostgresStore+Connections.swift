import Foundation
import Logging
import PostgresNIO
import Synchronization
import TransferCore
import TransferSQL

/// Connections, transactions and outage detection: how every statement reaches PostgreSQL.
extension PostgresStore {
    /// The pool for a `--database` URL (one host or several, `PostgresURL`).
    public static func makeClient(url: String, maxConnections: Int = 20, logger: Logger) throws(InvalidDatabaseURL) -> PostgresPool {
        try PostgresPool(url: try PostgresURL(parsing: url), maxConnections: maxConnections, logger: logger)
    }

    // MARK: Deadlines

    /// How long a request's statement may go unanswered before its connection is closed and
    /// the request answers `503` (the contract's bound is 2 s from the outage; a lease gives up
    /// after `leaseTimeout`, and a statement started just before the database went away is
    /// cut short here). Long enough for any statement of a request on a busy database; the
    /// pruner and the CLI, whose statements may walk large tables, set a longer one.
    public static let requestStatementTimeout = Duration.milliseconds(1500)

    /// Replaces the store's `statementTimeout` for the statements of a task (the pruner's).
    @TaskLocal static var statementTimeoutOverride: Duration?

    var statementLimit: Duration { Self.statementTimeoutOverride ?? statementTimeout }

    /// Runs `body` (statements on `conn`), closing `conn` if it has not finished within `limit`:
    /// a statement waiting for its answer then fails as a lost connection (`503`), and the pool
    /// drops the connection. TCP alone would wait minutes for a host that is gone without a
    /// word (a crashed machine, a cut network); PostgreSQL's `statement_timeout` cannot help
    /// when the server itself does not answer.
    ///
    /// With `pool`, a host that answered another statement of this pool within `limit` is
    /// busy, not gone (a statement waiting for a row lock that many requests want): the
    /// deadline is pushed back while that holds, up to `busyCap` in all. A connection that
    /// alone stopped answering on a host that still answers others is ended by TCP
    /// (`TCP_USER_TIMEOUT`, 10 s).
    ///
    /// `body` runs in a task of its own, and the deadline answers for it when it has not
    /// finished: PostgresNIO never completes a statement written to a connection that closed
    /// meanwhile (the write finds no handler left; the statement's promise is never fulfilled),
    /// so waiting for `body` itself could wait forever. A connection already closed is refused
    /// at once.
    static func guarded<T: Sendable>(
        _ conn: PostgresConnection, _ limit: Duration, pool: PostgresPool? = nil, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        guard !conn.isClosed else { throw ConnectionClosed() }
        let race = Race<T>()
        let started = ContinuousClock.now
        return try await withCheckedThrowingContinuation { continuation in
            race.start(continuation)
            @Sendable func arm(_ delay: Duration) {
                let (seconds, attoseconds) = delay.components
                race.setTimer(conn.eventLoop.scheduleTask(in: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)) {
                    if let pool, ContinuousClock.now - started < busyCap, pool.hostAnswered(conn, within: limit) {
                        arm(min(limit, .milliseconds(250)))
                        return
                    }
                    drop(conn)
                    race.finish(.failure(StatementTimedOut()))
                })
            }
            arm(limit)
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                race.cancelTimer()
                if let pool, Self.answered(result) { pool.answered(conn) }
                race.finish(result)
            }
        }
    }

    /// The longest a statement is waited for while its host keeps answering others.
    static let busyCap = Duration.seconds(30)

    /// Whether the server answered: a result, or an error it sent.
    static func answered<T>(_ result: Result<T, any Error>) -> Bool {
        guard case .failure(let error) = result else { return true }
        return (error as? PSQLError)?.code == .server
    }

    /// A statement that got no answer within its deadline; its connection was closed.
    struct StatementTimedOut: Error {}
    /// A statement for a connection that had closed already.
    struct ConnectionClosed: Error {}

    /// Whichever ends first, the statements or their deadline, answers the caller; the other is ignored.
    final class Race<T: Sendable>: Sendable {
        private let state = Mutex<(continuation: CheckedContinuation<T, any Error>?, done: Bool)>((nil, false))
        private let timer = Mutex<(scheduled: Scheduled<Void>?, cancelled: Bool)>((nil, false))

        func start(_ continuation: CheckedContinuation<T, any Error>) { state.withLock { $0.continuation = continuation } }

        /// The deadline's current timer (each push back schedules another).
        func setTimer(_ scheduled: Scheduled<Void>) {
            let cancelNow = timer.withLock { timer in
                timer.scheduled = scheduled
                return timer.cancelled
            }
            if cancelNow { scheduled.cancel() }
        }

        func cancelTimer() {
            timer.withLock { timer in
                timer.cancelled = true
                return timer.scheduled
            }?.cancel()
        }

        func finish(_ result: Result<T, any Error>) {
            let continuation = state.withLock { state -> CheckedContinuation<T, any Error>? in
                guard !state.done else { return nil }
                state.done = true
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(with: result)
        }
    }

    /// Closes `conn` (the pool replaces it); anything waiting on it fails.
    static func drop(_ conn: PostgresConnection) {
        _ = conn.close() as EventLoopFuture<Void>
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
                return try await withConnection { [self] conn in
                    try await run(conn, "BEGIN")
                    let value: T
                    do {
                        value = try await body(conn)
                    } catch {
                        try? await run(conn, "ROLLBACK")
                        throw error
                    }
                    do {
                        try await run(conn, "COMMIT")
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
    /// (a COMMIT already sent is not interrupted); each of its statements has its deadline
    /// (`guarded`). `writes`: `body` is one statement that writes, whose outcome is unknown
    /// when the connection is lost after it was sent.
    ///
    /// A host found read-only (`25006`: a primary demoted behind a proxy, or `any` on a standby)
    /// answers `503` too, and the connection is dropped: the next one walks the hosts again.
    func withConnection<T: Sendable>(writes: Bool = false, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let gate = LeaseGate()
        let client = client, health = health
        do {
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    try await client.withConnection { conn in
                        guard gate.start() else { throw TransferError.unavailable(outcomeUnknown: false) }
                        do {
                            let value = try await body(conn)
                            health.succeeded()
                            return value
                        } catch let error as PSQLError where Self.isReadOnlyHost(error) {
                            client.hostTurnedReadOnly(conn)
                            throw TransferError.unavailable(outcomeUnknown: false)
                        } catch where writes && Self.isConnectionLoss(error) {
                            throw TransferError.unavailable(outcomeUnknown: true)
                        }
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
            // Our own errors and decoding failures are bugs or decisions, not outages.
            return !(error is PostgresDecodingError) && !(error is UnknownStoredValue) && !(error is TransferError)
                && !(error is TransferSetUpMeanwhile)
                && !(error is CancellationError) && !(error is DecodingError) && !(error is EncodingError) && !(error is MissingRow)
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

    /// Whether the host refused a write for being read-only: `25006 read_only_sql_transaction`,
    /// or a lock a standby cannot take (`55000`, "…while recovery is in progress").
    static func isReadOnlyHost(_ error: PSQLError) -> Bool {
        guard error.code == .server, let state = error.serverInfo?[.sqlState] else { return false }
        if state == "25006" { return true }
        return state == "55000" && (error.serverInfo?[.message] ?? "").contains("recovery")
    }

    static func isRace(_ error: PSQLError) -> Bool {
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return ["23505", "40001", "40P01"].contains(state)
    }

    // Each statement that succeeds tells `health` the database answers (a long transaction or
    // the pruner holding connections is a busy pool, not an outage).
    func one(_ conn: PostgresConnection, _ query: PostgresQuery) async throws -> PostgresRandomAccessRow? {
        let logger = logger
        let first = try await Self.guarded(conn, statementLimit, pool: client) { () -> PostgresRandomAccessRow? in
            for try await row in try await conn.query(query, logger: logger) { return row.makeRandomAccess() }
            return nil
        }
        health.succeeded()  // not on a throw: a failing statement is no sign the database answers
        return first
    }

    func all(_ conn: PostgresConnection, _ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
        let logger = logger
        let rows = try await Self.guarded(conn, statementLimit, pool: client) {
            var rows: [PostgresRandomAccessRow] = []
            for try await row in try await conn.query(query, logger: logger) { rows.append(row.makeRandomAccess()) }
            return rows
        }
        health.succeeded()
        return rows
    }

    func run(_ conn: PostgresConnection, _ query: PostgresQuery) async throws {
        let logger = logger
        try await Self.guarded(conn, statementLimit, pool: client) { _ = try await conn.query(query, logger: logger) }
        health.succeeded()
    }

    /// Every row of a prepared statement. Named and prepared once per connection, except
    /// through a pooler in transaction mode (`--database-pooling transaction`), where the next
    /// transaction may run on another server session that never saw it: there it is sent as
    /// the unnamed statement, parsed with each execution.
    func all<Statement: PostgresPreparedStatement & Sendable>(
        _ conn: PostgresConnection, _ statement: Statement
    ) async throws -> [Statement.Row] where Statement.Row: Sendable {
        let logger = logger, pooling = pooling
        let rows = try await Self.guarded(conn, statementLimit, pool: client) { () -> [Statement.Row] in
            var rows: [Statement.Row] = []
            switch pooling {
            case .session:
                for try await row in try await conn.execute(statement, logger: logger) { rows.append(row) }
            case .transaction:
                let query = PostgresQuery(unsafeSQL: Statement.sql, binds: try statement.makeBindings())
                for try await row in try await conn.query(query, logger: logger) { rows.append(try statement.decodeRow(row)) }
            }
            return rows
        }
        health.succeeded()
        return rows
    }

    /// The first row of a prepared statement (`all`'s, of a statement that answers one).
    func first<Statement: PostgresPreparedStatement & Sendable>(
        _ conn: PostgresConnection, _ statement: Statement
    ) async throws -> Statement.Row? where Statement.Row: Sendable {
        try await all(conn, statement).first
    }

    /// A statement written once in TransferSQL, rendered with `$n` binds.
    static func query(_ sql: SQLText) -> PostgresQuery {
        let (text, values) = sql.render(.postgres)
        var binds = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .null: binds.appendNull()
            case .integer(let n): binds.append(n)
            case .text(let text): binds.append(text)
            case .blob(let bytes): binds.append(ByteBuffer(bytes: bytes))
            }
        }
        return PostgresQuery(unsafeSQL: text, binds: binds)
    }

    func run(_ conn: PostgresConnection, _ statements: [SQLText]) async throws {
        for sql in statements { try await run(conn, Self.query(sql)) }
    }

    /// Runs a read plan to its end on this connection.
    func read<Plan: ReadPlan>(_ conn: PostgresConnection, _ plan: Plan) async throws -> Plan.Output {
        var plan = plan
        while let sql = plan.next() { try plan.take(await all(conn, Self.query(sql))) }
        return try plan.finish()
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

extension PostgresRandomAccessRow: SQLRow {
    public func text(_ column: String) throws -> String { try self[column].decode(String.self) }
    public func textOrNil(_ column: String) throws -> String? { try self[column].decode(String?.self) }
    public func integer(_ column: String) throws -> Int64 { try self[column].decode(Int64.self) }
    public func integerOrNil(_ column: String) throws -> Int64? { try self[column].decode(Int64?.self) }
    public func blob(_ column: String) throws -> [UInt8] { [UInt8](try self[column].decode(ByteBuffer.self).readableBytesView) }
    public func blobOrNil(_ column: String) throws -> [UInt8]? {
        try self[column].decode(ByteBuffer?.self).map { [UInt8]($0.readableBytesView) }
    }
    public func bool(_ column: String) throws -> Bool {
        let cell = self[column]
        // A boolean expression is `boolean`; a flag column is an integer.
        if cell.dataType == .bool { return try cell.decode(Bool.self) }
        return try cell.decode(Int64.self) != 0
    }
    public func text(at index: Int) throws -> String { try self[index].decode(String.self) }
    public func textOrNil(at index: Int) throws -> String? { try self[index].decode(String?.self) }
    public func integer(at index: Int) throws -> Int64 { try self[index].decode(Int64.self) }
}
