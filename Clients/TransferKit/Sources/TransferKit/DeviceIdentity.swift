import Foundation

/// This phone's identity toward the service: a device id and the secret that proves it.
/// Generated once, kept in the ``CredentialStore`` and never sent anywhere but the service.
struct DeviceIdentity: Codable, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// A lower-case RFC 4122 UUID.
    let deviceId: String
    /// 256 random bits, base64url without padding: 43 characters of `[A-Za-z0-9_-]`
    /// (the contract asks for 32–128 such characters and at least 192 bits).
    let deviceSecret: String

    /// Leaves the secrets out, so that a log line never carries them.
    var description: String { "DeviceIdentity(deviceId: \(deviceId), deviceSecret: \(Redacted.text))" }
    var debugDescription: String { description }
    var customMirror: Mirror { Mirror(self, children: ["deviceId": deviceId, "deviceSecret": Redacted.text]) }

    static func generate() -> DeviceIdentity {
        DeviceIdentity(deviceId: UUID().uuidString.lowercased(), deviceSecret: Base64URL.random(bytes: 32))
    }
}
