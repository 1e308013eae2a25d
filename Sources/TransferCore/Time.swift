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
        let year = Int(parts.tm_year) + 1900
        if (0...9999).contains(year) {
            // Written digit by digit: `String(format:)` was 6 % of a `GET /v1/me`.
            var text = [UInt8]()
            text.reserveCapacity(20)
            func digits(_ value: Int, _ width: Int) {
                var divisor = 1
                for _ in 1..<width { divisor *= 10 }
                while divisor > 0 {
                    text.append(UInt8(48 + value / divisor % 10))
                    divisor /= 10
                }
            }
            digits(year, 4)
            text.append(UInt8(ascii: "-"))
            digits(Int(parts.tm_mon) + 1, 2)
            text.append(UInt8(ascii: "-"))
            digits(Int(parts.tm_mday), 2)
            text.append(UInt8(ascii: "T"))
            digits(Int(parts.tm_hour), 2)
            text.append(UInt8(ascii: ":"))
            digits(Int(parts.tm_min), 2)
            text.append(UInt8(ascii: ":"))
            digits(Int(parts.tm_sec), 2)
            text.append(UInt8(ascii: "Z"))
            return String(decoding: text, as: UTF8.self)
        }
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ",
            Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }

    public var description: String { rfc3339 }

    /// Parses an RFC 3339 date-time (`2026-11-22T10:00:00Z`, `…T19:00:00.250+09:00`; `T` and
    /// `Z` in either case); nil for anything else. Fractions beyond milliseconds are cut off;
    /// a leap second (`:60`, only in a minute's last second) counts as the next second's start.
    public init?(rfc3339 text: String) {
        let b = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= b.count else { return nil }
            var n = 0
            for i in range {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                n = n * 10 + Int(b[i] - 48)
            }
            return n
        }
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] | 0x20 == UInt8(ascii: "t"),
            b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"),
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60 || (second == 60 && minute == 59)
        else { return nil }
        var i = 19
        var millis = 0
        if b[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if i - start < 3 { millis = millis * 10 + Int(b[i] - 48) }
                i += 1
            }
            guard i > start else { return nil }
            for _ in 0..<max(0, 3 - (i - start)) { millis *= 10 }
        }
        guard i < b.count else { return nil }
        var offset = 0
        if b[i] | 0x20 == UInt8(ascii: "z"), i + 1 == b.count {
            offset = 0
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-"), i + 6 == b.count, b[i + 3] == UInt8(ascii: ":"),
            let h = number(i + 1..<i + 3), let m = number(i + 4..<i + 6), h < 24, m < 60
        {
            offset = (h * 60 + m) * 60 * (b[i] == UInt8(ascii: "-") ? -1 : 1)
        } else {
            return nil
        }
        var midnight = tm()
        midnight.tm_year = Int32(year - 1900)
        midnight.tm_mon = Int32(month - 1)
        midnight.tm_mday = Int32(day)
        let dayStart = timegm(&midnight)
        // timegm turns 31 April into 1 May; such a date is not a date.
        guard midnight.tm_mday == Int32(day) else { return nil }
        let seconds = Int64(dayStart) + Int64(hour * 3600 + minute * 60 + second) - Int64(offset)
        self.init(milliseconds: seconds * 1000 + Int64(millis))
    }
}

extension Duration {
    public var milliseconds: Int64 {
        let (s, atto) = components
        return s * 1000 + atto / 1_000_000_000_000_000
    }

    /// `30s`, `15m`, `24h`, `7d` (at most ten years); nil for anything else.
    public init?(flag text: String) {
        let t = text.trimmingCharacters(in: .whitespaces)
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        guard let unit = t.last, let seconds = units[unit], let n = Int64(t.dropLast()), n > 0, n <= 3650 * 86400 / seconds else {
            return nil
        }
        self = .seconds(n * seconds)
    }

    /// The shortest of `s`, `m`, `h`, `d` that says it exactly (`900s` → `15m`).
    public var flagText: String {
        let s = components.seconds
        for (unit, size) in [("d", Int64(86400)), ("h", 3600), ("m", 60)] where s % size == 0 && s >= size { return "\(s / size)\(unit)" }
        return "\(s)s"
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
