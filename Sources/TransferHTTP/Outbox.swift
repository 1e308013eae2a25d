import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Tracing
import TransferCore
import TransferSettings
import TransferStorage

/// `--webhook-url` and `--webhook-secret`.
public struct WebhookConfiguration: Sendable {
    public var url: String
    public var signature: WebhookSignature
    public init(url: String, signature: WebhookSignature) {
        self.url = url
        self.signature = signature
    }
}

/// Standard Webhooks signatures: `v1,` and the base64 of HMAC-SHA256, keyed with the secret's
/// bytes, over `id.timestamp.body`.
public struct WebhookSignature: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Never the key.
    public var description: String { "WebhookSignature(<redacted>)" }
    public var debugDescription: String { description }
    let key: SymmetricKey

    /// `whsec_` and the base64 of 24 to 64 bytes (the specification's bounds).
    public init?(secret: String) {
        guard let secret = WebhookSecret(secret) else { return nil }
        self.init(secret)
    }

    public init(_ secret: WebhookSecret) { key = SymmetricKey(data: secret.bytes) }

    public func sign(id: String, timestamp: Int64, body: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data("\(id).\(timestamp).\(body)".utf8), using: key)
        return "v1," + Data(mac).base64EncodedString()
    }
}

/// Sends one outbox message somewhere; says what happened, never throws.
protocol OutboxSender: Sendable {
    func send(_ message: OutboxMessage, now: Timestamp) async -> DeliveryOutcome
}

/// Posts webhook events to the app backend: a 2xx within 10 s is a delivery; a redirect is not
/// followed (it is a failure, as the specification advises).
struct WebhookSender: OutboxSender {
    let configuration: WebhookConfiguration
    let client: HTTPClient
    /// With traces on, each delivery is a trace of its own (`send`).
    var traced = false
    static let timeout = TimeAmount.seconds(10)

    func send(_ message: OutboxMessage, now: Timestamp) async -> DeliveryOutcome {
        guard traced else { return await post(message, now: now) }
        // It runs after the request's commit, on whichever node leases it, so it starts a trace
        // of its own, which the receiver may continue (`traceparent`). The event's type, its
        // webhook-id and the attempt; never the payload, the signature or the URL.
        return await withSpan("webhook delivery", context: .topLevel, ofKind: .client) { span in
            span.attributes["webhook.type"] = message.type
            span.attributes["webhook.id"] = message.id
            span.attributes["webhook.attempt"] = message.attempts + 1
            let outcome = await post(message, now: now, span: span)
            if case .failed = outcome { span.setStatus(SpanStatus(code: .error)) }
            return outcome
        }
    }

    private func post(_ message: OutboxMessage, now: Timestamp, span: (any Span)? = nil) async -> DeliveryOutcome {
        var request = HTTPClientRequest(url: configuration.url)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.headers.add(name: "user-agent", value: "transfer-server-webhooks")
        request.headers.add(name: "webhook-id", value: message.id)
        request.headers.add(name: "webhook-timestamp", value: String(now.seconds))
        request.headers.add(
            name: "webhook-signature", value: configuration.signature.sign(id: message.id, timestamp: now.seconds, body: message.body))
        request.body = .bytes(ByteBuffer(string: message.body))
        if let span { InstrumentationSystem.instrument.inject(span.context, into: &request.headers, using: HeaderInjector()) }
        return await OutboxDelivery.post(request, client: client, timeout: Self.timeout, span: span)
    }

    private struct HeaderInjector: Injector {
        func inject(_ value: String, forKey key: String, into headers: inout HTTPHeaders) { headers.replaceOrAdd(name: key, value: value) }
    }
}

enum OutboxDelivery {
    /// A 2xx is delivered; anything else says what went wrong in a few words (never the
    /// receiver's body, which may hold anything).
    static func post(_ request: HTTPClientRequest, client: HTTPClient, timeout: TimeAmount, span: (any Span)? = nil) async -> DeliveryOutcome {
        do {
            let response = try await client.execute(request, timeout: timeout)
            span?.attributes["http.response.status_code"] = Int(response.status.code)
            // Read (and drop) the body, so the connection can serve the next request.
            _ = try? await response.body.collect(upTo: 64 * 1024)
            guard (200..<300).contains(response.status.code) else { return .failed("HTTP \(response.status.code)") }
            return .delivered
        } catch let error as HTTPClientError {
            return .failed(String("\(error)".prefix(200)))
        } catch {
            return .failed(String("\(type(of: error)): \(error)".prefix(200)))
        }
    }
}

/// Delivers the outbox messages of one kind, after their commits: leases a batch of due
/// messages (the oldest of each account), sends them concurrently, records each outcome, and
/// when nothing is due waits `pollInterval`. Several nodes may run one each.
struct OutboxWorker: Service {
    let kind: OutboxKind
    let store: any TransferStore
    let clock: any WallClock
    let policy: OutboxPolicy
    let pollInterval: Duration
    let sender: any OutboxSender
    let metrics: OutboxMetrics
    /// True once the database is migrated (the server's signing key is loaded after that): the worker starts then.
    let ready: @Sendable () -> Bool
    let logger: Logger
    static let batchSize = 32

    func run() async throws {
        while !ready() {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(50)) }
            } catch {
                return
            }
        }
        var lastStats = ContinuousClock.now - .seconds(60)
        while !Task.isShuttingDownGracefully {
            var sent = 0
            do {
                sent = try await round()
            } catch {
                logger.error("outbox round failed", metadata: ["kind": "\(kind.rawValue)", "error": "\(Storage.describe(error))"])
            }
            if ContinuousClock.now - lastStats >= .seconds(5) {
                lastStats = ContinuousClock.now
                if let stats = try? await store.outboxStats(kind: kind) { metrics.record(stats, now: clock.now()) }
            }
            if sent == 0 {
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: pollInterval) }
                } catch {
                    return  // shutting down
                }
            }
        }
    }

    /// One batch; returns how many messages were sent.
    func round() async throws -> Int {
        let messages = try await store.execute(LeaseOutboxCommand(
            now: clock.now(), limit: Self.batchSize, kind: kind, leaseID: Identifier.make(), policy: policy)
        ).get()
        guard !messages.isEmpty else { return 0 }
        await withTaskGroup(of: Void.self) { group in
            for message in messages {
                group.addTask { await deliver(message) }
            }
        }
        return messages.count
    }

    func deliver(_ message: OutboxMessage) async {
        let outcome = await sender.send(message, now: clock.now())
        do {
            let state = try await store.execute(RecordDeliveryCommand(message: message, outcome: outcome, now: clock.now(), policy: policy)).get()
            switch (outcome, state) {
            case (.delivered, _): metrics.delivered()
            case (.failed(let error), .failed?):
                metrics.failed()
                logger.error(
                    "outbox message failed for good", metadata: ["kind": "\(kind.rawValue)", "id": "\(message.id)", "error": "\(error)"])
            case (.failed(let error), _):
                metrics.retried()
                logger.warning(
                    "outbox delivery failed; will retry",
                    metadata: ["kind": "\(kind.rawValue)", "id": "\(message.id)", "attempt": "\(message.attempts + 1)", "error": "\(error)"])
            }
        } catch {
            // Not recorded: the lease runs out and the message is sent again (at least once).
            logger.error("recording a delivery failed", metadata: ["id": "\(message.id)", "error": "\(Storage.describe(error))"])
        }
    }
}

/// Outbox depth, deliveries by outcome, and the age of the oldest pending message, of one
/// kind; the metric handles are made once, as `ServiceMetrics` does.
struct OutboxMetrics: Sendable {
    private let deliveredCount, retriedCount, failedCount: Metrics.Counter
    private let pending, failing, oldestPendingSeconds: Metrics.Gauge

    init(kind: OutboxKind, factory: any MetricsFactory) {
        func deliveries(_ outcome: String) -> Metrics.Counter {
            Metrics.Counter(label: "transfer_outbox_deliveries_total", dimensions: [("kind", kind.rawValue), ("outcome", outcome)], factory: factory)
        }
        deliveredCount = deliveries("delivered")
        retriedCount = deliveries("retry")
        failedCount = deliveries("failed")
        let dimensions = [("kind", kind.rawValue)]
        pending = Metrics.Gauge(label: "transfer_outbox_pending", dimensions: dimensions, factory: factory)
        failing = Metrics.Gauge(label: "transfer_outbox_failed", dimensions: dimensions, factory: factory)
        oldestPendingSeconds = Metrics.Gauge(label: "transfer_outbox_oldest_pending_seconds", dimensions: dimensions, factory: factory)
    }

    func delivered() { deliveredCount.increment() }
    func retried() { retriedCount.increment() }
    func failed() { failedCount.increment() }

    func record(_ stats: OutboxStats, now: Timestamp) {
        pending.record(stats.pending)
        failing.record(stats.failed)
        oldestPendingSeconds.record(stats.oldestPendingAt.map { max(0, Double(now.milliseconds - $0.milliseconds) / 1000) } ?? 0)
    }
}
