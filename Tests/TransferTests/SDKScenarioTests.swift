import Foundation
import Testing
import TransferKit
import TransferKitTesting

/// QA's scenario tests of A→B moves, told as the user's story: each phone is a TransferKit
/// client with its own (memory) Keychain and app files, against a real `transfer-server`
/// process on every store.
@Suite("TransferKit scenarios against the real server")
struct SDKScenarioTests {
    let password = "plum-harbor-71-sail"

    /// A running server on a fresh database of `kind`.
    func withNode(_ kind: StoreKind, extra: [String] = [], _ body: @Sendable (Node, URL) async throws -> Void) async throws {
        try await kind.withDatabaseLocation { location, _ in
            let node = try Node(database: location.argument, extra: extra)
            defer { node.stop() }
            try #require(try await node.waitReady())
            try await body(node, try #require(URL(string: node.base)))
        }
    }

    func signedIn(_ result: LaunchResult) -> (account: String, created: Bool)? {
        if case .signedIn(let account, let created) = result { return (account, created) }
        return nil
    }

    @Test("first launch, relaunch, set-up on A, claim on B, B relaunches into the account, A is told it moved; then B→C",
          arguments: StoreKind.available)
    func aToBToC(kind: StoreKind) async throws {
        try await withNode(kind) { _, base in
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

            let aAfter = a.relaunched()
            _ = try? await aAfter.launch()
            #expect(aAfter.saw(.accountMoved), "A is told its account moved: \(aAfter.events)")

            _ = try await b.setUpTransfer(email: "mia@example.com", password: password)
            let c = SimulatedPhone("C", baseURL: base)
            #expect(try await c.claim(email: "mia@example.com", password: password).id == first.account)
            let bAfter = b.relaunched()
            _ = try? await bAfter.launch()
            #expect(bAfter.saw(.accountMoved), "B is told too")
        }
    }

    @Test("a phone with two accounts moves one; the new phone adds it beside its own, or refuses without a choice",
          arguments: StoreKind.available)
    func twoAccountsMoveOne(kind: StoreKind) async throws {
        try await withNode(kind) { _, base in
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

            let aAfter = a.relaunched()
            _ = try? await aAfter.launch()
            #expect(aAfter.saw(.accountMoved), "A is told the work account moved: \(aAfter.events)")
            try await aAfter.switchAccount(to: personal)
            #expect(try await aAfter.accounts().map(\.id) == [personal], "A keeps the personal account")
        }
    }

    @Test("fifty requests around an access token's expiry make one refresh at the server")
    func oneRefresh() async throws {
        try await withNode(.sqlite, extra: ["--access-token-ttl", "10s"]) { node, base in
            let phone = SimulatedPhone("A", baseURL: base)
            _ = try await phone.launch()
            func refreshes() throws -> Int {
                let metrics = try Curl.call(["\(node.base)/metrics"]).body
                return lines(of: metrics).filter { $0.contains("route=\"/v1/tokens/refresh\"") && $0.hasPrefix("http_requests_total") }
                    .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +)
            }
            let before = try refreshes()
            // The SDK renews 1 s before the 10 s expiry; the renewed token then has 9 s to spare.
            try await Task.sleep(for: .milliseconds(9_300))
            let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<50 { group.addTask { try await phone.client.withAccessToken { $0 } } }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(try refreshes() - before == 1, "one refresh for fifty callers")
            #expect(tokens.count == 1, "every caller got the renewed token")
        }
    }
}
