import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore
import Synchronization
import TransferCore

/// What every JWT Apple signs for us carries; `AppleSignIn.check` verifies it.
protocol AppleSigned: JWTPayload {
    var iss: IssuerClaim { get }
    var aud: AudienceClaim { get }
    var iat: IssuedAtClaim { get }
    var expiry: Date? { get }
}

/// The claims of an Apple identity token we read. Every check is `AppleSignIn`'s, with the
/// service's clock and configuration: jwt-kit's `AppleIdentityToken.verify` hard-codes the
/// issuer and checks neither audience nor nonce.
struct AppleClaims: AppleSigned {
    var iss: IssuerClaim
    var aud: AudienceClaim
    var sub: SubjectClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim
    var nonce: String?
    var email: String?
    /// Apple sends these as booleans or as the strings "true" / "false".
    var email_verified: BoolClaim?
    var is_private_email: BoolClaim?

    var expiry: Date? { exp.value }
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A server-to-server notification: `events` is a JSON string inside the JWT.
struct AppleNotificationClaims: AppleSigned {
    var iss: IssuerClaim
    var aud: AudienceClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim?
    var jti: String
    var events: String

    var expiry: Date? { exp?.value }
    func verify(using algorithm: some JWTAlgorithm) async throws {}

    struct Event: Decodable {
        var type: String
        var sub: String
        var email: String?
        var is_private_email: BoolClaim?
    }
}

/// Sign in with Apple: verifies identity tokens and notifications against Apple's published keys.
struct AppleSignIn: Sendable {
    let configuration: AppleConfiguration
    let keys: AppleKeys
    /// nil without `--apple-team-id`, `--apple-key-id` and `--apple-private-key`: no code exchange.
    let tokens: AppleTokenClient?
    /// How far `exp` and `iat` may be off.
    static let leeway: Int64 = 60_000

    /// A check that failed, said in words.
    struct Refusal: Error { let why: String }

    /// A verified identity, or `invalid_identity_token` saying which check failed. With
    /// `nonce`, the token must carry its SHA-256 (that the nonce is ours and unused is the
    /// store's check, in the transaction that uses it).
    func verify(_ token: String, nonce: String?, now: Timestamp) async throws -> AppleIdentity {
        do {
            let claims = try await check(token, as: AppleClaims.self, named: "the identityToken", now: now)
            if let nonce {
                guard let carried = claims.nonce, carried == AppleNonces.claim(for: nonce) else {
                    throw Refusal(why: "the identityToken's nonce is not the SHA-256 of the nonce sent")
                }
            }
            return AppleIdentity(
                sub: claims.sub.value, email: claims.email, isPrivateEmail: claims.is_private_email?.value,
                clientID: claims.aud.value.first(where: configuration.clientIDs.contains))
        } catch let refusal as Refusal {
            throw TransferError.invalidIdentityToken(refusal.why)
        }
    }

    /// Apple's refresh token for a link's authorization code, when the exchange is configured
    /// and the app sent a code (without either, the link keeps no token to revoke).
    func grant(code: String?, identity: AppleIdentity, now: Timestamp) async throws -> AppleGrant? {
        guard let code, let tokens, let clientID = identity.clientID else { return nil }
        return try await tokens.exchange(code: code, clientID: clientID, verifier: self, now: now)
    }

    /// A verified notification (verified as identity tokens are, without a nonce), or `400 invalid_request`.
    func notification(_ payload: String, now: Timestamp) async throws -> AppleEvent {
        do {
            let claims = try await check(payload, as: AppleNotificationClaims.self, named: "the payload", now: now)
            guard let event = try? JSONDecoder().decode(AppleNotificationClaims.Event.self, from: Data(claims.events.utf8)) else {
                throw Refusal(why: "the payload's events claim is not an event")
            }
            return AppleEvent(
                jti: claims.jti, issuedAt: Timestamp(claims.iat.value), kind: AppleEvent.Kind(type: event.type), sub: event.sub, email: event.email,
                isPrivateEmail: event.is_private_email?.value)
        } catch let refusal as Refusal {
            throw APIError.invalidRequest("The payload is not a verified Apple notification: \(refusal.why).")
        }
    }

    /// Signature (RS256, a key Apple publishes, by `kid`), `iss`, `aud`, `exp` (when present)
    /// and `iat`, with this service's clock. `name` names the token in the refusal.
    func check<Claims: AppleSigned>(_ token: String, as: Claims.Type, named name: String, now: Timestamp) async throws -> Claims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count <= 8192, parts.count == 3, let headerBytes = Base64URL.decode(parts[0]),
            let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes))
        else { throw Refusal(why: "\(name) is not a JWT") }
        // Only RS256, Apple's algorithm: a token "signed" with HS256 and the public key, or
        // with none, never reaches a verifier.
        guard header.alg == "RS256" else { throw Refusal(why: "\(name) is not signed with RS256") }
        guard let kid = header.kid, !kid.isEmpty else { throw Refusal(why: "\(name) names no key (kid)") }
        guard let collection = try await keys.collection(for: kid) else {
            throw Refusal(why: "\(name) is signed with a key Apple does not publish")
        }
        let claims: Claims
        do {
            claims = try await collection.verify(token, as: Claims.self)
        } catch {
            throw Refusal(why: "\(name)'s signature does not verify")
        }
        guard claims.iss.value == configuration.issuer else { throw Refusal(why: "\(name)'s iss is not \(configuration.issuer)") }
        guard claims.aud.value.contains(where: configuration.clientIDs.contains) else {
            throw Refusal(why: "\(name)'s aud is not one of this service's client ids")
        }
        if let expiry = claims.expiry {
            guard now.milliseconds < Timestamp(expiry).milliseconds + Self.leeway else { throw Refusal(why: "\(name) has expired") }
        }
        guard Timestamp(claims.iat.value).milliseconds <= now.milliseconds + Self.leeway else {
            throw Refusal(why: "\(name)'s iat is in the future")
        }
        return claims
    }

    struct Header: Decodable {
        var alg: String
        var kid: String?
    }
}

/// Apple's published keys (JWKS), cached. A token naming a key not in the cache fetches them
/// again, at most once a minute (Apple publishes several and rotates them); when Apple cannot
/// be reached the last good keys stay.
final class AppleKeys: Sendable {
    let url: String
    let client: HTTPClient
    let clock: any WallClock
    let logger: Logger
    let refetchInterval: Duration

    private struct State {
        var keys: JWTKeyCollection?
        var kids: Set<String> = []
        var lastFetch: Timestamp?
        var inFlight: Task<Void, Never>?
    }
    private let state = Mutex(State())

    init(url: String, client: HTTPClient = .shared, clock: any WallClock, logger: Logger, refetchInterval: Duration = .seconds(60)) {
        self.url = url
        self.client = client
        self.clock = clock
        self.logger = logger
        self.refetchInterval = refetchInterval
    }

    /// The keys, if `kid` is among them (fetching them again if it is not and the last fetch
    /// is older than a minute); nil when Apple does not publish `kid`. Throws `unavailable`
    /// when no keys were ever fetched and Apple cannot be reached.
    func collection(for kid: String) async throws -> JWTKeyCollection? {
        enum Next { case found(JWTKeyCollection), wait(Task<Void, Never>), unknown }
        let now = clock.now()
        let next: Next = state.withLock { s in
            if s.kids.contains(kid), let keys = s.keys { return .found(keys) }
            if let task = s.inFlight { return .wait(task) }
            if let last = s.lastFetch, now < last + refetchInterval { return .unknown }
            s.lastFetch = now
            let task = Task { await self.fetch() }
            s.inFlight = task
            return .wait(task)
        }
        switch next {
        case .found(let keys): return keys
        case .unknown: return try known(kid)
        case .wait(let task):
            await task.value
            return try known(kid)
        }
    }

    private func known(_ kid: String) throws -> JWTKeyCollection? {
        try state.withLock { s in
            guard let keys = s.keys else {
                throw APIError(.serviceUnavailable, "unavailable", "Apple's keys cannot be fetched; try again shortly.", headers: [.retryAfter: "60"])
            }
            return s.kids.contains(kid) ? keys : nil
        }
    }

    private func fetch() async {
        defer { state.withLock { $0.inFlight = nil } }
        do {
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Accept", value: "application/json")
            let response = try await client.execute(request, timeout: .seconds(10))
            guard response.status == .ok else { throw FetchError(status: Int(response.status.code)) }
            let body = try await response.body.collect(upTo: 1 << 20)
            let jwks = try JSONDecoder().decode(JWKS.self, from: Data(buffer: body))
            let keys = JWTKeyCollection()
            var kids = Set<String>()
            for jwk in jwks.keys where jwk.keyType == .rsa {
                guard let kid = jwk.keyIdentifier?.string else { continue }
                try await keys.add(jwk: jwk)
                kids.insert(kid)
            }
            guard !kids.isEmpty else { throw FetchError(status: nil) }
            state.withLock {
                $0.keys = keys
                $0.kids = kids
            }
            logger.info("fetched Apple's keys", metadata: ["kids": "\(kids.sorted().joined(separator: ","))"])
        } catch {
            logger.warning("Apple's keys could not be fetched; keeping the last good ones", metadata: ["error.type": "\(type(of: error))"])
        }
    }

    struct FetchError: Error { let status: Int? }
}
