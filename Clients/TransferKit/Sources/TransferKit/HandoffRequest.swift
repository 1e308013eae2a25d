import Foundation

/// What a sibling app makes before it asks the host app for the account: its client id and a
/// PKCE verifier (RFC 7636) whose `S256` challenge the host sends with ``TransferClient/createHandoffCode(forClient:codeChallenge:of:)``.
///
/// The sibling keeps the request until the host's code arrives, then redeems the code with it
/// (``SiblingSession/redeemHandoff(code:request:)``). Only `clientId` and ``codeChallenge`` go
/// into the host's universal link; the verifier never leaves the sibling app.
///
/// ```swift
/// let request = HandoffRequest.make(clientId: "com.example.news")
/// pending = request  // Codable: keep it in your Keychain if iOS may end the app meanwhile
/// await UIApplication.shared.open(request.url(host: URL(string: "https://host.example.com/handoff")!))
///
/// // Later, the host's answer arrives through the sibling's own universal link:
/// .onOpenURL { url in
///     guard let code = HandoffRequest.code(in: url) else { return }
///     Task { try await session.redeemHandoff(code: code, request: pending) }
/// }
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

extension HandoffRequest {
    /// The host app's universal link `link` asking for the account: it carries `client_id` and
    /// `code_challenge`, never the verifier. The host reads them with ``HandoffChallenge/init(url:)``.
    public func url(host link: URL) -> URL {
        HandoffLink.adding([(HandoffLink.clientId, clientId), (HandoffLink.codeChallenge, codeChallenge)], to: link)
    }

    /// The hand-off code in the sibling's universal link that the host opened (its `code`
    /// item); nil when the link has none or it is not base64url.
    public static func code(in url: URL) -> String? {
        guard let code = HandoffLink.value(HandoffLink.code, in: url), HandoffLink.isBase64URL(code) else { return nil }
        return code
    }
}

/// What the host app reads from a sibling app's link asking for the account: its client id and
/// PKCE challenge. Check the client id against your own list of sibling apps (and their
/// universal links), ask the user, then call
/// ``TransferClient/createHandoffCode(forClient:codeChallenge:of:)``.
///
/// ```swift
/// .onOpenURL { url in
///     guard let asking = HandoffChallenge(url: url), let siblingLink = siblings[asking.clientId] else { return }
///     Task {
///         let handoff = try await transfer.createHandoffCode(forClient: asking.clientId, codeChallenge: asking.codeChallenge)
///         await UIApplication.shared.open(handoff.url(sibling: siblingLink))
///     }
/// }
/// ```
public struct HandoffChallenge: Sendable, Equatable {
    /// The sibling app's client id (its bundle id).
    public let clientId: String
    /// The PKCE `S256` challenge: 43 characters of base64url.
    public let codeChallenge: String

    /// A challenge as the sibling sent it.
    public init(clientId: String, codeChallenge: String) {
        self.clientId = clientId
        self.codeChallenge = codeChallenge
    }

    /// The challenge in a link made by ``HandoffRequest/url(host:)``; nil when the link lacks
    /// either item or the challenge is not 43 base64url characters.
    public init?(url: URL) {
        guard let clientId = HandoffLink.value(HandoffLink.clientId, in: url), !clientId.isEmpty,
            let challenge = HandoffLink.value(HandoffLink.codeChallenge, in: url),
            challenge.count == 43, HandoffLink.isBase64URL(challenge)
        else { return nil }
        self.init(clientId: clientId, codeChallenge: challenge)
    }
}

extension HandoffCode {
    /// The sibling's universal link `link` with the code (its `code` item): open it right away,
    /// and never log it (the code is a secret until redeemed). The sibling reads it with
    /// ``HandoffRequest/code(in:)``.
    public func url(sibling link: URL) -> URL {
        HandoffLink.adding([(HandoffLink.code, code)], to: link)
    }
}

/// The query items of the hand-off links.
enum HandoffLink {
    static let clientId = "client_id"
    static let codeChallenge = "code_challenge"
    static let code = "code"

    /// `link` with `items` added to its query (replacing items of the same names).
    static func adding(_ items: [(String, String)], to link: URL) -> URL {
        guard var components = URLComponents(url: link, resolvingAgainstBaseURL: false) else { return link }
        let names = Set(items.map(\.0))
        components.queryItems = (components.queryItems ?? []).filter { !names.contains($0.name) }
            + items.map { URLQueryItem(name: $0.0, value: $0.1) }
        return components.url ?? link
    }

    /// The value of the query item `name`, if the link has exactly one.
    static func value(_ name: String, in url: URL) -> String? {
        let values = (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).filter { $0.name == name }
        return values.count == 1 ? values[0].value : nil
    }

    static func isBase64URL(_ text: String) -> Bool {
        !text.isEmpty && text.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_") }
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
