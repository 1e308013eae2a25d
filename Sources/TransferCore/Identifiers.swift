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
        value = text.lowercased()
    }

    public var description: String { value }
}

/// Fresh random identifiers for rows the service creates.
public enum Identifier {
    public static func make() -> String { UUID().uuidString.lowercased() }
}
