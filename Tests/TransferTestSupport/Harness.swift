import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing
import TransferArgon2
import TransferCore
import TransferHTTP

/// A clock the test moves by hand.
final class ManualClock: WallClock {
    /// Starts at the real time, so tools that read the real clock (the CLI) agree with it.
    private let current = Mutex(Timestamp(Date()))
    func now() -> Timestamp { current.withLock { $0 } }
    func advance(_ d: Duration) { current.withLock { $0 = $0 + d } }
}

/// Real argon2id with cheap parameters, counting calls.
final class CountingHasher: PasswordHasher {
    let inner = Argon2Hasher(parameters: Argon2Parameters(memoryKiB: 256, iterations: 1, parallelism: 1), workers: 2, queueDepth: 1000)
    let hashes = Atomic<Int>(0)
    let verifications = Atomic<Int>(0)
    func hash(_ password: String) async throws -> String {
        hashes.add(1, ordering: .relaxed)
        return try await inner.hash(password)
    }
    func verify(_ password: String, against phc: String) async throws -> Bool {
        verifications.add(1, ordering: .relaxed)
        return try await inner.verify(password, against: phc)
    }
    var verifyCount: Int { verifications.load(ordering: .relaxed) }
}

/// Collects every log line (message and metadata) a server writes.
final class LogCollector: Sendable {
    let lines = Mutex<[String]>([])
    var all: String { lines.withLock { $0.joined(separator: "\n") } }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(collector: self) }
    }

    struct Handler: LogHandler {
        let collector: LogCollector
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            collector.lines.withLock { $0.append("\(event.level) \(event.message) \(merged)") }
        }
    }
}

/// Strings gathered from concurrent code, kept in the order added: empty ones too, so a
/// value's position never depends on the ones before it.
final class LockedStrings: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String] = []
    func add(_ v: String...) { lock.withLock { values += v } }
    var all: [String] { lock.withLock { values } }
}

/// One server on a fresh database, with a hand-moved clock and a counting hasher.
struct Harness {
    let clock = ManualClock()
    let hasher = CountingHasher()
    let logs = LogCollector()
    let database: TempDatabase
    var configuration: ServerConfiguration
    /// False: the server uses the argon2 pool its configuration describes.
    var injectHasher = true

    init(database: TempDatabase = TempDatabase(), configure: (inout ServerConfiguration) -> Void = { _ in }) {
        self.init(location: .sqlite(path: database.path), file: database, configure: configure)
    }

    init(location: DatabaseLocation, file: TempDatabase, configure: (inout ServerConfiguration) -> Void = { _ in }) {
        self.database = file
        var config = ServerConfiguration()
        config.database = location
        if case .postgres = location { config.databasePooling = TestPostgres.pooling }
        config.limits = .off
        config.argon2 = Argon2Parameters(memoryKiB: 256, iterations: 1, parallelism: 1)
        configure(&config)
        configuration = config
    }

    /// Runs `body` against the server through the router (no socket). A server that trusts
    /// proxies listens on a socket of its own instead: a router test has no peer to trust,
    /// and on a socket the peer is 127.0.0.1 (the proxy, when it is named).
    func run(_ body: @Sendable (Client, TransferApp.Parts) async throws -> Void) async throws {
        var configuration = configuration
        let live = !configuration.trustedProxies.ranges.isEmpty
        if live { configuration.port = 0 }
        let (app, parts) = try await TransferApp.build(
            configuration: configuration, clock: clock, passwordHasher: injectHasher ? hasher : nil, logger: logs.logger)
        try await app.test(live ? .live : .router) { client in
            try await body(Client(client: client), parts)
        }
    }
}

extension TrustedProxies {
    /// The peer of a test's socket: `--trusted-proxy 127.0.0.1,::1`.
    static let loopback = try! TrustedProxies("127.0.0.1,::1")
}

/// A server on a fresh database of the given store, removed afterwards.
func withServer(
    _ kind: StoreKind = .sqlite,
    configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in },
    _ body: @Sendable (Client, Harness) async throws -> Void
) async throws {
    try await kind.withDatabaseLocation { location, file in
        let harness = Harness(location: location, file: file, configure: configure)
        try await harness.run { client, _ in try await body(client, harness) }
    }
}

extension Harness {
    /// The `--database` value of this harness's database.
    var databaseArgument: String { configuration.database.argument }
}

/// A harness on a fresh database of the given store, for tests that also reach the database otherwise.
func withHarness(
    _ kind: StoreKind,
    configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in },
    _ body: @Sendable (Harness) async throws -> Void
) async throws {
    try await kind.withDatabaseLocation { location, file in
        try await body(Harness(location: location, file: file, configure: configure))
    }
}
