import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore
import TransferCore

/// Apple's token endpoints, called as this service's team (`--apple-team-id`, `--apple-key-id`,
/// `--apple-private-key`): the exchange of a link's authorization code for a refresh token, and
/// that token's revocation (sent from the outbox, after the commit that dropped the link).
/// Apple's refresh token never reaches a response or a log.
struct AppleTokenClient: Sendable {
    let configuration: AppleConfiguration
    let team: AppleConfiguration.CodeExchange
    let signer: JWTKeyCollection
    let client: HTTPClient
    let logger: Logger
    /// The client secret's `aud`, whatever the endpoints' URLs.
    static let audience = "https://appleid.apple.com"
    /// Apple accepts up to six months; a secret made per call lives five minutes.
    static let secretLifetime: Int64 = 300
    static let timeout = TimeAmount.seconds(10)

    /// The team's key, ready to sign client secrets.
    static func signer(_ team: AppleConfiguration.CodeExchange) async throws -> JWTKeyCollection {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(pem: team.privateKeyPEM), kid: JWKIdentifier(string: team.keyID))
        return keys
    }

    /// The client secret: an ES256 JWT with the team as `iss` and the client id as `sub`.
    struct ClientSecret: JWTPayload {
        var iss: IssuerClaim
        var sub: SubjectClaim
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    func clientSecret(for clientID: String, now: Timestamp) async throws -> String {
        let issued = Date(timeIntervalSince1970: TimeInterval(now.seconds))
        return try await signer.sign(
            ClientSecret(
                iss: .init(value: team.teamID), sub: .init(value: clientID), aud: .init(value: [Self.audience]),
                iat: .init(value: issued), exp: .init(value: issued.addingTimeInterval(TimeInterval(Self.secretLifetime)))),
            kid: JWKIdentifier(string: team.keyID))
    }

    /// What the token endpoint answers; only these fields are read.
    struct TokenAnswer: Decodable {
        var refresh_token: String?
        var id_token: String?
        var error: String?
    }

    /// Exchanges a link's authorization code, issued to `clientID`. The grant names the Apple ID
    /// of the id_token Apple sends with it (verified as an identity token is, without a nonce).
    /// Apple's `invalid_grant` is the app's: `invalidAuthorizationCode`; anything else is ours or
    /// Apple's: `503 unavailable`, logged.
    func exchange(code: String, clientID: String, verifier: AppleSignIn, now: Timestamp) async throws -> AppleGrant {
        guard !code.isEmpty, code.utf8.count <= 1024 else { throw TransferError.invalidAuthorizationCode("it is empty or too long") }
        let answer: TokenAnswer, status: UInt
        do {
            var request = HTTPClientRequest(url: configuration.tokenURL)
            request.method = .POST
            request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
            request.headers.add(name: "accept", value: "application/json")
            request.body = .bytes(ByteBuffer(string: Self.form([
                ("client_id", clientID), ("client_secret", try await clientSecret(for: clientID, now: now)),
                ("code", code), ("grant_type", "authorization_code"),
            ])))
            let response = try await client.execute(request, timeout: Self.timeout)
            let body = try await response.body.collect(upTo: 64 * 1024)
            status = response.status.code
            answer = (try? JSONDecoder().decode(TokenAnswer.self, from: Data(buffer: body))) ?? TokenAnswer()
        } catch {
            throw unavailable("Apple's token endpoint cannot be reached", error: "\(type(of: error))")
        }
        if status == 400, answer.error == "invalid_grant" {
            throw TransferError.invalidAuthorizationCode("Apple answered invalid_grant (used already, expired, or another app's)")
        }
        guard status == 200, let refreshToken = answer.refresh_token, let idToken = answer.id_token else {
            throw unavailable("Apple's token endpoint refused the exchange", error: "HTTP \(status) \(answer.error ?? "")")
        }
        let identity: AppleIdentity
        do {
            identity = try await verifier.verify(idToken, nonce: nil, now: now)
        } catch {
            throw unavailable("Apple's token endpoint sent an id_token that does not verify", error: "\(error)")
        }
        return AppleGrant(refreshToken: refreshToken, clientID: clientID, sub: identity.sub)
    }

    /// Revokes a refresh token; a 2xx within 10 s is done (Apple also answers 200 for a token
    /// that is no longer valid).
    func revoke(_ revocation: AppleRevocation, now: Timestamp) async -> DeliveryOutcome {
        var request = HTTPClientRequest(url: configuration.revokeURL)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        do {
            request.body = .bytes(ByteBuffer(string: Self.form([
                ("client_id", revocation.clientID), ("client_secret", try await clientSecret(for: revocation.clientID, now: now)),
                ("token", revocation.refreshToken), ("token_type_hint", "refresh_token"),
            ])))
        } catch {
            return .failed("the client secret cannot be signed")
        }
        return await OutboxDelivery.post(request, client: client, timeout: Self.timeout)
    }

    private func unavailable(_ message: String, error: String) -> APIError {
        logger.error("Sign in with Apple code exchange failed", metadata: ["why": "\(message)", "error": "\(error.prefix(200))"])
        return APIError(.serviceUnavailable, "unavailable", "\(message); try again shortly.", headers: [.retryAfter: "60"])
    }

    /// `application/x-www-form-urlencoded`, every byte outside the unreserved set escaped.
    static func form(_ fields: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: "\u{0}"..."\u{7F}"))
        allowed.insert(charactersIn: "-._~")
        return fields.map { "\($0)=\($1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
    }
}

/// Revokes Apple refresh tokens kept in the outbox (`apple_revoke` rows).
struct AppleRevokeSender: OutboxSender {
    let tokens: AppleTokenClient

    func send(_ message: OutboxMessage, now: Timestamp) async -> DeliveryOutcome {
        guard let revocation = try? JSONDecoder().decode(AppleRevocation.self, from: Data(message.body.utf8)) else {
            return .failed("the message is not a revocation")
        }
        return await tokens.revoke(revocation, now: now)
    }
}
