import Foundation
import Testing
import TransferKit
import TransferKitTesting
@testable import TransferTestSupport

/// QA's scenario tests of A→B moves, told as the user's story: each phone is a TransferKit
/// client with its own (memory) Keychain and app files, against a real `transfer-server`
/// process on every store.
@Suite("TransferKit scenarios against the real server")
struct SDKScenarioTests {
    let password = "plum-harbor-71-sail"

    /// A running server on a fresh database of `kind`; `body` gets it, its URL and its `--database`
    /// value (for the support CLI).
    func withNode(
        _ kind: StoreKind, extra: [String] = [], _ body: @Sendable (Node, URL, String) async throws -> Void
    ) async throws {
        try await kind.withDatabaseLocation { location, _ in
            let node = try Node(database: location.argument, extra: extra)
            defer { node.stop() }
            try #require(try await node.waitReady())
            try await body(node, try #require(URL(string: node.base)), location.argument)
        }
    }

    /// `transfer stats --json` on the node's database.
    func stats(_ database: String) throws -> [String: Any] {
        let run = try CLI.transfer(["stats", "--json"], database: database)
        #expect(run.code == 0, "\(run)")
        return try run.json
    }

    /// `phone` killed and started again; its launch may fail (that is what is looked at).
    func relaunch(_ phone: SimulatedPhone) async -> SimulatedPhone {
        let relaunched = phone.relaunched()
        _ = try? await relaunched.launch()
        return relaunched
    }

    func signedIn(_ result: LaunchResult) -> (account: String, created: Bool)? {
        if case .signedIn(let account, let created) = result { return (account, created) }
        return nil
    }

    @Test("first launch, relaunch, set-up on A, claim on B, B relaunches into the account, A is told it moved; then B→C",
          arguments: StoreKind.available)
    func aToBToC(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, _ in
            let a = SimulatedPhone("A", baseURL: base)
            let first = try #require(signedIn(try await a.launch()), "A's first launch signs in")
            #expect(first.created, "the first launch creates the account")
            let again = try #require(signedIn(try await a.relaunched().launch()))
            #expect(again.account == first.account && !again.created, "a relaunch is the same account")

            _ = try await a.setUpTransfer(email: "mia@example.com", password: password)
            let b = SimulatedPhone("B", baseURL: base)
            let claimed = try await b.claim(email: "mia@example.com", password: password)
            #expect(claimed.id == first.account, "B holds Mia's account")
            let onB = try #require(signedIn(try await b.relaunched().launch()))
            #expect(onB.account == first.account && !onB.created, "B relaunches into the account")

            let aAfter = await relaunch(a)
            #expect(aAfter.saw(.accountMoved), "A is told its account moved: \(aAfter.events)")

            _ = try await b.setUpTransfer(email: "mia@example.com", password: password)
            let c = SimulatedPhone("C", baseURL: base)
            #expect(try await c.claim(email: "mia@example.com", password: password).id == first.account)
            #expect(await relaunch(b).saw(.accountMoved), "B is told too")
        }
    }

    @Test("a phone with two accounts moves one; the new phone adds it beside its own, or refuses without a choice",
          arguments: StoreKind.available)
    func twoAccountsMoveOne(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, _ in
            let a = SimulatedPhone("A", baseURL: base)
            let personal = try #require(signedIn(try await a.launch())).account
            let work = try await a.addAccount()
            try await a.switchAccount(to: work.id)
            _ = try await a.setUpTransfer(email: "work@example.com", password: password)

            let b = SimulatedPhone("B", baseURL: base)
            let own = try #require(signedIn(try await b.launch())).account
            do {
                _ = try await b.claim(email: "work@example.com", password: password, choice: .fail)
                Issue.record("a phone with an account claimed without a choice")
            } catch let error as TransferError {
                #expect(error.code == "device_has_account", "\(error)")
            }
            let added = try await b.claim(email: "work@example.com", password: password, choice: .add)
            #expect(added.id == work.id)
            #expect(Set(try await b.accounts().map(\.id)) == [own, work.id], "B keeps its own account beside the moved one")

            // A relaunches into the moved account (still its current one): the launch offers what
            // is left instead of failing, and the event names it too.
            let aAfter = a.relaunched()
            let result = try await aAfter.launch()
            guard case .currentAccountMoved(let movedId, _, let remaining) = result else {
                Issue.record("the launch into the moved account answered \(result)")
                return
            }
            #expect(movedId == work.id && remaining.map(\.id) == [personal], "the launch offers the personal account")
            let moved = aAfter.events.compactMap { event -> [String]? in
                if case .accountMoved(let id, _, let remaining) = event, id == work.id { return remaining.map(\.id) }
                return nil
            }
            #expect(moved == [[personal]], "A is told the work account moved and the personal one is left: \(aAfter.events)")
            try await aAfter.switchAccount(to: personal)
            #expect(try await aAfter.accounts().map(\.id) == [personal], "A keeps the personal account")
            let next = try #require(signedIn(try await aAfter.relaunched().launch()), "A's next launch signs in")
            #expect(next.account == personal && !next.created, "and into the personal account, creating none")
        }
    }

    @Test("a claim with replace: refused while the new phone's own account has no way back; abandoning it, the moved one is its only account",
          arguments: StoreKind.available)
    func claimReplacing(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, _ in
            let a = SimulatedPhone("A", baseURL: base)
            let mia = try #require(signedIn(try await a.launch())).account
            _ = try await a.setUpTransfer(email: "mia@example.com", password: password)

            let b = SimulatedPhone("B", baseURL: base)
            let own = try #require(signedIn(try await b.launch())).account
            await #expect { try await b.claim(email: "mia@example.com", password: password, choice: .replace) } throws: {
                ($0 as? TransferKit.TransferError)?.code == .accountWouldBeLost
            }
            #expect(try await b.accounts().map(\.id) == [own], "nothing changed")
            #expect(try await b.claim(email: "mia@example.com", password: password, choice: .abandonExisting).id == mia)
            #expect(try await b.accounts().map(\.id) == [mia], "B holds only Mia's account")
            let relaunched = b.relaunched()
            let onB = try #require(signedIn(try await relaunched.launch()))
            #expect(onB.account == mia && onB.account != own, "B relaunches into Mia's account")

            let aAfter = await relaunch(a)
            #expect(aAfter.saw(.accountMoved), "A is told: \(aAfter.events)")
        }
    }

    @Test("removing an account: refused while it would be lost, allowed with a pending transfer or when abandoned",
          arguments: StoreKind.available)
    func removal(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, database in
            let phone = SimulatedPhone("A", baseURL: base)
            let personal = try #require(signedIn(try await phone.launch())).account
            let work = try await phone.addAccount()
            let spare = try await phone.addAccount()
            do {
                try await phone.removeAccount(work.id)
                Issue.record("an account on its only device, with no way back, was removed without abandon")
            } catch let error as TransferError {
                #expect(error.kind == .accountWouldBeLost, "\(error)")
            }
            #expect(Set(try await phone.accounts().map(\.id)) == [personal, work.id, spare.id], "the refusal changed nothing")

            // With a pending transfer the account has a way back: it may leave this phone.
            try await phone.switchAccount(to: work.id)
            _ = try await phone.setUpTransfer(email: "work@example.com", password: password)
            try await phone.removeAccount(work.id)
            #expect(phone.saw(.accountRemoved))
            // Abandoned: kept at the server for support, gone from the phone.
            try await phone.removeAccount(spare.id, abandon: true)
            #expect(try await phone.accounts().map(\.id) == [personal])
            #expect(try stats(database)["accounts"] as? Int == 3, "the server keeps all three accounts")

            // The moved-off work account still comes back on a new phone through its transfer.
            let b = SimulatedPhone("B", baseURL: base)
            #expect(try await b.claim(email: "work@example.com", password: password).id == work.id)
        }
    }

    @Test("push routing as a service key sees it: a phone's token reaches its accounts, a muted one is left out, a moved one follows the move",
          arguments: StoreKind.available)
    func pushRouting(kind: StoreKind) async throws {
        try await withNode(kind) { node, base, database in
            let made = try CLI.transfer(["service-key", "create", "backend", "--reason", "push test", "--json"], database: database)
            let key = try #require(try made.json["key"] as? String, "\(made)")
            /// The tokens the service key is told reach `account`.
            func tokens(reaching account: String) throws -> [String] {
                let (status, answer) = try node.post("/v1/service/push-targets", #"{"accountIds":["\#(account)"]}"#, token: key)
                #expect(status == 200, "\(answer)")
                let targets = answer["targets"] as? [[String: Any]] ?? []
                return targets.filter { ($0["accountIds"] as? [String])?.contains(account) == true }.compactMap { $0["token"] as? String }
            }

            let a = SimulatedPhone("A", baseURL: base)
            let personal = try #require(signedIn(try await a.launch())).account
            let work = try await a.addAccount()
            let tokenA = Data(repeating: 0xA1, count: 32)
            try await a.client.registerPushToken(apns: tokenA)
            let hexA = String(repeating: "a1", count: 32)
            #expect(try tokens(reaching: personal) == [hexA] && tokens(reaching: work.id) == [hexA], "A's token reaches both accounts")

            try await a.client.setPushEnabled(false, of: personal)
            #expect(try tokens(reaching: personal).isEmpty, "a muted account is reached by no token")
            #expect(try tokens(reaching: work.id) == [hexA])

            try await a.switchAccount(to: work.id)
            _ = try await a.setUpTransfer(email: "work@example.com", password: password)
            let b = SimulatedPhone("B", baseURL: base)
            _ = try await b.claim(email: "work@example.com", password: password)
            try await b.client.registerPushToken(apns: Data(repeating: 0xB2, count: 32))
            #expect(try tokens(reaching: work.id) == [String(repeating: "b2", count: 32)], "the moved account is reached on B only")

            // B's app routes a notification for the work account to it, and ignores others.
            #expect(b.client.account(forNotification: ["accountId": work.id.uppercased()])?.id == work.id)
            #expect(b.client.account(forNotification: ["accountId": personal]) == nil)
        }
    }

    @Test("a phone locked before its first unlock creates no account and no identity; once unlocked it signs in as before",
          arguments: StoreKind.available)
    func lockedKeychain(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, database in
            let phone = SimulatedPhone("A", baseURL: base)
            phone.setLockedBeforeFirstUnlock(true)
            guard case .storageUnavailable(let failure) = try await phone.launch() else {
                Issue.record("a locked phone launched")
                return
            }
            #expect(failure.kind == .locked, "the launch says the store is locked: \(failure)")
            #expect(phone.saw(.storageUnavailable))
            #expect(phone.deviceId == nil && phone.keychain.items.isEmpty, "no identity was minted while locked")
            #expect(try stats(database)["accounts"] as? Int == 0, "nothing reached the server")

            phone.setLockedBeforeFirstUnlock(false)
            let first = try #require(signedIn(try await phone.launch()))
            #expect(first.created)

            // Rebooted: locked again, the relaunch must not start a second account.
            let rebooted = phone.relaunched()
            rebooted.setLockedBeforeFirstUnlock(true)
            #expect(try await rebooted.launch() == .storageUnavailable(StorageError(.locked, reason: "locked")))
            rebooted.setLockedBeforeFirstUnlock(false)
            let again = try #require(signedIn(try await rebooted.launch()))
            #expect(again.account == first.account && !again.created)
            #expect(try stats(database)["accounts"] as? Int == 1, "one account after all the launches")
        }
    }

    @Test("a relaunched phone removes one of its two accounts before launching: it keeps its identity and the other account",
          arguments: StoreKind.available)
    func removalBeforeLaunch(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, database in
            let phone = SimulatedPhone("A", baseURL: base)
            let personal = try #require(signedIn(try await phone.launch())).account
            let work = try await phone.addAccount()
            let deviceId = phone.deviceId

            let relaunched = phone.relaunched()
            try await relaunched.removeAccount(work.id, abandon: true)
            #expect(!relaunched.saw(.startedOver), "the identity is kept: \(relaunched.events)")
            let next = try #require(signedIn(try await relaunched.launch()), "the next launch signs in")
            #expect(next.account == personal && !next.created, "into the personal account, creating none")
            #expect(relaunched.deviceId == deviceId)
            #expect(try stats(database)["accounts"] as? Int == 2, "no account was created")
        }
    }

    @Test("deleting one of two accounts: the phone keeps the other, the server keeps nothing of the deleted one",
          arguments: StoreKind.available)
    func deletion(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, database in
            let phone = SimulatedPhone("A", baseURL: base)
            let personal = try #require(signedIn(try await phone.launch())).account
            let work = try await phone.addAccount()
            #expect(try await phone.profile(of: work.id).id == work.id)
            try await phone.deleteAccount(work.id)
            #expect(phone.saw(.accountDeleted))
            #expect(try await phone.accounts().map(\.id) == [personal], "the phone keeps the personal account")
            #expect(try stats(database)["accounts"] as? Int == 1, "the deleted account is gone at the server")
            let next = try #require(signedIn(try await phone.relaunched().launch()))
            #expect(next.account == personal && !next.created)
        }
    }

    @Test("a lost phone: A linked its Apple ID; B signs in with Apple and gets the account, and A hears it moved",
          arguments: StoreKind.available)
    func appleWayBack(kind: StoreKind) async throws {
        try await FakeApple.run { apple in
            let flags = ["--apple-client-ids", FakeApple.bundleID, "--apple-jwks-url", apple.jwksURL]
            try await withNode(kind, extra: flags) { _, base, _ in
                /// What Apple's sheet hands the app on `phone`: an identity token carrying the nonce's hash.
                func signInWithApple(_ phone: SimulatedPhone) async throws -> (token: String, nonce: AppleNonce) {
                    let nonce = try await phone.appleNonce()
                    let claims = apple.claims(sub: "001234.mia.0101", nonce: nonce.value)
                    return (try apple.token(claims), nonce)
                }
                let a = SimulatedPhone("A", baseURL: base)
                let mia = try #require(signedIn(try await a.launch())).account
                let (linkToken, linkNonce) = try await signInWithApple(a)
                try await a.linkAppleID(identityToken: linkToken, nonce: linkNonce)
                #expect(try await a.profile().appleID != nil, "A's account shows its Apple ID")

                let b = SimulatedPhone("B", baseURL: base)
                let own = try #require(signedIn(try await b.launch())).account
                let (token, nonce) = try await signInWithApple(b)
                do {
                    _ = try await b.claimWithAppleID(identityToken: token, nonce: nonce)
                    Issue.record("a phone with an account took another without a choice")
                } catch let error as TransferError {
                    #expect(error.code == "device_has_account", "\(error)")
                }
                let (again, againNonce) = try await signInWithApple(b)
                #expect(try await b.claimWithAppleID(identityToken: again, nonce: againNonce, choice: .add).id == mia)
                #expect(Set(try await b.accounts().map(\.id)) == [own, mia], "B holds Mia's account beside its own")
                #expect(await relaunch(a).saw(.accountMoved), "A, if it ever starts again, hears the account moved")
            }
        }
    }

    @Test("a sibling app signed in by hand-off uses the account until the host's account moves away, then asks again",
          arguments: StoreKind.available)
    func siblingSession(kind: StoreKind) async throws {
        let news = "com.example.news"
        try await withNode(kind, extra: ["--handoff-clients", news]) { _, base, _ in
            let host = SimulatedPhone("A", baseURL: base)
            let mia = try #require(signedIn(try await host.launch())).account
            let sibling = SiblingSession(baseURL: base, clientId: news, credentials: MemoryCredentialStore())
            let request = HandoffRequest.make(clientId: news)
            let handoff = try await host.client.createHandoffCode(forClient: news, codeChallenge: request.codeChallenge)
            #expect(try await sibling.redeemHandoff(code: handoff.code, request: request).id == mia)
            #expect(try await sibling.profile().id == mia, "the sibling reads the account")

            _ = try await host.setUpTransfer(email: "mia@example.com", password: password)
            _ = try await SimulatedPhone("B", baseURL: base).claim(email: "mia@example.com", password: password)
            do {
                _ = try await sibling.profile()
                Issue.record("the sibling kept using an account that moved to another phone")
            } catch let error as TransferError {
                #expect(error.kind == .handoffRequired, "\(error)")
            }
            #expect(try await sibling.account() == nil, "the sibling forgot the session")
        }
    }

    @Test("an app and its extension sharing the stores renew side by side by login: neither revokes the other's session",
          arguments: StoreKind.available)
    func appAndExtension(kind: StoreKind) async throws {
        try await withNode(kind, extra: ["--access-token-ttl", "10s"]) { node, base, _ in
            let clock = TransferKitTesting.ManualClock()
            let keychain = MemoryCredentialStore(), appFiles = MemoryCredentialStore()
            func process(_ name: String) -> SimulatedPhone {
                SimulatedPhone(name, keychain: keychain, appFiles: appFiles) { keychain, appFiles in
                    TransferClient(
                        baseURL: base, credentials: keychain, accountList: appFiles, sharesSessions: true,
                        clock: { clock.now })
                }
            }
            let app = process("app"), widget = process("widget")
            let account = try #require(signedIn(try await app.launch())).account
            _ = try await widget.accessToken()  // the widget reads the app's session
            clock.advance(by: 9.3)  // both tokens are due

            _ = try await app.accessToken()
            clock.advance(by: 9.3)
            _ = try await widget.accessToken()
            let metrics = try Curl.call(["\(node.base)/metrics"]).body
            let refreshes = lines(of: metrics).filter { $0.contains("route=\"/v1/tokens/refresh\"") && $0.hasPrefix("http_requests_total") }
            #expect(refreshes.isEmpty, "shared sessions never refresh (only refreshes rotate): \(refreshes)")
            #expect(try await app.profile().id == account, "the app's session still works")
            #expect(try await widget.profile().id == account, "the widget's too")
            #expect(!app.saw(.accountMoved) && !widget.saw(.deviceRevoked))
        }
    }

    @Test("fifty requests around an access token's expiry make one refresh at the server")
    func oneRefresh() async throws {
        try await withNode(.sqlite, extra: ["--access-token-ttl", "10s"]) { node, base, _ in
            let clock = TransferKitTesting.ManualClock()
            let phone = SimulatedPhone("A", baseURL: base, clock: clock)
            _ = try await phone.launch()
            func refreshes() throws -> Int {
                let metrics = try Curl.call(["\(node.base)/metrics"]).body
                return lines(of: metrics).filter { $0.contains("route=\"/v1/tokens/refresh\"") && $0.hasPrefix("http_requests_total") }
                    .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +)
            }
            let before = try refreshes()
            // The SDK renews 1 s before the 10 s expiry: its clock moves past that point (the
            // server's tokens are still valid, so nothing else changes; no waiting).
            clock.advance(by: 9.3)
            let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<50 { group.addTask { try await phone.client.withAccessToken { $0 } } }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(try refreshes() - before == 1, "one refresh for fifty callers")
            #expect(tokens.count == 1, "every caller got the renewed token")
        }
    }

    // MARK: Contract v1.2 through the SDK

    @Test("A shows a transfer code, B (never launched) claims it, relaunches into the account; A is told it moved",
          arguments: StoreKind.available)
    func moveByCode(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, database in
            let a = SimulatedPhone("A", baseURL: base)
            let first = try #require(signedIn(try await a.launch()))
            let shown = try await a.setUpTransferCode()
            // The user types it as read aloud: lower case, spaces.
            let typed = try #require(TransferCode(shown.code.grouped.lowercased().replacingOccurrences(of: "-", with: " ")))
            let b = SimulatedPhone("B", baseURL: base)
            let claimed = try await b.claim(code: typed)
            #expect(claimed.id == first.account, "B holds A's account")
            let onB = try #require(signedIn(try await b.relaunched().launch()))
            #expect(onB.account == first.account && !onB.created)
            let relaunchedA = await relaunch(a)
            #expect(relaunchedA.saw(.accountMoved), "A hears its account moved: \(relaunchedA.events)")
            #expect(try stats(database)["accounts"] as? Int == 1, "no empty account was created on B")
        }
    }

    @Test("the claim's answer is lost twice: the SDK repeats the claim and the server answers the winner again",
          arguments: StoreKind.available)
    func lostClaimAnswer(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, _ in
            let a = SimulatedPhone("A", baseURL: base)
            let first = try #require(signedIn(try await a.launch()))
            _ = try await a.setUpTransfer(email: "mia@example.com", password: password)
            let b = SimulatedPhone("B", baseURL: base)
            b.network.loseAnswers(to: "POST /v1/transfers/claim", count: 2)
            let claimed = try await b.claim(email: "mia@example.com", password: password)
            #expect(claimed.id == first.account, "the third try got the winner's answer")
            #expect(b.network.lostAnswers == 2)
            let onB = try #require(signedIn(try await b.relaunched().launch()))
            #expect(onB.account == first.account)
        }
    }

    @Test("a phone lost with nothing set up but a recovery code: the new phone claims with the code; the code is then used up",
          arguments: StoreKind.available)
    func recoveryCode(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, _ in
            let a = SimulatedPhone("A", baseURL: base)
            let first = try #require(signedIn(try await a.launch()))
            #expect(try await a.profile().waysBack == [], "nothing set up: no way back")
            let issued = try await a.makeRecoveryCode()
            #expect(try await a.profile().waysBack == [.recoveryCode])
            // A is lost. B is a new phone.
            let b = SimulatedPhone("B", baseURL: base)
            let claimed = try await b.claim(recoveryCode: issued.code)
            #expect(claimed.id == first.account)
            #expect(try await b.profile().waysBack == [], "the code is used up: the app should offer a new one")
            let c = SimulatedPhone("C", baseURL: base)
            await #expect(throws: TransferError.self, "a used code moves nothing") { _ = try await c.claim(recoveryCode: issued.code) }
        }
    }

    @Test("a phone restored from A's backup claims; every answer is lost (the app is killed); the next launch signs in, not 'restored'",
          arguments: StoreKind.available)
    func restoredThenLostAnswer(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, _ in
            let a = SimulatedPhone("A", baseURL: base)
            let first = try #require(signedIn(try await a.launch()))
            let b = a.restoredFromBackup(as: "B")
            let offer = try await a.setUpTransferCode()
            b.network.loseAnswers(to: "POST /v1/transfers/claim", count: 3)  // every try the SDK makes
            await #expect(throws: (any Error).self, "the claim reached the server, its answers never came back") {
                _ = try await b.claim(code: offer.code)
            }
            let relaunched = b.relaunched()
            let launched = try #require(signedIn(try await relaunched.launch()), "\(relaunched.events)")
            #expect(launched.account == first.account && !launched.created, "the account won by the lost claim")
            #expect(!relaunched.saw(.restoredOntoNewPhone))
            let old = await relaunch(a)
            #expect(old.saw(.accountMoved), "A hears its account moved: \(old.events)")
        }
    }

    @Test("a phone's non-current account moves to another phone; the next launch tells the app it left",
          arguments: StoreKind.available)
    func nonCurrentAccountMoved(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, _ in
            let a = SimulatedPhone("A", baseURL: base)
            let personal = try #require(signedIn(try await a.launch())).account
            let work = try await a.addAccount()  // now current
            try await a.switchAccount(to: personal)
            let offer = try await a.setUpTransferCode()
            try await a.switchAccount(to: work.id)
            let c = SimulatedPhone("C", baseURL: base)
            #expect(try await c.claim(code: offer.code).id == personal)
            let relaunched = a.relaunched()
            let launched = try #require(signedIn(try await relaunched.launch()))
            #expect(launched.account == work.id)
            #expect(relaunched.saw(.accountMoved), "the personal account left the phone: \(relaunched.events)")
            #expect(try await relaunched.accounts().map(\.id) == [work.id])
        }
    }

    @Test("a new phone asked before its first launch claims first, and no empty account is left behind",
          arguments: StoreKind.available)
    func newPhoneClaimsFirst(kind: StoreKind) async throws {
        try await withNode(kind) { _, base, database in
            let a = SimulatedPhone("A", baseURL: base)
            let first = try #require(signedIn(try await a.launch()))
            _ = try await a.setUpTransfer(email: "mia@example.com", password: password)
            let b = SimulatedPhone("B", baseURL: base)
            #expect(await b.startingPoint() == .firstStart, "the app asks 'new phone?' before launching")
            #expect(try await b.claim(email: "mia@example.com", password: password).id == first.account)
            let launched = try #require(signedIn(try await b.launch()))
            #expect(launched.account == first.account && !launched.created)
            #expect(try stats(database)["accounts"] as? Int == 1, "B created no account of its own")
        }
    }

    @Test("--inactive-account-ttl: a phone left in a drawer loses its account and starts over; a phone used daily keeps the profile it never opens",
          arguments: StoreKind.available)
    func inactiveAccounts(kind: StoreKind) async throws {
        try await withNode(kind, extra: ["--inactive-account-ttl", "30d", "--prune-interval", "1s"]) { _, base, database in
            let drawer = SimulatedPhone("drawer", baseURL: base)
            let forgotten = try #require(signedIn(try await drawer.launch())).account
            let daily = SimulatedPhone("daily", baseURL: base)
            let mine = try #require(signedIn(try await daily.launch())).account
            let child = try await daily.addAccount()
            try await daily.switchAccount(to: mine)
            // Forty days pass (the server's clock is the real one, so the database is made older),
            // and the daily phone was opened today with its own account, never with the child's
            // profile: every time is made 40 days older but that last login. (Aging it too would
            // let a round, every second, erase the daily phone's accounts before it logs in again.)
            let forty = Int64(40 * 86_400_000)
            try await RawDatabase(argument: database).run([
                ("UPDATE accounts SET created_at = created_at - ?", [.int(forty)]),
                ("UPDATE device_accounts SET added_at = added_at - ?", [.int(forty)]),
                ("UPDATE device_accounts SET last_login_at = last_login_at - ? WHERE account_id <> ?", [.int(forty), .text(mine)]),
            ])

            var counts: [String: Any] = [:]
            for _ in 0..<100 {
                counts = try stats(database)
                if counts["accounts"] as? Int == 2 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(counts["accounts"] as? Int == 2, "a round (every 1 s) erased the drawer's account only: \(counts)")
            let today = daily.relaunched()
            #expect(signedIn(try await today.launch())?.account == mine)
            #expect(try await today.profile(of: child.id).id == child.id, "the profile nobody opened lives on the phone in use")

            // The drawer's phone is opened again: the app hears the account is gone, and starts over.
            let back = drawer.relaunched()
            await #expect { try await back.launch() } throws: { ($0 as? TransferError)?.code == .accountDeleted }
            #expect(back.saw(.accountDeleted))
            try await back.startOver()
            let fresh = try #require(signedIn(try await back.launch()))
            #expect(fresh.created && fresh.account != forgotten, "a new account, not the erased one")
        }
    }
}
