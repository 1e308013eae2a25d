import Synchronization
import TransferCore

/// Fixed-window counter per client address, in this process's memory. Each node of a
/// multi-node deployment limits on its own (see README).
final class RateLimiter: Sendable {
    private struct Window { var start: Int64; var count: Int }
    private let limit: ServerConfiguration.RateLimit
    private let windows = Mutex<[String: Window]>([:])

    init(_ limit: ServerConfiguration.RateLimit) { self.limit = limit }

    /// The seconds to wait when `key` has used up its window, without counting anything.
    func exhausted(_ key: String, now: Timestamp) -> Int? {
        let period = limit.period.milliseconds
        return windows.withLock { windows in
            guard let window = windows[key], now.milliseconds - window.start < period, window.count >= limit.count else {
                return nil
            }
            return now.secondsUntil(Timestamp(milliseconds: window.start + period))
        }
    }

    /// Counts one event for `key`; returns the seconds to wait when over the limit.
    @discardableResult
    func hit(_ key: String, now: Timestamp) -> Int? {
        let period = limit.period.milliseconds
        return windows.withLock { windows in
            if windows.count > 100_000 {
                windows = windows.filter { now.milliseconds - $0.value.start < period }
            }
            var window = windows[key] ?? Window(start: now.milliseconds, count: 0)
            if now.milliseconds - window.start >= period { window = Window(start: now.milliseconds, count: 0) }
            guard window.count < limit.count else {
                return now.secondsUntil(Timestamp(milliseconds: window.start + period))
            }
            window.count += 1
            windows[key] = window
            return nil
        }
    }
}
