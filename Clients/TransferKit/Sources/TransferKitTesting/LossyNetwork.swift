import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_spi(TransferKitTesting) import TransferKit

/// A network between a phone and the service that can lose answers: the request reaches the
/// service and is handled (a claim wins, an account is created), then the answer never
/// arrives, as when the app is killed or the connection drops at that moment.
///
/// ```swift
/// let serviceURL = URL(string: "http://127.0.0.1:8080")!
/// let network = LossyNetwork()
/// let client = TransferClient(
///     baseURL: serviceURL, credentials: MemoryCredentialStore(),
///     transport: network.wrap(.urlSession(.shared), baseURL: serviceURL))
/// network.loseAnswers(to: "POST /v1/transfers/claim", count: 3)
/// ```
///
/// ``SimulatedPhone`` has one (``SimulatedPhone/network``). Routes are named as in
/// ``FakeTransferService/requests(_:)``: the method and the path template.
public final class LossyNetwork: @unchecked Sendable {
    private let lock = NSLock()
    private var losses: [String: Int] = [:]
    private var lost = 0

    /// A network that loses nothing until told to.
    public init() {}

    /// The next `count` answers to `route` (`"POST /v1/transfers/claim"`) are lost.
    public func loseAnswers(to route: String, count: Int = 1) {
        lock.lock()
        losses[route, default: 0] += count
        lock.unlock()
    }

    /// Loses no more answers.
    public func heal() {
        lock.lock()
        losses.removeAll()
        lock.unlock()
    }

    /// How many answers were lost so far.
    public var lostAnswers: Int {
        lock.lock()
        defer { lock.unlock() }
        return lost
    }

    /// `transport` on this network: requests under `baseURL` to a route told to lose its answer
    /// are sent, their answer dropped, and `URLError(.networkConnectionLost)` thrown.
    public func wrap(_ transport: Transport, baseURL: URL) -> Transport {
        Transport { [self] request in
            let answer = try await transport.answer(request)
            let path = String((request.url?.path ?? "").dropFirst(baseURL.path.count))
            let method = request.httpMethod ?? "GET"
            let route = WireContract.route(method: method, path: path)?.name ?? "\(method) \(path)"
            if take(route) { throw URLError(.networkConnectionLost) }
            return answer
        }
    }

    private func take(_ route: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard let left = losses[route], left > 0 else { return false }
        losses[route] = left - 1
        lost += 1
        return true
    }
}
