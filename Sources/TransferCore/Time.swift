import Foundation

/// A point in time with millisecond precision, stored as milliseconds since 1970 (UTC).
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var milliseconds: Int64

    public init(milliseconds: Int64) { self.milliseconds = milliseconds }
    public init(_ date: Date) { self.milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
    public var seconds: Int64 { milliseconds / 1000 }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.milliseconds < rhs.milliseconds }
    public static func + (lhs: Self, rhs: Duration) -> Self { Self(milliseconds: lhs.milliseconds + rhs.milliseconds) }
    public static func - (lhs: Self, rhs: Duration) -> Self { Self(milliseconds: lhs.milliseconds - rhs.milliseconds) }

    /// Whole seconds from `self` until `later`, rounded up, at least 1 (for `Retry-After`).
    public func secondsUntil(_ later: Timestamp) -> Int {
        let ms = later.milliseconds - milliseconds
        return max(1, Int((ms + 999) / 1000))
    }

    /// RFC 3339 in UTC with whole seconds, e.g. `2026-11-21T12:00:00Z`.
    public var rfc3339: String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ",
            Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }

    public var description: String { rfc3339 }
}

extension Duration {
    public var milliseconds: Int64 {
        let (s, atto) = components
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}

/// Where the service reads the time from; tests inject a clock they can move.
public protocol WallClock: Sendable {
    func now() -> Timestamp
}

public struct SystemWallClock: WallClock {
    public init() {}
    public func now() -> Timestamp { Timestamp(Date()) }
}
