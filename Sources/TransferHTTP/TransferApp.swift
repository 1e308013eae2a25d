import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import TransferArgon2
import TransferCore
import TransferSQLite

/// Builds the whole server from a configuration: store, hasher, service, tokens, routes.
public enum TransferApp {
    public struct Parts: Sendable {
        public let service: TransferService
        public let hasher: Argon2Hasher
        public let store: any TransferStore
        public let metrics: ServiceMetrics
    }

    /// The application, ready to `run()` or to test. `clock` and `hasher` may be injected by tests.
    public static func build(
        configuration: ServerConfiguration, clock: any WallClock = SystemWallClock(),
        passwordHasher: (any PasswordHasher)? = nil, logger: Logger = Logger(label: "transfer-server")
    ) async throws -> (some ApplicationProtocol, Parts) {
        _ = CommonPasswords.count  // load the list now, not on the first set-up
        let store: any TransferStore
        let closeStore: @Sendable () async throws -> Void
        switch configuration.database {
        case .sqlite(let path):
            let sqlite = try SQLiteStore(path: path)
            store = sqlite
            closeStore = { try sqlite.close() }
        case .postgres:
            throw ServerConfiguration.Invalid(description: "--database: the PostgreSQL store is not available in this build yet")
        }
        let metrics = ServiceMetrics()
        let hashRecorder = metrics.hashSeconds
        let argon2 = Argon2Hasher(
            parameters: configuration.argon2, workers: configuration.hashWorkers, queueDepth: configuration.hashQueue,
            onTiming: { hashRecorder.record($0) })
        let service = try await TransferService(
            store: store, hasher: passwordHasher ?? argon2, clock: clock,
            policy: ServicePolicy(transferTTL: configuration.transferTTL, refreshTokenTTL: configuration.refreshTokenTTL),
            observer: metrics)
        let tokens = try await TokenService.load(
            store: store, issuer: configuration.issuer, audience: configuration.audience,
            accessTTL: configuration.accessTokenTTL, now: clock.now())

        let router = Router(context: TransferRequestContext.self)
        router.add(middleware: RequestLogMiddleware(metrics: metrics))
        router.add(middleware: ErrorMiddleware(allowedMethods: API<TransferRequestContext>.routes))
        API<TransferRequestContext>(
            service: service, tokens: tokens, configuration: configuration, metrics: metrics, hasher: argon2,
            creationLimiter: configuration.accountCreationLimit.map(RateLimiter.init),
            claimLimiter: configuration.claimLimit.map(RateLimiter.init),
            openAPI: try openAPIDocument()
        ).register(on: router)

        var app = Application(
            router: router,
            configuration: .init(address: .hostname(configuration.hostname, port: configuration.port), serverName: nil),
            logger: logger)
        // Shut down after the HTTP server has finished its in-flight requests.
        app.addServices(Closer(logger: logger) {
            try await argon2.shutdown()
            try await closeStore()
        })
        return (app, Parts(service: service, hasher: argon2, store: store, metrics: metrics))
    }

    static func openAPIDocument() throws -> [UInt8] {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml") else { return [] }
        return [UInt8](try Data(contentsOf: url))
    }
}

/// Runs `close` once the service group shuts down gracefully.
struct Closer: Service {
    let logger: Logger
    let close: @Sendable () async throws -> Void

    init(logger: Logger, _ close: @escaping @Sendable () async throws -> Void) {
        self.logger = logger
        self.close = close
    }

    func run() async throws {
        try? await gracefulShutdown()
        do {
            try await close()
            logger.info("database closed")
        } catch {
            logger.error("closing failed", metadata: ["error.type": "\(type(of: error))"])
        }
    }
}
