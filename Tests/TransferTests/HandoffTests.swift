import Foundation
import HTTPTypes
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Sibling apps: the signed-in host app hands its account to a sibling app with a one-time
/// code bound to the sibling's client id and its PKCE S256 challenge (contract v1.1).
@Suite("Sibling-app hand-off")
struct HandoffTests {
    static let news = Handoff.news, travel = Handoff.travel
    typealias PKCEPair = Handoff.PKCEPair

    static func configure(_ config: inout ServerConfiguration) {
        config.handoff = HandoffPolicy(clients: [news, travel])
    }


    /// The host asks for a code for `client` with `pkce`'s challenge; returns the code.
    static func code(_ api: Client, host token: String, client: String = news, pkce: PKCEPair) async throws -> String {
        let reply = try await api.call(
            .post, "/v1/handoff/codes", json: ["clientId": client, "codeChallenge": pkce.challenge, "codeChallengeMethod": "S256"], token: token)
        guard reply.status == .created else { throw reply.failure("the host could not create a hand-off code") }
        return try reply.string("code")
    }

    static func redeem(_ api: Client, code: String, verifier: String, client: String = news) async throws -> Reply {
        try await api.call(.post, "/v1/handoff/token", json: ["code": code, "codeVerifier": verifier, "clientId": client])
    }

    /// A host signed in on its phone, and a sibling session handed off from it.
    static func handedOff(_ api: Client, client: String = news) async throws -> (phone: Device, host: Reply, sibling: Reply) {
        let phone = Device()
        let host = try await api.login(phone)
        let pkce = PKCEPair()
        let sibling = try await redeem(api, code: try await code(api, host: try host.accessToken, client: client, pkce: pkce), verifier: pkce.verifier, client: client)
        guard sibling.status == .ok else { throw sibling.failure("the sibling could not redeem its code") }
        return (phone, host, sibling)
    }

    /// The claims of an access token (its payload, unverified: the server verified it).

    @Test("the whole hand-off: the sibling gets a session for the host's account with azp and did; it may read and refresh, not act for the host", arguments: StoreKind.available)
    func wholeHandoff(kind: StoreKind) async throws {
        try await withHarness(kind, configure: Self.configure) { harness in
            try await harness.run { api, _ in
                let phone = Device()
                let host = try await api.login(phone)
                let pkce = PKCEPair()
                let created = try await api.call(
                    .post, "/v1/handoff/codes", json: ["clientId": Self.news, "codeChallenge": pkce.challenge, "codeChallengeMethod": "S256"],
                    token: try host.accessToken)
                #expect(created.status == .created, "\(created.text)")
                let code = try created.string("code")
                #expect(code.count == 43, "256 random bits, base64url")
                #expect(created["expiresIn"] as? Int == 60)
                #expect(created.headers[.cacheControl] == "no-store")

                let sibling = try await Self.redeem(api, code: code, verifier: pkce.verifier)
                #expect(sibling.status == .ok, "\(sibling.text)")
                #expect(try sibling.accountID == (try host.accountID))
                #expect(sibling["deviceId"] as? String == phone.id)
                #expect(sibling["created"] as? Bool == false)
                #expect(try sibling.accounts.map { "\($0.id) \($0.current)" } == ["\(try host.accountID) true"], "a sibling holds the one account")
                let claims = try TokenText.claims(try sibling.accessToken)
                #expect(claims["azp"] as? String == Self.news)
                #expect(claims["did"] as? String == phone.id)
                #expect(claims["sub"] as? String == (try host.accountID))
                #expect(try TokenText.claims(try host.accessToken)["azp"] == nil, "the host app's tokens carry no azp")

                #expect(try await api.me(try sibling.accessToken).status == .ok)
                let refreshed = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": try sibling.refreshToken])
                #expect(refreshed.status == .ok, "\(refreshed.text)")
                #expect(try refreshed.refreshToken != (try sibling.refreshToken), "a sibling's refresh rotates")
                #expect(try TokenText.claims(try refreshed.accessToken)["azp"] as? String == Self.news)
                let token = try refreshed.accessToken

                // Acting for the host's device or account is the host app's.
                let refused: [(HTTPRequest.Method, String, [String: Any]?)] = [
                    (.put, "/v1/me/transfer", ["email": "sib@example.com", "temporaryPassword": "plum-harbor-71-sail"]),
                    (.delete, "/v1/me", nil),
                    (.get, "/v1/devices/accounts", nil),
                    (.put, "/v1/devices/push-token", ["provider": "fcm", "token": String(repeating: "f", count: 140)]),
                    (.post, "/v1/handoff/codes", ["clientId": Self.travel, "codeChallenge": PKCEPair().challenge, "codeChallengeMethod": "S256"]),
                ]
                for (method, path, body) in refused {
                    let reply = try await api.call(method, path, json: body, token: token)
                    #expect(reply.status == .forbidden && reply.error == "insufficient_scope", "\(method) \(path): \(reply.status) \(reply.text)")
                    #expect(reply.headers[.wwwAuthenticate] == #"Bearer error="insufficient_scope""#)
                }
                #expect(try await api.me(try host.accessToken)["migrationFlag"] as? Bool == false, "nothing the sibling tried changed the account")

                // Support sees the open sibling session, never its token.
                let shown = try CLI.transfer(["account", try host.accountID, "--json"], database: harness.databaseArgument)
                let report = try #require(try JSONSerialization.jsonObject(with: Data(shown.out.utf8)) as? [String: Any], "\(shown)")
                let listed = report["siblingSessions"] as? [[String: Any]]
                #expect(listed?.map { $0["clientId"] as? String } == [Self.news], "\(shown.out)")
                #expect(listed?.first?["deviceId"] as? String == phone.id)
                #expect(!shown.out.contains(try refreshed.refreshToken))

                // The sibling's logout ends its own session only.
                #expect(try await api.call(.post, "/v1/logout", token: token).status == .noContent)
                #expect(try await api.me(token).error == "invalid_token")
                #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": try refreshed.refreshToken]).status == .unauthorized)
                #expect(try await api.me(try host.accessToken).status == .ok, "the host stays signed in")
                let history = try CLI.transfer(["history", try host.accountID], database: harness.databaseArgument)
                #expect(history.out.contains("session.handoff"), "\(history.out)")
            }
        }
    }

    @Test("every failed redemption is one 400 invalid_grant and leaves the code usable; a second redemption revokes the first's session", arguments: StoreKind.available)
    func failures(kind: StoreKind) async throws {
        try await withServer(kind, configure: Self.configure) { api, harness in
            let host = try await api.login(Device())
            let pkce = PKCEPair()
            let code = try await Self.code(api, host: try host.accessToken, pkce: pkce)
            let attempts: [(String, Reply)] = [
                ("wrong verifier", try await Self.redeem(api, code: code, verifier: PKCEPair().verifier)),
                ("verifier too short", try await Self.redeem(api, code: code, verifier: "abc")),
                ("another sibling's client id", try await Self.redeem(api, code: code, verifier: pkce.verifier, client: Self.travel)),
                ("a client id not configured", try await Self.redeem(api, code: code, verifier: pkce.verifier, client: "com.evil.app")),
                ("an unknown code", try await Self.redeem(api, code: RandomToken.make(), verifier: pkce.verifier)),
            ]
            let first = attempts[0].1.text
            for (what, reply) in attempts {
                #expect(reply.status == .badRequest && reply.error == "invalid_grant", "\(what): \(reply.status) \(reply.text)")
                #expect(reply.text == first, "\(what): one body for every failure")
            }
            let sibling = try await Self.redeem(api, code: code, verifier: pkce.verifier)
            #expect(sibling.status == .ok, "failed attempts do not use the code up: \(sibling.text)")

            // Replayed with only the code (an interceptor): refused, and nothing is revoked.
            #expect(try await Self.redeem(api, code: code, verifier: PKCEPair().verifier).error == "invalid_grant")
            #expect(try await api.me(try sibling.accessToken).status == .ok)
            // Replayed with its verifier (RFC 6749 §4.1.2): refused, and the first session ends.
            #expect(try await Self.redeem(api, code: code, verifier: pkce.verifier).error == "invalid_grant")
            #expect(try await api.me(try sibling.accessToken).error == "invalid_token")
            #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": try sibling.refreshToken]).error == "invalid_refresh_token")
            #expect(try await api.me(try host.accessToken).status == .ok, "the host's session is not the code's")

            // Expired: 60 s by default.
            let late = PKCEPair()
            let lateCode = try await Self.code(api, host: try host.accessToken, pkce: late)
            harness.clock.advance(.seconds(61))
            let expired = try await Self.redeem(api, code: lateCode, verifier: late.verifier)
            #expect(expired.error == "invalid_grant", "\(expired.text)")
        }
    }

    @Test("the host's request: S256 only, a 43-character challenge, a configured client; off without --handoff-clients", arguments: StoreKind.available)
    func codeRequests(kind: StoreKind) async throws {
        try await withServer(kind, configure: Self.configure) { api, _ in
            let token = try await api.login(Device()).accessToken
            let challenge = PKCEPair().challenge
            func ask(_ body: [String: Any]) async throws -> Reply { try await api.call(.post, "/v1/handoff/codes", json: body, token: token) }
            let plain = try await ask(["clientId": Self.news, "codeChallenge": challenge, "codeChallengeMethod": "plain"])
            #expect(plain.status == .badRequest && plain.error == "invalid_request", "\(plain.text)")
            #expect(plain.text.contains("S256"))
            for wrong in [String(challenge.dropLast()), challenge + "A", String(challenge.dropLast()) + "="] {
                let reply = try await ask(["clientId": Self.news, "codeChallenge": wrong, "codeChallengeMethod": "S256"])
                #expect(reply.error == "invalid_request", "challenge \(wrong): \(reply.text)")
            }
            #expect(try await ask(["clientId": Self.news, "codeChallenge": challenge]).error == "invalid_request", "the method is required")
            let unknown = try await ask(["clientId": "com.evil.app", "codeChallenge": challenge, "codeChallengeMethod": "S256"])
            #expect(unknown.status == .forbidden && unknown.error == "unknown_client", "\(unknown.text)")
            let anonymous = try await api.call(
                .post, "/v1/handoff/codes", json: ["clientId": Self.news, "codeChallenge": challenge, "codeChallengeMethod": "S256"])
            #expect(anonymous.status == .unauthorized)
        }
        try await withServer(kind) { api, _ in
            let token = try await api.login(Device()).accessToken
            let codes = try await api.call(
                .post, "/v1/handoff/codes", json: ["clientId": Self.news, "codeChallenge": PKCEPair().challenge, "codeChallengeMethod": "S256"],
                token: token)
            #expect(codes.status == .notImplemented && codes.error == "not_configured", "\(codes.text)")
            let anonymous = try await api.call(.post, "/v1/handoff/codes", json: [:])
            #expect(anonymous.status == .notImplemented && anonymous.error == "not_configured", "before credentials: \(anonymous.text)")
            let redeemed = try await Self.redeem(api, code: RandomToken.make(), verifier: PKCEPair().verifier)
            #expect(redeemed.status == .notImplemented && redeemed.error == "not_configured")
        }
    }

    @Test("a sibling's session dies with the host's pair and with the host's logout", arguments: StoreKind.available)
    func diesWithHost(kind: StoreKind) async throws {
        try await withHarness(kind, configure: Self.configure) { harness in try await harness.run { api, parts in
            func gone(_ sibling: Reply, _ why: String) async throws {
                #expect(try await api.me(try sibling.accessToken).error == "invalid_token", "after \(why), the sibling's access token")
                let refresh = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": try sibling.refreshToken])
                #expect(refresh.error == "invalid_refresh_token", "after \(why), the sibling's refresh token: \(refresh.text)")
            }
            // The host's account is claimed by another phone.
            let moved = try await Self.handedOff(api)
            #expect(try await api.setUp(token: try moved.host.accessToken, email: "sib@example.com", password: "plum-harbor-71-sail").status == .created)
            #expect(try await api.claim(email: "sib@example.com", password: "plum-harbor-71-sail", device: Device()).status == .ok)
            try await gone(moved.sibling, "a claim by another phone")

            // The host logs out.
            let loggedOut = try await Self.handedOff(api)
            #expect(try await api.call(.post, "/v1/logout", token: try loggedOut.host.accessToken).status == .noContent)
            try await gone(loggedOut.sibling, "the host's logout")
            #expect(try await api.login(loggedOut.phone).status == .ok, "the host signs in again; the sibling must ask again")

            // Support revokes the host's phone.
            let stolen = try await Self.handedOff(api)
            _ = try await parts.service.revokeDevice(DeviceID(stolen.phone.id)!, by: .support(operator: "test"), reason: "stolen phone")
            try await gone(stolen.sibling, "support's revocation")

            // The account is deleted from the host.
            let deleted = try await Self.handedOff(api)
            #expect(try await api.call(.delete, "/v1/me", token: try deleted.host.accessToken).status == .noContent)
            try await gone(deleted.sibling, "the account's deletion")

            // A second hand-off to the same client replaces the first; another client's stays.
            let twice = try await Self.handedOff(api)
            let travel = PKCEPair()
            let other = try await Self.redeem(
                api, code: try await Self.code(api, host: try twice.host.accessToken, client: Self.travel, pkce: travel), verifier: travel.verifier,
                client: Self.travel)
            let again = PKCEPair()
            let replacement = try await Self.redeem(
                api, code: try await Self.code(api, host: try twice.host.accessToken, pkce: again), verifier: again.verifier)
            #expect(replacement.status == .ok)
            try await gone(twice.sibling, "a later hand-off to the same client")
            #expect(try await api.me(try other.accessToken).status == .ok, "the other sibling's session stays")
            #expect(try await api.me(try replacement.accessToken).status == .ok)
        } }
    }

    @Test("16 concurrent redemptions of one code: exactly one 200, and its session is revoked by the replays", arguments: StoreKind.available)
    func concurrentRedemptions(kind: StoreKind) async throws {
        try await withServer(kind, configure: Self.configure) { api, _ in
            let host = try await api.login(Device())
            let pkce = PKCEPair()
            let code = try await Self.code(api, host: try host.accessToken, pkce: pkce)
            let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                for _ in 0..<16 { group.addTask { try await Self.redeem(api, code: code, verifier: pkce.verifier) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let won = replies.filter { $0.status == .ok }
            #expect(won.count == 1, "statuses: \(replies.map(\.status.code).sorted())")
            #expect(replies.filter { $0.error == "invalid_grant" }.count == 15)
            if let winner = won.first {
                #expect(try await api.me(try winner.accessToken).error == "invalid_token", "the replays revoked the session the code opened")
            }
        }
    }

    @Test("a sibling app taken off --handoff-clients is shut out at once, and let back in when it returns", arguments: StoreKind.available)
    func clientRemoved(kind: StoreKind) async throws {
        try await withHarness(kind, configure: Self.configure) { harness in
            let sibling = LockedStrings()
            try await harness.run { api, _ in
                let handed = try await Self.handedOff(api).sibling
                sibling.add(try handed.accessToken, try handed.refreshToken)
            }
            var without = harness
            without.configuration.handoff = HandoffPolicy(clients: [Self.travel])
            try await without.run { api, _ async throws in
                #expect(try await api.me(sibling.all[0]).error == "invalid_token")
                #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": sibling.all[1]]).error == "invalid_refresh_token")
            }
            try await harness.run { api, _ async throws in
                #expect(try await api.me(sibling.all[0]).status == .ok, "the session was kept")
                #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": sibling.all[1]]).status == .ok)
            }
        }
    }

    @Test("expired hand-off codes and sibling sessions are pruned", arguments: StoreKind.available)
    func pruning(kind: StoreKind) async throws {
        try await withHarness(kind, configure: Self.configure) { harness in
            try await harness.run { api, parts in
                _ = try await Self.handedOff(api)
                _ = try await Self.code(api, host: try await api.login(Device()).accessToken, pkce: PKCEPair())
                func prune() async throws -> PruneCounts {
                    try #require(try await parts.store.prune(
                        PruneCutoffs(now: harness.clock.now(), retainedSince: harness.clock.now() - .seconds(86_400)), batchSize: 100))
                }
                #expect(try await prune().handoffCodes == 0, "codes are kept until they expire")
                harness.clock.advance(.seconds(61))
                #expect(try await prune().handoffCodes == 2, "the used code and the unused one expired")
                harness.clock.advance(ServerConfiguration().refreshTokenTTL)
                #expect(try await prune().expiredSessions == 3, "two hosts' sessions and the sibling's expired")
            }
        }
    }
}
