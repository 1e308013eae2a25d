import Foundation

/// A device UUID: accepted in any case, always kept and returned lower-case canonical.
public struct DeviceID: Hashable, Sendable, CustomStringConvertible {
    public let value: String

    /// Parses the 8-4-4-4-12 hexadecimal form of RFC 4122; `nil` for anything else.
    public init?(_ text: String) {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return nil }
        for (i, c) in utf8.enumerated() {
            switch i {
            case 8, 13, 18, 23: guard c == UInt8(ascii: "-") else { return nil }
            default:
                let isHex = (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)
                guard isHex else { return nil }
            }
        }
        // Apps send lower case almost always: only text with an upper-case letter is copied.
        value = utf8.contains(where: { $0 >= 65 && $0 <= 70 }) ? text.lowercased() : text
    }

    public var description: String { value }
}

/// Fresh identifiers for rows the service creates: UUIDv7 (RFC 9562), lower-case. The
/// leading millisecond timestamp keeps primary-key inserts at the end of their index
/// instead of on a random page; the 74 random bits come from the CSPRNG in one call.
public enum Identifier {
    public static func make(at now: Timestamp = SystemWallClock().now()) -> String {
        make(at: now, random: RandomToken.randomBytes(16))
    }

    /// An identifier from 16 random bytes drawn with others (one CSPRNG call for a login's ids and key).
    public static func make(at now: Timestamp, random: some Collection<UInt8>) -> String {
        var b = Array(random)
        precondition(b.count == 16)
        let ms = UInt64(max(0, now.milliseconds))
        for i in 0..<6 { b[i] = UInt8(truncatingIfNeeded: ms >> (40 - 8 * UInt64(i))) }
        b[6] = 0x70 | (b[6] & 0x0F)  // version 7
        b[8] = 0x80 | (b[8] & 0x3F)  // variant 10
        let hex = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(36)
        for (i, byte) in b.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
