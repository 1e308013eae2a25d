import Foundation
import Testing
import TransferCore
@testable import TransferSQLite
import GRDB
@testable import TransferTestSupport

/// The user's story, end to end through the HTTP contract.
@Suite("A→B scenarios")
struct ScenarioTests {
    let password = "plum-harbor-71-sail"

    @Test("first launch creates the account; relaunch logs in to it", arguments: StoreKind.available)
    func firstLaunchAndRelaunch(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device()
            let first = try await api.login(a)
            #expect(first.status == .created)
            #expect(first["created"] as? Bool == true)
            #expect(first["userName"] as? String == a.id)
            #expect(first["deviceId"] as? String == a.id)
            #expect(first["migrationFlag"] as? Bool == false)
            #expect(first["tokenType"] as? String == "Bearer")
            #expect(first["expiresIn"] as? Int == 900)

            let again = try await api.login(a)
            #expect(again.status == .ok)
            #expect(again["created"] as? Bool == false)
            #expect(again["accountId"] as? String == first["accountId"] as? String)
        }
    }

    @Test("upper-case device ids log in to the same account and come back lower-case", arguments: StoreKind.available)
    func deviceIdCase(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device()
            let first = try await api.login(a)
            let upper = try await api.login(Device(id: a.id.uppercased(), secret: a.secret))
            #expect(upper.status == .ok)
            #expect(upper["accountId"] as? String == first["accountId"] as? String)
            #expect(upper["deviceId"] as? String == a.id)
        }
    }

    @Test("a wrong device secret is refused", arguments: StoreKind.available)
    func wrongSecret(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device()
            _ = try await api.login(a)
            let wrong = try await api.login(Device(id: a.id, secret: Device().secret))
            #expect(wrong.status == .unauthorized)
            #expect(wrong.error == "invalid_device_credentials")
        }
    }

    @Test("A sets up, B claims, B relaunches into the same account, A is told its data moved", arguments: StoreKind.available)
    func moveFromAToB(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device(), b = Device()
            let sessionA = try await api.login(a)
            let account = sessionA["accountId"] as? String

            let setUp = try await api.setUp(token: sessionA.accessToken, email: "  Mia@Example.COM ", password: password)
            #expect(setUp.status == .created)
            #expect(setUp["email"] as? String == "Mia@Example.COM")
            #expect(setUp["expiresAt"] is String)

            let meA = try await api.me(sessionA.accessToken)
            #expect(meA["migrationFlag"] as? Bool == true)
            let pending = meA["transfer"] as? [String: Any]
            #expect(pending?["email"] as? String == "Mia@Example.COM")
            #expect(try await api.login(a)["migrationFlag"] as? Bool == true)

            let claim = try await api.claim(email: "mia@example.com", password: password, device: b)
            #expect(claim.status == .ok)
            #expect(claim["accountId"] as? String == account)
            #expect(claim["deviceId"] as? String == b.id)
            #expect(claim["migrationFlag"] as? Bool == false)
            #expect(claim["created"] as? Bool == false)

            let relaunchB = try await api.login(b)
            #expect(relaunchB.status == .ok)
            #expect(relaunchB["accountId"] as? String == account)

            let meB = try await api.me(relaunchB.accessToken)
            #expect(meB["transferId"] as? String == b.id)
            #expect(meB["migrationFlag"] as? Bool == false)
            #expect(meB["transfer"] is NSNull)
            let devices = try #require(meB["devices"] as? [[String: Any]], "\(meB.text)")
            #expect(devices.count == 1)
            #expect(devices.first?["deviceId"] as? String == b.id)
            #expect(devices.first?["current"] as? Bool == true)

            let relaunchA = try await api.login(a)
            #expect(relaunchA.status == .gone)
            #expect(relaunchA.error == "device_transferred")
            #expect(relaunchA["transferredAt"] is String)

            // A's tokens die at once, not when they expire.
            let oldAccess = try await api.me(sessionA.accessToken)
            #expect(oldAccess.status == .unauthorized)
            #expect(oldAccess.error == "invalid_token")
            #expect(oldAccess.headers[.wwwAuthenticate] == "Bearer")
            let oldRefresh = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": sessionA.refreshToken])
            #expect(oldRefresh.status == .unauthorized)
            #expect(oldRefresh.error == "invalid_refresh_token")

            // The transfer is consumed.
            let again = try await api.claim(email: "mia@example.com", password: password, device: Device())
            #expect(again.error == "invalid_transfer_credentials")
        }
    }

    @Test("A→B→C: each move keeps the account and retires the previous phone", arguments: StoreKind.available)
    func chain(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device(), b = Device(), c = Device()
            let sessionA = try await api.login(a)
            let account = sessionA["accountId"] as? String
            _ = try await api.setUp(token: sessionA.accessToken, email: "chain@example.com", password: password)
            let sessionB = try await api.claim(email: "chain@example.com", password: password, device: b)
            #expect(sessionB.status == .ok)
            #expect(try await api.setUp(token: sessionB.accessToken, email: "chain@example.com", password: "second-\(password)").status == .created)
            let sessionC = try await api.claim(email: "chain@example.com", password: "second-\(password)", device: c)
            #expect(sessionC.status == .ok)
            #expect(sessionC["accountId"] as? String == account)
            #expect(try await api.login(c)["accountId"] as? String == account)
            #expect(try await api.login(b).status == .gone)
            #expect(try await api.login(a).status == .gone)
            #expect(try await api.me(sessionC.accessToken)["transferId"] as? String == c.id)
            // A retired device id cannot be bound again.
            _ = try await api.setUp(token: sessionC.accessToken, email: "chain@example.com", password: "third-\(password)")
            let retired = try await api.claim(email: "chain@example.com", password: "third-\(password)", device: a)
            #expect(retired.status == .conflict)
            #expect(retired.error == "device_retired")
        }
    }

    @Test("claiming onto a phone that has its own account needs replaceExistingAccount", arguments: StoreKind.available)
    func deviceWithOwnAccount(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device(), b = Device()
            let sessionA = try await api.login(a)
            let sessionB = try await api.login(b)
            _ = try await api.setUp(token: sessionA.accessToken, email: "own@example.com", password: password)

            let refused = try await api.claim(email: "own@example.com", password: password, device: b)
            #expect(refused.status == .conflict)
            #expect(refused.error == "device_has_account")
            // Nothing changed: B still logs in to its own account, A's transfer is still pending.
            #expect(try await api.login(b)["accountId"] as? String == sessionB["accountId"] as? String)
            #expect(try await api.me(sessionA.accessToken)["migrationFlag"] as? Bool == true)

            // B's own account has no way back: replacing it would strand it (contract v1.3).
            let stranding = try await api.claim(email: "own@example.com", password: password, device: b, replace: true)
            #expect(stranding.status == .conflict && stranding.error == "account_would_be_lost", "\(stranding.text)")
            #expect(try await api.login(b)["accountId"] as? String == sessionB["accountId"] as? String)
            let replaced = try await api.claim(email: "own@example.com", password: password, device: b, replace: true, abandon: true)
            #expect(replaced.status == .ok)
            #expect(replaced["accountId"] as? String == sessionA["accountId"] as? String)
            #expect(try await api.login(b)["accountId"] as? String == sessionA["accountId"] as? String)
            // B's old session in its former account is dead.
            #expect(try await api.me(sessionB.accessToken).status == .unauthorized)
        }
    }

    @Test("claim errors about the new device", arguments: StoreKind.available)
    func claimDeviceErrors(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device()
            let sessionA = try await api.login(a)
            _ = try await api.setUp(token: sessionA.accessToken, email: "dev@example.com", password: password)

            let same = try await api.claim(email: "dev@example.com", password: password, device: a)
            #expect(same.status == .conflict)
            #expect(same.error == "device_already_bound")

            let b = Device()
            _ = try await api.login(b)
            let wrongSecret = try await api.claim(
                email: "dev@example.com", password: password, device: Device(id: b.id, secret: Device().secret), replace: true)
            #expect(wrongSecret.status == .unauthorized)
            #expect(wrongSecret.error == "invalid_device_credentials")
            // None of these counted as failed attempts: the transfer still works.
            #expect(try await api.claim(email: "dev@example.com", password: password, device: Device()).status == .ok)
        }
    }

    @Test("cancel lowers the flag and the transfer can no longer be claimed", arguments: StoreKind.available)
    func cancel(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device()
            let session = try await api.login(a)
            _ = try await api.setUp(token: session.accessToken, email: "cancel@example.com", password: password)
            let cancel = try await api.call(.delete, "/v1/me/transfer", token: session.accessToken)
            #expect(cancel.status == .noContent)
            #expect(try await api.me(session.accessToken)["migrationFlag"] as? Bool == false)
            #expect(try await api.claim(email: "cancel@example.com", password: password, device: Device()).error == "invalid_transfer_credentials")
            // Cancelling again is fine.
            #expect(try await api.call(.delete, "/v1/me/transfer", token: session.accessToken).status == .noContent)
        }
    }

    @Test("a transfer expires after its lifetime", arguments: StoreKind.available)
    func expiry(store: StoreKind) async throws {
        try await withServer(store) { api, harness in
            let a = Device()
            let session = try await api.login(a)
            _ = try await api.setUp(token: session.accessToken, email: "exp@example.com", password: password)
            harness.clock.advance(.seconds(24 * 3600 - 1))
            #expect(try await api.login(a)["migrationFlag"] as? Bool == true)
            harness.clock.advance(.seconds(1))
            #expect(try await api.login(a)["migrationFlag"] as? Bool == false)
            let late = try await api.claim(email: "exp@example.com", password: password, device: Device())
            #expect(late.status == .unauthorized)
            #expect(late.error == "invalid_transfer_credentials")
            // The email is free again for another account.
            let other = try await api.login(Device())
            #expect(try await api.setUp(token: other.accessToken, email: "exp@example.com", password: password).status == .created)
        }
    }

    @Test("another account's pending transfer holds its email", arguments: StoreKind.available)
    func emailInUse(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let one = try await api.login(Device())
            let two = try await api.login(Device())
            _ = try await api.setUp(token: one.accessToken, email: "taken@example.com", password: password)
            let clash = try await api.setUp(token: two.accessToken, email: "TAKEN@example.com", password: password)
            #expect(clash.status == .conflict)
            #expect(clash.error == "email_in_use")
            // The same account may replace its own transfer: new password, the old one stops working.
            #expect(try await api.setUp(token: one.accessToken, email: "taken@example.com", password: "new-\(password)").status == .created)
            #expect(try await api.claim(email: "taken@example.com", password: password, device: Device()).error == "invalid_transfer_credentials")
            #expect(try await api.claim(email: "taken@example.com", password: "new-\(password)", device: Device()).status == .ok)
        }
    }

    @Test("locked at exactly the 5th wrong password, for 15 minutes, even for the right one", arguments: StoreKind.available)
    func lockout(store: StoreKind) async throws {
        try await withServer(store) { api, harness in
            let session = try await api.login(Device())
            _ = try await api.setUp(token: session.accessToken, email: "lock@example.com", password: password)
            for _ in 1...4 {
                #expect(try await api.claim(email: "lock@example.com", password: "wrong-guess-1", device: Device()).error == "invalid_transfer_credentials")
            }
            // The right password still works after 4.
            #expect(try await api.me(session.accessToken)["migrationFlag"] as? Bool == true)
            let fifth = try await api.claim(email: "lock@example.com", password: "wrong-guess-1", device: Device())
            #expect(fifth.error == "invalid_transfer_credentials")
            let locked = try await api.claim(email: "lock@example.com", password: password, device: Device())
            #expect(locked.status == .tooManyRequests)
            #expect(locked.error == "too_many_attempts")
            #expect(locked.headers[.retryAfter] == "900")
            harness.clock.advance(.seconds(14 * 60 + 59))
            #expect(try await api.claim(email: "lock@example.com", password: password, device: Device()).status == .tooManyRequests)
            harness.clock.advance(.seconds(1))
            #expect(try await api.claim(email: "lock@example.com", password: password, device: Device()).status == .ok)
        }
    }

    @Test("attempts during a lock are not counted, and the right password before the 5th resets nothing it shouldn't", arguments: StoreKind.available)
    func lockNotCounted(store: StoreKind) async throws {
        try await withServer(store) { api, harness in
            let session = try await api.login(Device())
            _ = try await api.setUp(token: session.accessToken, email: "count@example.com", password: password)
            for _ in 1...5 { _ = try await api.claim(email: "count@example.com", password: "wrong-guess-1", device: Device()) }
            for _ in 1...30 {
                #expect(try await api.claim(email: "count@example.com", password: "wrong-guess-1", device: Device()).status == .tooManyRequests)
            }
            harness.clock.advance(.seconds(15 * 60))
            // 5 counted so far; 30 refused during the lock did not count, so the transfer is not voided.
            #expect(try await api.claim(email: "count@example.com", password: password, device: Device()).status == .ok)
        }
    }

    @Test("voided at exactly 20 wrong passwords in total", arguments: StoreKind.available)
    func voiding(store: StoreKind) async throws {
        try await withServer(store) { api, harness in
            let a = Device()
            let first = try await api.login(a)
            _ = try await api.setUp(token: first.accessToken, email: "void@example.com", password: password)
            for round in 1...4 {
                for _ in 1...5 {
                    #expect(try await api.claim(email: "void@example.com", password: "wrong-guess-1", device: Device()).error == "invalid_transfer_credentials")
                }
                if round < 4 { harness.clock.advance(.seconds(15 * 60)) }
            }
            harness.clock.advance(.seconds(15 * 60))
            let after = try await api.claim(email: "void@example.com", password: password, device: Device())
            #expect(after.status == .unauthorized)
            #expect(after.error == "invalid_transfer_credentials")
            let session = try await api.login(a)
            #expect(session["migrationFlag"] as? Bool == false)
            // Device A can set up a new one.
            #expect(try await api.setUp(token: session.accessToken, email: "void@example.com", password: password).status == .created)
            #expect(try await api.claim(email: "void@example.com", password: password, device: Device()).status == .ok)
        }
    }

    @Test("claims racing for one transfer: exactly one wins", arguments: StoreKind.available, [2, 16])
    func racingClaims(store: StoreKind, count: Int) async throws {
        try await withServer(store) { api, _ in
            let a = Device()
            let session = try await api.login(a)
            _ = try await api.setUp(token: session.accessToken, email: "race@example.com", password: password)
            let devices = (0..<count).map { _ in Device() }
            let statuses = try await withThrowingTaskGroup(of: (Device, Int, String?).self) { group in
                for device in devices {
                    group.addTask {
                        let r = try await api.claim(email: "race@example.com", password: password, device: device)
                        return (device, Int(r.status.code), r.error)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let winners = statuses.filter { $0.1 == 200 }
            #expect(winners.count == 1)
            #expect(statuses.filter { $0.1 != 200 }.allSatisfy { $0.1 == 401 && $0.2 == "invalid_transfer_credentials" })
            // Only the winner is bound; the losers were never bound to anything.
            let winner = try #require(winners.first?.0)
            #expect(try await api.login(winner)["accountId"] as? String == session["accountId"] as? String)
            for loser in statuses.filter({ $0.1 != 200 }).map(\.0) {
                #expect(try await api.login(loser).status == .created)
            }
        }
    }

    @Test("refresh rotates; presenting a rotated token revokes the family", arguments: StoreKind.available)
    func refreshRotation(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device()
            let first = try await api.login(a)
            let second = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": first.refreshToken])
            #expect(second.status == .ok)
            #expect(try second.refreshToken != first.refreshToken)
            #expect(second["accountId"] as? String == first["accountId"] as? String)
            #expect(try await api.me(second.accessToken).status == .ok)

            let reuse = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": first.refreshToken])
            #expect(reuse.status == .unauthorized)
            #expect(reuse.error == "invalid_refresh_token")
            // The whole family is gone: the newer refresh token and its access token.
            #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": second.refreshToken]).status == .unauthorized)
            #expect(try await api.me(second.accessToken).status == .unauthorized)
            // The device itself still logs in.
            #expect(try await api.login(a).status == .ok)
            #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": "not-a-token"]).error == "invalid_refresh_token")
        }
    }

    @Test("refresh tokens expire", arguments: StoreKind.available)
    func refreshExpiry(store: StoreKind) async throws {
        try await withServer(store) { api, harness in
            let first = try await api.login(Device())
            harness.clock.advance(.seconds(30 * 24 * 3600))
            #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": first.refreshToken]).status == .unauthorized)
        }
    }

    @Test("access tokens expire", arguments: StoreKind.available)
    func accessExpiry(store: StoreKind) async throws {
        try await withServer(store) { api, harness in
            let first = try await api.login(Device())
            harness.clock.advance(.seconds(15 * 60 - 1))
            #expect(try await api.me(first.accessToken).status == .ok)
            harness.clock.advance(.seconds(1))
            let expired = try await api.me(first.accessToken)
            #expect(expired.status == .unauthorized)
            #expect(expired.error == "invalid_token")
        }
    }

    @Test("logout revokes the device's tokens; the device stays bound", arguments: StoreKind.available)
    func logout(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device()
            let session = try await api.login(a)
            #expect(try await api.call(.post, "/v1/logout", token: session.accessToken).status == .noContent)
            #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": session.refreshToken]).status == .unauthorized)
            #expect(try await api.me(session.accessToken).status == .unauthorized)
            let again = try await api.login(a)
            #expect(again.status == .ok)
            #expect(again["accountId"] as? String == session["accountId"] as? String)
        }
    }
}

@Suite("Support actions seen by the app")
struct RevocationTests {
    @Test("a revoked device gets 403 device_revoked, its tokens die at once, and it cannot claim")
    func revokedDevice() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        try await harness.run { api, parts in
            let stolen = Device()
            let session = try await api.login(stolen)
            let accounts = try await parts.service.revokeDevice(DeviceID(stolen.id)!, by: .support(operator: "test"), reason: "stolen phone")
            #expect(accounts == [session["accountId"] as? String])
            let login = try await api.login(stolen)
            #expect(login.status == .forbidden)
            #expect(login.error == "device_revoked")
            #expect(try await api.me(session.accessToken).status == .unauthorized)
            #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": session.refreshToken]).status == .unauthorized)

            let owner = try await api.login(Device())
            _ = try await api.setUp(token: owner.accessToken, email: "owner@example.com", password: "plum-harbor-71-sail")
            let claim = try await api.claim(email: "owner@example.com", password: "plum-harbor-71-sail", device: stolen)
            #expect(claim.status == .conflict)
            #expect(claim.error == "device_retired")
        }
    }

    @Test("the audit trail records creations, set-ups, failures, locks, claims, moves and revocations, not logins")
    func auditTrail() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        try await harness.run { api, parts in
            let a = Device(), b = Device()
            let session = try await api.login(a)
            _ = try await api.login(a)
            _ = try await api.login(Device(id: a.id, secret: Device().secret))
            _ = try await api.setUp(token: session.accessToken, email: "audit@example.com", password: "plum-harbor-71-sail")
            for _ in 1...5 { _ = try await api.claim(email: "audit@example.com", password: "wrong-guess-1", device: b) }
            harness.clock.advance(.seconds(900))
            _ = try await api.claim(email: "audit@example.com", password: "plum-harbor-71-sail", device: b)
            _ = try await parts.service.revokeDevice(DeviceID(b.id)!, by: .support(operator: "test"), reason: "stolen phone")
        }
        let store = try SQLiteStore(path: harness.database.path)
        let kinds = try await store.pool.read { db in try String.fetchAll(db, sql: "SELECT kind FROM audit_events ORDER BY id") }
        try store.close()
        #expect(kinds == [
            "account.created", "transfer.set_up",
            "transfer.claim_failed",  // five guesses from one client within the hour: one row, repeats 5
            "transfer.locked", "device.moved", "transfer.claimed", "device.revoked",
        ])
    }
}
