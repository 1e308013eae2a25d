import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Synchronization
import TransferCore
import TransferHTTP
import _CryptoExtras

/// A local stand-in for Apple's Sign in with Apple servers, served by a real socket so the
/// server under test calls it with AsyncHTTPClient as it calls Apple:
/// - `/auth/keys`: a JWKS of RS256 keys that a test can rotate;
/// - `/auth/token`: exchanges one-use, five-minute authorization codes (made by
///   `authorizationCode`) for a refresh token and an id_token, once the client secret checks;
/// - `/auth/revoke`: records each revocation whose client secret checks.
/// Tokens are minted here by hand, so a test can write any header and claims (an HS256
/// forgery, `"true"` as a string, a future `iat`).
final class FakeApple: Sendable {
    static let bundleID = "com.example.transfer"
    static let servicesID = "com.example.transfer.web"
    static let issuer = "https://appleid.apple.com"
    static let teamID = "TEAM123456"
    static let keyID = "SIWAKEY123"

    /// The team's Sign in with Apple key (the .p8): the server signs client secrets with it.
    let teamKey = P256.Signing.PrivateKey()
    /// The time the fake checks and issues by: the harness's clock in tests that move it.
    let clock = Mutex<@Sendable () -> Timestamp>({ Timestamp(Date()) })
    var now: Timestamp { clock.withLock { $0 }() }

    struct Code: Sendable {
        let sub: String
        let clientID: String
        let expiresAt: Timestamp
        var used = false
    }
    let codes = Mutex<[String: Code]>([:])
    /// Refresh tokens handed out, by Apple ID.
    let refreshTokens = Mutex<[(sub: String, token: String)]>([])
    struct Revocation: Sendable, Equatable {
        let clientID: String
        let token: String
        let hint: String?
    }
    let revocations = Mutex<[Revocation]>([])
    /// Revocation requests whose client secret checked, answered or not.
    let revokeAttempts = Atomic<Int>(0)
    /// What `/auth/revoke` answers (a test sets 503 to see the revocation retried).
    let revokeStatus = Mutex<HTTPResponse.Status>(.ok)
    /// Why the last client secret was refused, for a test's message.
    let lastRefusal = Mutex<String?>(nil)

    struct Key: Sendable {
        let kid: String
        let key: _RSA.Signing.PrivateKey
    }

    /// The keys the JWKS publishes.
    let published: Mutex<[Key]>
    /// Whether the JWKS answers (false: 503, as when Apple cannot be reached).
    let up = Mutex(true)
    let fetches = Atomic<Int>(0)
    let baseURL: String

    private init(baseURL: String, first: Key) {
        self.baseURL = baseURL
        published = Mutex([first])
    }

    /// Runs `body` with a fake Apple listening on a free local port.
    static func run(_ body: @Sendable (FakeApple) async throws -> Void) async throws {
        let first = try Key(kid: "apple-key-1", key: _RSA.Signing.PrivateKey(keySize: .bits2048))
        let holder = Mutex<FakeApple?>(nil)
        let router = Router()
        router.get("/auth/keys") { _, _ -> Response in
            guard let apple = holder.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            apple.fetches.add(1, ordering: .relaxed)
            guard apple.up.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            return Response(
                status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: apple.jwks())))
        }
        router.post("/auth/token") { request, _ -> Response in
            guard let apple = holder.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            return apple.token(form: try await Self.form(request))
        }
        router.post("/auth/revoke") { request, _ -> Response in
            guard let apple = holder.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            return apple.revoke(form: try await Self.form(request))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            let apple = FakeApple(baseURL: "http://127.0.0.1:\(client.port!)", first: first)
            holder.withLock { $0 = apple }
            try await body(apple)
        }
    }

    var jwksURL: String { baseURL + "/auth/keys" }

    /// The server's Apple settings pointing here; with `codeExchange`, also the team's key and the token endpoints.
    func configure(_ config: inout ServerConfiguration, codeExchange: Bool = false) {
        var apple = AppleConfiguration(clientIDs: [Self.bundleID, Self.servicesID])
        apple.jwksURL = jwksURL
        if codeExchange {
            apple.tokenURL = baseURL + "/auth/token"
            apple.revokeURL = baseURL + "/auth/revoke"
            apple.codeExchange = .init(teamID: Self.teamID, keyID: Self.keyID, privateKeyPEM: teamKey.pemRepresentation)
        }
        config.apple = apple
    }

    /// The authorization code a sign-in for `sub` hands the app: one use, five minutes.
    func authorizationCode(sub: String, clientID: String = bundleID) -> String {
        let code = "c." + UUID().uuidString.lowercased()
        codes.withLock { $0[code] = Code(sub: sub, clientID: clientID, expiresAt: now + .seconds(300)) }
        return code
    }

    /// The refresh tokens handed out for `sub`, oldest first.
    func refreshTokens(for sub: String) -> [String] { refreshTokens.withLock { $0.filter { $0.sub == sub }.map(\.token) } }

    /// The refresh tokens revoked so far.
    var revokedTokens: [String] { revocations.withLock { $0.map(\.token) } }

    static func form(_ request: Request) async throws -> [String: String] {
        let body = String(buffer: try await request.body.collect(upTo: 64 * 1024))
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            fields[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return fields
    }

    static func json(_ status: HTTPResponse.Status, _ object: [String: Any]) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: try! JSONSerialization.data(withJSONObject: object))))
    }

    /// `/auth/token`: the client secret must check, then the code must be unused, unexpired and the client's.
    func token(form: [String: String]) -> Response {
        guard let clientID = form["client_id"], let secret = form["client_secret"], let why = Optional(clientSecretRefusal(secret, clientID: clientID)),
            why == nil
        else { return Self.json(.badRequest, ["error": "invalid_client"]) }
        guard form["grant_type"] == "authorization_code" else { return Self.json(.badRequest, ["error": "unsupported_grant_type"]) }
        let now = self.now
        let code: Code? = codes.withLock { codes in
            guard let name = form["code"], let found = codes[name], !found.used, now < found.expiresAt, found.clientID == clientID else { return nil }
            codes[name]?.used = true
            return found
        }
        guard let code else { return Self.json(.badRequest, ["error": "invalid_grant"]) }
        let refresh = "r." + UUID().uuidString.lowercased()
        refreshTokens.withLock { $0.append((code.sub, refresh)) }
        var claims = self.claims(sub: code.sub, nonce: nil, now: now)
        claims["aud"] = clientID
        return Self.json(.ok, [
            "access_token": "a." + UUID().uuidString.lowercased(), "token_type": "Bearer", "expires_in": 3600,
            "refresh_token": refresh, "id_token": try! token(claims),
        ])
    }

    /// `/auth/revoke`: records the revocation once the client secret checks.
    func revoke(form: [String: String]) -> Response {
        guard let clientID = form["client_id"], let secret = form["client_secret"], clientSecretRefusal(secret, clientID: clientID) == nil,
            let token = form["token"]
        else { return Self.json(.badRequest, ["error": "invalid_client"]) }
        revokeAttempts.add(1, ordering: .relaxed)
        let status = revokeStatus.withLock { $0 }
        guard status == .ok else { return Response(status: status) }
        revocations.withLock { $0.append(Revocation(clientID: clientID, token: token, hint: form["token_type_hint"])) }
        return Response(status: .ok)
    }

    /// Why Apple would refuse `secret` as the client secret of `clientID`; nil when it checks:
    /// ES256 with the team's key and key id, `iss` the team, `sub` the client, `aud` Apple,
    /// issued now and living at most five minutes.
    func clientSecretRefusal(_ secret: String, clientID: String) -> String? {
        let why: String? = {
            let parts = secret.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
                let signature = Base64URL.decode(parts[2]),
                let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
                let claims = try? JSONSerialization.jsonObject(with: Data(claimBytes)) as? [String: Any]
            else { return "not a JWT" }
            guard header["alg"] as? String == "ES256", header["kid"] as? String == Self.keyID else { return "header \(header)" }
            guard let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
                teamKey.publicKey.isValidSignature(ecdsa, for: SHA256.hash(data: Array("\(parts[0]).\(parts[1])".utf8)))
            else { return "signature" }
            let aud = (claims["aud"] as? String).map { [$0] } ?? (claims["aud"] as? [String]) ?? []
            guard claims["iss"] as? String == Self.teamID, claims["sub"] as? String == clientID, aud == ["https://appleid.apple.com"],
                [Self.bundleID, Self.servicesID].contains(clientID)
            else { return "claims \(claims)" }
            guard let iat = (claims["iat"] as? NSNumber)?.int64Value, let exp = (claims["exp"] as? NSNumber)?.int64Value,
                iat <= now.seconds + 60, exp > now.seconds, exp - iat <= 300
            else { return "times \(claims)" }
            return nil
        }()
        if let why { lastRefusal.withLock { $0 = why } }
        return why
    }

    /// Publishes a new key beside the current ones (Apple rotates by adding first).
    @discardableResult
    func rotate() throws -> Key {
        let key = try Key(kid: "apple-key-\(published.withLock { $0.count } + 1)", key: _RSA.Signing.PrivateKey(keySize: .bits2048))
        published.withLock { $0.append(key) }
        return key
    }

    func jwks() -> [UInt8] {
        let keys: [[String: String]] = published.withLock { $0 }.map { key in
            let p = try! key.key.publicKey.getKeyPrimitives()
            return ["kty": "RSA", "kid": key.kid, "use": "sig", "alg": "RS256", "n": Base64URL.encode(p.modulus), "e": Base64URL.encode(p.publicExponent)]
        }
        return [UInt8](try! JSONSerialization.data(withJSONObject: ["keys": keys]))
    }

    /// The claims of a normal identity token for `sub`, issued now (by `now`), for the iOS app.
    func claims(sub: String, nonce: String?, now: Timestamp = Timestamp(Date()), email: String? = "mia@privaterelay.appleid.com") -> [String: Any] {
        var claims: [String: Any] = [
            "iss": Self.issuer, "aud": Self.bundleID, "sub": sub, "iat": now.seconds, "exp": now.seconds + 600,
            "email_verified": true, "is_private_email": true, "auth_time": now.seconds, "nonce_supported": true,
        ]
        if let nonce { claims["nonce"] = AppleNonces.claim(for: nonce) }
        if let email { claims["email"] = email } else { claims["email_verified"] = nil; claims["is_private_email"] = nil }
        return claims
    }

    /// A compact JWS of `claims`, signed RS256 with `key` (default: the first published key).
    func token(_ claims: [String: Any], key: Key? = nil, kid: String? = nil) throws -> String {
        let signer = key ?? published.withLock { $0[0] }
        let header: [String: Any] = ["alg": "RS256", "kid": kid ?? signer.kid]
        let input = try Self.encode(header) + "." + Self.encode(claims)
        let signature = try signer.key.signature(for: SHA256.hash(data: Array(input.utf8)), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// A server-to-server notification as Apple posts it: `{"payload": JWT}`, the event a JSON string inside.
    func notification(_ type: String, sub: String, jti: String = UUID().uuidString, now: Timestamp, extra: [String: Any] = [:], key: Key? = nil) throws -> [String: Any] {
        var event: [String: Any] = ["type": type, "sub": sub, "event_time": now.milliseconds]
        event.merge(extra) { $1 }
        let events = String(decoding: try JSONSerialization.data(withJSONObject: event, options: [.sortedKeys]), as: UTF8.self)
        let claims: [String: Any] = ["iss": Self.issuer, "aud": Self.bundleID, "iat": now.seconds, "jti": jti, "events": events]
        return ["payload": try token(claims, key: key)]
    }

    /// The classic forgery: HS256, "keyed" with Apple's public key.
    func hs256Forgery(_ claims: [String: Any]) throws -> String {
        let signer = published.withLock { $0[0] }
        let header: [String: Any] = ["alg": "HS256", "kid": signer.kid]
        let input = try Self.encode(header) + "." + Self.encode(claims)
        let secret = SymmetricKey(data: Array(signer.key.publicKey.pemRepresentation.utf8))
        let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: secret)
        return input + "." + Base64URL.encode(Array(mac))
    }

    static func encode(_ object: [String: Any]) throws -> String {
        Base64URL.encode(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }
}

extension FakeApple {
    /// Whether `token` is revoked at Apple within 10 s (the server revokes after it answers).
    func eventuallyRevoked(_ token: String) async throws -> Bool {
        for _ in 0..<200 {
            if revokedTokens.contains(token) { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }
}
