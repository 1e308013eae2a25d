import Foundation
import Logging
import PostgresNIO
import Synchronization
import TransferCore
import TransferSQL

/// The multi-node store: every node talks to one PostgreSQL database through its pool
/// (`PostgresPool`: the first qualifying of the URL's hosts), which must be running (`run()`,
/// as a service of the server) before any query.
///
/// Each `TransferStore` method is one transaction at READ COMMITTED. Rows that a decision
/// depends on are read `FOR UPDATE`, so concurrent requests on any node serialise on them;
/// inserts that race (two first launches of one device, two set-ups of one email) meet the
/// schema's unique indexes, and the transaction is retried, then sees the winner's row.
public final class PostgresStore: SQLStore {
    public let client: PostgresPool
    let logger: Logger
    /// When a query last succeeded: tells a busy pool from an unreachable database.
    let health = QueryHealth()
    /// How PostgreSQL is reached: in `transaction` (PgBouncer's transaction pooling) nothing
    /// relies on a server session outliving a transaction.
    public let pooling: DatabasePooling
    /// A statement unanswered this long ends its request with `503` (`guarded`).
    let statementTimeout: Duration
    /// The reads of concurrent logins, a statement per batch (`openSession`). Two drainers:
    /// one batch on the wire while the next gathers.
    let openSessions = BatchedReads<ReadOpenSessions.Login, OpenSession?>(drainers: 2) { error in
        if case .unavailable = error as? TransferError { return true }
        return false
    }

    public init(
        client: PostgresPool, pooling: DatabasePooling = .session, statementTimeout: Duration = PostgresStore.requestStatementTimeout,
        logger: Logger = Logger(label: "transfer.postgres")
    ) {
        self.client = client
        self.pooling = pooling
        self.statementTimeout = statementTimeout
        self.logger = logger
    }

    // MARK: Operations

    public func execute<Operation: StoreOperation>(_ operation: Operation) async throws -> Result<Operation.Success, TransferError> {
        // An operation that reads nothing and writes one statement (a rate-limit slot taken or
        // given back before a claim or a set-up) needs no transaction: the statement is atomic
        // on its own, and BEGIN and COMMIT would triple its round trips.
        if operation.reads.isEmpty {
            let plan = try operation.plan(Facts())
            if plan.effects.count == 1, let effect = plan.effects.first, let sql = effect.checkedStatement ?? effect.single {
                try await withConnection(writes: true) { [self] conn in try effect.check(await all(conn, Self.query(sql))) }
                return plan.result
            }
        }
        return try await transaction { [self] conn in
            let plan = try operation.plan(try await read(conn, FactsPlan(operation.reads, at: operation.now, lock: true, dialect: .postgres)))
            var outbox: [Effect] = []
            for effect in plan.effects {
                if case .enqueue = effect {
                    outbox.append(effect)
                } else if let checked = effect.checkedStatement {
                    try effect.check(await all(conn, Self.query(checked)))
                } else {
                    try await run(conn, effect.statements)
                }
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
        for effect in effects { try await run(conn, effect.statements) }
    }

    /// The first key of the per-account outbox locks ("outx").
    static let outboxLockClass: Int32 = 0x6F75_7478

    // MARK: TransferStore

    /// Answers within 1.5 seconds, or throws: `/readyz` must not hang while the database is
    /// down, and is ready only on a connection that can write (`SHOW transaction_read_only`, as
    /// libpq's `read-write` check): during a failover, not before the promoted standby is reached.
    public func ping() async throws {
        let client = client, logger = logger
        try await Self.withTimeout(.milliseconds(1500)) {
            try await client.withConnection { conn in
                let readOnly = try await Self.guarded(conn, .milliseconds(1400)) { () -> Bool in
                    var value = "on"
                    for try await v in try await conn.query("SHOW transaction_read_only", logger: logger).decode(String.self) { value = v }
                    return value != "off"
                }
                if readOnly {
                    client.hostTurnedReadOnly(conn)
                    throw ReadOnlyHost()
                }
            }
        }
    }

    /// `/readyz` reached a host that cannot write.
    public struct ReadOnlyHost: Error, CustomStringConvertible {
        public var description: String { "the database host is read-only" }
    }

    // MARK: Reads outside operations (written once in TransferSQL's `SQLStore`)

    public func read<Plan: ReadPlan>(_ plan: Plan) async throws -> Plan.Output {
        try await withConnection { [self] conn in try await read(conn, plan) }
    }

    public var dialect: SQLDialect { .postgres }
}
