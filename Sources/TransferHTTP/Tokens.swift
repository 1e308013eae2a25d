import Crypto
import Synchronization
import Foundation
import JWTKit
import TransferCore

/// Claims of an access token.
struct AccessClaims: JWTPayload {
    var iss: IssuerClaim
    var aud: AudienceClaim
    var sub: SubjectClaim
    var did: String
    var sid: String
    /// A sibling app's session: its client id (the authorized party). Absent on the host app's tokens.
    var azp: String?
    var iat: IssuedAtClaim
    var exp: ExpirationClaim
    /// Never set by us; honoured when present.
    var nbf: NotBeforeClaim?

    /// Expiry is checked by `TokenService.verify` against the service's clock.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Signs access tokens with the deployment's current Ed25519 key (kept in the database, so
/// every node and every restart uses the same one) and verifies them with every published key.
/// A node builds a new one when the keys change (`SigningKeyWatcher`).
public struct TokenService: Sendable {
    let keys: JWTKeyCollection
    /// The current key, for signing on the login path without a trip through the actor and
    /// `JSONEncoder` (see `accessToken`), and the JWS header naming it, encoded once.
    let signingKey: Curve25519.Signing.PrivateKey
    let encodedHeader: String
    let publicKeys: [(kid: String, x: String)]
    let issuer: String
    let audience: String
    let accessTTL: Duration
    /// The current kid, then the published ones: a rebuild is due when this changes.
    let fingerprint: [String]
    /// Tokens signed and verified under these keys lately (see `accessToken(for:now:reuse:)` and `verify`).
    let memo = TokenMemo()

    /// Loads the signing keys from the store, creating the first one when there is none. With
    /// `kek`, plain keys are sealed under it first (and a new key is made sealed). Throws a
    /// `SigningKeyAtRestError` when a key is under another key-encryption key than `kek` (or
    /// any, without one), or one that signs or verifies does not open.
    public static func load(
        store: any TransferStore, kek: KeyEncryptionKey?, issuer: String, audience: String, accessTTL: Duration, now: Timestamp
    ) async throws -> TokenService {
        let records = try await store.execute(SigningKeysCommand(candidate: .generate(now: now, kek: kek), kek: kek, now: now)).get()
        if let problem = SigningKeysAtRest.problem(records, kek: kek) { throw problem }
        return try await make(records, kek: kek, issuer: issuer, audience: audience, accessTTL: accessTTL, now: now)
    }

    /// Signs with the current key of `records`; verifies with (and publishes) those published
    /// at `now`; sealed ones are opened with `kek`.
    static func make(
        _ records: [SigningKeyRecord], kek: KeyEncryptionKey?, issuer: String, audience: String, accessTTL: Duration, now: Timestamp
    ) async throws -> TokenService {
        guard let current = SigningKeys.current(records), let signing = try privateKey(current, kek) else { throw TokenError.noKey }
        let keys = JWTKeyCollection()
        var publics: [(String, String)] = []
        for record in SigningKeys.published(records, accessTTL: accessTTL, now: now) {
            guard let key = try privateKey(record, kek) else { continue }
            await keys.add(eddsa: EdDSA.PublicKey(backing: key.publicKey), kid: JWKIdentifier(string: record.kid))
            publics.append((record.kid, Base64URL.encode(key.publicKey.rawRepresentation)))
        }
        return TokenService(
            keys: keys, signingKey: signing,
            encodedHeader: Base64URL.encode(header(kid: current.kid)),
            publicKeys: publics, issuer: issuer, audience: audience, accessTTL: accessTTL,
            fingerprint: fingerprint(records, accessTTL: accessTTL, now: now))
    }

    /// The JWS header: `{"alg":"EdDSA","kid":…,"typ":"JWT"}`.
    static func header(kid: String) -> [UInt8] {
        var out = JSONOut()
        out.raw("{")
        out.member("alg", "EdDSA", first: true)
        out.member("kid", kid)
        out.member("typ", "JWT")
        out.raw("}")
        return out.bytes
    }

    static func fingerprint(_ records: [SigningKeyRecord], accessTTL: Duration, now: Timestamp) -> [String] {
        [SigningKeys.current(records)?.kid ?? ""] + SigningKeys.published(records, accessTTL: accessTTL, now: now).map(\.kid)
    }

    private static func privateKey(_ record: SigningKeyRecord, _ kek: KeyEncryptionKey?) throws -> Curve25519.Signing.PrivateKey? {
        guard record.algorithm == "EdDSA" else { return nil }
        return try Curve25519.Signing.PrivateKey(rawRepresentation: try record.rawPrivateKey(kek))
    }

    /// The kid that signs.
    var currentKid: String { fingerprint[0] }

    enum TokenError: Error { case noKey }

    /// A signed access token for a session: a compact JWS (RFC 7515) with EdDSA (RFC 8037),
    /// and when it expires.
    ///
    /// Built here rather than by `JWTKeyCollection.sign`: on the auto-login path the generic
    /// `JSONEncoder` of header and claims plus the actor hop cost more than the Ed25519
    /// signature itself (BENCHMARKS.md, profile). The claims are the same `AccessClaims`
    /// that `verify` decodes with jwt-kit, and the tests verify every token with jwt-kit.
    ///
    /// With `reuse` (a login), the token this node signed for the same session is handed out
    /// again while at least two thirds of its lifetime remain (contract v1.3): the signature
    /// was a tenth of a launch that writes nothing. The caller has just read that the session
    /// is open; a revoked session's id never opens again, so its tokens are never handed out.
    func accessToken(for grant: SessionGrant, now: Timestamp, reuse: Bool = false) throws -> TokenMemo.Issued {
        let session = grant.sessionID + "\u{0}" + grant.deviceID + "\u{0}" + grant.account.accountID + "\u{0}" + (grant.clientID ?? "")
        let lifetime = accessTTL.components.seconds
        if reuse, let earlier = memo.issued(for: session, since: now.seconds - lifetime / 3), earlier.issuedAt <= now.seconds {
            return earlier
        }
        var payload = JSONOut()
        payload.raw("{")
        payload.member("iss", issuer, first: true)
        payload.key("aud")
        payload.raw("[")
        payload.string(audience)
        payload.raw("]")
        payload.member("sub", grant.account.accountID)
        payload.member("did", grant.deviceID)
        payload.member("sid", grant.sessionID)
        if let client = grant.clientID { payload.member("azp", client) }
        payload.member("iat", Int(now.seconds))
        payload.member("exp", Int((now + accessTTL).seconds))
        payload.raw("}")
        let input = encodedHeader + "." + Base64URL.encode(payload.bytes)
        let signature = try signingKey.signature(for: Array(input.utf8))
        let token = TokenMemo.Issued(
            token: input + "." + Base64URL.encode(signature), issuedAt: now.seconds, expiresAt: (now + accessTTL).seconds)
        memo.remember(token, for: session)
        return token
    }

    /// Verifies signature, algorithm, `kid`, expiry, issuer and audience; `nil` for any failure.
    /// A token whose signature this service verified before is taken from the memo (the same
    /// bytes under the same keys verify the same way); its times are checked again each time.
    func verify(_ token: String, now: Timestamp) async -> AccessClaims? {
        let claims: AccessClaims
        if let known = memo.claims(of: token) {
            claims = known
        } else {
            guard let verified = try? await keys.verify(token, as: AccessClaims.self) else { return nil }
            memo.remember(verified, of: token)
            claims = verified
        }
        guard claims.iss.value == issuer, claims.aud.value.contains(audience) else { return nil }
        guard now.date < claims.exp.value, claims.iat.value.timeIntervalSince(now.date) < 60 else { return nil }
        if let nbf = claims.nbf, nbf.value.timeIntervalSince(now.date) > 60 { return nil }
        return claims
    }

    /// `/.well-known/jwks.json`.
    var jwksJSON: [UInt8] {
        let keys = publicKeys.map { ["kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "kid": $0.kid, "x": $0.x] }
        return (try? [UInt8](JSONSerialization.data(withJSONObject: ["keys": keys], options: [.sortedKeys, .withoutEscapingSlashes]))) ?? []
    }

}

/// The token service, loaded from the database once the database client runs (before the
/// server accepts requests).
public final class TokenBox: Sendable {
    private let value = Mutex<TokenService?>(nil)
    public init() {}

    func set(_ service: TokenService) { value.withLock { $0 = service } }

    /// True once the server is prepared: migrated, its signing key loaded.
    var isLoaded: Bool { value.withLock { $0 != nil } }

    var tokens: TokenService {
        get throws {
            guard let service = value.withLock({ $0 }) else {
                throw APIError(.serviceUnavailable, "not_ready", "The service is starting; try again shortly.")
            }
            return service
        }
    }
}
