import Foundation
import Testing
import TransferCore
@testable import TransferTestSupport

/// Contract v1.1, "Devices that hold several accounts" and "Sessions: one per device and
/// account", told as the app's stories through the HTTP API, on every store.
@Suite("Several accounts on one device")
struct MultiAccountTests {
    let password = "plum-harbor-71-sail"

    /// A phone with a personal account and a work account (current), both logged in.
    struct TwoAccounts {
        let phone: Device
        let personal: Reply
        let work: Reply
        var personalID: String { get throws { try personal.accountID } }
        var workID: String { get throws { try work.accountID } }
    }

    func twoAccounts(_ api: Client) async throws -> TwoAccounts {
        let phone = Device()
        let personal = try await api.login(phone)
        try #require(personal.status == .created, "first launch: \(personal.text)")
        let work = try await api.login(phone, newAccount: true)
        try #require(work.status == .created, "newAccount: \(work.text)")
        #expect(work["created"] as? Bool == true)
        #expect(try work.accountIDs == [try personal.accountID, try work.accountID])
        #expect(try work.currentAccount == (try work.accountID), "the new account becomes current")
        #expect(work["userName"] as? String == (try work.accountID), "the device's UUID names its first account only")
        return TwoAccounts(phone: phone, personal: personal, work: work)
    }

    @Test("a phone with two accounts moves one to a new phone and keeps the other", arguments: StoreKind.available)
    func moveOneKeepOther(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let a = try await twoAccounts(api)
            let b = Device()
            #expect(try await api.setUp(token: a.personal.accessToken, email: "mia@example.com", password: password).status == .created)
            let claimed = try await api.claim(email: "mia@example.com", password: password, device: b)
            #expect(claimed.status == .ok, "\(claimed.text)")
            #expect(try claimed.accountID == (try a.personalID))
            #expect(try claimed.accountIDs == [try a.personalID])

            // The old phone keeps the work account; its session still works.
            #expect(try await api.me(a.work.accessToken).status == .ok, "the account that stayed keeps its session")
            #expect(try await api.me(a.personal.accessToken).status == .unauthorized, "the moved account's session on A ended")
            let stayed = try await api.login(a.phone)
            #expect(stayed.status == .ok, "the work account was current: \(stayed.text)")
            #expect(try stayed.accountID == (try a.workID))
            #expect(try stayed.accountIDs == [try a.workID])
            let moved = try await api.login(a.phone, account: try a.personalID)
            #expect(moved.status == .gone)
            #expect(moved.error == "device_transferred")
            #expect(try moved.accountIDs == [try a.workID], "410 lists the accounts left")
            #expect(try await api.login(b).accountID == (try a.personalID), "B logs in to the moved account from then on")
        }
    }

    @Test("the current account moved away: the plain login says so until the app picks another", arguments: StoreKind.available)
    func currentMovedAway(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let a = try await twoAccounts(api)
            #expect(try await api.setUp(token: a.work.accessToken, email: "work@example.com", password: password).status == .created)
            #expect(try await api.claim(email: "work@example.com", password: password, device: Device()).status == .ok)
            let plain = try await api.login(a.phone)
            #expect(plain.status == .gone)
            #expect(plain.error == "device_transferred")
            #expect(plain["transferredAt"] as? String != nil)
            #expect(try plain.accounts.map(\.id) == [try a.personalID])
            #expect(try plain.currentAccount == nil, "the moved account is still current, and it is not on the list")
            #expect(try await api.setCurrent(a.personal.accessToken, account: try a.personalID).status == .noContent)
            let after = try await api.login(a.phone)
            #expect(after.status == .ok, "\(after.text)")
            #expect(try after.accountID == (try a.personalID))
        }
    }

    @Test("switching the current account, and logging in to an inactive one without switching", arguments: StoreKind.available)
    func switching(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let a = try await twoAccounts(api)
            // The extension shows the personal account's unread count: a login by accountId.
            let inactive = try await api.login(a.phone, account: try a.personalID)
            #expect(inactive.status == .ok)
            #expect(try inactive.accountID == (try a.personalID))
            #expect(try inactive.currentAccount == (try a.workID), "a login by accountId does not switch")
            #expect(try await api.login(a.phone).accountID == (try a.workID))

            #expect(try await api.setCurrent(a.work.accessToken, account: try a.personalID).status == .noContent)
            #expect(try await api.login(a.phone).accountID == (try a.personalID))
            let listed = try await api.accounts(a.work.accessToken)
            #expect(listed.status == .ok)
            #expect(listed["deviceId"] as? String == a.phone.id)
            #expect(try listed.accounts.map(\.id) == [try a.personalID, try a.workID])
            #expect(try listed.currentAccount == (try a.personalID))
            let first = try #require((listed["accounts"] as? [[String: Any]])?.first)
            #expect(first["addedAt"] as? String != nil && first["lastLoginAt"] as? String != nil && first["pushEnabled"] as? Bool == true)

            let stranger = try await api.login(Device())
            let refused = try await api.setCurrent(a.work.accessToken, account: try stranger.accountID)
            #expect(refused.status == .forbidden)
            #expect(refused.error == "account_not_on_device")
            #expect(try await api.login(a.phone, account: try stranger.accountID).error == "account_not_on_device")
            #expect(try await api.login(a.phone, account: try a.workID, newAccount: true).error == "invalid_request")
            #expect(try await api.setCurrent(a.work.accessToken, account: "not-a-uuid").error == "invalid_request")
        }
    }

    @Test("logins of one pair share one session: the same refresh token until a refresh rotates it", arguments: StoreKind.available)
    func oneSessionPerPair(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let phone = Device()
            let app = try await api.login(phone)
            let widget = try await api.login(phone)
            #expect(try widget.refreshToken == app.refreshToken, "an extension's login must not revoke the app's token")
            let rotated = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": try app.refreshToken])
            #expect(rotated.status == .ok)
            #expect(try await api.login(phone).refreshToken == rotated.refreshToken)
            // Any earlier token of the session revokes it, not only the last one.
            let again = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": try rotated.refreshToken])
            #expect(again.status == .ok)
            let reuse = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": try app.refreshToken])
            #expect(reuse.error == "invalid_refresh_token")
            #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": try again.refreshToken]).error == "invalid_refresh_token")
            #expect(try await api.me(again.accessToken).status == .unauthorized)
            // Logout ends this pair's session only; the next login opens a new one.
            let fresh = try await api.login(phone)
            #expect(try fresh.refreshToken != again.refreshToken)
            let other = try await api.login(phone, newAccount: true)
            #expect(try await api.call(.post, "/v1/logout", token: try fresh.accessToken).status == .noContent)
            #expect(try await api.me(fresh.accessToken).status == .unauthorized)
            #expect(try await api.me(other.accessToken).status == .ok, "logout of one account leaves the others logged in")
        }
    }

    @Test("addAccount: a claim puts the account beside the phone's own; without it 409 device_has_account", arguments: StoreKind.available)
    func addAccountClaim(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let old = try await api.login(Device())
            let tablet = Device()
            let own = try await api.login(tablet)
            #expect(try await api.setUp(token: old.accessToken, email: "kid@example.com", password: password).status == .created)
            #expect(try await api.claim(email: "kid@example.com", password: password, device: tablet).error == "device_has_account")
            #expect(try await api.claim(email: "kid@example.com", password: password, device: tablet, replace: true, add: true).error == "invalid_request")
            let added = try await api.claim(email: "kid@example.com", password: password, device: tablet, add: true)
            #expect(added.status == .ok, "\(added.text)")
            #expect(try added.accountIDs == [try own.accountID, try old.accountID])
            #expect(try added.currentAccount == (try old.accountID))
            #expect(try await api.me(own.accessToken).status == .ok, "the tablet's own account keeps its session")
            #expect(try await api.login(tablet, account: try own.accountID).status == .ok)
        }
    }

    @Test("replaceExistingAccount on a phone with two accounts: both leave it, the claimed one is alone", arguments: StoreKind.available)
    func replaceOnTwo(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let a = try await twoAccounts(api)
            let old = try await api.login(Device())
            #expect(try await api.setUp(token: old.accessToken, email: "new@example.com", password: password).status == .created)
            let replaced = try await api.claim(email: "new@example.com", password: password, device: a.phone, replace: true, abandon: true)
            #expect(replaced.status == .ok, "\(replaced.text)")
            #expect(try replaced.accountIDs == [try old.accountID])
            #expect(try await api.me(a.work.accessToken).status == .unauthorized)
            #expect(try await api.me(a.personal.accessToken).status == .unauthorized)
            #expect(try await api.login(a.phone, account: try a.workID).error == "account_not_on_device")
            #expect(try await api.login(a.phone).accountID == (try old.accountID))
        }
    }

    @Test("removing an account: guarded when it would be lost; the most recent other becomes current; the last retires the phone", arguments: StoreKind.available)
    func removal(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let a = try await twoAccounts(api)
            let guarded = try await api.remove(a.work.accessToken, account: try a.workID)
            #expect(guarded.status == .conflict)
            #expect(guarded.error == "account_would_be_lost")
            #expect(try await api.login(a.phone).accountID == (try a.workID), "a refused removal changes nothing")
            // With a pending transfer the account is not lost: it can still come to a new phone.
            #expect(try await api.setUp(token: a.work.accessToken, email: "w@example.com", password: password).status == .created)
            #expect(try await api.remove(a.personal.accessToken, account: try a.workID).status == .noContent)
            #expect(try await api.me(a.work.accessToken).status == .unauthorized, "its session on the phone ended")
            let left = try await api.login(a.phone)
            #expect(try left.accountID == (try a.personalID), "the remaining account became current")
            #expect(try await api.login(a.phone, account: try a.workID).error == "account_not_on_device")
            #expect(try await api.claim(email: "w@example.com", password: password, device: Device()).status == .ok)

            // The last account leaves with abandon=true: the phone is retired, its deviceId never bound again.
            #expect(try await api.remove(left.accessToken, account: try a.personalID).error == "account_would_be_lost")
            #expect(try await api.remove(left.accessToken, account: try a.personalID, abandon: true).status == .noContent)
            #expect(try await api.login(a.phone).error == "account_not_on_device")
            #expect(try await api.login(a.phone, newAccount: true).error == "account_not_on_device")
            #expect(try await api.remove(left.accessToken, account: try a.personalID).status == .unauthorized)
        }
    }

    @Test("the limit per device, also for two adds racing at the limit: one wins", arguments: StoreKind.available)
    func limit(kind: StoreKind) async throws {
        try await withServer(kind, configure: { $0.maxAccountsPerDevice = 3 }) { api, _ in
            let phone = Device()
            #expect(try await api.login(phone).status == .created)
            #expect(try await api.login(phone, newAccount: true).status == .created)
            let racing = try await withThrowingTaskGroup(of: Reply.self) { group in
                for _ in 0..<2 { group.addTask { try await api.login(phone, newAccount: true) } }
                return try await group.reduce(into: [Reply]()) { $0.append($1) }
            }
            #expect(racing.map(\.status.code).sorted() == [201, 409], "\(racing.map(\.text))")
            let refused = try #require(racing.first { $0.status == .conflict })
            #expect(refused.error == "device_account_limit")
            let full = try await api.login(phone)
            #expect(try full.accounts.count == 3)
            // A claim with addAccount meets the same limit.
            let old = try await api.login(Device())
            #expect(try await api.setUp(token: old.accessToken, email: "x@example.com", password: password).status == .created)
            #expect(try await api.claim(email: "x@example.com", password: password, device: phone, add: true).error == "device_account_limit")
        }
    }

    @Test("A → B → C with several accounts: each move takes one account and leaves the others", arguments: StoreKind.available)
    func chain(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let a = try await twoAccounts(api)
            let b = Device(), c = Device()
            let bOwn = try await api.login(b)
            #expect(try await api.setUp(token: a.personal.accessToken, email: "p1@example.com", password: password).status == .created)
            let onB = try await api.claim(email: "p1@example.com", password: password, device: b, add: true)
            #expect(try onB.accountIDs == [try bOwn.accountID, try a.personalID])
            #expect(try await api.setUp(token: onB.accessToken, email: "p2@example.com", password: password).status == .created)
            let onC = try await api.claim(email: "p2@example.com", password: password, device: c)
            #expect(try onC.accountIDs == [try a.personalID])
            #expect(try await api.login(b, account: try a.personalID).error == "device_transferred")
            let bLeft = try await api.login(b)
            #expect(bLeft.error == "device_transferred", "B's current account moved on")
            #expect(try bLeft.accountIDs == [try bOwn.accountID])
            #expect(try await api.login(b, account: try bOwn.accountID).status == .ok)
            #expect(try await api.login(a.phone).accountID == (try a.workID))
            #expect(try await api.login(c).accountID == (try a.personalID))
            let me = try await api.me(onC.accessToken)
            #expect(me["transferId"] as? String == c.id)
            // The work account moves A → C, beside the personal one: A is now empty and retired.
            #expect(try await api.setUp(token: a.work.accessToken, email: "w@example.com", password: password).status == .created)
            let both = try await api.claim(email: "w@example.com", password: password, device: c, add: true)
            #expect(try both.accountIDs == [try a.personalID, try a.workID])
            #expect(try await api.login(a.phone).error == "device_transferred")
            #expect(try await api.login(a.phone, newAccount: true).error == "device_transferred", "a retired device takes no new account")
            let retired = try await api.claim(email: "nobody@example.com", password: password, device: a.phone)
            #expect(retired.error == "invalid_transfer_credentials")
        }
    }
}

/// Contract v1.3, security round 3: "`replaceExistingAccount` never strands an account".
extension MultiAccountTests {
    @Test("replaceExistingAccount refuses to push off an account with no way back (409 account_would_be_lost) and changes nothing",
          arguments: StoreKind.available)
    func replaceWouldStrand(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let b = Device()
            let own = try await api.login(b)  // B made its own account at first launch: no way back
            let mia = try await api.login(Device())
            #expect(try await api.setUp(token: try mia.accessToken, email: "mia@example.com", password: password).status == .created)
            let ben = try await api.login(Device())
            let code = try await api.call(.put, "/v1/me/transfer", json: ["method": "code"], token: try ben.accessToken).string("transferCode")

            let byPassword = try await api.claim(email: "mia@example.com", password: password, device: b, replace: true)
            #expect(byPassword.status == .conflict && byPassword.error == "account_would_be_lost", "\(byPassword.text)")
            let byCode = try await api.call(.post, "/v1/transfers/claim", json: [
                "transferCode": code, "deviceId": b.id, "deviceSecret": b.secret, "replaceExistingAccount": true,
            ])
            #expect(byCode.status == .conflict && byCode.error == "account_would_be_lost", "\(byCode.text)")
            // Nothing changed: B holds its own account, both transfers are pending and usable.
            let onB = try await api.login(b)
            #expect(try onB.status == .ok && onB.accountIDs == [try own.accountID], "\(onB.text)")
            #expect(try await api.me(try mia.accessToken)["migrationFlag"] as? Bool == true)
            #expect(try await api.me(try ben.accessToken)["migrationFlag"] as? Bool == true)
            for _ in 0..<5 {  // no wrong password was counted: five refusals lock nothing
                #expect(try await api.claim(email: "mia@example.com", password: password, device: b, replace: true).error == "account_would_be_lost")
            }
            let elsewhere = try await api.call(.post, "/v1/transfers/claim", json: ["transferCode": code, "deviceId": Device().id, "deviceSecret": Device().secret])
            #expect(try elsewhere.status == .ok && elsewhere.accountID == ben.accountID, "the code was not used up: \(elsewhere.text)")

            // With a way back (a recovery code) the account may leave B, and comes back with it.
            let recovery = try await api.call(.put, "/v1/me/recovery-code", token: try onB.accessToken).string("recoveryCode")
            let replaced = try await api.claim(email: "mia@example.com", password: password, device: b, replace: true)
            #expect(try replaced.status == .ok && replaced.accountIDs == [try mia.accountID], "\(replaced.text)")
            let back = try await api.call(.post, "/v1/transfers/claim", json: ["recoveryCode": recovery, "deviceId": Device().id, "deviceSecret": Device().secret])
            #expect(try back.status == .ok && back.accountID == own.accountID, "\(back.text)")

            let alone = try await api.call(.post, "/v1/transfers/claim", json: [
                "email": "x@example.com", "temporaryPassword": password, "deviceId": b.id, "deviceSecret": b.secret, "abandonExisting": true,
            ])
            #expect(alone.status == .badRequest && alone.error == "invalid_request", "abandonExisting needs replaceExistingAccount: \(alone.text)")
        }
    }

    @Test("abandonExisting: the claim wins, and the account pushed off with no way back is audited as abandoned", arguments: StoreKind.available)
    func replaceAbandoning(kind: StoreKind) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { api, parts in
                let b = Device()
                let own = try await api.login(b)
                let mia = try await api.login(Device())
                #expect(try await api.setUp(token: try mia.accessToken, email: "mia@example.com", password: password).status == .created)
                let claimed = try await api.claim(email: "mia@example.com", password: password, device: b, replace: true, abandon: true)
                #expect(try claimed.status == .ok && claimed.accountIDs == [try mia.accountID], "\(claimed.text)")
                #expect(try await api.login(b, account: try own.accountID).error == "account_not_on_device")
                let report = try #require(try await parts.store.report(accountID: try own.accountID, at: harness.clock.now(), recentEvents: 10))
                #expect(report.deletedAt == nil, "kept for support")
                let replaced = try #require(report.recentEvents.last)
                #expect(replaced.kind == .deviceReplaced && replaced.deviceID == b.id)
                #expect(replaced.reason == "claimed account \(try mia.accountID) with replaceExistingAccount; abandoned with no way back (abandonExisting=true)")
            }
        }
    }
}

/// Contract v1.3, security round 3: one attestation (one device) cannot mint accounts without
/// end through `newAccount` and `DELETE …?abandon=true`.
extension MultiAccountTests {
    @Test("a device creates at most 10 accounts in 24 hours, removed and deleted ones included: the 11th is 429, a day later it works",
          arguments: StoreKind.available)
    func deviceCreationCap(kind: StoreKind) async throws {
        try await withServer(kind) { api, harness in
            let phone = Device()
            let first = try await api.login(phone)  // the 1st creation
            try #require(first.status == .created)
            for i in 2...10 {
                harness.clock.advance(.seconds(60))  // creation i at 60 × (i - 1) seconds
                let made = try await api.login(phone, newAccount: true)
                try #require(made.status == .created, "creation \(i): \(made.text)")
                // Out of the way again, one way or the other: neither frees its place in the day's count.
                let gone = i % 2 == 0
                    ? try await api.call(.delete, "/v1/devices/accounts/\(try made.accountID)?abandon=true", token: try made.accessToken)
                    : try await api.call(.delete, "/v1/me", token: try made.accessToken)
                try #require(gone.status == .noContent, "\(gone.text)")
            }
            harness.clock.advance(.seconds(3600))
            let refused = try await api.login(phone, newAccount: true)
            #expect(refused.status == .tooManyRequests && refused.error == "rate_limited", "\(refused.text)")
            let retryAfter = Int(refused.headers[.retryAfter] ?? "") ?? 0
            #expect(retryAfter == 86_400 - 540 - 3600, "until the first creation is a day old: \(retryAfter)")
            let onPhone = try await api.login(phone)
            #expect(try onPhone.status == .ok && onPhone.accountIDs == [try first.accountID], "nothing was written: \(onPhone.text)")

            // A claim brings an account without creating one: not counted, not capped.
            let other = try await api.login(Device())
            #expect(try await api.setUp(token: try other.accessToken, email: "kid@example.com", password: password).status == .created)
            #expect(try await api.claim(email: "kid@example.com", password: password, device: phone, add: true).status == .ok)

            harness.clock.advance(.seconds(86_400 - 540 - 3600))
            let later = try await api.login(phone, newAccount: true)
            #expect(later.status == .created, "a day after the first creation: \(later.text)")
            #expect(try await api.login(phone, newAccount: true).status == .tooManyRequests, "the 2nd..10th are still within their day")
        }
    }
}
