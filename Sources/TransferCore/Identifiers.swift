import Foundation

/// A UUID as the service keeps every id it is sent (devices, accounts): the 8-4-4-4-12
/// hexadecimal form of RFC 4122, accepted in any case, kept lower-case.
public enum CanonicalUUID {
    /// The lower-case form of `text`; `nil` for anything that is not a UUID.
    public static func parse(_ text: String) -> String? {
        let utf8 = text.utf8
        guard utf8.count == 36 else { return nil }
        var upper = false
        for (i, c) in utf8.enumerated() {
            switch i {
            case 8, 13, 18, 23: guard c == UInt8(ascii: "-") else { return nil }
            default:
                let isDigit = c >= 48 && c <= 57, isUpper = c >= 65 && c <= 70, isLower = c >= 97 && c <= 102
                guard isDigit || isUpper || isLower else { return nil }
                upper = upper || isUpper
            }
        }
        // Apps send lower case almost always: only text with an upper-case letter is copied.
        return upper ? text.lowercased() : text
    }
}

/// A device's UUID, canonical (`CanonicalUUID`).
public struct DeviceID: Hashable, Sendable, CustomStringConvertible {
    public let value: String

    public init?(_ text: String) {
        guard let value = CanonicalUUID.parse(text) else { return nil }
        self.value = value
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
