import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization
import TransferCore
import _ConnectionPoolModule

#if canImport(Glibc)
import Glibc
#endif

/// The store's PostgreSQL connections, to whichever of the URL's hosts qualifies.
///
/// PostgresNIO's `PostgresClient` connects to one host and takes no connection factory of its
/// own, so this is its pool (`_ConnectionPoolModule`, the one `PostgresClient` runs on; pinned
/// with postgres-nio at an exact version) with a factory that does what libpq does with a
/// multi-host URL: each new connection tries the hosts in order and keeps the first that
/// qualifies (`target_session_attrs`). While none does (a failover in progress), the factory
/// walks them again every `retryInterval` rather than failing: the pool's own retry backs off
/// up to a minute, which would keep a node away for that long after a standby is promoted.
/// Requests do not wait for it: `PostgresStore.withConnection` gives up on a lease after a
/// second and answers `503`.
///
/// A connection on a host found read-only later (`25006`, a demoted primary behind a proxy)
/// is closed by the store (`hostTurnedReadOnly`), and so is, at its next lease, every other
/// connection made to that host before it: new connections walk the hosts again.
///
/// Every connection's socket has TCP keepalive (a host that vanished without closing its
/// connections is noticed in about 11 s even while idle); a statement that gets no answer is
/// cut short by the store's per-statement deadline (`PostgresStore.guarded`).
public final class PostgresPool: Sendable, Service {
    typealias Pool = ConnectionPool<
        PostgresConnection, PostgresConnection.ID, _ConnectionPoolModule.ConnectionIDGenerator,
        ConnectionRequest<PostgresConnection>, ConnectionRequest<PostgresConnection>.ID, KeepAlive,
        NoOpConnectionPoolMetrics<PostgresConnection.ID>, ContinuousClock
    >

    public let url: PostgresURL
    let pool: Pool
    let walker: HostWalker

    /// How long a walk that found no qualifying host waits before the next.
    static let retryInterval = Duration.milliseconds(200)
    /// An idle pooled connection runs `SELECT 1` this often, and is closed if it gets no answer in 5 s.
    static let keepAliveFrequency = Duration.seconds(30)

    public init(url: PostgresURL, maxConnections: Int = 20, logger: Logger) throws(InvalidDatabaseURL) {
        self.url = url
        let walker = try HostWalker(url: url, logger: logger)
        self.walker = walker
        var configuration = ConnectionPoolConfiguration()
        configuration.minimumConnectionCount = 0
        configuration.maximumConnectionSoftLimit = maxConnections
        configuration.maximumConnectionHardLimit = maxConnections
        configuration.idleTimeout = .seconds(60)
        // At most this many walks at once: during an outage each retries every `retryInterval`.
        configuration.maximumConcurrentConnectionRequests = min(maxConnections, 4)
        let group = MultiThreadedEventLoopGroup.singleton
        pool = Pool(
            configuration: configuration,
            keepAliveBehavior: KeepAlive(logger: logger),
            observabilityDelegate: NoOpConnectionPoolMetrics(connectionIDType: PostgresConnection.ID.self),
            connectionFactory: { id, _ in
                ConnectionAndMetadata(connection: try await walker.connect(id: id, on: group.any()), maximalStreamsOnConnection: 1)
            })
    }

    /// Runs the pool until the task is cancelled or the service group shuts down gracefully;
    /// no connection is leased before it runs.
    public func run() async {
        await cancelWhenGracefulShutdown { await self.pool.run() }
    }

    /// Runs `body` on a leased connection; one that the host it was made to turned read-only
    /// since is closed and another leased (as is one already closed, not yet out of the pool).
    public func withConnection<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        var lease = try await pool.leaseConnection()
        while walker.isStale(lease.connection) || lease.connection.isClosed {
            PostgresStore.drop(lease.connection)
            lease.release()
            lease = try await pool.leaseConnection()
        }
        defer { lease.release() }
        return try await body(lease.connection)
    }

    /// `body` in a transaction (BEGIN, then COMMIT, or ROLLBACK when it throws).
    public func withTransaction<T>(logger: Logger, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await withConnection { conn in
            try await conn.query("BEGIN", logger: logger)
            let value: T
            do {
                value = try await body(conn)
            } catch {
                _ = try? await conn.query("ROLLBACK", logger: logger)
                throw error
            }
            try await conn.query("COMMIT", logger: logger)
            return value
        }
    }

    /// The host `conn` was made to turned read-only: `conn` is closed, and so is every other
    /// connection made to that host until now, at its next lease.
    func hostTurnedReadOnly(_ conn: PostgresConnection) {
        walker.markStale(conn)
        PostgresStore.drop(conn)
    }

    /// A statement on `conn` got its answer: its host answers.
    func answered(_ conn: PostgresConnection) { walker.answered(conn) }

    /// Whether `conn`'s host answered a statement of this pool within `limit`.
    func hostAnswered(_ conn: PostgresConnection, within limit: Duration) -> Bool { walker.answered(conn, within: limit) }

    /// Which host `conn` is on, as the URL lists it.
    public func host(of conn: PostgresConnection) -> PostgresURL.Host? { walker.host(of: conn).map { url.hosts[$0] } }

    /// Why the last attempt to connect failed, in one line (nil: none failed since the last success).
    public var lastConnectProblem: String? { walker.lastProblem }

    struct KeepAlive: ConnectionKeepAliveBehavior {
        let logger: Logger
        var keepAliveFrequency: Duration? { PostgresPool.keepAliveFrequency }
        func runKeepAlive(for connection: PostgresConnection) async throws {
            let logger = logger
            try await PostgresStore.guarded(connection, .seconds(5)) { _ = try await connection.query("SELECT 1", logger: logger) }
        }
    }
}

/// Connects to the first of the URL's hosts that qualifies, and remembers which host each
/// connection is on (for `isStale`).
final class HostWalker: Sendable {
    let url: PostgresURL
    let tls: PostgresConnection.Configuration.TLS
    let logger: Logger

    private struct State {
        /// Bumped when a host is found read-only: connections made before are stale.
        var epochs: [Int]
        /// Each open connection's host and that host's epoch when it was made.
        var connections: [PostgresConnection.ID: (host: Int, epoch: Int)] = [:]
        /// When each host last answered a statement (`DispatchTime` nanoseconds; 0: never).
        var lastAnswer: [UInt64]
        var lastProblem: String?
    }
    private let state: Mutex<State>

    init(url: PostgresURL, logger: Logger) throws(InvalidDatabaseURL) {
        self.url = url
        self.logger = logger
        if url.sslMode.usesTLS {
            do {
                tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            } catch {
                throw InvalidDatabaseURL(description: "TLS (sslmode=\(url.sslMode.rawValue)) cannot be set up: \(error)")
            }
        } else {
            tls = .disable
        }
        state = Mutex(State(epochs: Array(repeating: 0, count: url.hosts.count), lastAnswer: Array(repeating: 0, count: url.hosts.count)))
    }

    /// A connection to the first host that qualifies; walks the hosts again every
    /// `PostgresPool.retryInterval` until one does, or the task is cancelled (the pool stops).
    func connect(id: PostgresConnection.ID, on eventLoop: any EventLoop) async throws -> PostgresConnection {
        while true {
            try Task.checkCancellation()
            var problems: [String] = []
            for (index, host) in url.hosts.enumerated() {
                do {
                    let epoch = state.withLock { $0.epochs[index] }
                    switch try await attempt(host, id: id, on: eventLoop) {
                    case .qualifies(let conn):
                        state.withLock { state in
                            state.connections[conn.id] = (index, epoch)
                            state.lastProblem = nil
                        }
                        conn.closeFuture.whenComplete { [weak self] _ in
                            _ = self?.state.withLock { $0.connections.removeValue(forKey: id) }
                        }
                        return conn
                    case .doesNotQualify(let why):
                        problems.append("\(host): \(why)")
                    }
                } catch {
                    problems.append("\(host): \(Self.describe(error))")
                }
            }
            let problem = problems.joined(separator: "; ")
            state.withLock { $0.lastProblem = problem }
            logger.debug("no host qualifies", metadata: ["hosts": "\(problem)"])
            try await Task.sleep(for: PostgresPool.retryInterval)
        }
    }

    enum Attempt {
        case qualifies(PostgresConnection)
        case doesNotQualify(String)
    }

    /// Connects to `host` and checks it as `target_session_attrs` asks.
    func attempt(_ host: PostgresURL.Host, id: PostgresConnection.ID, on eventLoop: any EventLoop) async throws -> Attempt {
        let timeout = TimeAmount.nanoseconds(Int64(url.connectTimeout.components.seconds) * 1_000_000_000)
        let channel = try await Self.bootstrap(eventLoop, timeout: timeout).connect(host: host.name, port: host.port).get()
        var configuration = PostgresConnection.Configuration(
            establishedChannel: channel, tls: tls, username: url.user, password: url.password, database: url.database)
        configuration.options.connectTimeout = timeout
        configuration.options.tlsServerName = Self.isAddress(host.name) ? nil : host.name
        if let name = url.applicationName { configuration.options.additionalStartupParameters = [("application_name", name)] }
        let conn: PostgresConnection
        do {
            conn = try await PostgresConnection.connect(on: eventLoop, configuration: configuration, id: id, logger: logger).get()
        } catch {
            channel.close(promise: nil)
            throw error
        }
        let logger = logger
        do {
            let qualifies: Bool
            switch url.targetSessionAttributes {
            case .any:
                return .qualifies(conn)
            case .readWrite:
                qualifies = try await PostgresStore.guarded(conn, url.connectTimeout) {
                    var value = ""
                    for try await v in try await conn.query("SHOW transaction_read_only", logger: logger).decode(String.self) { value = v }
                    return value == "off"
                }
                if !qualifies {
                    await Self.close(conn)
                    return .doesNotQualify("read-only")
                }
            case .primary:
                qualifies = try await PostgresStore.guarded(conn, url.connectTimeout) {
                    var recovering = true
                    for try await v in try await conn.query("SELECT pg_is_in_recovery()", logger: logger).decode(Bool.self) { recovering = v }
                    return !recovering
                }
                if !qualifies {
                    await Self.close(conn)
                    return .doesNotQualify("in recovery (a standby)")
                }
            }
            return .qualifies(conn)
        } catch {
            await Self.close(conn)
            throw error
        }
    }

    /// Closes a connection the pool never saw, and waits until it is (one released before
    /// it is closed is a bug PostgresNIO asserts on).
    static func close(_ conn: PostgresConnection) async {
        _ = try? await (conn.close() as EventLoopFuture<Void>).get()
    }

    /// TCP with keepalive: first probe after 5 s idle, then every 2 s, dead after 3 unanswered
    /// (about 11 s); sent data unacknowledged for 10 s also ends the connection (Linux).
    static func bootstrap(_ eventLoop: any EventLoop, timeout: TimeAmount) -> ClientBootstrap {
        var bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(ChannelOptions.socketOption(.so_keepalive), value: 1)
        #if canImport(Glibc)
        for (option, value) in [(TCP_KEEPIDLE, 5), (TCP_KEEPINTVL, 2), (TCP_KEEPCNT, 3), (TCP_USER_TIMEOUT, 10_000)] {
            bootstrap = bootstrap.channelOption(ChannelOptions.tcpOption(NIOBSDSocket.Option(rawValue: CInt(option))), value: value)
        }
        #endif
        return bootstrap
    }

    static func isAddress(_ host: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            if let underlying = error.underlying { return "\(underlying)" }
            return "\(error.code)"
        }
        return "\(error)"
    }

    func host(of conn: PostgresConnection) -> Int? { state.withLock { $0.connections[conn.id]?.host } }

    func markStale(_ conn: PostgresConnection) {
        state.withLock { state in
            guard let made = state.connections[conn.id] else { return }
            // Once per turn: a host's connections that find out one after another bump it once.
            if state.epochs[made.host] == made.epoch { state.epochs[made.host] += 1 }
        }
    }

    func isStale(_ conn: PostgresConnection) -> Bool {
        state.withLock { state in
            guard let made = state.connections[conn.id] else { return false }
            return made.epoch < state.epochs[made.host]
        }
    }

    var lastProblem: String? { state.withLock { $0.lastProblem } }

    func answered(_ conn: PostgresConnection) {
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock { state in
            if let host = state.connections[conn.id]?.host { state.lastAnswer[host] = now }
        }
    }

    func answered(_ conn: PostgresConnection, within limit: Duration) -> Bool {
        let last = state.withLock { state in state.connections[conn.id].map { state.lastAnswer[$0.host] } ?? 0 }
        let now = DispatchTime.now().uptimeNanoseconds
        return last > 0 && Duration.nanoseconds(Int64(clamping: now > last ? now - last : 0)) < limit
    }
}
