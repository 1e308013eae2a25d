import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing
import TransferCore
import TransferHTTP

/// A local app backend that receives the server's webhooks on a real socket, records every
/// request, and answers 500 to as many requests as a test asks (a receiver having trouble).
final class FakeWebhookReceiver: Sendable {
    /// 32 fixed bytes: `whsec_` + base64.
    static let secret = "whsec_" + Data((0..<32).map { UInt8($0 * 7 + 3) }).base64EncodedString()

    struct Delivery: Sendable {
        let id: String
        let timestamp: String
        let signature: String
        let body: String
        /// The W3C `traceparent` the delivery carried (with traces on), if any.
        var traceparent: String? = nil
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:] }
        var type: String { json["type"] as? String ?? "" }
        var data: [String: Any] { json["data"] as? [String: Any] ?? [:] }
        var accountID: String { data["accountId"] as? String ?? "" }
    }

    let received = Mutex<[Delivery]>([])
    /// Requests still to answer with 500.
    let failuresLeft = Mutex(0)
    /// Requests being answered right now, per webhook-id: more than one means a concurrent duplicate.
    let inFlight = Mutex<[String: Int]>([:])
    let concurrentDuplicates = Atomic<Int>(0)
    /// How long each answer takes (for overlap checks across nodes).
    let delay: Duration
    let port: Int

    private init(port: Int, delay: Duration) {
        self.port = port
        self.delay = delay
    }

    var url: String { "http://127.0.0.1:\(port)/hooks" }

    /// Runs `body` with a receiver on `port` (0: any free port).
    static func run(port: Int = 0, delay: Duration = .zero, _ body: @Sendable (FakeWebhookReceiver) async throws -> Void) async throws {
        let holder = Mutex<FakeWebhookReceiver?>(nil)
        let router = Router()
        router.post("/hooks") { request, _ -> Response in
            guard let receiver = holder.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            let body = try await request.body.collect(upTo: 1 << 20)
            let h = request.headers
            let delivery = Delivery(
                id: h[HTTPField.Name("webhook-id")!] ?? "", timestamp: h[HTTPField.Name("webhook-timestamp")!] ?? "",
                signature: h[HTTPField.Name("webhook-signature")!] ?? "", body: String(buffer: body),
                traceparent: h[HTTPField.Name("traceparent")!])
            let overlapping = receiver.inFlight.withLock { inFlight -> Bool in
                inFlight[delivery.id, default: 0] += 1
                return inFlight[delivery.id]! > 1
            }
            if overlapping { receiver.concurrentDuplicates.add(1, ordering: .relaxed) }
            if receiver.delay > .zero { try await Task.sleep(for: receiver.delay) }
            receiver.inFlight.withLock { $0[delivery.id, default: 1] -= 1 }
            receiver.received.withLock { $0.append(delivery) }
            let fail = receiver.failuresLeft.withLock { left -> Bool in
                guard left > 0 else { return false }
                left -= 1
                return true
            }
            return Response(status: fail ? .internalServerError : .noContent)
        }
        // Run directly, not through the live test framework: that one always listens on a new
        // port, and a receiver that comes back must come back where the server sends.
        let bound = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in bound.continuation.yield(channel.localAddress?.port ?? 0) })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // A receiver that cannot bind (its port taken meanwhile) ends the stream: the test
                // fails saying so, instead of waiting for a port that never comes.
                defer { bound.continuation.finish() }
                try await app.run()
            }
            var ports = bound.stream.makeAsyncIterator()
            guard let actual = await ports.next(), actual > 0 else { throw TestFailure("the webhook receiver did not start") }
            let receiver = FakeWebhookReceiver(port: actual, delay: delay)
            holder.withLock { $0 = receiver }
            do {
                try await body(receiver)
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
        }
    }

    /// A local port nothing listens on (a receiver that is down).
    static func closedPort() async throws -> Int {
        let port = Mutex(0)
        try await run { receiver in port.withLock { $0 = receiver.port } }
        return port.withLock { $0 }
    }

    /// The server's webhook settings pointing at `url`, with a fast idle poll.
    static func configure(_ config: inout ServerConfiguration, url: String) {
        config.webhook = WebhookConfiguration(url: url, signature: WebhookSignature(secret: secret)!)
        config.outboxPollInterval = .milliseconds(20)
    }

    var deliveries: [Delivery] { received.withLock { $0 } }

    /// Waits until `count` requests were received, or fails saying what did arrive.
    @discardableResult
    func wait(
        for count: Int, timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> [Delivery] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let got = deliveries
            if got.count >= count { return got }
            try await Task.sleep(for: .milliseconds(10))
        }
        let got = deliveries
        Issue.record(
            "expected \(count) webhook requests, got \(got.count): \(got.map(\.type))", sourceLocation: sourceLocation)
        return got
    }
}

extension FakeWebhookReceiver {
    /// Verifies a delivery's signature with Python's hmac module: not our code, not swift-crypto.
    static func verifiedIndependently(_ d: FakeWebhookReceiver.Delivery) throws -> Bool {
        let script = """
            import base64, hashlib, hmac, os, sys
            key = base64.b64decode(os.environ["SECRET"][len("whsec_"):])
            signed = (os.environ["ID"] + "." + os.environ["TS"] + "." + sys.stdin.read()).encode()
            expected = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
            sys.exit(0 if any(hmac.compare_digest(expected, s) for s in os.environ["SIG"].split(" ")) else 1)
            """
        let run = try ChildProcess.capture(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", script],
            environment: ["SECRET": FakeWebhookReceiver.secret, "ID": d.id, "TS": d.timestamp, "SIG": d.signature, "PATH": "/usr/bin:/bin"],
            input: Data(d.body.utf8))
        return run.code == 0
    }
}
