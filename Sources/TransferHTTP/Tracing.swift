import Foundation
import HTTPTypes
import Hummingbird
import Logging
import OTel
import ServiceLifecycle
import Synchronization
import Tracing
import TransferCore
import TransferSettings
import TransferStorage

/// Traces over OTLP/HTTP, from the standard `OTEL_*` variables; nil (no variable says to
/// export) turns them off: nothing is bootstrapped, no middleware or wrapper is added.
///
/// On when `OTEL_TRACES_EXPORTER` is `otlp`, or when it is unset and an OTLP endpoint is
/// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); off when
/// `OTEL_SDK_DISABLED` is `true` or `OTEL_TRACES_EXPORTER` is `none`. The variables are checked
/// here, at start, so a typo stops the server with one line instead of exporting nothing.
public struct TracingConfiguration: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Where spans are posted, as swift-otel resolves it (for the start-up line).
    public let endpoint: String
    /// `http/protobuf` or `http/json`.
    public let transport: String
    /// The `OTEL_*` variables swift-otel reads, without the headers and the SDK switch.
    let environment: [String: String]
    /// `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, parsed: given to swift-otel in code, so that its
    /// start-up messages, which repeat the variables they read, never see them (they may hold a
    /// collector's credentials).
    let headers: [(String, String)]

    /// The exporters this build has: OTLP over HTTP (the gRPC exporter is not built).
    static let transports = ["http/protobuf", "http/json"]
    static let samplers = [
        "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
    ]
    /// Integer variables (milliseconds or counts) swift-otel reads for traces.
    static let integers = [
        "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    ]

    /// nil when tracing is off; throws, naming the variable, when one is not understood.
    public static func load(environment: [String: String]) throws(Invalid) -> TracingConfiguration? {
        func given(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        switch given("OTEL_SDK_DISABLED")?.lowercased() {
        case "true": return nil
        case nil, "false": break
        case let other?: throw Invalid(description: "OTEL_SDK_DISABLED: '\(other)' is not true or false")
        }
        let endpointVariable = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"].first { given($0) != nil }
        switch given("OTEL_TRACES_EXPORTER") {
        case nil: if endpointVariable == nil { return nil }
        case "none": return nil
        case "otlp": break
        case let other?:
            throw Invalid(description: "OTEL_TRACES_EXPORTER: '\(other)' is not supported; otlp or none")
        }
        let transportVariable = ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"].first { given($0) != nil }
        let transport = transportVariable.flatMap(given) ?? "http/protobuf"
        guard transports.contains(transport) else {
            let more = transport == "grpc" ? " (this build exports over OTLP/HTTP only)" : ""
            throw Invalid(description: "\(transportVariable ?? "OTEL_EXPORTER_OTLP_PROTOCOL"): '\(transport)' is not http/protobuf or http/json\(more)")
        }
        var endpoint = "http://localhost:4318/v1/traces"
        if let variable = endpointVariable, let text = given(variable) {
            // Not repeated: a URL may carry credentials.
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false else {
                throw Invalid(description: "\(variable): not an http:// or https:// URL")
            }
            // The general endpoint is a base the signal's path is added to; the traces one is used as it is.
            endpoint = variable == "OTEL_EXPORTER_OTLP_ENDPOINT" ? (text.hasSuffix("/") ? text + "v1/traces" : text + "/v1/traces") : text
        }
        if let sampler = given("OTEL_TRACES_SAMPLER") {
            guard samplers.contains(sampler) else {
                throw Invalid(description: "OTEL_TRACES_SAMPLER: '\(sampler)' is not one of \(samplers.joined(separator: ", "))")
            }
            if sampler.hasSuffix("traceidratio"), let argument = given("OTEL_TRACES_SAMPLER_ARG") {
                guard let ratio = Double(argument), (0...1).contains(ratio) else {
                    throw Invalid(description: "OTEL_TRACES_SAMPLER_ARG: '\(argument)' is not a ratio from 0 to 1")
                }
            }
        }
        for name in integers {
            if let text = given(name), Int(text).map({ $0 < 0 }) ?? true {
                throw Invalid(description: "\(name): '\(text)' is not a whole number of milliseconds (or items)")
            }
        }
        for name in ["OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION"] {
            if let text = given(name), !["gzip", "none"].contains(text) {
                throw Invalid(description: "\(name): '\(text)' is not gzip or none")
            }
        }
        var headers: [(String, String)] = []
        let headersVariable = ["OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"].first { given($0) != nil }
        if let variable = headersVariable, let text = given(variable) {
            for pair in text.split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                let name = parts.first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
                guard parts.count == 2, !name.isEmpty else {
                    // Never the value: it is usually a credential.
                    throw Invalid(description: "\(variable): not a list of name=value pairs")
                }
                let value = parts[1].trimmingCharacters(in: .whitespaces)
                headers.append((name, value.removingPercentEncoding ?? value))
            }
        }
        // swift-otel stops the process (fatalError) on a propagator it lacks: refused here instead.
        // `baggage` (in the specification's default, `tracecontext,baggage`) is dropped: the
        // server reads no baggage, and nothing it would carry is the server's to pass on.
        var propagators: String?
        if let text = given("OTEL_PROPAGATORS") {
            let names = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0 != "baggage" }
            if let unknown = names.first(where: { !["tracecontext", "none"].contains($0) }) {
                throw Invalid(description: "OTEL_PROPAGATORS: '\(unknown)' is not supported; tracecontext (W3C traceparent) or none")
            }
            propagators = names.isEmpty ? "none" : names.joined(separator: ",")
        }
        // The endpoints are given to swift-otel in code (`endpoint`), never as variables: with
        // OTEL_LOG_LEVEL at info or below it logs each variable it reads with its value, and an
        // endpoint may carry credentials. The headers likewise (`headers`).
        var passed = environment.filter {
            $0.key.hasPrefix("OTEL_") && $0.key != "OTEL_SDK_DISABLED" && !$0.key.hasSuffix("_HEADERS")
                && !$0.key.hasSuffix("_ENDPOINT") && $0.key != "OTEL_PROPAGATORS"
                && !$0.key.hasPrefix("OTEL_METRIC") && !$0.key.hasPrefix("OTEL_LOGS") && !$0.key.hasPrefix("OTEL_BLRP")
        }
        if let propagators { passed["OTEL_PROPAGATORS"] = propagators }
        return TracingConfiguration(endpoint: endpoint, transport: transport, environment: passed, headers: headers)
    }

    /// Never the headers (credentials) or the variables.
    public var description: String { "TracingConfiguration(endpoint: \(endpointShown), protocol: \(transport))" }
    public var debugDescription: String { description }

    /// The endpoint without its path, query or credentials, for the log.
    var endpointShown: String {
        guard let url = URL(string: endpoint), let scheme = url.scheme, let host = url.host else { return "?" }
        return "\(scheme)://\(host)" + (url.port.map { ":\($0)" } ?? "")
    }
}

/// The spans the server makes besides the request's own (Hummingbird's `TracingMiddleware`).
enum Traces {
    /// The only headers the request's tracing middleware sees. Besides recording some, it hands
    /// them all to the tracer to find `traceparent`, and swift-otel logs every header it was
    /// handed when that fails (a malformed `traceparent`): `Authorization` and `X-Device-Secret`
    /// among them. Here, not in the (generic) middleware, so it is made once, not per request.
    static let requestHeaders: [HTTPField.Name] = [
        HTTPField.Name("traceparent")!, HTTPField.Name("tracestate")!, .userAgent, .contentLength,
    ]

    private static let bootstrapped = Mutex(false)

    /// Bootstraps swift-otel for traces only (the server keeps its own log and Prometheus
    /// metrics) and returns its service, which exports in batches until shutdown. Once per
    /// process: the tracer is process-wide.
    static func bootstrap(_ configuration: TracingConfiguration, logger: Logger) throws -> any Service {
        guard bootstrapped.withLock({ done in defer { done = true }; return !done }) else {
            throw TransferApp.StartupError(description: "tracing was already started in this process", exitCode: 2)
        }
        var otel = OTel.Configuration.default
        otel.serviceName = "transfer-server"
        otel.logs.enabled = false
        otel.metrics.enabled = false
        otel.traces.exporter = .otlp
        otel.traces.otlpExporter.headers = configuration.headers
        // Set in code, so used as it is (`load` resolved it as the specification says).
        otel.traces.otlpExporter.endpoint = configuration.endpoint
        otel.diagnosticLogger = .custom(logger)
        // Its info lines repeat each variable read; its warnings and errors (an export that failed) are kept.
        otel.diagnosticLogLevel = .warning
        let service = try OTel.bootstrap(configuration: otel, environment: configuration.environment)
        logger.info(
            "traces are exported over OTLP",
            metadata: ["endpoint": "\(configuration.endpointShown)", "protocol": "\(configuration.transport)"])
        return service
    }

    /// Runs `body` in a span named `name`, a child of the request being traced. Outside a
    /// traced request (start-up, the pruner, the outbox's polls) there is no parent and no span.
    /// A thrown error marks the span failed with its kind only (`Storage.kind`): an error's
    /// text may quote values.
    static func child<T>(
        _ name: @autoclosure () -> String, isolation: isolated (any Actor)? = #isolation,
        _ body: ((any Span)?) async throws -> T
    ) async rethrows -> T {
        guard let parent = InstrumentationContext.current else { return try await body(nil) }
        let span = startSpan(name(), context: parent)
        defer { span.end() }
        do {
            return try await body(span)
        } catch {
            span.attributes["error.type"] = Storage.kind(of: error)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }
}

/// The request's span: Hummingbird's `TracingMiddleware`, which continues the caller's W3C
/// `traceparent` and records the method, path, route, status, body sizes and user agent, and
/// no other header. It would record the query string as sent, and a client may put anything there:
/// it is shown the request without its query (the handlers still get the whole request).
struct RequestTracingMiddleware<Context: AppRequestContext>: RouterMiddleware {
    let tracing = TracingMiddleware<Context>()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var head = request.head
        head.path = request.uri.path
        var fields = HTTPFields()
        for name in Traces.requestHeaders {
            for value in request.headers[values: name] { fields.append(HTTPField(name: name, value: value)) }
        }
        head.headerFields = fields
        return try await tracing.handle(Request(head: head, body: request.body), context: context) { _, context in
            try await next(request, context)
        }
    }
}

/// One span per store operation, around its transaction, named by the operation
/// (`SetUpCommand`), with the database (`db.system`) and, when refused, the refusal's code.
/// The reads outside operations are not traced.
struct TracedStore: TransferStore {
    let base: any TransferStore
    let system: String

    init(_ base: any TransferStore, database: DatabaseLocation) {
        self.base = base
        switch database {
        case .sqlite: system = "sqlite"
        case .postgres: system = "postgresql"
        }
    }

    private func traced<Success>(
        _ name: String, _ run: () async throws -> Result<Success, TransferError>
    ) async throws -> Result<Success, TransferError> {
        try await Traces.child(name) { span in
            let result = try await run()
            if let span {
                span.attributes["db.system"] = system
                if case .failure(let refusal) = result { span.attributes["transfer.refusal"] = refusal.code }
            }
            return result
        }
    }

    func execute<Operation: StoreOperation>(_ operation: Operation) async throws -> Result<Operation.Success, TransferError> {
        try await traced(String(describing: Operation.self)) { try await base.execute(operation) }
    }

    func login(_ command: LoginCommand) async throws -> Result<SessionGrant, TransferError> {
        try await traced("LoginCommand") { try await base.login(command) }
    }

    func ping() async throws { try await base.ping() }
    func isSessionValid(sessionID: String, accountID: String, deviceID: String, clientID: String?) async throws -> Bool {
        try await base.isSessionValid(sessionID: sessionID, accountID: accountID, deviceID: deviceID, clientID: clientID)
    }
    func read(_ facts: [FactKey], at: Timestamp) async throws -> Facts { try await base.read(facts, at: at) }
    func device(_ id: String, at: Timestamp) async throws -> DeviceRecord? { try await base.device(id, at: at) }
    func profile(accountID: String, whileOpen session: OpenSession?, at: Timestamp) async throws -> AccountProfile? {
        try await base.profile(accountID: accountID, whileOpen: session, at: at)
    }
    func pendingTransfer(emailKey: String) async throws -> TransferRecord? { try await base.pendingTransfer(emailKey: emailKey) }
    func claimedTransfer(emailKey: String, by device: String) async throws -> TransferRecord? {
        try await base.claimedTransfer(emailKey: emailKey, by: device)
    }
    func attestationChallengeExpiry(hash: SecretHash) async throws -> Timestamp? { try await base.attestationChallengeExpiry(hash: hash) }
    func pushRoutes(accountIDs: [String]) async throws -> [PushRoute] { try await base.pushRoutes(accountIDs: accountIDs) }
    func serviceKey(hash: SecretHash) async throws -> ServiceKeyRecord? { try await base.serviceKey(hash: hash) }
    func appleLink(sub: String) async throws -> AppleLink? { try await base.appleLink(sub: sub) }
    func signingKeys() async throws -> [SigningKeyRecord] { try await base.signingKeys() }
    func outboxStats(kind: OutboxKind) async throws -> OutboxStats { try await base.outboxStats(kind: kind) }
    func prune(_ cutoffs: PruneCutoffs, batchSize: Int) async throws -> PruneCounts? { try await base.prune(cutoffs, batchSize: batchSize) }
}

/// A span per argon2 hash (a set-up) and verification (a claim), around the wait for a
/// worker and the work; never the password or the hash.
struct TracedHasher: PasswordHasher {
    let base: any PasswordHasher

    func hash(_ password: String) async throws -> String {
        try await Traces.child("argon2 hash") { _ in try await base.hash(password) }
    }

    func verify(_ password: String, against phc: String) async throws -> Bool {
        try await Traces.child("argon2 verify") { _ in try await base.verify(password, against: phc) }
    }
}

/// A span per attestation verification: the platform and the outcome (`verified`, or the
/// check that failed); never the key id, the attestation object or the token.
struct TracedAttestationVerifier: AttestationVerifier {
    let base: any AttestationVerifier

    func verify(_ proof: AttestationProof, now: Timestamp) async -> AttestationVerdict {
        await Traces.child("attestation verify") { span in
            let verdict = await base.verify(proof, now: now)
            if let span {
                span.attributes["attestation.platform"] = proof.platform.rawValue
                switch verdict {
                case .verified: span.attributes["attestation.outcome"] = "verified"
                case .failed(let check, _): span.attributes["attestation.outcome"] = "failed: \(check)"
                }
            }
            return verdict
        }
    }
}
