import Foundation

/// base64url without padding (RFC 4648 §5): how the contract writes device secrets, hand-off
/// codes and PKCE values.
enum Base64URL {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// `count` random bytes, base64url: 32 bytes (256 bits) make 43 characters of `[A-Za-z0-9_-]`.
    static func random(bytes count: Int) -> String {
        // SystemRandomNumberGenerator is a cryptographically secure source on every platform
        // (arc4random_buf on Apple platforms, getrandom on Linux).
        var generator = SystemRandomNumberGenerator()
        return encode((0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }
}
