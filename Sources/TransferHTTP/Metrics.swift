import Metrics
import Synchronization
import Prometheus
import TransferArgon2
import TransferCore

/// The service's metrics, on a registry of its own (so tests can run many servers).
public final class ServiceMetrics: ServiceObserver {
    public let registry = PrometheusCollectorRegistry()
    let factory: PrometheusMetricsFactory
    /// `transfer_logins_total{wrote}`: every successful login, by whether it wrote.
    private let logins: [Bool: Metrics.Counter]
    private let accountsCreated: Metrics.Counter
    private let transfersSetUp: Metrics.Counter
    private let claimsWon: Metrics.Counter
    private let claimsFailed: Metrics.Counter
    private let lockouts: Metrics.Counter
    let hashSeconds: Metrics.Recorder

    public init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
        ]
        factory.defaultValueHistogramBuckets = [0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5]
        self.factory = factory
        logins = Dictionary(uniqueKeysWithValues: [true, false].map {
            ($0, Metrics.Counter(label: "transfer_logins_total", dimensions: [("wrote", String($0))], factory: factory))
        })
        accountsCreated = Metrics.Counter(label: "transfer_accounts_created_total", factory: factory)
        transfersSetUp = Metrics.Counter(label: "transfer_transfers_set_up_total", factory: factory)
        claimsWon = Metrics.Counter(label: "transfer_claims_won_total", factory: factory)
        claimsFailed = Metrics.Counter(label: "transfer_claims_failed_total", factory: factory)
        lockouts = Metrics.Counter(label: "transfer_lockouts_total", factory: factory)
        hashSeconds = Metrics.Recorder(label: "transfer_argon2_seconds", aggregate: true, factory: factory)
    }

    public func loggedIn(created: Bool, wrote: Bool) {
        logins[wrote]?.increment()
        if created { accountsCreated.increment() }
    }
    public func transferSetUp() { transfersSetUp.increment() }
    public func claimWon() { claimsWon.increment() }
    public func claimFailed() { claimsFailed.increment() }
    public func transferLocked() { lockouts.increment() }

    private struct AttestationKey: Hashable { var platform: String; var outcome: String; var check: String? }
    private let attestationCounters = Mutex<[AttestationKey: Metrics.Counter]>([:])

    /// `transfer_attestations_total{platform, outcome}`: apple, android or none (missing);
    /// verified, missing or failed, a failure with its `check`.
    public func attestation(_ result: AttestationResult) {
        var key = AttestationKey(platform: result.platform?.rawValue ?? "none", outcome: "verified", check: nil)
        switch result.outcome {
        case .verified: break
        case .missing: key.outcome = "missing"
        case .failed(let check):
            key.outcome = "failed"
            key.check = check
        }
        let counter = attestationCounters.withLock { cache in
            if let counter = cache[key] { return counter }
            var dimensions = [("platform", key.platform), ("outcome", key.outcome)]
            if let check = key.check { dimensions.append(("check", check)) }
            let counter = Metrics.Counter(label: "transfer_attestations_total", dimensions: dimensions, factory: factory)
            cache[key] = counter
            return counter
        }
        counter.increment()
    }

    private struct RequestKey: Hashable { var method: String; var route: String; var status: Int }
    /// Metric handles per method, route and status, made once: creating them per request
    /// costs a registry lookup under a lock each time.
    private let requestMetrics = Mutex<[RequestKey: (count: Metrics.Counter, time: Metrics.Timer)]>([:])

    func request(method: String, route: String, status: Int, duration: Duration) {
        let key = RequestKey(method: method, route: route, status: status)
        let handles = requestMetrics.withLock { cache in
            if let handles = cache[key] { return handles }
            let handles = (
                count: Metrics.Counter(
                    label: "http_requests_total", dimensions: [("method", method), ("route", route), ("status", String(status))],
                    factory: factory),
                time: Metrics.Timer(
                    label: "http_request_duration_seconds", dimensions: [("method", method), ("route", route)], factory: factory)
            )
            cache[key] = handles
            return handles
        }
        handles.count.increment()
        handles.time.recordSeconds(duration.secondsDouble)
    }

    /// The text exposition, with the hash queue's current depth.
    func exposition(hasher: Argon2Hasher?) -> [UInt8] {
        if let hasher {
            Metrics.Gauge(label: "transfer_argon2_queue_depth", factory: factory).record(hasher.queued)
            Metrics.Gauge(label: "transfer_argon2_in_flight", factory: factory).record(hasher.inFlight)
        }
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }
}
