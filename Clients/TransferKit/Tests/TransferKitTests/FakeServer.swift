import Foundation
@_spi(TransferKitTesting) @testable import TransferKit
import TransferKitTesting

/// The fake service (``FakeTransferService``, in TransferKitTesting) under the name the tests use.
typealias FakeServer = FakeTransferService

extension FakeTransferService {
    /// Refreshes wait until `gate` opens.
    var refreshGate: Gate? {
        get { nil }
        set {
            guard let gate = newValue else { return beforeRefresh = nil }
            beforeRefresh = { await gate.pass() }
        }
    }
}

/// A clock the tests move by hand.
typealias TestClock = ManualClock

/// Holds whoever passes until it opens; counts arrivals.
final class Gate: @unchecked Sendable {
    private let lock = NSLock()
    private var isOpen = false
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private var arrivals = 0

    func pass() async {
        await withCheckedContinuation { continuation in
            lock.lock()
            arrivals += 1
            if isOpen {
                lock.unlock()
                continuation.resume()
            } else {
                waiting.append(continuation)
                lock.unlock()
            }
        }
    }

    func open() {
        lock.lock()
        isOpen = true
        let waiting = self.waiting
        self.waiting = []
        lock.unlock()
        for continuation in waiting { continuation.resume() }
    }

    private var hasArrivals: Bool {
        lock.lock()
        defer { lock.unlock() }
        return arrivals > 0
    }

    /// Waits (up to 5 s) until someone is held at the gate.
    func waitForArrival() async throws {
        for _ in 0..<5000 {
            if hasArrivals { return }
            try await Task.sleep(nanoseconds: 1_000_000)
        }
        throw CancellationError()
    }
}

/// Every event a client emits, in order.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [TransferEvent] = []

    init(_ client: TransferClient) {
        client.observeEvents { [weak self] event in self?.append(event) }
    }

    var all: [TransferEvent] {
        lock.lock()
        defer { lock.unlock() }
        return events
    }

    private func append(_ event: TransferEvent) {
        lock.lock()
        events.append(event)
        lock.unlock()
    }
}
