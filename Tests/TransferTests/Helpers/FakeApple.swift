import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Synchronization
import TransferCore
import TransferHTTP
import _CryptoExtras

/// A local stand-in for Apple's Sign in with Apple servers: a JWKS (RS256 keys that a test can
/// rotate) at `/auth/keys`, served by a real socket so the server under test fetches it with
/// AsyncHTTPClient as it fetches Apple's. Tokens are minted here by hand, so a test can write
/// any header and claims (an HS256 forgery, `"true"` as a string, a future `iat`).
final class FakeApple: Sendable {
    static let bundleID = "com.example.transfer"
    static let servicesID = "com.example.transfer.web"
    static let issuer = "https://appleid.apple.com"

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
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            let apple = FakeApple(baseURL: "http://127.0.0.1:\(client.port!)", first: first)
            holder.withLock { $0 = apple }
            try await body(apple)
        }
    }

    var jwksURL: String { baseURL + "/auth/keys" }

    /// The server's Apple settings pointing here.
    func configure(_ config: inout ServerConfiguration) {
        var apple = AppleConfiguration(clientIDs: [Self.bundleID, Self.servicesID])
        apple.jwksURL = jwksURL
        config.apple = apple
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
    func claims(sub: String, nonce: String?, now: Timestamp, email: String? = "mia@privaterelay.appleid.com") -> [String: Any] {
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
