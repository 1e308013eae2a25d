import Foundation
import HTTPTypes
import Testing
import TransferCore
@testable import TransferTestSupport

/// Contract v1.1, "Deleting an account" (App Store guideline 5.1.1(v), the GDPR's right to
/// erasure), told through the app's and support's calls, on every store.
@Suite("Deleting an account")
struct DeletionTests {
    let password = "plum-harbor-71-sail"
    static let address = "203.0.113.77"
    static let forwarded: HTTPFields = [HTTPField.Name("X-Forwarded-For")!: address]

    func login(_ api: Client, _ device: Device) async throws -> Reply {
        try await api.call(.post, "/v1/devices/login", json: device.loginBody, headers: Self.forwarded)
    }

    @Test("deleting from the app: the phone hears 410 account_deleted, its tokens die, and no email or address is left in the database file")
    func deleteFromTheApp() async throws {
        let harness = Harness { $0.trustedProxies = .loopback }
        defer { harness.database.remove() }
        let a = Device(), b = Device()
        try await harness.run { api, parts in
            // The account moved from A to B once, and has a pending transfer again.
            let first = try await login(api, a)
            #expect(try await api.call(.put, "/v1/me/transfer", json: ["email": "Erase.Me@example.com", "temporaryPassword": password],
                                       token: first.accessToken, headers: Self.forwarded).status == .created)
            let claimed = try await api.call(.post, "/v1/transfers/claim", json: [
                "email": "Erase.Me@example.com", "temporaryPassword": password, "deviceId": b.id, "deviceSecret": b.secret,
            ], headers: Self.forwarded)
            #expect(claimed.status == .ok, "\(claimed.text)")
            let account = try claimed.accountID
            #expect(try await api.setUp(token: claimed.accessToken, email: "second.erase@example.com", password: password).status == .created)

            #expect(try await api.call(.delete, "/v1/me", token: claimed.accessToken).status == .noContent)
            #expect(try await api.me(claimed.accessToken).status == .unauthorized, "the session ended with the account")
            #expect(try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": try claimed.refreshToken]).error == "invalid_refresh_token")
            let again = try await api.login(b)
            #expect(again.status == .gone)
            #expect(again.error == "account_deleted", "B held only this account: \(again.text)")
            #expect(try await api.login(b, account: account).error == "account_deleted")
            #expect(try await api.login(a).error == "account_deleted", "A, left with no account, hears it too")
            let claim = try await api.claim(email: "second.erase@example.com", password: password, device: Device())
            #expect(claim.error == "invalid_transfer_credentials", "the pending transfer went with the account")
            #expect(try await api.login(b, newAccount: true).error == "account_deleted", "a retired phone holds nothing new")

            let report = try #require(try await parts.store.report(accountID: account, at: harness.clock.now(), recentEvents: 50))
            #expect(report.deletedAt != nil)
            #expect(report.recentEvents.map(\.kind) == [.accountDeleted], "only the tombstone stays in the audit trail")
            #expect(report.transfer == nil)
            let events = try await parts.store.outbox(limit: 100).filter { $0.accountID == account }.map(\.type)
            #expect(events.last == "account.deleted", "written for the app backend (delivered once a webhook is configured): \(events)")
        }
        // The file and its WAL, as the server left them.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: harness.database.path))
        let wal = harness.database.path + "-wal"
        if FileManager.default.fileExists(atPath: wal) { bytes.append(try Data(contentsOf: URL(fileURLWithPath: wal))) }
        let text = String(decoding: bytes, as: UTF8.self).lowercased()
        let left = ["erase.me@example.com", "second.erase@example.com", Self.address, "$argon2id$v="].filter { text.contains($0) }
        if !left.isEmpty { try? FileManager.default.copyItem(atPath: harness.database.path, toPath: "/tmp/deletion-left.sqlite") }
        #expect(left.isEmpty, "still in the database file after the deletion")
    }

    @Test("a phone with two accounts keeps the other; the most recently used one becomes current", arguments: StoreKind.available)
    func secondAccountStays(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let phone = Device()
            let personal = try await api.login(phone)
            let work = try await api.login(phone, newAccount: true)
            let third = try await api.login(phone, newAccount: true)
            _ = try await api.login(phone, account: try work.accountID)
            #expect(try await api.call(.delete, "/v1/me", token: third.accessToken).status == .noContent)
            let after = try await api.login(phone)
            #expect(after.status == .ok, "\(after.text)")
            #expect(try after.accountID == (try work.accountID), "work was used last")
            #expect(try after.accountIDs == [try personal.accountID, try work.accountID])
            #expect(try await api.me(try personal.accessToken).status == .ok, "the other accounts' sessions stay")
            #expect(try await api.login(phone, account: try third.accountID).error == "account_deleted")
        }
    }

    @Test("support deletes with the CLI; a second time says so; the account cannot be issued a transfer", arguments: StoreKind.available)
    func fromTheCLI(kind: StoreKind) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { api, parts in
                let phone = Device()
                let session = try await api.login(phone)
                let account = try session.accountID
                let run = try CLI.transfer(["delete-account", account, "--reason", "ticket 51: user asked by email"], database: harness.databaseArgument)
                #expect(run.code == 0, "\(run)")
                #expect(try await InactiveAccountTests.deletions(parts.store).map(\.reason) == ["support"], "account.deleted says support deleted it")
                #expect(run.out.contains("Deleted account \(account)"))
                #expect(try await api.login(phone).error == "account_deleted")
                #expect(try await api.me(session.accessToken).status == .unauthorized)
                let again = try CLI.transfer(["delete-account", account, "--reason", "again", "--json"], database: harness.databaseArgument)
                #expect(again.code == 0)
                #expect(again.out.contains("already deleted"))
                let issue = try CLI.transfer(["issue", account, "--email", "back@example.com", "--reason", "x"], database: harness.databaseArgument)
                #expect(issue.code == 3, "\(issue)")
                let shown = try CLI.transfer(["account", account], database: harness.databaseArgument)
                #expect(shown.out.contains("deleted"), "\(shown)")
                let history = try CLI.transfer(["history", account], database: harness.databaseArgument)
                #expect(history.out.contains("account.deleted"))
                #expect(history.out.contains("ticket 51"), "the operator's reason stays with the tombstone")
            }
        }
    }

    @Test("a claim racing a deletion: the account ends deleted and on no phone, whichever commits first", arguments: StoreKind.available)
    func claimRacesDeletion(kind: StoreKind) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { api, parts in
                var outcomes: Set<String> = []
                for round in 0..<12 {
                    let a = Device(), b = Device()
                    let session = try await api.login(a)
                    let account = try session.accountID
                    let email = "race\(round)@example.com"
                    #expect(try await api.setUp(token: session.accessToken, email: email, password: password).status == .created)
                    async let claim = api.claim(email: email, password: password, device: b)
                    // Throws when refused: the account is found and deleted whichever commits first.
                    async let deletion: Void = parts.service.deleteAccount(accountID: account, by: .support(operator: "ana"), reason: "race")
                    let (claimed, _) = try await (claim, deletion)
                    outcomes.insert(claimed.status == .ok ? "claim first" : "deletion first")
                    if claimed.status == .ok {
                        #expect(try await api.login(b).error == "account_deleted", "deleted from B after the claim")
                    } else {
                        #expect(claimed.error == "invalid_transfer_credentials", "\(claimed.text)")
                        #expect(try await api.login(b).status == .created, "B never held the account")
                    }
                    let report = try #require(try await parts.store.report(accountID: account, at: harness.clock.now(), recentEvents: 10))
                    #expect(report.deletedAt != nil)
                    #expect(report.devices.allSatisfy { $0.account(account)?.state != .active }, "round \(round): on no phone")
                    #expect(report.transfer == nil)
                }
                // Both orders usually happen in twelve rounds; either is consistent, so only record it.
                print("claim vs deletion on \(kind): \(outcomes.sorted())")
            }
        }
    }
}
