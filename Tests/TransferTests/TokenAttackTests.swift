import Crypto
import Foundation
import JWTKit
import Testing
import TransferCore
@testable import TransferTestSupport

/// Forged and stale access tokens are all refused with `401 invalid_token`.
@Suite("Token attacks")
struct TokenAttackTests {
    static func b64(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func json(_ object: [String: Any]) -> Data {
        try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    /// The header and payload of a JWS; throws, naming the token, when it has no such parts.

    /// A token with `header` and `payload`, signed by `sign` over `header.payload`.
    static func token(_ header: [String: Any], _ payload: [String: Any], sign: (Data) throws -> Data) rethrows -> String {
        let input = b64(json(header)) + "." + b64(json(payload))
        return input + "." + b64(try sign(Data(input.utf8)))
    }

    /// What an app backend checks: our tokens through jwt-kit and the published JWKS only.
    struct BackendClaims: JWTPayload {
        var iss: IssuerClaim
        var aud: AudienceClaim
        var sub: SubjectClaim
        var did: String
        var sid: String
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws { try exp.verifyNotExpired() }
    }

    @Test("the access token is read after the Bearer scheme in any case, with extra spaces around it; other schemes are refused")
    func bearerForms() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        try await harness.run { api, _ in
            let token = try await api.login(Device()).accessToken
            for header in ["Bearer \(token)", "bearer \(token)", "BEARER   \(token)", "Bearer \t \(token)", "Bearer \(token) ", "Bearer \(token)\t"] {
                let reply = try await api.call(.get, "/v1/me", headers: [.authorization: header])
                #expect(reply.status == .ok, "\(header.prefix(10))…: \(reply.text)")
            }
            for header in ["Basic \(token)", "Bearer", "Bearer ", "Bearer x\(token)", "Bearer\(token)"] {
                let reply = try await api.call(.get, "/v1/me", headers: [.authorization: header])
                #expect(reply.status == .unauthorized, "\(header.prefix(10))…: \(reply.status) \(reply.text)")
            }
        }
    }

    @Test("an access token verifies with jwt-kit against the published JWKS and carries the contract's claims")
    func verifiesAgainstJWKS() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        try await harness.run { api, _ in
            let device = Device()
            let session = try await api.login(device)
            let jwks = try await api.call(.get, "/.well-known/jwks.json")
            let keys = try await JWTKeyCollection().add(jwksJSON: jwks.text)
            let claims = try await keys.verify(session.accessToken, as: BackendClaims.self)
            #expect(claims.sub.value == session["accountId"] as? String)
            #expect(claims.did == device.id)
            #expect(claims.aud.value == ["transfer-api"])
            #expect(claims.iss.value == "transfer-server")
            #expect(Int(claims.exp.value.timeIntervalSince(claims.iat.value)) == session["expiresIn"] as? Int)
            let header = try TokenText.parts(session.accessToken).header
            #expect(header["alg"] as? String == "EdDSA")
            #expect(header["typ"] as? String == "JWT")
            #expect(header["kid"] as? String != nil)
        }
    }

    @Test("an issuer and an audience with quotes, backslashes, slashes, control characters and non-ASCII come back from jwt-kit as configured")
    func escapedClaims() async throws {
        let issuer = "https://auth.example/\"a\\b\"\t\u{1}\u{8}\u{c}\u{7f}é", audience = "app \"ü\"\n/x 🙂"
        let harness = Harness { config in
            config.issuer = issuer
            config.audience = audience
        }
        defer { harness.database.remove() }
        try await harness.run { api, _ in
            let session = try await api.login(Device())
            let keys = try await JWTKeyCollection().add(jwksJSON: try await api.call(.get, "/.well-known/jwks.json").text)
            let claims = try await keys.verify(session.accessToken, as: BackendClaims.self)
            #expect(claims.iss.value == issuer)
            #expect(claims.aud.value == [audience])
            #expect(try await api.call(.get, "/v1/me", headers: [.authorization: "Bearer \(session.accessToken)"]).status == .ok)
        }
    }

    @Test("tokens with another key, alg none, HS256 with the public key, or altered claims are refused")
    func forgeries() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        try await harness.run { api, parts in
            let session = try await api.login(Device())
            let real = try session.accessToken
            #expect(try await api.me(real).status == .ok)
            let (header, payload) = try TokenText.parts(real)
            let keys = try await parts.store.execute(SigningKeysCommand(
                candidate: SigningKeyRecord(kid: "unused", algorithm: "EdDSA", privateKey: "", createdAt: harness.clock.now()),
                kek: nil, now: harness.clock.now())
            ).get()
            let key = try #require(keys.first, "no signing key in the store")
            let serverKey = try Curve25519.Signing.PrivateKey(rawRepresentation: try #require(Data(base64Encoded: key.privateKey)))
            let now = Int(harness.clock.now().seconds)
            func signed(_ p: [String: Any]) throws -> String {
                try Self.token(header, p) { try serverKey.signature(for: $0) }
            }
            var forged: [(String, String)] = []
            // Another Ed25519 key under the server's kid.
            let other = Curve25519.Signing.PrivateKey()
            forged.append(("another key", try Self.token(header, payload) { try other.signature(for: $0) }))
            // alg: none, no signature.
            var none = header
            none["alg"] = "none"
            forged.append(("alg none", Self.token(none, payload) { _ in Data() }))
            forged.append(("alg none, real signature kept", Self.b64(Self.json(none)) + "." + real.split(separator: ".")[1] + "." + real.split(separator: ".")[2]))
            // HS256 keyed with the public key (raw bytes and its base64url text).
            var hs = header
            hs["alg"] = "HS256"
            let pub = serverKey.publicKey.rawRepresentation
            for secret in [pub, Data(Self.b64(pub).utf8)] {
                forged.append(("HS256 with public key", Self.token(hs, payload) { Data(HMAC<SHA256>.authenticationCode(for: $0, using: SymmetricKey(data: secret))) }))
            }
            // The server's own key, but claims it would never issue.
            var expired = payload
            expired["exp"] = now - 1
            forged.append(("expired", try signed(expired)))
            var future = payload
            future["iat"] = now + 3600
            future["exp"] = now + 7200
            forged.append(("issued in the future", try signed(future)))
            var notYet = payload
            notYet["nbf"] = now + 3600
            forged.append(("not yet valid", try signed(notYet)))
            var audience = payload
            audience["aud"] = ["another-api"]
            forged.append(("other audience", try signed(audience)))
            var issuer = payload
            issuer["iss"] = "someone-else"
            forged.append(("other issuer", try signed(issuer)))
            var account = payload
            account["sub"] = UUID().uuidString.lowercased()
            forged.append(("other account", try signed(account)))
            // Tampered payload with the original signature.
            var tampered = payload
            tampered["did"] = UUID().uuidString.lowercased()
            forged.append(("tampered", Self.b64(Self.json(header)) + "." + Self.b64(Self.json(tampered)) + "." + real.split(separator: ".")[2]))
            forged.append(("garbage", "not-a-jwt"))
            forged.append(("two parts", "a.b"))

            for (what, token) in forged {
                let r = try await api.me(token)
                #expect(r.status == .unauthorized, "\(what) was accepted")
                #expect(r.error == "invalid_token", "\(what)")
                #expect(r.headers[.wwwAuthenticate] == "Bearer")
            }
            // The untouched token still works: the refusals above were about the forgeries.
            #expect(try await api.me(real).status == .ok)
            #expect(try await api.me(try signed(payload)).status == .ok)
        }
    }

    @Test("concurrent refreshes of one token yield at most one new pair", arguments: StoreKind.available)
    func concurrentRefresh(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let session = try await api.login(Device())
            let results = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        Int(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": session.refreshToken]).status.code)
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(results.filter { $0 == 200 }.count == 1, "the first refresh rotates the token; every later one is a reuse (401) that ends the session: \(results)")
            #expect(results.allSatisfy { $0 == 200 || $0 == 401 })
        }
    }
}
