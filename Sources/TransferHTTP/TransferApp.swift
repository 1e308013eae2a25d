import AsyncHTTPClient
import JWTKit
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import PostgresNIO
import ServiceLifecycle
import TransferArgon2
import TransferCore
import TransferSettings
import TransferStorage

/// Builds the whole server from a configuration: store, hasher, service, tokens, routes.
public enum TransferApp {
    public struct Parts: Sendable {
        public let service: TransferService
        public let hasher: Argon2Hasher
        public let store: any SupportStore
    }

    /// A start-up failure, said in one line.
    public struct StartupError: Error, CustomStringConvertible {
        public let description: String
        /// 1: a restart may help (the database was away); 2: it would not (the configuration is wrong).
        public var exitCode: Int32 = 1
    }

    /// The application, ready to `run()` or to test. `clock` and `hasher` may be injected by tests.
    public static func build(
        configuration: ServerConfiguration, clock: any WallClock = SystemWallClock(),
        passwordHasher: (any PasswordHasher)? = nil, logger: Logger = Logger(label: "transfer-server")
    ) async throws -> (some ApplicationProtocol, Parts) {
        _ = CommonPasswords.count  // load the list now, not on the first set-up
        var services: [any Service] = []
        // First, so that it stops last: the spans of the last requests are exported before it ends.
        if let tracing = configuration.tracing { services.append(try Traces.bootstrap(tracing, logger: logger)) }
        var prepare: @Sendable () async throws -> Void = {}
        // The pool retries connections on its own; its per-attempt messages stay out of the log.
        var poolLogger = logger
        poolLogger.logLevel = .error
        let opened: OpenedStore
        do {
            opened = try Storage.open(
                configuration.database, poolSize: configuration.databasePoolSize, pooling: configuration.databasePooling, logger: poolLogger)
        } catch {
            throw StartupError(description: error.reason == .invalidURL ? "--database: \(error.description)" : error.description)
        }
        let store = opened.store
        if let client = opened.client {
            services.append(client)  // runs before the server starts, stops after it
            let where_ = DatabaseLocation.redacted(configuration.database.argument)
            prepare = {
                do {
                    try await Storage.withTimeout(.seconds(15)) { try await opened.migrate() }
                } catch {
                    // The pool retries on its own: say why its last attempt failed (a password refused, no host writable).
                    let last = client.lastConnectProblem.map { "; last connection attempt: \($0)" } ?? ""
                    throw StartupError(description: "PostgreSQL at \(where_) does not answer or cannot be migrated (\(Storage.describe(error))\(last))")
                }
            }
        }
        let metrics = ServiceMetrics()
        let hashRecorder = metrics.hashSeconds
        let argon2 = Argon2Hasher(
            parameters: configuration.argon2, workers: configuration.hashWorkers, queueDepth: configuration.hashQueue,
            onTiming: { hashRecorder.record($0) })
        // With traces on, the service's store, hasher and attestation verifier make child spans of
        // the request's; off, they are not wrapped at all.
        let traced = configuration.tracing != nil
        let hasher = passwordHasher ?? argon2
        var attestation = configuration.attestation.policy
        if traced, let verifier = attestation.verifier { attestation.verifier = TracedAttestationVerifier(base: verifier) }
        let service = try await TransferService(
            store: traced ? TracedStore(store, database: configuration.database) : store,
            hasher: traced ? TracedHasher(base: hasher) : hasher, clock: clock,
            policy: ServicePolicy(
                transferTTL: configuration.transferTTL, refreshTokenTTL: configuration.refreshTokenTTL,
                maxAccountsPerDevice: configuration.maxAccountsPerDevice, handoff: configuration.handoff,
                limits: configuration.limits, attestation: attestation,
                deviceProof: configuration.deviceProof, activityResolution: configuration.activityResolution),
            observer: metrics)
        if !configuration.deviceProof {
            logger.warning(
                "--device-proof off: an access token alone can set up a transfer, replace a way back or delete the account; turn it on once the apps send X-Device-Secret")
        }
        if let kek = configuration.keyEncryptionKey {
            logger.info("the token signing keys are stored encrypted", metadata: ["kek": "\(kek.id)"])
        } else {
            logger.warning(
                "the token signing keys are stored unencrypted: a copy of the database can sign access tokens; give --key-encryption-key-file")
        }
        if let everyone = configuration.trustedProxies.ranges.first(where: { $0.prefix == 0 }) {
            logger.warning(
                "--trusted-proxy trusts every peer of a family: any client there can write its own X-Forwarded-For",
                metadata: ["range": "\(everyone)"])
        }
        if let path = configuration.attestation.rootCAPath {
            logger.warning(
                "App Attest trusts the root CA of --app-attest-root-ca instead of Apple's: only for a private staging CA",
                metadata: ["path": "\(path)"])
        }

        var appleSigner: JWTKeyCollection?
        if let team = configuration.apple?.codeExchange { appleSigner = try await AppleTokenClient.signer(team) }
        let openAPI = ByteBuffer(bytes: openAPIDocument)
        // Nothing throws from here until the Closer, which shuts this client down.
        // Outgoing deliveries (webhooks, Apple's token endpoints): no redirects, 10 s to answer.
        let outgoing = configuration.webhook != nil || appleSigner != nil ? Self.outgoingClient() : nil
        var apple: AppleSignIn?
        if let config = configuration.apple {
            var tokens: AppleTokenClient?
            if let team = config.codeExchange, let appleSigner, let outgoing {
                tokens = AppleTokenClient(configuration: config, team: team, signer: appleSigner, client: outgoing, logger: logger)
            }
            apple = AppleSignIn(configuration: config, keys: AppleKeys(url: config.jwksURL, clock: clock, logger: logger), tokens: tokens)
        }

        let tokenBox = TokenBox()
        let router = Router(context: TransferRequestContext.self)
        let api = API<TransferRequestContext>(
            service: service, tokenBox: tokenBox, configuration: configuration, metrics: metrics, hasher: argon2,
            apple: apple,
            openAPI: openAPI)
        if traced { router.add(middleware: RequestTracingMiddleware()) }
        router.add(middleware: RequestLogMiddleware(metrics: metrics))
        router.add(middleware: ErrorMiddleware(allowedMethods: API<TransferRequestContext>.allowedMethods))
        api.register(on: router)

        let limits = ConnectionLimits(idleTimeout: configuration.idleTimeout, requestTimeout: configuration.requestTimeout)
        var app = Application(
            router: router,
            server: HTTPServerBuilder { responder in GuardedHTTP1Channel(responder: responder, limits: limits, metrics: metrics) },
            configuration: .init(address: .hostname(configuration.hostname, port: configuration.port), serverName: nil),
            services: services,
            logger: logger)
        // Once the database client runs: migrate, then load (or create) the signing key.
        app.beforeServerStarts { [prepare] in
            try await prepare()
            do {
                tokenBox.set(try await TokenService.load(
                    store: store, kek: configuration.keyEncryptionKey, issuer: configuration.issuer, audience: configuration.audience,
                    accessTTL: configuration.accessTokenTTL, now: clock.now()))
            } catch let problem as SigningKeyAtRestError {
                throw StartupError(description: problem.advice, exitCode: 2)
            }
        }
        // Closes the database after the HTTP server has finished its in-flight requests and
        // after every service added below has stopped (a service group stops its services in
        // reverse order): none of them may still be reading when the pool closes.
        app.addServices(Closer(logger: logger) {
            try? await outgoing?.shutdown()
            try await argon2.shutdown()
            try opened.close()
        })
        app.addServices(Pruner(
            store: store, clock: clock, retention: configuration.auditRetention, accessTTL: configuration.accessTokenTTL,
            inactivity: configuration.inactiveAccountTTL.map(InactivityPolicy.init), interval: configuration.pruneInterval,
            firstDelay: configuration.pruneInterval, logger: logger))
        app.addServices(SigningKeyWatcher(
            service: service, tokenBox: tokenBox, kek: configuration.keyEncryptionKey, issuer: configuration.issuer, audience: configuration.audience,
            accessTTL: configuration.accessTokenTTL, interval: configuration.signingKeyPollInterval,
            maxAge: configuration.signingKeyMaxAge, logger: logger))
        // Outgoing HTTP never runs inside a transaction: events wait in the outbox, written
        // with their change, and a worker delivers them after the commit.
        func outboxWorker(_ kind: OutboxKind, _ sender: any OutboxSender) -> OutboxWorker {
            OutboxWorker(
                kind: kind, store: store, clock: clock, policy: configuration.outboxPolicy,
                pollInterval: configuration.outboxPollInterval, sender: sender,
                metrics: OutboxMetrics(kind: kind, factory: metrics.factory), ready: { tokenBox.isLoaded }, logger: logger)
        }
        if let webhook = configuration.webhook, let client = outgoing {
            app.addServices(outboxWorker(.webhook, WebhookSender(configuration: webhook, client: client, traced: traced)))
        }
        if let tokens = apple?.tokens {
            app.addServices(outboxWorker(.appleRevoke, AppleRevokeSender(tokens: tokens)))
        }
        return (app, Parts(service: service, hasher: argon2, store: store))
    }

    /// The client of outgoing deliveries: redirects are not followed (a receiver that
    /// redirects has failed the delivery), and a receiver gets 10 s to answer.
    static func outgoingClient() -> HTTPClient {
        var http = HTTPClient.Configuration()
        http.redirectConfiguration = .disallow
        http.timeout = .init(connect: .seconds(5), read: .seconds(10))
        // Its own spans would record the whole URL, query included (a webhook URL may carry a
        // token); a webhook delivery makes its own span instead (`WebhookSender`).
        http.tracing.tracer = nil
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: http)
    }

    /// `openapi.yaml`, compiled into the binary (SwiftPM's `embedInCode`).
    static var openAPIDocument: [UInt8] { PackageResources.openapi_yaml }
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

// The service lifecycle logs its services (at debug level) by their descriptions: a default
// one would print every field, the webhook secret and Apple's team key among them.
extension Closer: CustomStringConvertible { var description: String { "Closer" } }
extension Pruner: CustomStringConvertible { var description: String { "Pruner" } }
extension SigningKeyWatcher: CustomStringConvertible { var description: String { "SigningKeyWatcher" } }
extension OutboxWorker: CustomStringConvertible { var description: String { "OutboxWorker(\(kind.rawValue))" } }
