import Foundation

/// This phone's identity toward the service: a device id and the secret that proves it.
/// Generated once, kept in the ``CredentialStore`` and never sent anywhere but the service.
struct DeviceIdentity: Codable, Sendable, Equatable {
    /// A lower-case RFC 4122 UUID.
    let deviceId: String
    /// 256 random bits, base64url without padding: 43 characters of `[A-Za-z0-9_-]`
    /// (the contract asks for 32–128 such characters and at least 192 bits).
    let deviceSecret: String

    static func generate() -> DeviceIdentity {
        // SystemRandomNumberGenerator is a cryptographically secure source on every platform
        // (arc4random_buf on Apple platforms, getrandom on Linux).
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return DeviceIdentity(deviceId: UUID().uuidString.lowercased(), deviceSecret: base64URL(Data(bytes)))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
