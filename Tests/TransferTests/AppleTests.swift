import Foundation
import Testing
import TransferCore
import TransferHTTP
import _CryptoExtras
@testable import TransferTestSupport

/// Contract v1.1, "Sign in with Apple": linking an account, against a fake Apple on a local
/// socket (no test needs the internet), on every store.
@Suite("Sign in with Apple")
struct AppleTests {
    /// A server with Sign in with Apple pointed at a fake Apple.
    func withApple(_ kind: StoreKind, _ body: @Sendable (Client, FakeApple, Harness) async throws -> Void) async throws {
        try await FakeApple.run { apple in
            try await withServer(kind, configure: { apple.configure(&$0) }) { api, harness in
                try await body(api, apple, harness)
            }
        }
    }

    @Test("link, link again, GET /v1/me shows it, unlink", arguments: StoreKind.available)
    func linkAndUnlink(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let session = try await api.login(Device())
            let access = try session.accessToken
            let nonce = try await api.appleNonce()
            let sub = "001234.\(UUID().uuidString.prefix(8)).0101"
            let linked = try await api.linkApple(access, token: try apple.token(apple.claims(sub: sub, nonce: nonce, now: harness.clock.now())), nonce: nonce)
            #expect(linked.status == .created, "\(linked.text)")
            #expect(linked["email"] as? String == "mia@privaterelay.appleid.com")
            #expect(linked["isPrivateEmail"] as? Bool == true)
            let me = try await api.me(access)
            let link = try #require(try me.json["apple"] as? [String: Any], "\(me.text)")
            #expect(link["linkedAt"] as? String != nil && link["email"] as? String == "mia@privaterelay.appleid.com")
            #expect(me["waysBack"] as? [String] == ["apple"], "the Apple ID is a way back: \(me.text)")

            // The second sign-in carries no email (Apple sends it once): the stored one stays.
            let again = try await api.appleNonce()
            let second = try await api.linkApple(
                access, token: try apple.token(apple.claims(sub: sub, nonce: again, now: harness.clock.now(), email: nil)), nonce: again)
            #expect(second.status == .ok, "already linked to this account: \(second.text)")
            #expect(second["email"] as? String == "mia@privaterelay.appleid.com", "never overwritten with null")

            #expect(try await api.call(.delete, "/v1/me/apple", token: access).status == .noContent)
            let unlinked = try await api.me(access)
            #expect(unlinked["apple"] is NSNull, "unlinked")
            #expect(unlinked["waysBack"] as? [String] == [], "no way back left: \(unlinked.text)")
            #expect(try await api.call(.delete, "/v1/me/apple", token: access).status == .noContent, "again: nothing to unlink, still 204")
        }
    }

    @Test("an Apple ID linked to another account is refused; the second allowed audience and the string \"true\" are accepted", arguments: StoreKind.available)
    func inUseAndAudiences(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let mia = try await api.login(Device()), other = try await api.login(Device())
            let sub = "001234.shared.0101"
            let n1 = try await api.appleNonce()
            var claims = apple.claims(sub: sub, nonce: n1, now: harness.clock.now())
            claims["aud"] = FakeApple.servicesID  // a web sign-in carries the services id
            claims["is_private_email"] = "false"
            claims["email_verified"] = "true"
            let linked = try await api.linkApple(try mia.accessToken, token: try apple.token(claims), nonce: n1)
            #expect(linked.status == .created, "\(linked.text)")
            #expect(linked["isPrivateEmail"] as? Bool == false, "\"false\" as a string: \(linked.text)")
            let n2 = try await api.appleNonce()
            let taken = try await api.linkApple(try other.accessToken, token: try apple.token(apple.claims(sub: sub, nonce: n2, now: harness.clock.now())), nonce: n2)
            #expect(taken.status == .conflict && taken.error == "apple_id_in_use", "\(taken.text)")
        }
    }

    @Test("identity tokens that fail a check are refused with the check named", arguments: StoreKind.available)
    func refusedTokens(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let session = try await api.login(Device())
            let access = try session.accessToken
            let now = harness.clock.now()
            func attempt(_ edit: (inout [String: Any]) -> Void, forge: Bool = false) async throws -> Reply {
                let nonce = try await api.appleNonce()
                var claims = apple.claims(sub: "001234.refused.0101", nonce: nonce, now: now)
                edit(&claims)
                let token = forge ? try apple.hs256Forgery(claims) : try apple.token(claims)
                return try await api.linkApple(access, token: token, nonce: nonce)
            }
            let cases: [(String, (inout [String: Any]) -> Void, Bool, String)] = [
                ("wrong audience", { $0["aud"] = "com.attacker.app" }, false, "aud"),
                ("wrong issuer", { $0["iss"] = "https://evil.example.com" }, false, "iss"),
                ("expired beyond the leeway", { $0["exp"] = now.seconds - 61 }, false, "expired"),
                ("iat in the future", { $0["iat"] = now.seconds + 120 }, false, "future"),
                ("nonce of another request", { $0["nonce"] = AppleNonces.claim(for: "someone-else") }, false, "nonce"),
                ("no nonce in the token", { $0["nonce"] = nil }, false, "nonce"),
                ("HS256 keyed with Apple's public key", { _ in }, true, "RS256"),
            ]
            for (name, edit, forge, word) in cases {
                let reply = try await attempt(edit, forge: forge)
                #expect(reply.status == .unauthorized && reply.error == "invalid_identity_token", "\(name): \(reply.text)")
                #expect(reply.text.contains(word), "\(name): the message names the check: \(reply.text)")
            }
            let late = try await attempt { $0["exp"] = now.seconds - 30 }
            #expect(late.status == .created, "expired 30 s ago is within the 60 s leeway: \(late.text)")
            #expect(try await api.me(access)["apple"] is [String: Any])
        }
    }

    @Test("nonces are ours and single use: missing, unknown, reused and expired ones are refused", arguments: StoreKind.available)
    func nonces(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let session = try await api.login(Device())
            let access = try session.accessToken
            let issued = try await api.call(.post, "/v1/apple/nonce")
            #expect(issued.status == .created && issued["expiresIn"] as? Int == 300, "\(issued.text)")
            #expect(try await api.call(.post, "/v1/apple/nonce", json: [:]).status == .created, "{} is fine too")

            let missing = try await api.call(
                .put, "/v1/me/apple", json: ["identityToken": try apple.token(apple.claims(sub: "s1", nonce: "x", now: harness.clock.now()))], token: access)
            #expect(missing.error == "invalid_request", "\(missing.text)")
            let unknown = "a-nonce-we-never-issued"
            let made = try await api.linkApple(access, token: try apple.token(apple.claims(sub: "s1", nonce: unknown, now: harness.clock.now())), nonce: unknown)
            #expect(made.error == "invalid_identity_token" && made.text.contains("not issued"), "\(made.text)")

            let nonce = try await api.appleNonce()
            let token = try apple.token(apple.claims(sub: "s1", nonce: nonce, now: harness.clock.now()))
            #expect(try await api.linkApple(access, token: token, nonce: nonce).status == .created)
            let replay = try await api.linkApple(access, token: token, nonce: nonce)
            #expect(replay.error == "invalid_identity_token", "a token replayed with its used nonce: \(replay.text)")

            let old = try await api.appleNonce()
            harness.clock.advance(.seconds(301))
            let stale = try await api.linkApple(access, token: try apple.token(apple.claims(sub: "s1", nonce: old, now: harness.clock.now())), nonce: old)
            #expect(stale.error == "invalid_identity_token", "a nonce older than five minutes: \(stale.text)")
        }
    }

    @Test("a key Apple starts publishing is fetched; an unknown kid refetches at most once a minute; Apple down keeps the last keys", arguments: StoreKind.available)
    func keyRotation(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let session = try await api.login(Device())
            let access = try session.accessToken
            func link(_ sub: String, key: FakeApple.Key? = nil, kid: String? = nil) async throws -> Reply {
                let nonce = try await api.appleNonce()
                return try await api.linkApple(
                    access, token: try apple.token(apple.claims(sub: sub, nonce: nonce, now: harness.clock.now()), key: key, kid: kid), nonce: nonce)
            }
            #expect(try await link("s-1").status == .created)
            #expect(apple.fetches.load(ordering: .relaxed) == 1, "fetched on first use")
            #expect(try await link("s-1").status == .ok)
            #expect(apple.fetches.load(ordering: .relaxed) == 1, "cached")

            let rotated = try apple.rotate()
            #expect(try await link("s-1", key: rotated).error == "invalid_identity_token", "a new kid within a minute of the fetch: not fetched yet")
            #expect(apple.fetches.load(ordering: .relaxed) == 1)
            harness.clock.advance(.seconds(61))
            #expect(try await link("s-1", key: rotated).status == .ok, "a minute later a new kid is fetched, and found")
            #expect(apple.fetches.load(ordering: .relaxed) == 2)

            let bogus = try await link("s-1", kid: "no-such-key")
            #expect(bogus.error == "invalid_identity_token", "\(bogus.text)")
            #expect(try await link("s-1", kid: "no-such-key-either").error == "invalid_identity_token")
            #expect(apple.fetches.load(ordering: .relaxed) == 2, "unknown kids within a minute of the last fetch do not fetch again")

            apple.up.withLock { $0 = false }
            #expect(try await link("s-1").status == .ok, "Apple down: the cached keys still verify")
        }
    }

    @Test("Apple unreachable before any key was fetched: 503, not a verdict on the token")
    func appleUnreachable() async throws {
        try await withApple(.sqlite) { api, apple, harness in
            apple.up.withLock { $0 = false }
            let session = try await api.login(Device())
            let nonce = try await api.appleNonce()
            let reply = try await api.linkApple(
                try session.accessToken, token: try apple.token(apple.claims(sub: "s", nonce: nonce, now: harness.clock.now())), nonce: nonce)
            #expect(reply.status == .serviceUnavailable && reply.headers[.retryAfter] != nil, "\(reply.text)")
        }
    }

    @Test("an account linked to an Apple ID may leave its only phone: the Apple ID is its way back", arguments: StoreKind.available)
    func removalWithAppleLink(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let phone = Device()
            let first = try await api.login(phone)
            let second = try await api.login(phone, newAccount: true)
            #expect(try await api.remove(try second.accessToken, account: try first.accountID).error == "account_would_be_lost")
            let nonce = try await api.appleNonce()
            _ = try await api.linkApple(try first.accessToken, token: try apple.token(apple.claims(sub: "s-way-back", nonce: nonce, now: harness.clock.now())), nonce: nonce)
            #expect(try await api.remove(try second.accessToken, account: try first.accountID).status == .noContent)
        }
    }

    @Test("transfer account shows the linked Apple ID: email, private relay or not, when; never Apple's user id", arguments: StoreKind.available)
    func supportSeesLink(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let session = try await api.login(Device())
            let nonce = try await api.appleNonce()
            let sub = "001234.support-sees.0101"
            _ = try await api.linkApple(try session.accessToken, token: try apple.token(apple.claims(sub: sub, nonce: nonce, now: harness.clock.now())), nonce: nonce)
            let json = try CLI.transfer(["account", try session.accountID, "--json"], database: harness.databaseArgument)
            let link = try #require(try json.json["apple"] as? [String: Any], "\(json)")
            #expect(link["email"] as? String == "mia@privaterelay.appleid.com" && link["isPrivateEmail"] as? Bool == true)
            let text = try CLI.transfer(["account", try session.accountID], database: harness.databaseArgument)
            #expect(text.out.contains("Apple ID") && text.out.range(of: #"private relay\s+yes"#, options: .regularExpression) != nil, "\(text.out)")
            #expect(!text.out.contains(sub) && !json.out.contains(sub))
        }
    }

    /// Links a fresh account on a fresh phone to `sub`; returns the phone and its session.
    func linkedPhone(_ api: Client, _ apple: FakeApple, _ harness: Harness, sub: String) async throws -> (Device, Reply) {
        let phone = Device()
        let session = try await api.login(phone)
        let nonce = try await api.appleNonce()
        let linked = try await api.linkApple(try session.accessToken, token: try apple.token(apple.claims(sub: sub, nonce: nonce, now: harness.clock.now())), nonce: nonce)
        try #require(linked.status == .created, "\(linked.text)")
        return (phone, session)
    }

    func move(_ api: Client, _ apple: FakeApple, _ harness: Harness, sub: String, to device: Device, options: [String: Any] = [:], nonce: String? = nil) async throws -> Reply {
        let given = nonce
        let nonce: String
        if let given { nonce = given } else { nonce = try await api.appleNonce() }
        var body: [String: Any] = [
            "identityToken": try apple.token(apple.claims(sub: sub, nonce: nonce, now: harness.clock.now(), email: nil)), "nonce": nonce,
            "deviceId": device.id, "deviceSecret": device.secret,
        ]
        body.merge(options) { $1 }
        return try await api.call(.post, "/v1/transfers/apple", json: body)
    }

    @Test("the old phone was lost: Sign in with Apple on the new phone brings the account over, as a claim would", arguments: StoreKind.available)
    func moveToNewPhone(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let sub = "001234.moving.0101"
            let (a, session) = try await linkedPhone(api, apple, harness, sub: sub)
            let account = try session.accountID
            // A transfer was set up before the phone was lost; the Apple move makes it moot.
            #expect(try await api.setUp(token: try session.accessToken, email: "mia@example.com", password: "plum-harbor-71-sail").status == .created)
            let b = Device()
            let moved = try await move(api, apple, harness, sub: sub, to: b)
            #expect(moved.status == .ok, "\(moved.text)")
            #expect(try moved.accountID == account && moved["migrationFlag"] as? Bool == false)
            #expect(try await api.login(a).error == "device_transferred", "the old phone is told")
            #expect(try await api.login(b).accountID == account, "B auto-logs in to the account from then on")
            let claim = try await api.claim(email: "mia@example.com", password: "plum-harbor-71-sail", device: Device())
            #expect(claim.error == "invalid_transfer_credentials", "the pending transfer was cancelled: \(claim.text)")
            let me = try await api.me(try moved.accessToken)
            let link = try me.json["apple"] as? [String: Any]
            #expect(me["migrationFlag"] as? Bool == false && link != nil, "\(me.text)")
            #expect(me["transferId"] as? String == b.id)
            let history = try CLI.transfer(["history", account, "--json"], database: harness.databaseArgument)
            let kinds = (try history.json["events"] as? [[String: Any]])?.compactMap { $0["kind"] as? String } ?? []
            #expect(kinds.suffix(3).sorted() == ["apple.moved", "device.moved", "transfer.cancelled"], "\(kinds)")
        }
    }

    @Test("a move with Apple answers the claim's device errors, and 404 for an Apple ID no account is linked to", arguments: StoreKind.available)
    func moveErrors(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let sub = "001234.errors.0101"
            let (_, session) = try await linkedPhone(api, apple, harness, sub: sub)
            let nobody = try await move(api, apple, harness, sub: "001234.nobody.0101", to: Device())
            #expect(nobody.status == .notFound && nobody.error == "apple_id_not_linked", "\(nobody.text)")

            // A phone that has its own account: the claim's rules.
            let c = Device()
            let own = try await api.login(c)
            #expect(try await move(api, apple, harness, sub: sub, to: c).error == "device_has_account")
            // Its own account has no way back: replacing it would strand it, unless abandoned (contract v1.3).
            #expect(try await move(api, apple, harness, sub: sub, to: c, options: ["replaceExistingAccount": true]).error == "account_would_be_lost")
            #expect(try await move(api, apple, harness, sub: sub, to: c, options: ["abandonExisting": true]).error == "invalid_request")
            #expect(try await move(api, apple, harness, sub: sub, to: c, options: ["addAccount": true, "replaceExistingAccount": true]).error == "invalid_request")
            #expect(try await move(api, apple, harness, sub: sub, to: Device(id: c.id, secret: RandomToken.make())).error == "invalid_device_credentials")
            let added = try await move(api, apple, harness, sub: sub, to: c, options: ["addAccount": true])
            #expect(added.status == .ok, "\(added.text)")
            #expect(try added.accountIDs == [try own.accountID, try session.accountID], "beside the phone's own account")
            // The same move again is a repeat (its answer may have been lost), with no time limit (contract v1.3).
            let repeated = try await move(api, apple, harness, sub: sub, to: c)
            #expect(repeated.status == .ok, "\(repeated.text)")
            #expect(try repeated.accountID == (try session.accountID))
            #expect(Set(try repeated.accountIDs) == [try own.accountID, try session.accountID], "nothing changed: \(repeated.text)")
            harness.clock.advance(.seconds(10 * 60 + 1))
            let later = try await move(api, apple, harness, sub: sub, to: c)
            #expect(later.status == .ok, "after 10 minutes still the winner's repeat: \(later.text)")

            // A nonce is used once, also when the move fails.
            let nonce = try await api.appleNonce()
            #expect(try await move(api, apple, harness, sub: "001234.nobody.0101", to: Device(), nonce: nonce).error == "apple_id_not_linked")
            #expect(try await move(api, apple, harness, sub: sub, to: Device(), nonce: nonce).error == "invalid_identity_token")
        }
    }

    @Test("Apple's notifications: consent revoked and account deleted unlink, email off and on follow; a repeated jti and a bad signature", arguments: StoreKind.available)
    func notifications(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let sub = "001234.notified.0101"
            let (_, session) = try await linkedPhone(api, apple, harness, sub: sub)
            let access = try session.accessToken
            func post(_ body: [String: Any]) async throws -> Reply { try await api.call(.post, "/v1/apple/notifications", json: body) }
            func link() async throws -> [String: Any]? { try await api.me(access).json["apple"] as? [String: Any] }
            let now = harness.clock.now()

            #expect(try await post(apple.notification("email-disabled", sub: sub, now: now)).status == .ok)
            #expect(try await post(apple.notification("email-enabled", sub: sub, now: now, extra: ["is_private_email": "true"])).status == .ok)
            #expect(try await link() != nil)
            #expect(try await post(apple.notification("some-future-type", sub: sub, now: now)).status == .ok, "an unknown type is acknowledged")
            let old = now - .seconds(31 * 86_400)
            #expect(try await post(apple.notification("consent-revoked", sub: sub, now: old)).status == .ok, "an old notification: 200")
            #expect(try await link() != nil, "signed more than 30 days ago (its jti may be forgotten): nothing changes")

            let revoked = try apple.notification("consent-revoked", sub: sub, jti: "jti-revoke-1", now: now)
            #expect(try await post(revoked).status == .ok)
            #expect(try await link() == nil, "consent revoked: unlinked")
            // Linked again; Apple delivers the same notification again: acknowledged, ignored.
            let nonce = try await api.appleNonce()
            _ = try await api.linkApple(access, token: try apple.token(apple.claims(sub: sub, nonce: nonce, now: now)), nonce: nonce)
            #expect(try await post(revoked).status == .ok, "a repeated jti: 200")
            #expect(try await link() != nil, "and nothing changed")

            for type in ["account-delete", "account-deleted"] {
                if try await link() == nil {
                    let n = try await api.appleNonce()
                    _ = try await api.linkApple(access, token: try apple.token(apple.claims(sub: sub, nonce: n, now: now)), nonce: n)
                }
                #expect(try await post(apple.notification(type, sub: sub, now: now)).status == .ok)
                #expect(try await link() == nil, "\(type): unlinked")
            }
            #expect(try await post(apple.notification("consent-revoked", sub: "001234.nobody.0101", now: now)).status == .ok, "no account: still 200")

            let stranger = FakeApple.Key(kid: "apple-key-1", key: try _RSA.Signing.PrivateKey(keySize: .bits2048))
            let forged = try await post(apple.notification("consent-revoked", sub: sub, now: now, key: stranger))
            #expect(forged.status == .badRequest && forged.error == "invalid_request", "a bad signature: \(forged.text)")
            #expect(try await post(["payload": "not.a.jwt"]).error == "invalid_request")
        }
    }

    @Test("email-disabled is kept on the link: support sees it", arguments: [StoreKind.sqlite])
    func emailForwarding(kind: StoreKind) async throws {
        try await withApple(kind) { api, apple, harness in
            let sub = "001234.forwarding.0101"
            let (_, session) = try await linkedPhone(api, apple, harness, sub: sub)
            _ = try await api.call(.post, "/v1/apple/notifications", json: try apple.notification("email-disabled", sub: sub, now: harness.clock.now()))
            let link = try CLI.transfer(["account", try session.accountID, "--json"], database: harness.databaseArgument).json["apple"] as? [String: Any]
            #expect(link?["emailForwarding"] as? Bool == false, "\(String(describing: link))")
        }
    }

    @Test("Sign in with Apple off: its routes answer 501 not_configured")
    func off() async throws {
        try await withServer(.sqlite) { api, _ in
            let session = try await api.login(Device())
            for (method, path) in [
                ("POST", "/v1/apple/nonce"), ("PUT", "/v1/me/apple"), ("DELETE", "/v1/me/apple"), ("POST", "/v1/transfers/apple"),
                ("POST", "/v1/apple/notifications"),
            ] {
                let reply = try await api.call(.init(method)!, path, json: ["identityToken": "x", "nonce": "y"], token: try session.accessToken)
                #expect(reply.status == .notImplemented && reply.error == "not_configured", "\(method) \(path): \(reply.text)")
                // Before credentials and the body are looked at.
                let bare = try await api.call(.init(method)!, path, json: [:])
                #expect(bare.status == .notImplemented && bare.error == "not_configured", "\(method) \(path): \(bare.text)")
            }
            #expect(try await api.me(try session.accessToken)["apple"] is NSNull)
        }
    }

    @Test("Apple settings: the code exchange's three values go together, and nothing works without client ids")
    func configuration() throws {
        func load(_ args: [String]) throws -> ServerConfiguration {
            try ServerConfiguration.load(arguments: args, environment: [:])
        }
        #expect(try load([]).apple == nil)
        #expect(try load(["--apple-client-ids", "com.a, com.a.web"]).apple?.clientIDs == ["com.a", "com.a.web"])
        #expect(throws: ServerConfiguration.Invalid.self) { try load(["--apple-issuer", "https://appleid.apple.com"]) }
        #expect(throws: ServerConfiguration.Invalid.self) { try load(["--apple-client-ids", "com.a", "--apple-team-id", "T1"]) }
        #expect(throws: ServerConfiguration.Invalid.self) { try load(["--apple-client-ids", "com.a", "--apple-jwks-url", "not a url"]) }
        #expect(throws: ServerConfiguration.Invalid.self) {
            try load(["--apple-client-ids", "com.a", "--apple-team-id", "T1", "--apple-key-id", "K1", "--apple-private-key", "/nonexistent.p8"])
        }
    }
}

extension Client {
    /// A fresh nonce from `POST /v1/apple/nonce`.
    func appleNonce() async throws -> String {
        try await call(.post, "/v1/apple/nonce").string("nonce")
    }

    func linkApple(_ access: String, token: String, nonce: String) async throws -> Reply {
        try await call(.put, "/v1/me/apple", json: ["identityToken": token, "nonce": nonce], token: access)
    }
}
