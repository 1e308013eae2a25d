import Foundation
import Logging
import Testing
import TransferCore
import TransferHTTP
import TransferSQL
import TransferStorage
@testable import TransferTestSupport

/// Contract v1.2, "Inactive accounts": with `--inactive-account-ttl` the pruner erases, as
/// `DELETE /v1/me` does, what nobody used for that long, and never what holds something (a
/// pending transfer, an Apple ID, the app backend's protection), on every store.
@Suite("Inactive accounts")
struct InactiveAccountTests {
    let t0 = Timestamp(milliseconds: 1_795_000_000_000)
    static let day = Duration.seconds(86_400)
    /// Ninety-one days after `t0`, with a TTL of ninety days.
    var now: Timestamp { t0 + Self.day * 91 }
    var cutoffs: PruneCutoffs { PruneCutoffs(now: now, retainedSince: t0 - .seconds(1), inactiveBefore: now - Self.day * 90) }

    static func withStore(_ location: DatabaseLocation, _ body: @Sendable (any SupportStore) async throws -> Void) async throws {
        var quiet = Logger(label: "test.store")
        quiet.logLevel = .error
        try await Storage.withStore(location, poolSize: 20, pooling: TestPostgres.pooling, logger: quiet, body)
    }

    /// The `account.deleted` events of the outbox, as (account, data.reason).
    static func deletions(_ store: any SupportStore) async throws -> [(account: String, reason: String?)] {
        try await store.outbox(limit: 10_000).filter { $0.type == "account.deleted" }.map { message in
            let body = try JSONSerialization.jsonObject(with: Data(message.body.utf8)) as? [String: Any]
            return (message.accountID, (body?["data"] as? [String: Any])?["reason"] as? String)
        }
    }

    func account(_ calls: StoreCalls, _ device: DeviceID, at: Timestamp, address: String? = nil) async throws -> String {
        let grant = try #require(try await calls.login(device, at: at, address: address).grant, "login of \(device.value)")
        return grant.account.accountID
    }

    static func device() -> DeviceID { DeviceID(UUID().uuidString)! }

    @Test("an account nobody used for the TTL is erased as DELETE /v1/me erases: its phone hears account_deleted, the webhook says inactive, its emails and addresses are gone",
          arguments: StoreKind.available)
    func erased(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation { location, _ in
            try await Self.withStore(location) { store in
                let calls = StoreCalls(store: store)
                let idle = Self.device(), busy = Self.device()
                let gone = try await account(calls, idle, at: t0, address: "203.0.113.91")
                _ = try await calls.setUp(account: gone, email: "Idle.User@example.com", at: t0)  // expired long before the round
                let kept = try await account(calls, busy, at: t0)
                _ = try await calls.login(busy, at: now - Self.day)

                let counts = try #require(try await store.prune(cutoffs, batchSize: 5_000))
                #expect(counts.inactiveAccounts == 1, "only the idle account: \(counts)")
                #expect(try await calls.login(idle, at: now) == .failure(.accountDeleted), "its phone hears 410 account_deleted")
                #expect(try await calls.login(busy, at: now).grant?.account.accountID == kept, "the account used yesterday stays")

                let deletions = try await Self.deletions(store)
                #expect(deletions.map(\.account) == [gone] && deletions.map(\.reason) == ["inactive"], "one account.deleted, reason inactive: \(deletions)")
                let report = try #require(try await store.report(accountID: gone, at: now, recentEvents: 50))
                #expect(report.deletedAt == now)
                #expect(report.recentEvents.map(\.kind) == [.accountDeleted] && report.recentEvents.first?.actor == .system,
                        "only the tombstone stays, by the system: \(report.recentEvents)")
                #expect(try await store.findAccounts("idle.user@example.com").isEmpty, "the transfer's email went with the account")
                let raw = RawDatabase(location: location)
                #expect(try await raw.strings("SELECT COALESCE(last_address, 'none') FROM device_accounts WHERE account_id = '\(gone)'") == ["none"],
                        "the address its logins recorded is erased")
                #expect(try await raw.strings("SELECT id FROM transfers WHERE account_id = '\(gone)'").isEmpty)

                let again = try #require(try await store.prune(cutoffs, batchSize: 5_000))
                #expect(again.inactiveAccounts == 0, "a second round finds nothing: \(again)")
                #expect(try await Self.deletions(store).count == 1, "one webhook")
            }
        }
    }

    @Test("a pending transfer, an Apple ID, protection and a recent login each keep an account; protection lifted, the next round erases it",
          arguments: StoreKind.available)
    func kept(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let plain = try await account(calls, Self.device(), at: t0)
            let transfer = try await account(calls, Self.device(), at: t0)
            _ = try await calls.setUp(account: transfer, email: "moving@example.com", at: now - .seconds(600))
            let apple = try await account(calls, Self.device(), at: t0)
            try await store.execute(LinkApple(link: AppleLink(
                accountID: apple, sub: "001122.apple", email: nil, isPrivateEmail: nil, linkedAt: t0), now: t0)).get()
            let protected = try await account(calls, Self.device(), at: t0)
            try await store.execute(SetProtectionCommand(accountID: protected, protected: true, now: t0)).get()
            let recentDevice = Self.device()
            let recent = try await account(calls, recentDevice, at: t0)
            _ = try await calls.login(recentDevice, at: now - Self.day * 89)

            let before = cutoffs.inactiveBefore!
            #expect(try await store.inactiveCounts(before: before, at: now) == InactiveCounts(erasable: 1, protectedInactive: 1, protected: 1))
            let first = try #require(try await store.prune(cutoffs, batchSize: 2))
            #expect(first.inactiveAccounts == 1, "\(first)")
            for (name, id) in [("transfer", transfer), ("apple", apple), ("protected", protected), ("recent", recent)] {
                #expect(try await store.report(accountID: id, at: now, recentEvents: 1)?.deletedAt == nil, "the \(name) account is kept")
            }
            #expect(try await store.report(accountID: plain, at: now, recentEvents: 1)?.deletedAt != nil, "the plain one is erased")

            try await store.execute(SetProtectionCommand(accountID: protected, protected: false, now: now)).get()
            let second = try #require(try await store.prune(cutoffs, batchSize: 2))
            #expect(second.inactiveAccounts == 1, "\(second)")
            #expect(try await store.report(accountID: protected, at: now, recentEvents: 1)?.deletedAt != nil, "unprotected, it goes in the next round")
            #expect(try await Self.deletions(store).map(\.account) == [plain, protected])
            #expect(try await store.execute(SetProtectionCommand(accountID: protected, protected: true, now: now)).refusal == .accountNotFound,
                    "an erased account cannot be protected")
        }
    }

    @Test("what changes between the candidates' read and the erasure wins: a login, a protection; an account erased already is left alone",
          arguments: StoreKind.available)
    func recheckedUnderLock(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let phone = Self.device()
            let returning = try await account(calls, phone, at: t0)
            let protectedLate = try await account(calls, Self.device(), at: t0)
            let plain = try await account(calls, Self.device(), at: t0)
            let before = cutoffs.inactiveBefore!
            #expect(try await store.inactiveCounts(before: before, at: now).erasable == 3)
            // The round read its candidates; then the user opens the app, and the backend protects the other.
            _ = try await calls.login(phone, at: now)
            try await store.execute(SetProtectionCommand(accountID: protectedLate, protected: true, now: now)).get()
            let erase = { (id: String) in EraseInactiveAccountCommand(accountID: id, now: now, inactiveBefore: before) }
            #expect(try await store.execute(erase(returning)) == .success(.kept(.recentLogin)))
            #expect(try await store.execute(erase(protectedLate)) == .success(.kept(.protected)))
            #expect(try await store.execute(erase(plain)) == .success(.erased))
            #expect(try await store.execute(erase(plain)) == .success(.kept(.gone)), "a second node finds it erased")
            #expect(try await Self.deletions(store).map(\.account) == [plain], "one webhook")
            #expect(try await calls.login(phone, at: now).grant?.account.accountID == returning)
        }
    }

    @Test("a phone used daily with one account keeps its other accounts (the contract counts devices); a quiet phone loses all of its own",
          arguments: StoreKind.available)
    func devicesCount(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let daily = Self.device(), quiet = Self.device()
            let mine = try await calls.account(daily, at: t0)
            let child = try await calls.account(daily, .newAccount, at: t0)  // a second profile, not opened since
            _ = try await calls.login(daily, .account(mine), at: now - Self.day)
            _ = try await calls.account(quiet, at: t0)
            _ = try await calls.account(quiet, .newAccount, at: t0)

            let before = cutoffs.inactiveBefore!
            #expect(try await store.inactiveCounts(before: before, at: now).erasable == 2, "only the quiet phone's two accounts")
            let erase = { (id: String) in EraseInactiveAccountCommand(accountID: id, now: now, inactiveBefore: before) }
            #expect(try await store.execute(erase(child)) == .success(.kept(.recentLogin)),
                    "checked again under lock, the phone's login with another account keeps it")
            let round = try #require(try await store.prune(cutoffs, batchSize: 5_000))
            #expect(round.inactiveAccounts == 2, "\(round)")
            #expect(try await calls.login(daily, .account(child), at: now).grant?.account.accountID == child, "the second profile is still there")
            #expect(try await calls.login(quiet, at: now) == .failure(.accountDeleted))
        }
    }

    /// What the erasure's first statement asks: on PostgreSQL a set-up can commit while the
    /// erasure waits for the account's lock, after its pending transfers were read.
    struct OpenTransferProbe: StoreOperation {
        var accountID: String
        var now: Timestamp
        var reads: [FactKey] { [] }
        func plan(_ facts: Facts) throws -> Plan<Void> { Plan((), [.requireNoOpenTransfer(accountID: accountID, at: now)]) }
    }

    @Test("an erasure asks for open transfers again after its locks: one set up meanwhile rolls it back and the round keeps the account",
          arguments: StoreKind.available)
    func transferSetUpMeanwhile(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let idle = try await account(calls, Self.device(), at: t0)
            let moving = try await account(calls, Self.device(), at: t0)
            _ = try await calls.setUp(account: moving, email: "late@example.com", at: now - .seconds(60), by: .support(operator: "kim"))
            try await store.execute(OpenTransferProbe(accountID: idle, now: now)).get()
            await #expect(throws: TransferSetUpMeanwhile.self, "an open transfer found under the locks stops the erasure") {
                try await store.execute(OpenTransferProbe(accountID: moving, now: now))
            }
            let plan = EraseInactiveAccountCommand(accountID: idle, now: now, inactiveBefore: cutoffs.inactiveBefore!)
            #expect(try await store.execute(plan) == .success(.erased))
        }
    }

    @Test("two nodes pruning at once erase each account once and send one webhook for it", arguments: StoreKind.available)
    func twoNodes(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation { location, _ in
            try await Self.withStore(location) { first in
                try await Self.withStore(location) { second in
                    let calls = StoreCalls(store: first)
                    var ids: [String] = []
                    for _ in 0..<12 { ids.append(try await account(calls, Self.device(), at: t0)) }
                    let cutoffs = self.cutoffs
                    // Both pruners, and both erasure loops straight (PostgreSQL's pruner lock lets one node prune at a time).
                    async let a = first.prune(cutoffs, batchSize: 5)
                    async let b = second.prune(cutoffs, batchSize: 5)
                    let rounds = try await [a, b].compactMap { $0?.inactiveAccounts }
                    #expect(rounds.reduce(0, +) == 12, "each account erased once: \(rounds)")
                    for _ in 0..<3 { _ = try await calls.login(Self.device(), at: t0) }
                    let (x, y) = (try #require(first as? any SQLStore), try #require(second as? any SQLStore))
                    async let c = x.eraseInactiveAccounts(cutoffs, batchSize: 2, parallel: 2, erase: { try await first.execute($0).get() })
                    async let d = y.eraseInactiveAccounts(cutoffs, batchSize: 2, parallel: 2, erase: { try await second.execute($0).get() })
                    let loops = try await [c, d]
                    #expect(loops.reduce(0, +) == 3, "each of the 3 later accounts erased once: \(loops)")
                    let deletions = try await Self.deletions(first)
                    #expect(deletions.count == 15 && Set(deletions.map(\.account)).count == 15, "one account.deleted each: \(deletions.count)")
                    #expect(Set(ids).isSubset(of: Set(deletions.map(\.account))))
                }
            }
        }
    }

    @Test("the server's pruner erases inactive accounts every --prune-interval; the phone then hears 410 account_deleted", arguments: StoreKind.available)
    func serverRound(kind: StoreKind) async throws {
        try await withHarness(kind, configure: {
            $0.inactiveAccountTTL = Self.day * 30
            $0.pruneInterval = .seconds(1)
        }) { harness in
            try await harness.run { api, parts in
                let calls = StoreCalls(store: parts.store)
                let old = Self.device()
                let gone = try await account(calls, old, at: harness.clock.now() - Self.day * 31)
                let fresh = Device()
                #expect(try await api.login(fresh).status == .created)
                var deleted = false
                for _ in 0..<100 where !deleted {
                    try await Task.sleep(for: .milliseconds(100))
                    deleted = try await parts.store.report(accountID: gone, at: harness.clock.now(), recentEvents: 1)?.deletedAt != nil
                }
                #expect(deleted, "a round ran within 10 s of a 1 s interval")
                let phone = Device(id: old.value, secret: StoreCalls.secret(old))
                let login = try await api.login(phone)
                #expect(login.status == .gone && login.error == "account_deleted", "\(login.text)")
                #expect(try await api.login(fresh).status == .ok, "the account in use stays")
                #expect(try await Self.deletions(parts.store).map(\.reason) == ["inactive"])
            }
        }
    }

    @Test("PUT /v1/service/accounts/{accountId}/protection: 204 with the service key, 404 account_not_found, 400 for a bad body, 401 without the key",
          arguments: StoreKind.available)
    func protectionRoute(kind: StoreKind) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { api, parts in
                let key = try #require(try await parts.service.createServiceKey(name: "shop", by: .support(operator: "test"), reason: "test")).key
                let account = try await api.login(Device()).accountID as String
                func put(_ id: String, _ body: [String: Any], key: String? = key) async throws -> Reply {
                    try await api.call(.put, "/v1/service/accounts/\(id)/protection", json: body, token: key)
                }
                #expect(try await put(account, ["protected": true]).status == .noContent)
                let report = try #require(try await parts.store.report(accountID: account, at: harness.clock.now(), recentEvents: 1))
                let since = try #require(report.protectedAt, "protected")
                #expect(try await put(account.uppercased(), ["protected": true]).status == .noContent, "ids are case-insensitive")
                #expect(try await parts.store.report(accountID: account, at: harness.clock.now(), recentEvents: 1)?.protectedAt == since,
                        "asked again, the protection keeps its time")
                let unknown = try await put(UUID().uuidString, ["protected": true])
                #expect(unknown.status == .notFound && unknown.error == "account_not_found", "\(unknown.text)")
                for body: [String: Any] in [[:], ["protected": "yes"], ["protected": 1]] {
                    let bad = try await put(account, body)
                    #expect(bad.status == .badRequest && bad.error == "invalid_request", "\(body): \(bad.text)")
                }
                #expect(try await put("not-a-uuid", ["protected": true]).status == .badRequest)
                #expect(try await put(account, ["protected": false], key: nil).status == .unauthorized)
                #expect(try await put(account, ["protected": false], key: try await api.login(Device()).accessToken).status == .unauthorized,
                        "an app's token is not a service key")
                #expect(try await parts.store.report(accountID: account, at: harness.clock.now(), recentEvents: 1)?.protectedAt == since,
                        "refused calls changed nothing")
                #expect(try await put(account, ["protected": false]).status == .noContent)
                #expect(try await parts.store.report(accountID: account, at: harness.clock.now(), recentEvents: 1)?.protectedAt == nil)
            }
        }
    }

    @Test("transfer inactive counts what the next rounds would erase and the protected accounts, erasing nothing; transfer account shows protection",
          arguments: StoreKind.available)
    func cliCounts(kind: StoreKind) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { api, parts in
                let calls = StoreCalls(store: parts.store)
                let old = Timestamp(Date()) - Self.day * 100
                let idle = [try await account(calls, Self.device(), at: old), try await account(calls, Self.device(), at: old)]
                let kept = try await account(calls, Self.device(), at: old)
                try await parts.service.setProtection(accountID: kept, protected: true)
                _ = try await api.login(Device())
                let db = harness.databaseArgument

                let json = try CLI.transfer(["inactive", "--inactive-account-ttl", "90d", "--json"], database: db)
                #expect(json.code == 0, "\(json)")
                #expect(try json.json["erasable"] as? Int == 2)
                #expect(try json.json["protectedInactive"] as? Int == 1)
                #expect(try json.json["protected"] as? Int == 1)
                let text = try CLI.transfer(["inactive", "--inactive-account-ttl", "90d"], database: db)
                #expect(text.code == 0 && text.out.contains("to be erased") && text.out.contains("2 ("), "\(text)")
                #expect(try CLI.transfer(["inactive", "--inactive-account-ttl", "120d", "--json"], database: db).json["erasable"] as? Int == 0,
                        "nobody is 120 days idle")
                for id in idle + [kept] {
                    #expect(try await parts.store.report(accountID: id, at: Timestamp(Date()), recentEvents: 1)?.deletedAt == nil, "nothing erased")
                }
                let off = try CLI.transfer(["inactive"], database: db)
                #expect(off.code == 2 && off.err.contains("--inactive-account-ttl"), "without the TTL: a usage error that names it: \(off)")
                let short = try CLI.transfer(["inactive", "--inactive-account-ttl", "7d"], database: db)
                #expect(short.code == 2 && short.err.contains("30d"), "\(short)")

                let shown = try CLI.transfer(["account", kept, "--json"], database: db)
                #expect(try shown.json["protected"] as? Bool == true && (try shown.json["protectedAt"] as? String) != nil, "\(shown)")
                #expect(try CLI.transfer(["account", idle[0], "--json"], database: db).json["protected"] as? Bool == false)
                #expect(try CLI.transfer(["account", kept], database: db).out.contains("protected"))
            }
        }
    }

    @Test("a v11 database with an idle phone and a busy one upgrades to v12: nobody is protected, protection works, the idle account is erased once unprotected",
          arguments: StoreKind.available)
    func upgradeFromV11(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation(empty: true) { location, file in
            let idle = Device(), busy = Device()
            let idleID = "b1100000-0000-4000-8000-000000000001", busyID = "b1100000-0000-4000-8000-000000000002"
            let now = Timestamp(Date()).milliseconds, day: Int64 = 86_400_000
            let raw = RawDatabase(location: location)
            try await raw.migrate(through: 11)
            try await raw.run([
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(idleID), .text(idle.id), .int(now - 200 * day)]),
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(busyID), .text(busy.id), .int(now - 200 * day)]),
                ("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)", [.text(idle.id), .blob(SecretHash(of: idle.secret).bytes), .int(now - 200 * day)]),
                ("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)", [.text(busy.id), .blob(SecretHash(of: busy.secret).bytes), .int(now - 200 * day)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at, last_login_at, last_address) VALUES (?, ?, 'active', ?, ?, ?)",
                 [.text(idle.id), .text(idleID), .int(now - 200 * day), .int(now - 150 * day), .text("198.51.100.7")]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at, last_login_at) VALUES (?, ?, 'active', ?, ?)",
                 [.text(busy.id), .text(busyID), .int(now - 200 * day), .int(now - day)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(idleID), .text(idle.id)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(busyID), .text(busy.id)]),
            ])
            try await Harness(location: location, file: file).run { api, parts in
                let key = try #require(try await parts.service.createServiceKey(name: "shop", by: .support(operator: "test"), reason: "test")).key
                #expect(try await parts.store.report(accountID: idleID, at: Timestamp(Date()), recentEvents: 1)?.protectedAt == nil,
                        "an upgraded account is not protected")
                let at = Timestamp(Date())
                let cutoffs = PruneCutoffs(now: at, retainedSince: at - Self.day * 400, inactiveBefore: at - Self.day * 90)
                #expect(try await parts.store.inactiveCounts(before: at - Self.day * 90, at: at) == InactiveCounts(erasable: 1, protectedInactive: 0, protected: 0))
                let path = "/v1/service/accounts/\(idleID)/protection"
                #expect(try await api.call(.put, path, json: ["protected": true], token: key).status == .noContent)
                #expect(try await parts.store.prune(cutoffs, batchSize: 500)?.inactiveAccounts == 0, "protected, it stays")
                #expect(try await api.call(.put, path, json: ["protected": false], token: key).status == .noContent)
                #expect(try await parts.store.prune(cutoffs, batchSize: 500)?.inactiveAccounts == 1)
                let login = try await api.login(idle)
                #expect(login.status == .gone && login.error == "account_deleted", "\(login.text)")
                let kept = try await api.login(busy)
                #expect(try kept.status == .ok && kept.accountID == busyID, "the phone used yesterday keeps its account: \(kept.text)")
                #expect(try await Self.deletions(parts.store).map(\.reason) == ["inactive"])
                #expect(try await raw.strings("SELECT COALESCE(last_address, 'none') FROM device_accounts WHERE account_id = '\(idleID)'") == ["none"])
            }
        }
    }

    @Test("--inactive-account-ttl is off by default and at least 30d, --prune-interval 1h by default and at least 1s: refused at start in one line")
    func flags() throws {
        let defaults = try ServerConfiguration.load(arguments: [], environment: [:])
        #expect(defaults.inactiveAccountTTL == nil)
        #expect(defaults.pruneInterval == .seconds(3600))
        let on = try ServerConfiguration.load(arguments: ["--inactive-account-ttl", "30d", "--prune-interval", "1s"], environment: [:])
        #expect(on.inactiveAccountTTL == Self.day * 30)
        #expect(on.pruneInterval == .seconds(1))
        #expect(try ServerConfiguration.load(arguments: [], environment: ["TRANSFER_INACTIVE_ACCOUNT_TTL": "400d"]).inactiveAccountTTL == Self.day * 400)
        #expect(try ServerConfiguration.load(arguments: ["--inactive-account-ttl", "off"], environment: [:]).inactiveAccountTTL == nil)
        for (arguments, environment, words) in [
            (["--inactive-account-ttl", "29d"], [String: String](), ["--inactive-account-ttl", "30d"]),
            ([], ["TRANSFER_INACTIVE_ACCOUNT_TTL": "719h"], ["TRANSFER_INACTIVE_ACCOUNT_TTL", "30d"]),
            (["--inactive-account-ttl", "soon"], [:], ["--inactive-account-ttl"]),
            (["--prune-interval", "0s"], [:], ["--prune-interval"]),
            (["--prune-interval", "500ms"], [:], ["--prune-interval"]),
            (["--inactive-account-ttl", "30d", "--database", "postgres://transfer@db.example/transfer", "--database-pool-size", "1"], [:],
             ["--inactive-account-ttl", "--database-pool-size 2"]),
        ] {
            do {
                _ = try ServerConfiguration.load(arguments: arguments, environment: environment)
                Issue.record("\(arguments) \(environment) was accepted")
            } catch {
                let text = "\(error)"
                #expect(words.allSatisfy(text.contains) && !text.contains("\n"), "one line naming the flag: \(text)")
            }
        }
    }
}

extension InactiveAccountTests {
    @Test("transfer-server with --inactive-account-ttl under 30d stops at once, exit 2, with one line naming the flag")
    func refusedAtStart() throws {
        let run = try Executable.run("transfer-server", ["--inactive-account-ttl", "14d", "--database", "sqlite:/nonexistent/never-opened.sqlite"])
        #expect(run.code == 2, "\(run)")
        #expect(run.err.split(separator: "\n").filter { !$0.isEmpty }.count == 1, "\(run)")
        #expect(run.err.contains("--inactive-account-ttl") && run.err.contains("30d"), "\(run)")
    }
}

/// Links an Apple ID as the link use case's plan does, without Apple.
private struct LinkApple: StoreOperation {
    var link: AppleLink
    var now: Timestamp
    var reads: [FactKey] { [] }
    func plan(_ facts: Facts) throws -> Plan<Void> { Plan((), [.linkApple(link)]) }
}
