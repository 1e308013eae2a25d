import Foundation

/// What a sibling app makes before it asks the host app for the account: its client id and a
/// PKCE verifier (RFC 7636) whose `S256` challenge the host sends with ``TransferClient/createHandoffCode(forClient:codeChallenge:account:)``.
///
/// The sibling keeps the request until the host's code arrives, then redeems the code with it
/// (``SiblingSession/redeemHandoff(code:request:)``). Only `clientId` and ``codeChallenge`` go
/// into the host's universal link; the verifier never leaves the sibling app.
///
/// ```swift
/// let request = HandoffRequest.make(clientId: "com.example.news")
/// pending = request  // Codable: keep it in your Keychain if iOS may end the app meanwhile
/// var link = URLComponents(string: "https://host.example.com/handoff")!
/// link.queryItems = [
///     URLQueryItem(name: "client_id", value: request.clientId),
///     URLQueryItem(name: "challenge", value: request.codeChallenge),
/// ]
/// await UIApplication.shared.open(link.url!)
/// ```
public struct HandoffRequest: Sendable, Codable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The sibling app's client id, as listed in the service's `--handoff-clients` (its bundle id).
    public let clientId: String
    /// The PKCE verifier: 256 random bits, base64url without padding (43 characters). A secret.
    public let codeVerifier: String

    /// The PKCE challenge: base64url (no padding) of the SHA-256 of ``codeVerifier``, 43 characters.
    public var codeChallenge: String { PKCE.challenge(for: codeVerifier) }

    /// A request with a new random verifier.
    public static func make(clientId: String) -> HandoffRequest {
        HandoffRequest(clientId: clientId, codeVerifier: PKCE.makeVerifier())
    }

    init(clientId: String, codeVerifier: String) {
        self.clientId = clientId
        self.codeVerifier = codeVerifier
    }

    /// Leaves the verifier out, so that a log line never carries it.
    public var description: String {
        "HandoffRequest(clientId: \(clientId), codeVerifier: \(Redacted.text), codeChallenge: \(codeChallenge))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["clientId": clientId, "codeVerifier": Redacted.text, "codeChallenge": codeChallenge])
    }
}

/// Proof Key for Code Exchange (RFC 7636) with the one method the service takes, `S256`.
enum PKCE {
    static let method = "S256"

    /// 32 random bytes, base64url: 43 characters of `[A-Za-z0-9_-]` (RFC 7636 §4.1 allows 43–128).
    static func makeVerifier() -> String {
        Base64URL.random(bytes: 32)
    }

    /// `BASE64URL-ENCODE(SHA256(ASCII(code_verifier)))` (RFC 7636 §4.2).
    static func challenge(for verifier: String) -> String {
        Base64URL.encode(SHA256.hash(verifier.utf8))
    }
}
