import Foundation
import Testing
@testable import TransferKit

@Suite("Secrets never print")
struct RedactionTests {
    /// Every way a value is commonly printed: interpolation, `debugPrint`, `dump`.
    private func printed(_ value: Any) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        return [String(describing: value), String(reflecting: value), dumped]
    }

    @Test("codes, nonces, verifiers, device secrets and tokens print as <redacted>")
    func redacted() {
        let secret = Base64URL.random(bytes: 32)
        let values: [(Any, String)] = [
            (HandoffCode(code: secret, expiresIn: 60), "HandoffCode"),
            (AppleNonce(value: secret, expiresIn: 300), "AppleNonce"),
            (HandoffRequest(clientId: "com.example.news", codeVerifier: secret), "HandoffRequest"),
            (DeviceIdentity(deviceId: UUID().uuidString.lowercased(), deviceSecret: secret), "DeviceIdentity"),
            (StoredSession(accessToken: secret, refreshToken: secret, refreshAt: Date()), "StoredSession"),
            (StoredSiblingSession(
                accountId: "a", userName: "u", tokens: StoredSession(accessToken: secret, refreshToken: secret, refreshAt: Date())),
             "StoredSiblingSession"),
            (AccountBackup(accountId: "a", displayName: "Mia", createdAt: Date(), key: secret), "AccountBackup"),
            (StoredBackup(accountId: "a", key: secret, displayName: "Mia", createdAt: Date()), "StoredBackup"),
            (ClaimInFlight(body: Data(#"{"backupKey":"\#(secret)"}"#.utf8), choice: "add", backupAccountId: "a", backupKey: secret, displayName: "Mia"),
             "ClaimInFlight"),
        ]
        for (value, name) in values {
            for text in printed(value) {
                #expect(!text.contains(secret), "\(name) printed its secret: \(text)")
                #expect(text.contains(Redacted.text), "\(name): \(text)")
            }
        }
    }

    @Test("what is not secret still prints")
    func stillUseful() {
        let code = HandoffCode(code: "secret-code", expiresIn: 60)
        #expect(code.description == "HandoffCode(code: <redacted>, expiresIn: 60)")
        #expect(code.debugDescription == code.description)
        let request = HandoffRequest(clientId: "com.example.news", codeVerifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect("\(request)".contains("com.example.news") && "\(request)".contains(request.codeChallenge))
        #expect("\(AppleNonce(value: "n", expiresIn: 300))" == "AppleNonce(value: <redacted>, expiresIn: 300)")
    }
}
