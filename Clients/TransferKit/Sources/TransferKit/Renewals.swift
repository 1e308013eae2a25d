import Foundation

/// The token renewals under way, one per key (an account id, or a sibling app's client id): a
/// caller that needs a renewal while one runs waits for that one (single flight), and stops
/// waiting as soon as it is cancelled (``waitUnlessCancelled(_:)``) while the renewal goes on for
/// the others. A renewal's own task marks it ``finished(_:for:)``, never a caller.
///
/// The owner (an actor) drops a key's renewal when its session ends (sign-out, the account
/// leaving the phone, a new hand-off). A renewal checks ``isCurrent(_:for:)`` before it keeps
/// the tokens it brought, so a dropped renewal's result is thrown away.
struct Renewals {
    struct Flight {
        let id: Int
        let task: Task<String, any Error>
    }

    private var flights: [String: Flight] = [:]
    private var lastId = 0

    /// The renewal running for `key`, or a new one: `start` makes its task, given its flight id.
    mutating func join(_ key: String, start: (_ flight: Int) -> Task<String, any Error>) -> Flight {
        if let running = flights[key] { return running }
        lastId += 1
        let flight = Flight(id: lastId, task: start(lastId))
        flights[key] = flight
        return flight
    }

    /// Whether the renewal `flight` still runs for `key`: not dropped, not finished.
    func isCurrent(_ flight: Int, for key: String) -> Bool {
        flights[key]?.id == flight
    }

    /// Called by the renewal `flight` itself when it ends: later callers start a new one.
    mutating func finished(_ flight: Int, for key: String) {
        if flights[key]?.id == flight { flights[key] = nil }
    }

    /// Drops the renewal of `key`: its result will not be kept.
    mutating func drop(_ key: String) {
        flights[key] = nil
    }

    /// Drops every renewal.
    mutating func dropAll() {
        flights.removeAll()
    }
}

/// The value of a renewal's `task`, or `CancellationError` as soon as the calling task is
/// cancelled (before or while it waits): awaiting an unstructured task's value never notices the
/// caller's cancellation by itself, so a cancelled caller would wait for a renewal (up to the
/// request timeout) that others may still need. The task goes on.
func waitUnlessCancelled<T: Sendable>(_ task: Task<T, any Error>) async throws -> T {
    let waiter = Waiter<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            guard waiter.wait(continuation) else { return }
            Task { waiter.resume(with: await task.result) }
        }
    } onCancel: {
        waiter.resume(with: .failure(CancellationError()))
    }
}

/// One continuation resumed once, by whichever comes first: the result or the cancellation.
private final class Waiter<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, any Error>?
    private var early: Result<T, any Error>?

    /// Keeps `continuation`; false when it was resumed at once (cancelled before waiting).
    func wait(_ continuation: CheckedContinuation<T, any Error>) -> Bool {
        lock.lock()
        if let early {
            lock.unlock()
            continuation.resume(with: early)
            return false
        }
        self.continuation = continuation
        lock.unlock()
        return true
    }

    func resume(with result: Result<T, any Error>) {
        lock.lock()
        guard let continuation else {
            if early == nil { early = result }
            lock.unlock()
            return
        }
        self.continuation = nil
        early = result  // later results are ignored
        lock.unlock()
        continuation.resume(with: result)
    }
}
