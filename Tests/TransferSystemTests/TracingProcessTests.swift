import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization
import Testing
@testable import TransferTestSupport

/// The real `transfer-server` exporting traces over OTLP/HTTP (JSON) to a collector in the test.
@Suite("traces of transfer-server", .serialized)
struct TracingProcessTests {
    @Test("the A→B story is traced: request spans continue traceparent, store/argon2/attestation spans are their children, a delivery its own trace; no secret is exported",
          arguments: StoreKind.available)
    func story(store: StoreKind) async throws {
        try await store.withDatabaseLocation { location, _ in
            try await FakeCollector.run { collector in
                try await FakeWebhookReceiver.run { receiver in
                    try await Self.tracedStory(location: location.argument, collector: collector, receiver: receiver)
                }
            }
        }
    }

    static func tracedStory(location: String, collector: FakeCollector, receiver: FakeWebhookReceiver) async throws {
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("OTEL_") }.merging([
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_SERVICE_NAME": "transfer-under-test",
        ]) { $1 }
        // Attestation in monitor mode, with Play Integrity keys made here: the first login is attested.
        let google = FakePlayIntegrity()
        let node = try Node(
            database: location,
            extra: [
                "--webhook-url", receiver.url, "--webhook-secret", FakeWebhookReceiver.secret,
                "--attestation", "monitor", "--play-integrity-packages", FakePlayIntegrity.packageName,
                "--play-integrity-decryption-key", google.decryptionKeyBase64, "--play-integrity-verification-key", google.verificationKeyBase64,
            ],
            environment: environment)
        defer { node.stop() }
        #expect(try await node.waitReady())
        #expect(try node.log().contains("traces are exported over OTLP"))

        // The caller's trace: its login continues it.
        let callerTrace = randomHex(bytes: 16), callerSpan = randomHex(bytes: 8)
        let a = Device(), b = Device()
        let email = "traced-\(randomHex(bytes: 4))@example.com", password = "plum-harbor-71-sail"
        let challenge = try #require(try call(node, "POST", "/v1/attestation/challenge", nil).json["challenge"] as? String)
        let integrityToken = try google.token(FakePlayIntegrity.verdict(nonce: challenge, at: Date()))
        let attestation = #"{"platform":"android","challenge":"\#(challenge)","integrityToken":"\#(integrityToken)"}"#
        let login = try call(
            node, "POST", "/v1/devices/login", #"{"deviceId":"\#(a.id)","deviceSecret":"\#(a.secret)","attestation":\#(attestation)}"#,
            headers: ["traceparent: 00-\(callerTrace)-\(callerSpan)-01"])
        #expect(login.status == 201, "\(login)")
        let tokenA = try #require(login.json["accessToken"] as? String), refreshA = try #require(login.json["refreshToken"] as? String)

        let setUp = try call(node, "PUT", "/v1/me/transfer", #"{"email":"\#(email)","temporaryPassword":"\#(password)"}"#, token: tokenA)
        #expect(setUp.status == 201, "\(setUp)")
        let recovery = try call(node, "PUT", "/v1/me/recovery-code", nil, token: tokenA)
        #expect(recovery.status == 201, "\(recovery)")
        let recoveryCode = try #require(recovery.json["recoveryCode"] as? String)
        // A query string nobody reads is not recorded (a client may put anything there).
        let queried = "q-\(randomHex(bytes: 12))"
        #expect(try call(node, "GET", "/healthz?token=\(queried)", nil).status == 200)

        let claim = try call(node, "POST", "/v1/transfers/claim", TwoNodeTests.claim(email, password, b))
        #expect(claim.status == 200, "\(claim)")
        let tokenB = try #require(claim.json["accessToken"] as? String), refreshB = try #require(claim.json["refreshToken"] as? String)
        let refreshed = try call(node, "POST", "/v1/tokens/refresh", #"{"refreshToken":"\#(refreshB)"}"#)
        #expect(refreshed.status == 200, "\(refreshed)")
        let tokenB2 = try #require(refreshed.json["accessToken"] as? String)
        let refreshB2 = try #require(refreshed.json["refreshToken"] as? String)
        // A malformed traceparent: the tracer, failing to read it, logs every header it was
        // handed. It is handed none that carries a credential (checked in the log below).
        let malformed = try call(node, "GET", "/v1/me", nil, token: tokenB2, headers: ["traceparent: 00-not-a-trace-id"])
        #expect(malformed.status == 200, "\(malformed)")

        // account.created, transfer.set_up, account.ways_back_changed (the recovery code and the claim), transfer.claimed.
        try await receiver.wait(for: 5)
        // Every span, once the batches are in: the request spans, their children and the deliveries.
        var spans: [ExportedSpan] = []
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            spans = collector.spans
            if spans.filter({ $0.name == "webhook delivery" }).count >= receiver.deliveries.count,
                spans.contains(where: { $0.attributes["http.route"] == "/v1/tokens/refresh" })
            {
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }

        func request(_ route: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> ExportedSpan {
            try #require(
                spans.first { $0.kind == 2 && $0.attributes["http.route"] == route }, "no request span of \(route) in \(spans.map(\.name))",
                sourceLocation: sourceLocation)
        }
        func children(of parent: ExportedSpan) -> [ExportedSpan] {
            spans.filter { $0.traceID == parent.traceID && $0.parentSpanID == parent.spanID }
        }

        // The login continues the caller's trace, as a child of the caller's span.
        let loginSpan = try request("/v1/devices/login")
        #expect(loginSpan.traceID == callerTrace)
        #expect(loginSpan.parentSpanID == callerSpan)
        #expect(loginSpan.attributes["http.request.method"] == "POST")
        #expect(loginSpan.attributes["http.response.status_code"] == "201")
        #expect(children(of: loginSpan).map(\.name).contains("LoginCommand"), "\(children(of: loginSpan).map(\.name))")
        let attested = children(of: loginSpan).first { $0.name == "attestation verify" }
        #expect(attested?.attributes["attestation.platform"] == "android", "\(children(of: loginSpan).map(\.name))")
        #expect(attested?.attributes["attestation.outcome"] == "verified")

        // Without a traceparent, a request starts a trace of its own.
        let setUpSpan = try request("/v1/me/transfer")
        #expect(setUpSpan.traceID != callerTrace && setUpSpan.parentSpanID.isEmpty)
        let setUpChildren = children(of: setUpSpan).map(\.name)
        #expect(setUpChildren.contains("argon2 hash"), "\(setUpChildren)")
        #expect(setUpChildren.contains("SetUpCommand"), "\(setUpChildren)")

        let claimSpan = try request("/v1/transfers/claim")
        let claimChildren = children(of: claimSpan)
        #expect(claimChildren.map(\.name).contains("argon2 verify"), "\(claimChildren.map(\.name))")
        #expect(claimChildren.contains { $0.name.hasPrefix("Claim") && $0.attributes["db.system"] != nil }, "\(claimChildren.map(\.name))")
        #expect(claimSpan.attributes["http.response.status_code"] == "200")

        // Each delivery is a trace of its own (it runs after the commit), with its status and attempt.
        let deliveries = receiver.deliveries
        let delivered = spans.filter { $0.name == "webhook delivery" }
        #expect(delivered.count >= deliveries.count, "\(delivered.count) delivery spans for \(deliveries.count) deliveries")
        #expect(Set(delivered.compactMap { $0.attributes["webhook.id"] }) == Set(deliveries.map(\.id)))
        for span in delivered {
            // The POST carries the delivery's trace, for the app backend to continue.
            let carried = deliveries.first { $0.id == span.attributes["webhook.id"] }?.traceparent
            #expect(carried == "00-\(span.traceID)-\(span.spanID)-01", "\(carried ?? "no traceparent")")
            #expect(span.kind == 3 && span.parentSpanID.isEmpty)
            #expect(span.attributes["http.response.status_code"] == "204")
            #expect(span.attributes["webhook.attempt"] == "1")
        }
        // Nothing runs in a trace it does not belong to: every child's parent was exported.
        let ids = Set(spans.map(\.spanID))
        for span in spans where !span.parentSpanID.isEmpty && span.traceID != callerTrace {
            #expect(ids.contains(span.parentSpanID), "\(span.name) has a parent that was not exported")
        }

        // No secret anywhere in what was exported.
        let exported = collector.raw
        #expect(!exported.isEmpty)
        let secrets: [(String, String)] = [
            ("device A's secret", a.secret), ("device B's secret", b.secret), ("the password", password), ("the email", email),
            ("the email's user", String(email.prefix { $0 != "@" })), ("A's access token", tokenA), ("A's refresh token", refreshA),
            ("B's access token", tokenB), ("B's refresh token", refreshB), ("B's new access token", tokenB2),
            ("B's new refresh token", refreshB2), ("the recovery code", recoveryCode),
            ("the recovery code ungrouped", recoveryCode.replacingOccurrences(of: "-", with: "")),
            ("the webhook secret", FakeWebhookReceiver.secret), ("the query", queried), ("the integrity token", integrityToken),
            ("the integrity token's signature", String(integrityToken.split(separator: ".").last ?? "")),
        ]
        for (what, secret) in secrets {
            #expect(exported.range(of: Data(secret.utf8)) == nil, "\(what) was exported")
        }
        // The access tokens' signatures alone, in case a token were cut up.
        for token in [tokenA, tokenB, tokenB2] {
            let signature = String(token.split(separator: ".").last ?? "")
            #expect(exported.range(of: Data(signature.utf8)) == nil, "an access token's signature was exported")
        }
        #expect(String(decoding: exported, as: UTF8.self).contains("transfer-under-test"), "OTEL_SERVICE_NAME names the service")
        // Nor in the server's log (the query aside: the request log names a request's path).
        let log = try node.log()
        for (what, secret) in secrets where what != "the query" {
            #expect(!log.contains(secret), "\(what) reached the server's log")
        }

        // SIGTERM stops the exporter after the server, cleanly.
        node.process.terminate()
        node.process.waitUntilExit()
        #expect(node.process.terminationStatus == 0)
        #expect(try node.log().contains("database closed"))
    }

    @Test("with no OTEL variables, OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true, nothing is sent")
    func off() async throws {
        try await FakeCollector.run(preferredPort: 4318) { collector in
            let base = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("OTEL_") }
            let endpoint = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)", "OTEL_BSP_SCHEDULE_DELAY": "50"]
            // With no variable at all the collector listens where an exporter's default would send (4318), when that port is free.
            var cases: [(String, [String: String])] = [
                ("OTEL_TRACES_EXPORTER=none", endpoint.merging(["OTEL_TRACES_EXPORTER": "none"]) { $1 }),
                ("OTEL_SDK_DISABLED=true", endpoint.merging(["OTEL_SDK_DISABLED": "true"]) { $1 }),
            ]
            if collector.port == 4318 { cases.insert(("no OTEL variable", [:]), at: 0) }
            let db = TempDatabase()
            defer { db.remove() }
            for (name, variables) in cases {
                let node = try Node(database: "sqlite:\(db.path)", environment: base.merging(variables) { $1 })
                defer { node.stop() }
                #expect(try await node.waitReady(), "\(name)")
                let a = Device()
                let login = try call(node, "POST", "/v1/devices/login", TwoNodeTests.body(a), headers: ["traceparent: 00-\(randomHex(bytes: 16))-\(randomHex(bytes: 8))-01"])
                #expect(login.status == 201, "\(name): \(login)")
                let token = try #require(login.json["accessToken"] as? String)
                let setUp = try call(
                    node, "PUT", "/v1/me/transfer", #"{"email":"off-\#(randomHex(bytes: 4))@example.com","temporaryPassword":"plum-harbor-71-sail"}"#,
                    token: token)
                #expect(setUp.status == 201, "\(name): \(setUp)")
                // A clean stop: an exporter would flush what it holds now.
                node.process.terminate()
                node.process.waitUntilExit()
                #expect(node.process.terminationStatus == 0, "\(name)")
                #expect(try !node.log().contains("traces are exported"), "\(name)")
                try await Task.sleep(for: .milliseconds(200))
                #expect(collector.requests == 0, "\(name): the collector received \(collector.requests) requests")
            }
        }
    }

    @Test("an OTEL variable the server cannot honour stops it at start with one line naming it")
    func refused() throws {
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("OTEL_") }.merging([
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        ]) { $1 }
        let run = try Executable.run("transfer-server", ["--port", "0"], environment: environment)
        #expect(run.code == 2, "\(run)")
        #expect(lines(of: run.err).count == 1, "\(run)")
        #expect(run.err.contains("OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc'"), "\(run)")
    }
}

/// One answer: status and JSON body (empty when the body is not a JSON object).
struct CurlAnswer: CustomStringConvertible {
    let status: Int
    let body: String
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:] }
    var description: String { "\(status) \(body)" }
}

/// A request to `node` with curl, with its token (and device secret) and any other headers.
private func call(
    _ node: Node, _ method: String, _ path: String, _ json: String?, token: String? = nil, headers: [String] = []
) throws -> CurlAnswer {
    var arguments = ["-X", method]
    if let json { arguments += ["-H", "Content-Type: application/json", "-d", json] }
    if let token { arguments += Node.auth(token) }
    for header in headers { arguments += ["-H", header] }
    let (status, body) = try Curl.call(arguments + ["\(node.base)\(path)"])
    return CurlAnswer(status: status, body: body)
}

private func randomHex(bytes: Int) -> String {
    (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
}

/// A span as the OTLP/JSON export carries it, ids in lower-case hex.
struct ExportedSpan {
    let traceID: String
    let spanID: String
    /// Empty for a root span.
    let parentSpanID: String
    let name: String
    /// 1 internal, 2 server, 3 client.
    let kind: Int
    /// Every attribute's value as text.
    let attributes: [String: String]

    init(_ json: [String: Any]) {
        traceID = Self.hex(json["traceId"])
        spanID = Self.hex(json["spanId"])
        parentSpanID = Self.hex(json["parentSpanId"])
        name = json["name"] as? String ?? ""
        kind = (json["kind"] as? Int) ?? Int(json["kind"] as? String ?? "") ?? 0
        var attributes: [String: String] = [:]
        for attribute in json["attributes"] as? [[String: Any]] ?? [] {
            guard let key = attribute["key"] as? String, let value = (attribute["value"] as? [String: Any])?.values.first else { continue }
            attributes[key] = "\(value)"
        }
        self.attributes = attributes
    }

    /// OTLP/JSON writes ids in hex; protobuf's JSON mapping in base64: either is read.
    static func hex(_ value: Any?) -> String {
        guard let text = value as? String, !text.isEmpty else { return "" }
        if text.count % 2 == 0, text.allSatisfy(\.isHexDigit), text.count == 32 || text.count == 16 { return text.lowercased() }
        guard let data = Data(base64Encoded: text) else { return text }
        return data.map { String(format: "%02x", $0) }.joined()
    }
}

/// A local OTLP/HTTP collector: keeps every export's raw bytes and decodes the JSON ones.
final class FakeCollector: Sendable {
    let port: Int
    private let bodies = Mutex<[Data]>([])

    private init(port: Int) { self.port = port }

    var requests: Int { bodies.withLock { $0.count } }
    /// Every export, concatenated.
    var raw: Data { bodies.withLock { $0.reduce(into: Data()) { $0.append($1) } } }

    var spans: [ExportedSpan] {
        bodies.withLock { $0 }.flatMap { body -> [ExportedSpan] in
            guard let json = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else { return [] }
            let resources = json["resourceSpans"] as? [[String: Any]] ?? []
            return resources.flatMap { resource in
                (resource["scopeSpans"] as? [[String: Any]] ?? []).flatMap { scope in
                    (scope["spans"] as? [[String: Any]] ?? []).map(ExportedSpan.init)
                }
            }
        }
    }

    /// Runs `body` with a collector on `preferredPort` when it is free, else on any free port.
    static func run(preferredPort: Int? = nil, _ body: @Sendable (FakeCollector) async throws -> Void) async throws {
        if let preferredPort {
            do {
                try await run(port: preferredPort, body)
                return
            } catch let error as CollectorDidNotStart {
                _ = error
            }
        }
        try await run(port: 0, body)
    }

    struct CollectorDidNotStart: Error {}

    private static func run(port: Int, _ body: @Sendable (FakeCollector) async throws -> Void) async throws {
        let holder = Mutex<FakeCollector?>(nil)
        let router = Router()
        router.post("/v1/traces") { request, _ -> Response in
            let bytes = try await request.body.collect(upTo: 16 << 20)
            holder.withLock { $0 }?.bodies.withLock { $0.append(Data(bytes.readableBytesView)) }
            return Response(
                status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{}")))
        }
        let bound = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in bound.continuation.yield(channel.localAddress?.port ?? 0) })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await app.run()
                } catch {
                    bound.continuation.yield(0)  // the port is taken
                    throw error
                }
            }
            var ports = bound.stream.makeAsyncIterator()
            guard let actual = await ports.next(), actual > 0 else {
                group.cancelAll()
                throw CollectorDidNotStart()
            }
            let collector = FakeCollector(port: actual)
            holder.withLock { $0 = collector }
            do {
                try await body(collector)
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
        }
    }
}
