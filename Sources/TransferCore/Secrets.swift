import Crypto
import Foundation

/// SHA-256 of a high-entropy secret (device secret, refresh token). Device secrets carry
/// at least 192 random bits, so a fast hash is enough; only the hash is ever stored.
public struct SecretHash: Hashable, Sendable {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public init(of secret: String) {
        bytes = Array(SHA256.hash(data: Array(secret.utf8)))
    }

    /// Compares in time that does not depend on where the hashes differ.
    public func matches(_ other: SecretHash) -> Bool {
        guard bytes.count == other.bytes.count else { return false }
        var diff: UInt8 = 0
        for i in bytes.indices { diff |= bytes[i] ^ other.bytes[i] }
        return diff == 0
    }

    public var hex: String { bytes.map { String(format: "%02x", $0) }.joined() }
}

public enum RandomToken {
    /// `byteCount` random bytes from the system's CSPRNG, base64url without padding.
    public static func make(byteCount: Int = 32) -> String {
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<byteCount).map { _ in UInt8.random(in: .min ... .max, using: &rng) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
