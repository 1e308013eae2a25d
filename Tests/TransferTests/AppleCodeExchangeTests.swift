import Foundation
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.1, "Sign in with Apple", with the team's key configured: the link exchanges the
/// authorization code and keeps Apple's refresh token, which is revoked at Apple (after the
/// commit, from the outbox) when the link goes. Against the fake Apple's token and revoke
/// endpoints, on every store.
@Suite("Sign in with Apple: the code exchange and revocation")
struct AppleCodeExchangeTests {
    /// A server doing the code exchange against a fake Apple that keeps the harness's time.
    func withExchange(
        _ kind: StoreKind, configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (Client, FakeApple, Harness) async throws -> Void
    ) async throws {
        try await FakeApple.run { apple in
            try await withServer(kind, configure: { apple.configure(&$0, codeExchange: true); configure(&$0) }) { api, harness in
                let clock = harness.clock
                apple.clock.withLock { $0 = { clock.now() } }
                try await body(api, apple, harness)
            }
        }
    }

    /// `PUT /v1/me/apple` for `sub`, with `code` as the authorization code.
    func link(_ api: Client, _ apple: FakeApple, _ harness: Harness, _ access: String, sub: String, code: String?) async throws -> Reply {
        let nonce = try await api.appleNonce()
        var body: [String: Any] = [
            "identityToken": try apple.token(apple.claims(sub: sub, nonce: nonce, now: harness.clock.now())), "nonce": nonce,
        ]
        if let code { body["authorizationCode"] = code }
        return try await api.call(.put, "/v1/me/apple", json: body, token: access)
    }


    @Test("the link keeps Apple's refresh token out of every answer and log; another Apple ID, unlink and deletion revoke the one kept",
          arguments: StoreKind.available)
    func keptAndRevoked(kind: StoreKind) async throws {
        try await withExchange(kind) { api, apple, harness in
            let session = try await api.login(Device())
            let access = try session.accessToken
            let first = "001234.exchange-1.0101"
            let linked = try await link(api, apple, harness, access, sub: first, code: apple.authorizationCode(sub: first))
            #expect(linked.status == .created, "\(linked.text) (fake Apple refused the client secret for: \(apple.lastRefusal.withLock { $0 } ?? "nothing"))")
            let t1 = try #require(apple.refreshTokens(for: first).first, "the link exchanged its code at the fake Apple")
            let me = try await api.me(access)
            #expect(!linked.text.contains(t1) && !me.text.contains(t1), "Apple's refresh token is never answered")

            // Signed in again with a new code: the new token is kept, the old one dropped. Not
            // revoked: Apple would end the user's authorization of the app with it.
            let again = try await link(api, apple, harness, access, sub: first, code: apple.authorizationCode(sub: first))
            #expect(again.status == .ok, "\(again.text)")
            let t2 = try #require(apple.refreshTokens(for: first).last)

            // Another Apple ID replaces the link: the first one leaves, its kept token is revoked.
            let second = "001234.exchange-2.0101"
            #expect(try await link(api, apple, harness, access, sub: second, code: apple.authorizationCode(sub: second)).status == .created)
            let t3 = try #require(apple.refreshTokens(for: second).first)
            #expect(try await apple.eventuallyRevoked(t2), "the replaced Apple ID's token is revoked")
            let revocation = try #require(apple.revocations.withLock { $0.first })
            #expect(revocation.clientID == FakeApple.bundleID && revocation.hint == "refresh_token", "\(revocation)")
            #expect(!apple.revokedTokens.contains(t1), "the token replaced by a new code of the same Apple ID is not revoked")

            #expect(try await api.call(.delete, "/v1/me/apple", token: access).status == .noContent)
            #expect(try await apple.eventuallyRevoked(t3), "unlink revokes")

            let third = "001234.exchange-3.0101"
            #expect(try await link(api, apple, harness, access, sub: third, code: apple.authorizationCode(sub: third)).status == .created)
            let t4 = try #require(apple.refreshTokens(for: third).first)
            #expect(try await api.call(.delete, "/v1/me", token: access).status == .noContent)
            #expect(try await apple.eventuallyRevoked(t4), "deleting the account revokes (App Store guideline 5.1.1(v))")

            let logs = harness.logs.all
            for token in [t1, t2, t3, t4] {
                #expect(!logs.contains(token), "a refresh token reached the log")
            }
        }
    }

    @Test("a code Apple refuses, or one for another Apple ID, links nothing (400) and revokes nothing; without a code the link keeps no token",
          arguments: StoreKind.available)
    func refusedCodes(kind: StoreKind) async throws {
        try await withExchange(kind) { api, apple, harness in
            let mia = try await api.login(Device()), noah = try await api.login(Device())
            let code = apple.authorizationCode(sub: "001234.mia.0101")
            #expect(try await link(api, apple, harness, try mia.accessToken, sub: "001234.mia.0101", code: code).status == .created)

            let reused = try await link(api, apple, harness, try noah.accessToken, sub: "001234.noah.0101", code: code)
            #expect(reused.status == .badRequest && reused.error == "invalid_request", "a used code: \(reused.text)")
            #expect(reused.text.contains("authorizationCode"), "the message names the field: \(reused.text)")

            let webCode = apple.authorizationCode(sub: "001234.noah.0101", clientID: FakeApple.servicesID)
            let otherApp = try await link(api, apple, harness, try noah.accessToken, sub: "001234.noah.0101", code: webCode)
            #expect(otherApp.error == "invalid_request", "a code of the web client with the iOS app's identity token: \(otherApp.text)")

            let strangers = apple.authorizationCode(sub: "001234.stranger.0101")
            let mixed = try await link(api, apple, harness, try noah.accessToken, sub: "001234.noah.0101", code: strangers)
            #expect(mixed.status == .badRequest && mixed.text.contains("another Apple ID"), "\(mixed.text)")
            #expect(try await api.me(try noah.accessToken)["apple"] is NSNull, "nothing was linked")
            #expect(apple.revokedTokens.isEmpty, "a refused link revokes nothing: at Apple that would end its owner's authorization")

            let plain = try await link(api, apple, harness, try noah.accessToken, sub: "001234.noah.0101", code: nil)
            #expect(plain.status == .created, "the code is optional: \(plain.text)")
            #expect(apple.refreshTokens(for: "001234.noah.0101").isEmpty)
        }
    }

    @Test("Apple's token endpoint unreachable: 503 with Retry-After, nothing linked")
    func tokenEndpointDown() async throws {
        let port = try await FakeWebhookReceiver.closedPort()
        try await withExchange(.sqlite, configure: { $0.apple?.tokenURL = "http://127.0.0.1:\(port)/auth/token" }) { api, apple, harness in
            let session = try await api.login(Device())
            let reply = try await link(api, apple, harness, try session.accessToken, sub: "001234.down.0101", code: apple.authorizationCode(sub: "001234.down.0101"))
            #expect(reply.status == .serviceUnavailable && reply.error == "unavailable", "\(reply.text)")
            #expect(reply.headers[.retryAfter] == "60")
            #expect(try await api.me(try session.accessToken)["apple"] is NSNull)
        }
    }

    @Test("a revocation Apple does not take is sent again after the backoff", arguments: [StoreKind.sqlite])
    func revocationRetried(kind: StoreKind) async throws {
        try await withExchange(kind) { api, apple, harness in
            let session = try await api.login(Device())
            let sub = "001234.retry.0101"
            #expect(try await link(api, apple, harness, try session.accessToken, sub: sub, code: apple.authorizationCode(sub: sub)).status == .created)
            let token = try #require(apple.refreshTokens(for: sub).first)
            apple.revokeStatus.withLock { $0 = .serviceUnavailable }
            #expect(try await api.call(.delete, "/v1/me/apple", token: try session.accessToken).status == .noContent)
            var tried = false
            for _ in 0..<200 where !tried {
                tried = apple.revokeAttempts.load(ordering: .relaxed) > 0
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(tried, "the first revocation was attempted")
            apple.revokeStatus.withLock { $0 = .ok }
            // Moved on while polling: the failure may be recorded (and the next attempt set 5 s
            // after it) a moment after the fake answered.
            var again = false
            for _ in 0..<100 where !again {
                harness.clock.advance(.seconds(6))
                try await Task.sleep(for: .milliseconds(100))
                again = apple.revokedTokens.contains(token)
            }
            #expect(again, "sent again once the first wait (5 s) has passed")
        }
    }
}
