import Foundation
import HTTPTypes
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.1, "Push routing": the phone registers its token, the app backend asks whom to
/// send to. Told as stories through the HTTP API, on every store.
@Suite("Push routing")
struct PushRoutingTests {
    let password = "plum-harbor-71-sail"

    /// A server on a fresh database and a service key for the app backend.
    func withBackend(_ kind: StoreKind, _ body: @Sendable (Client, Backend, Harness) async throws -> Void) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { api, parts in
                let made = try #require(try await parts.service.createServiceKey(name: "app-backend", by: .support(operator: "test"), reason: "test"))
                try await body(api, Backend(api: api, key: made.key, service: parts.service), harness)
            }
        }
    }

    /// The app backend's calls.
    struct Backend {
        let api: Client
        let key: String
        let service: TransferService

        func targets(_ ids: [String], key: String? = nil) async throws -> Reply {
            try await api.call(.post, "/v1/service/push-targets", json: ["accountIds": ids], token: key ?? self.key)
        }

        /// The targets of a 200 answer, as (token, deviceId, accountIds sorted).
        func reach(_ ids: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws -> [Target] {
            let reply = try await targets(ids)
            try #require(reply.status == .ok, "push-targets: \(reply.text)", sourceLocation: sourceLocation)
            let list = try #require(try reply.json["targets"] as? [[String: Any]], "no targets list: \(reply.text)", sourceLocation: sourceLocation)
            return list.map {
                Target(provider: $0["provider"] as? String ?? "?", token: $0["token"] as? String ?? "?", environment: $0["environment"] as? String,
                       deviceID: $0["deviceId"] as? String ?? "?", accountIDs: (($0["accountIds"] as? [String]) ?? []).sorted())
            }
        }

        func feedback(provider: String = "apns", token: String, at: Timestamp, reason: String = "unregistered") async throws -> Reply {
            try await api.call(
                .post, "/v1/service/push-feedback", json: ["provider": provider, "token": token, "reason": reason, "at": Self.withMilliseconds(at)],
                token: key)
        }

        /// `at` to the millisecond, as a backend would send a provider's time (`rfc3339` has whole seconds).
        static func withMilliseconds(_ at: Timestamp) -> String {
            String(at.rfc3339.dropLast()) + String(format: ".%03dZ", Int(at.milliseconds % 1000))
        }
    }

    struct Target: Equatable, CustomStringConvertible {
        var provider: String
        var token: String
        var environment: String?
        var deviceID: String
        var accountIDs: [String]
        var description: String { "\(provider) …\(token.suffix(8)) on \(deviceID) → \(accountIDs)" }
    }

    static func apnsToken() -> String { RandomToken.randomBytes(32).map { String(format: "%02x", $0) }.joined() }

    /// A phone with a personal account and a work account (current), both logged in.
    func twoAccounts(_ api: Client) async throws -> (phone: Device, personal: Reply, work: Reply) {
        let phone = Device()
        let personal = try await api.login(phone)
        try #require(personal.status == .created, "\(personal.text)")
        let work = try await api.login(phone, newAccount: true)
        try #require(work.status == .created, "\(work.text)")
        return (phone, personal, work)
    }

    @Test("a token registered on phone A reaches both of A's accounts, once per token", arguments: StoreKind.available)
    func oneTokenBothAccounts(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            let a = try await twoAccounts(api)
            let personal = try a.personal.accountID, work = try a.work.accountID
            let token = Self.apnsToken()
            #expect(try await backend.reach([personal, work]) == [], "no token registered yet")
            let put = try await api.registerPush(try a.personal.accessToken, token: token.uppercased())
            #expect(put.status == .noContent, "\(put.text)")
            let unknown = UUID().uuidString
            #expect(try await backend.reach([work, unknown, personal.uppercased(), personal]) == [
                Target(provider: "apns", token: token, environment: "production", deviceID: a.phone.id, accountIDs: [personal, work].sorted())
            ], "one target for the token, naming both asked accounts; unknown ids left out; the token kept lower-case")
            #expect(try await backend.reach([work]).map(\.accountIDs) == [[work]], "only the asked accounts are named")

            // An Android build of the same app on the same install is not a thing, but a device may
            // hold one token per provider: each is its own target.
            let fcm = "fcm-token_1:APA91b" + String(repeating: "x", count: 140)
            #expect(try await api.registerPush(try a.work.accessToken, provider: "fcm", token: fcm).status == .noContent)
            let both = try await backend.reach([personal])
            #expect(both.count == 2, "\(both)")
            #expect(both.first { $0.provider == "fcm" } == Target(provider: "fcm", token: fcm, environment: nil, deviceID: a.phone.id, accountIDs: [personal]))
            // A new token for a provider replaces the device's old one.
            let newer = Self.apnsToken()
            #expect(try await api.registerPush(try a.work.accessToken, token: newer, environment: "sandbox").status == .noContent)
            #expect(try await backend.reach([personal]).first { $0.provider == "apns" }.map { [$0.token, $0.environment] } == [newer, "sandbox"])
            #expect(try await api.call(.delete, "/v1/devices/push-token?provider=fcm", token: try a.work.accessToken).status == .noContent)
            #expect(try await backend.reach([personal]).map(\.provider) == ["apns"], "the fcm token was unregistered")
            let listed = try await api.accounts(try a.personal.accessToken)
            #expect((try listed.json["accounts"] as? [[String: Any]])?.map { $0["pushEnabled"] as? Bool } == [true, true])
        }
    }

    @Test("mode current reaches only the current account, and follows it when the app switches", arguments: StoreKind.available)
    func modeCurrent(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            let a = try await twoAccounts(api)
            let personal = try a.personal.accountID, work = try a.work.accountID
            _ = try await api.registerPush(try a.work.accessToken, token: Self.apnsToken())
            let mode = try await api.call(.put, "/v1/devices/push-preferences", json: ["mode": "current"], token: try a.work.accessToken)
            #expect(mode.status == .noContent, "\(mode.text)")
            #expect(try await backend.reach([personal, work]).map(\.accountIDs) == [[work]], "work is current")
            #expect(try await api.setCurrent(try a.work.accessToken, account: personal).status == .noContent)
            #expect(try await backend.reach([personal, work]).map(\.accountIDs) == [[personal]], "the app switched to personal")
            _ = try await api.call(.put, "/v1/devices/push-preferences", json: ["mode": "all"], token: try a.work.accessToken)
            #expect(try await backend.reach([personal, work]).map(\.accountIDs) == [[personal, work].sorted()])
            let bad = try await api.call(.put, "/v1/devices/push-preferences", json: ["mode": "some"], token: try a.work.accessToken)
            #expect(bad.status == .badRequest && bad.error == "invalid_request", "\(bad.text)")
        }
    }

    @Test("an account that mutes its pushes on the phone is no longer reached; the other still is", arguments: StoreKind.available)
    func muting(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            let a = try await twoAccounts(api)
            let personal = try a.personal.accountID, work = try a.work.accountID
            _ = try await api.registerPush(try a.personal.accessToken, token: Self.apnsToken())
            let mute = try await api.call(.put, "/v1/me/push", json: ["enabled": false], token: try a.work.accessToken)
            #expect(mute.status == .noContent, "\(mute.text)")
            #expect(try await backend.reach([personal, work]).map(\.accountIDs) == [[personal]])
            let listed = try await api.accounts(try a.personal.accessToken)
            let flags = (try listed.json["accounts"] as? [[String: Any]])?.map { [$0["accountId"] as? String: $0["pushEnabled"] as? Bool] }
            #expect(flags == [[personal: true], [work: false]], "\(listed.text)")
            #expect(try await api.call(.put, "/v1/me/push", json: ["enabled": "no"], token: try a.work.accessToken).error == "invalid_request")
            #expect(try await api.call(.put, "/v1/me/push", json: ["enabled": true], token: try a.work.accessToken).status == .noContent)
            #expect(try await backend.reach([personal, work]).map(\.accountIDs) == [[personal, work].sorted()])
        }
    }

    @Test("the moved account stops reaching phone A at the claim, and reaches phone B once B registers", arguments: StoreKind.available)
    func claimMovesRouting(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            let a = try await twoAccounts(api)
            let personal = try a.personal.accountID, work = try a.work.accountID
            let tokenA = Self.apnsToken(), tokenB = Self.apnsToken()
            _ = try await api.registerPush(try a.personal.accessToken, token: tokenA)
            #expect(try await api.setUp(token: try a.personal.accessToken, email: "mia@example.com", password: password).status == .created)
            let b = Device()
            let claimed = try await api.claim(email: "mia@example.com", password: password, device: b)
            try #require(claimed.status == .ok, "\(claimed.text)")
            #expect(try await backend.reach([personal, work]) == [
                Target(provider: "apns", token: tokenA, environment: "production", deviceID: a.phone.id, accountIDs: [work])
            ], "at the claim A stops receiving the moved account; it keeps the one that stayed")
            #expect(try await api.registerPush(try claimed.accessToken, token: tokenB).status == .noContent)
            #expect(try await backend.reach([personal]) == [
                Target(provider: "apns", token: tokenB, environment: "production", deviceID: b.id, accountIDs: [personal])
            ])
            // A's old session of the moved account cannot register anything any more.
            #expect(try await api.registerPush(try a.personal.accessToken, token: Self.apnsToken()).error == "invalid_token")
        }
    }

    @Test("a token registered again by another phone moves to it", arguments: StoreKind.available)
    func tokenMoves(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            // The app was deleted and installed again: a new deviceId, and APNs hands out the same token.
            let old = try await api.login(Device()), new = try await api.login(Device())
            let token = Self.apnsToken()
            _ = try await api.registerPush(try old.accessToken, token: token)
            _ = try await api.registerPush(try new.accessToken, token: token)
            #expect(try await backend.reach([try old.accountID, try new.accountID]) == [
                Target(provider: "apns", token: token, environment: "production", deviceID: try new.string("deviceId"), accountIDs: [try new.accountID])
            ], "a token is on one device at most")
        }
    }

    @Test("feedback drops a token, but not one registered again after the feedback's time", arguments: StoreKind.available)
    func feedback(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, harness in
            let session = try await api.login(Device())
            let account = try session.accountID
            let token = Self.apnsToken()
            let registered = harness.clock.now()
            _ = try await api.registerPush(try session.accessToken, token: token)
            harness.clock.advance(.seconds(60))
            // APNs said "unregistered" for a time before the app registered it again: ignored.
            _ = try await api.registerPush(try session.accessToken, token: token)
            let stale = try await backend.feedback(token: token, at: registered + .seconds(30))
            #expect(stale.status == .noContent, "\(stale.text)")
            #expect(try await backend.reach([account]).count == 1, "registered again after the feedback's time: kept")
            harness.clock.advance(.seconds(60))
            #expect(try await backend.feedback(token: token.uppercased(), at: harness.clock.now(), reason: "bad_token").status == .noContent)
            #expect(try await backend.reach([account]) == [], "dropped")
            #expect(try await backend.feedback(token: token, at: harness.clock.now()).status == .noContent, "an unknown token: 204 too")
            #expect(try await backend.feedback(token: token, at: harness.clock.now(), reason: "gone").error == "invalid_request")
            let badTime = try await api.call(
                .post, "/v1/service/push-feedback", json: ["provider": "apns", "token": token, "reason": "unregistered", "at": "yesterday"], token: backend.key)
            #expect(badTime.error == "invalid_request", "\(badTime.text)")
        }
    }

    @Test("a removed account, and the accounts of a revoked phone, are no longer targets", arguments: StoreKind.available)
    func removedAndRevoked(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            let a = try await twoAccounts(api)
            let personal = try a.personal.accountID, work = try a.work.accountID
            _ = try await api.registerPush(try a.work.accessToken, token: Self.apnsToken())
            #expect(try await api.remove(try a.work.accessToken, account: personal, abandon: true).status == .noContent)
            #expect(try await backend.reach([personal, work]).map(\.accountIDs) == [[work]])
            let revoked = try await backend.service.revokeDevice(DeviceID(a.phone.id)!, by: .support(operator: "test"), reason: "stolen")
            #expect(revoked == [work])
            #expect(try await backend.reach([personal, work]) == [], "a revoked phone gets no pushes")
        }
    }

    @Test("service keys: only they open the service API, only access tokens the device API; a revoked key fails at once", arguments: StoreKind.available)
    func serviceKeys(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            let session = try await api.login(Device())
            let ids = [try session.accountID]
            let none = try await api.call(.post, "/v1/service/push-targets", json: ["accountIds": ids])
            #expect(none.status == .unauthorized && none.error == "invalid_service_key", "\(none.text)")
            #expect(none.headers[.wwwAuthenticate] == "Bearer")
            let deviceToken = try await backend.targets(ids, key: try session.accessToken)
            #expect(deviceToken.status == .unauthorized && deviceToken.error == "invalid_service_key", "a device's access token: \(deviceToken.text)")
            #expect(try await backend.targets(ids, key: "tsk_" + RandomToken.make()).error == "invalid_service_key", "an unknown key")
            let keyOnDevice = try await api.registerPush(backend.key, token: Self.apnsToken())
            #expect(keyOnDevice.status == .unauthorized && keyOnDevice.error == "invalid_token", "a service key on a device endpoint: \(keyOnDevice.text)")
            #expect(try await backend.targets(ids).status == .ok)

            let second = try #require(try await backend.service.createServiceKey(name: "analytics", by: .support(operator: "test"), reason: "t"))
            #expect(try await backend.service.createServiceKey(name: "analytics", by: .support(operator: "test"), reason: "t") == nil, "names are unique")
            #expect(try await backend.targets(ids, key: second.key).status == .ok)
            let before = try #require(try await backend.service.revokeServiceKey(name: "analytics", by: .support(operator: "test"), reason: "leaked"))
            #expect(before.revokedAt == nil && before.lastUsedAt != nil, "its use was recorded: \(before)")
            let revoked = try await backend.targets(ids, key: second.key)
            #expect(revoked.status == .unauthorized && revoked.error == "invalid_service_key", "revoked: \(revoked.text)")
            #expect(try await backend.targets(ids).status == .ok, "the other key still works")
        }
    }

    @Test("invalid push tokens are refused and change nothing", arguments: StoreKind.available)
    func invalidTokens(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            let session = try await api.login(Device())
            let access = try session.accessToken
            let cases: [(provider: String, token: String, environment: String?, error: String)] = [
                ("apns", String(repeating: "a", count: 63), nil, "invalid_push_token"),
                ("apns", String(repeating: "a", count: 201), nil, "invalid_push_token"),
                ("apns", String(repeating: "g", count: 64), nil, "invalid_push_token"),
                ("apns", "", nil, "invalid_push_token"),
                ("fcm", "has space", nil, "invalid_push_token"),
                ("fcm", String(repeating: "x", count: 4097), nil, "invalid_push_token"),
                ("fcm", "", nil, "invalid_push_token"),
                ("fcm", "valid:token", "production", "invalid_request"),
                ("apns", Self.apnsToken(), "staging", "invalid_request"),
                ("webpush", Self.apnsToken(), nil, "invalid_request"),
            ]
            for c in cases {
                let reply = try await api.registerPush(access, provider: c.provider, token: c.token, environment: c.environment)
                #expect(reply.status == .badRequest && reply.error == c.error, "\(c.provider) \(c.token.prefix(20))… \(c.environment ?? "-"): \(reply.text)")
            }
            #expect(try await api.call(.put, "/v1/devices/push-token", json: ["provider": "apns"], token: access).error == "invalid_request")
            #expect(try await api.call(.delete, "/v1/devices/push-token", token: access).error == "invalid_request")
            #expect(try await api.call(.delete, "/v1/devices/push-token?provider=sms", token: access).error == "invalid_request")
            #expect(try await backend.reach([try session.accountID]) == [], "nothing was registered")
            #expect(try await api.registerPush(access, provider: "fcm", token: String(repeating: "x", count: 4096)).status == .noContent, "4 096 characters is the longest")
        }
    }

    @Test("push-targets takes 1 to 1 000 ids: 1 000 answer, 1 001 are refused", arguments: StoreKind.available)
    func thousandIDs(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            let session = try await api.login(Device())
            let token = Self.apnsToken()
            _ = try await api.registerPush(try session.accessToken, token: token)
            let others = (0..<999).map { _ in UUID().uuidString.lowercased() }
            let full = try await backend.reach(others + [try session.accountID])
            #expect(full.map(\.token) == [token], "1 000 ids: \(full)")
            let over = try await backend.targets(others + [try session.accountID, UUID().uuidString])
            #expect(over.status == .badRequest && over.error == "invalid_request", "\(over.status)")
            #expect(over.text.contains("1 to 1000"), "\(over.text)")
            #expect(try await backend.targets([]).error == "invalid_request")
            let notUUID = try await backend.targets(["acct-1"])
            #expect(notUUID.error == "invalid_request" && notUUID.text.contains("accountIds[0]"), "\(notUUID.text)")
            let notArray = try await api.call(.post, "/v1/service/push-targets", json: ["accountIds": "x"], token: backend.key)
            #expect(notArray.error == "invalid_request")
            let huge = try await api.call(
                .post, "/v1/service/push-targets", raw: #"{"accountIds": [""# + String(repeating: "a", count: 70_000) + #""]}"#, token: backend.key)
            #expect(huge.status == .contentTooLarge, "service bodies stop at 64 KiB: \(huge.status)")
        }
    }
}

extension PushRoutingTests {
    @Test("a token moving to another phone is audited on both, sends push.token_moved, and counts against --setup-limit",
          arguments: StoreKind.available)
    func tokenMoveVisible(kind: StoreKind) async throws {
        try await FakeWebhookReceiver.run { receiver in
            let url = receiver.url
            try await withHarness(kind, configure: {
                FakeWebhookReceiver.configure(&$0, url: url)
                $0.limits.setup = RateLimit(count: 2, period: .seconds(3600))
            }) { harness in
                try await harness.run { api, parts in
                    let a = Device(), b = Device()
                    let onA = try await api.login(a), onB = try await api.login(b)
                    let token = Self.apnsToken()
                    // Registering on the phone that holds it, again and again, is no move and takes no slot.
                    for _ in 1...4 { #expect(try await api.registerPush(try onA.accessToken, token: token).status == .noContent) }
                    let toB = { try await api.registerPush(try onB.accessToken, token: token) }
                    let toA = { try await api.registerPush(try onA.accessToken, token: token) }
                    #expect(try await toB().status == .noContent, "B's first move")
                    #expect(try await toB().status == .noContent, "already B's: no move")
                    #expect(try await toA().status == .noContent, "A's first move")
                    #expect(try await toB().status == .noContent, "B's second move")
                    #expect(try await toA().status == .noContent, "A's second move")
                    let refused = try await toB()
                    #expect(refused.status == .tooManyRequests && refused.error == "rate_limited", "B's third move: \(refused.text)")
                    let holder = try await parts.store.read([.pushTokenHolder(.apns, SecretHash(of: token))], at: harness.clock.now())
                    #expect(try holder.pushTokenHolder(.apns, SecretHash(of: token))?.deviceID == a.id, "the refused move changed nothing")

                    let moves = try await receiver.wait(for: 2 + 4).filter { $0.type == "push.token_moved" }
                    // Each for the account that took the token; oldest first per account (accounts are delivered side by side).
                    func path(_ account: String) -> [String] {
                        moves.filter { $0.accountID == account }.map { "\($0.data["fromDeviceId"] as? String ?? "?")→\($0.data["toDeviceId"] as? String ?? "?")" }
                    }
                    #expect(try path(onB.accountID) == ["\(a.id)→\(b.id)", "\(a.id)→\(b.id)"])
                    #expect(try path(onA.accountID) == ["\(b.id)→\(a.id)", "\(b.id)→\(a.id)"])
                    #expect(moves.allSatisfy { $0.data["provider"] as? String == "apns" && !$0.body.contains(token) }, "never the token")
                    let onBHistory = try await parts.store.history(accountID: try onB.accountID).filter { $0.kind == .pushTokenMoved }
                    let onAHistory = try await parts.store.history(accountID: try onA.accountID).filter { $0.kind == .pushTokenMoved }
                    #expect(onBHistory.count == 4 && onAHistory.count == 4, "each move on both phones' accounts: \(onAHistory) \(onBHistory)")
                    #expect(onAHistory.first?.deviceID == a.id && onAHistory.first?.reason == "apns token to device \(b.id)")
                }
            }
        }
    }

    @Test("eight phones registering one token at once: it ends on exactly one of them, none fails", arguments: StoreKind.available)
    func concurrentRegistrations(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            var sessions: [Reply] = []
            for _ in 0..<8 { sessions.append(try await api.login(Device())) }
            let token = Self.apnsToken()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for session in sessions {
                    let access = try session.accessToken
                    group.addTask { try await api.registerPush(access, token: token).status.code }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 204, count: 8), "\(statuses)")
            let reached = try await backend.reach(try sessions.map { try $0.accountID })
            #expect(reached.count == 1, "a token is on one device at most: \(reached)")
        }
    }
}

extension PushRoutingTests {
    @Test("every way an account leaves the phone stops its routing there: replaced, moved as the last account, removed and added back", arguments: StoreKind.available)
    func leavingAndComingBack(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            // B holds its own account with a token; a claim with replaceExistingAccount takes it over.
            let a = try await api.login(Device())
            let b = Device()
            let own = try await api.login(b)
            let tokenB = Self.apnsToken()
            _ = try await api.registerPush(try own.accessToken, token: tokenB)
            #expect(try await api.setUp(token: try a.accessToken, email: "ann@example.com", password: password).status == .created)
            let claimed = try await api.claim(email: "ann@example.com", password: password, device: b, replace: true, abandon: true)
            try #require(claimed.status == .ok, "\(claimed.text)")
            #expect(try await backend.reach([try own.accountID]) == [], "the replaced account no longer reaches B")
            #expect(try await backend.reach([try a.accountID]).map(\.token) == [tokenB], "B's token now reaches the claimed account")

            // A phone whose only account moves away retires (and its token row is deleted).
            let c = try await api.login(Device())
            let tokenC = Self.apnsToken()
            _ = try await api.registerPush(try c.accessToken, token: tokenC)
            _ = try await api.setUp(token: try c.accessToken, email: "cy@example.com", password: password)
            let d = Device()
            let moved = try await api.claim(email: "cy@example.com", password: password, device: d)
            try #require(moved.status == .ok, "\(moved.text)")
            #expect(try await backend.reach([try c.accountID]) == [], "nothing reaches the moved account before D registers")

            // Removed, then claimed back onto the same phone with addAccount: its pushes are on again.
            let phone = Device()
            let first = try await api.login(phone)
            let second = try await api.login(phone, newAccount: true)
            let secondID = try second.accountID
            _ = try await api.registerPush(try first.accessToken, token: Self.apnsToken())
            _ = try await api.call(.put, "/v1/me/push", json: ["enabled": false], token: try second.accessToken)
            #expect(try await api.setUp(token: try second.accessToken, email: "sam@example.com", password: password).status == .created)
            #expect(try await api.remove(try first.accessToken, account: secondID).status == .noContent, "a pending transfer is the way back")
            #expect(try await backend.reach([secondID]) == [])
            let back = try await api.claim(email: "sam@example.com", password: password, device: phone, add: true)
            try #require(back.status == .ok, "\(back.text)")
            #expect(try await backend.reach([secondID]).map(\.accountIDs) == [[secondID]], "back on the phone, with its pushes on again")
        }
    }

    @Test("mode current with the current account moved away reaches no one until the app picks another", arguments: StoreKind.available)
    func currentMovedAway(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            let a = try await twoAccounts(api)
            let personal = try a.personal.accountID, work = try a.work.accountID
            _ = try await api.registerPush(try a.personal.accessToken, token: Self.apnsToken())
            _ = try await api.call(.put, "/v1/devices/push-preferences", json: ["mode": "current"], token: try a.personal.accessToken)
            _ = try await api.setUp(token: try a.work.accessToken, email: "wes@example.com", password: password)
            #expect(try await api.claim(email: "wes@example.com", password: password, device: Device()).status == .ok)
            #expect(try await backend.reach([personal, work]) == [], "the current account (work) moved away")
            #expect(try await api.setCurrent(try a.personal.accessToken, account: personal).status == .noContent)
            #expect(try await backend.reach([personal, work]).map(\.accountIDs) == [[personal]])
        }
    }

    @Test("feedback at the registration's own time drops it, a future time counts as now, and it follows a moved token", arguments: StoreKind.available)
    func feedbackEdges(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, harness in
            let one = try await api.login(Device()), two = try await api.login(Device())
            let token = Self.apnsToken()
            _ = try await api.registerPush(try one.accessToken, token: token)
            #expect(try await backend.feedback(token: token, at: harness.clock.now()).status == .noContent)
            #expect(try await backend.reach([try one.accountID]) == [], "registered at the reported time: dropped")

            _ = try await api.registerPush(try one.accessToken, token: token)
            harness.clock.advance(.seconds(10))
            _ = try await api.registerPush(try two.accessToken, token: token)  // the token moved to two
            #expect(try await backend.feedback(token: token, at: harness.clock.now() - .seconds(5)).status == .noContent)
            #expect(try await backend.reach([try two.accountID]).count == 1, "two registered it after the reported time")
            #expect(try await backend.feedback(token: token, at: harness.clock.now() + .seconds(3600)).status == .noContent)
            #expect(try await backend.reach([try two.accountID]) == [], "a future time counts as now")
        }
    }

    @Test("a service key is read as a Bearer credential in any case of the scheme; malformed keys are refused", arguments: StoreKind.available)
    func keyForms(kind: StoreKind) async throws {
        try await withBackend(kind) { api, backend, _ in
            let body = ["accountIds": [UUID().uuidString]]
            #expect(try await api.call(.post, "/v1/service/push-targets", json: body, headers: [.authorization: "bearer \(backend.key)"]).status == .ok)
            for bad in [String(backend.key.dropFirst(4)), backend.key + String(repeating: "x", count: 120), "tsk_", "Basic \(backend.key)"] {
                let reply = try await api.call(.post, "/v1/service/push-targets", json: body, headers: [.authorization: bad.hasPrefix("Basic") ? bad : "Bearer \(bad)"])
                #expect(reply.status == .unauthorized && reply.error == "invalid_service_key", "\(bad.prefix(12))…: \(reply.text)")
            }
            // Device routes keep their 16 KiB limit.
            let session = try await api.login(Device())
            let big = try await api.registerPush(try session.accessToken, provider: "fcm", token: String(repeating: "x", count: 4096) + String(repeating: "y", count: 14_000))
            #expect(big.status == .contentTooLarge, "\(big.status)")
        }
    }
}

extension Client {
    func registerPush(_ token: String, provider: String = "apns", token push: String, environment: String? = nil) async throws -> Reply {
        var body: [String: Any] = ["provider": provider, "token": push]
        if let environment { body["environment"] = environment }
        return try await call(.put, "/v1/devices/push-token", json: body, token: token)
    }
}
