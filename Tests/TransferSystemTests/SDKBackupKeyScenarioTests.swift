import Foundation
import Testing
import TransferKit
import TransferKitTesting
@testable import TransferTestSupport

/// QA's scenarios of backup keys, claims in flight and erased accounts, told as the user walks
/// them: each phone a TransferKit client with its own (memory) Keychain and app files, and the
/// iCloud Keychain of its Apple account, shared by the user's phones, against a real
/// `transfer-server` process on every store.
@Suite("TransferKit backup keys and resumed claims against the real server")
struct SDKBackupKeyScenarioTests {
    let scenarios = SDKScenarioTests()

    func signedIn(_ result: LaunchResult) -> (account: String, created: Bool)? {
        scenarios.signedIn(result)
    }

    func offered(_ point: StartingPoint) -> [AccountBackup] {
        if case .backupsFound(let backups) = point { return backups }
        return []
    }

    /// Every time the scenario cares about, made `milliseconds` older (the server's clock is
    /// the real one, so the database is aged instead).
    func age(_ database: String, by milliseconds: Int64) async throws {
        try await RawDatabase(argument: database).run([
            ("UPDATE accounts SET created_at = created_at - ?", [.int(milliseconds)]),
            ("UPDATE device_accounts SET added_at = added_at - ?, last_login_at = last_login_at - ?", [.int(milliseconds), .int(milliseconds)]),
            ("UPDATE backup_keys SET created_at = created_at - ?, used_at = used_at - ?", [.int(milliseconds), .int(milliseconds)]),
            ("UPDATE audit_events SET at = at - ?", [.int(milliseconds)]),
        ])
    }

    enum NewPhone: String, CaseIterable, Sendable { case fresh, restoredFromBackup }

    @Test("a phone lost with nothing set up but Keychain sync on: the new phone, fresh or restored from backup, is in the user's account after one confirmation",
          arguments: StoreKind.available, NewPhone.allCases)
    func lostPhone(kind: StoreKind, newPhone: NewPhone) async throws {
        try await scenarios.withNode(kind) { _, base, database in
            let a = SimulatedPhone("A", baseURL: base, iCloudKeychain: MemorySynchronizedStore())
            let account = try #require(signedIn(try await a.launch()), "A's first launch signs in").account
            try await a.setDisplayName("Mia")
            #expect(try await a.profile().waysBack == [.backupKey], "the backup key is the account's way back, the user set up nothing")
            #expect(try await a.profile().backupKeys?.keys.sorted() == ["icloud-keychain"], "/v1/me lists it by store, never the key")

            // A is lost. The user starts the app on B.
            let b = newPhone == .fresh ? a.secondPhone(as: "B") : a.restoredFromBackup(as: "B")
            let found = offered(await b.startingPoint())
            #expect(found.map(\.accountId) == [account], "B offers the account of A's backup key: \(found)")
            #expect(found.first?.displayName == "Mia", "as 'Continue as Mia?', the name the app gave")
            // The user confirms once.
            #expect(try await b.claim(backup: try #require(found.first)).id == account, "B holds Mia's account")
            let onB = try #require(signedIn(try await b.relaunched().launch()), "B relaunches")
            #expect(onB.account == account && !onB.created, "into Mia's account")
            #expect(try scenarios.stats(database)["accounts"] as? Int == 1, "B created no account of its own")
            #expect(b.backupsInICloudKeychain.map(\.accountId) == [account], "B keeps a fresh backup key for the account")
            #expect(b.backupsInICloudKeychain.first?.displayName == "Mia")

            let old = await scenarios.relaunch(a)
            #expect(old.saw(.accountMoved), "should A turn up, it hears its account moved: \(old.events)")
        }
    }

    @Test("two accounts on the lost phone: the new phone offers both, and brings the one the user picks",
          arguments: StoreKind.available)
    func twoAccounts(kind: StoreKind) async throws {
        try await scenarios.withNode(kind) { _, base, _ in
            let a = SimulatedPhone("A", baseURL: base, iCloudKeychain: MemorySynchronizedStore())
            let personal = try #require(signedIn(try await a.launch())).account
            try await a.setDisplayName("Mia")
            let work = try await a.addAccount()
            try await a.setDisplayName("Mia at work", of: work.id)

            let b = a.secondPhone(as: "B")
            let found = offered(await b.startingPoint())
            #expect(Set(found.map(\.accountId)) == [personal, work.id], "both accounts are offered: \(found)")
            #expect(Set(found.compactMap(\.displayName)) == ["Mia", "Mia at work"])
            let picked = try #require(found.first { $0.accountId == work.id })
            #expect(try await b.claim(backup: picked).id == work.id)
            let other = try #require(found.first { $0.accountId == personal })
            #expect(try await b.claim(backup: other, choice: .add).id == personal, "and the other beside it, if the user wants")
            #expect(Set(try await b.accounts().map(\.id)) == [personal, work.id])
        }
    }

    enum DeadKey: String, CaseIterable, Sendable { case used, replaced }

    @Test("a key that no longer works (used by another phone, or replaced) is removed quietly, and the app starts fresh",
          arguments: StoreKind.available, DeadKey.allCases)
    func deadKey(kind: StoreKind, dead: DeadKey) async throws {
        try await scenarios.withNode(kind) { _, base, database in
            let a = SimulatedPhone("A", baseURL: base, iCloudKeychain: MemorySynchronizedStore())
            let account = try #require(signedIn(try await a.launch())).account
            // C is a phone whose iCloud Keychain has not heard of what happens next (a copy of today's).
            let iCloud = try #require(a.iCloudKeychain)
            let c = SimulatedPhone("C", baseURL: base, iCloudKeychain: MemorySynchronizedStore(iCloud.items))
            switch dead {
            case .used:
                let b = a.secondPhone(as: "B")
                #expect(try await b.claim(backup: try #require(offered(await b.startingPoint()).first)).id == account)
            case .replaced:
                await a.client.setBackupKeys(enabled: false)
                await a.client.setBackupKeys(enabled: true)
            }
            let stale = try #require(offered(await c.startingPoint()).first, "C still offers the old key")
            await #expect("the service refuses the key") {
                _ = try await c.claim(backup: stale)
            } throws: { ($0 as? TransferError)?.code == .invalidTransferCredentials }
            #expect(c.backupsInICloudKeychain.isEmpty, "the dead key was removed from C's iCloud Keychain")
            #expect(await c.startingPoint() == .firstStart, "nothing left to offer: C shows the welcome screen")
            let fresh = try #require(signedIn(try await c.launch()), "C starts fresh")
            #expect(fresh.created && fresh.account != account, "a new account, not Mia's")
            #expect(try scenarios.stats(database)["accounts"] as? Int == 2)
        }
    }

    @Test("an app killed mid-claim, relaunched an hour later: in the account, nothing typed", arguments: StoreKind.available)
    func killedMidClaim(kind: StoreKind) async throws {
        try await scenarios.withNode(kind) { _, base, database in
            let a = SimulatedPhone("A", baseURL: base, iCloudKeychain: MemorySynchronizedStore())
            let account = try #require(signedIn(try await a.launch())).account
            try await a.setDisplayName("Mia")
            let b = a.secondPhone(as: "B")
            let backup = try #require(offered(await b.startingPoint()).first)
            b.network.loseAnswers(to: "POST /v1/transfers/claim", count: 3)  // every try: the app is killed
            await #expect(throws: (any Error).self, "the claim won on the server, its answers never came back") {
                _ = try await b.claim(backup: backup)
            }
            try await age(database, by: 3_600_000)  // an hour later

            let relaunched = b.relaunched()
            #expect(await relaunched.startingPoint() == .returning, "the app does not show its welcome again")
            let launched = try #require(signedIn(try await relaunched.launch()), "the launch lands: \(relaunched.events)")
            #expect(launched.account == account && !launched.created, "in Mia's account")
            #expect(try scenarios.stats(database)["accounts"] as? Int == 1, "no account made behind the user's back")
            let fresh = try #require(relaunched.backupsInICloudKeychain.first)
            #expect(fresh.accountId == account && fresh.displayName == "Mia", "with a fresh backup key, the name kept")
        }
    }

    @Test("an account erased as inactive: the phone's next launch says so once, and the next start is a fresh one",
          arguments: StoreKind.available)
    func erasedAsInactive(kind: StoreKind) async throws {
        try await scenarios.withNode(kind, extra: ["--inactive-account-ttl", "30d", "--prune-interval", "1s"]) { _, base, database in
            let drawer = SimulatedPhone("drawer", baseURL: base, iCloudKeychain: MemorySynchronizedStore())
            let forgotten = try #require(signedIn(try await drawer.launch())).account
            #expect(drawer.backupsInICloudKeychain.count == 1)
            try await age(database, by: 40 * 86_400_000)  // forty days in a drawer
            var accounts = 1
            for _ in 0..<100 {
                accounts = try scenarios.stats(database)["accounts"] as? Int ?? -1
                if accounts == 0 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(accounts == 0, "a round (every 1 s) erased the account")

            // The README's path: the launch throws account_deleted once; the app shows its welcome.
            let back = drawer.relaunched()
            await #expect("the launch says the account is gone") { try await back.launch() } throws: {
                ($0 as? TransferError)?.code == .accountDeleted
            }
            #expect(back.saw(.accountDeleted) && back.saw(.startedOver), "\(back.events)")
            #expect(back.backupsInICloudKeychain.isEmpty, "the erased account's key is not offered to the user's phones")
            let again = back.relaunched()
            #expect(await again.startingPoint() == .firstStart, "the next start is a first start, not the same error")
            let fresh = try #require(signedIn(try await again.launch()), "\(again.events)")
            #expect(fresh.created && fresh.account != forgotten, "a new account, not the erased one")
        }
    }
}
