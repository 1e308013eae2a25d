import Foundation
import Testing
@testable import TransferTestSupport

@Suite("Two nodes on one PostgreSQL database", .serialized)
struct TwoNodeTests {
    /// Two `transfer-server` processes on one database, ready (the caller stops them).
    static func twoNodes(_ url: String, extra: [String] = []) async throws -> (Node, Node) {
        let one = try Node(database: url, extra: extra)
        let two: Node
        do {
            two = try Node(database: url, extra: extra)
        } catch {
            one.stop()
            throw error
        }
        do {
            #expect(try await one.waitReady())
            #expect(try await two.waitReady())
        } catch {
            one.stop()
            two.stop()
            throw error
        }
        return (one, two)
    }

    static func body(_ d: Device) -> String { #"{"deviceId":"\#(d.id)","deviceSecret":"\#(d.secret)"}"# }
    static func claim(_ email: String, _ password: String, _ d: Device) -> String {
        #"{"email":"\#(email)","temporaryPassword":"\#(password)","deviceId":"\#(d.id)","deviceSecret":"\#(d.secret)"}"#
    }

    @Test("set up on node 1, claim on node 2; 16 claims over both nodes: one winner; A refused on both",
          .enabled(if: StoreKind.available.contains(.postgres)))
    func twoNodes() async throws {
        // An empty database: the two nodes start together and exactly one of them migrates it.
        try await TestPostgres.withDatabase(empty: true) { url in
            let (one, two) = try await Self.twoNodes(url)
            defer { one.stop(); two.stop() }

            // A token issued by node 1 is accepted by node 2: one signing key in the database.
            let a = Device()
            let (created, session) = try one.post("/v1/devices/login", Self.body(a))
            #expect(created == 201)
            let token = try #require(session["accessToken"] as? String, "login on node 1: \(created) \(session)")
            #expect(try two.get("/v1/me", token: token) == 200)

            #expect(try one.put("/v1/me/transfer", #"{"email":"nodes@example.com","temporaryPassword":"plum-harbor-71-sail"}"#, token: token) == 201)
            let b = Device()
            let (claimed, claim) = try two.post("/v1/transfers/claim", Self.claim("nodes@example.com", "plum-harbor-71-sail", b))
            #expect(claimed == 200)
            #expect(claim["accountId"] as? String == session["accountId"] as? String)
            #expect(try one.post("/v1/devices/login", Self.body(a)).0 == 410)
            #expect(try two.post("/v1/devices/login", Self.body(a)).0 == 410)
            #expect(try one.get("/v1/me", token: token) == 401)
            #expect(try one.post("/v1/devices/login", Self.body(b)).1["accountId"] as? String == session["accountId"] as? String)

            // Sixteen claims of one transfer, spread over both nodes, at once.
            let c = Device()
            let (createdC, sessionC) = try one.post("/v1/devices/login", Self.body(c))
            let tokenC = try #require(sessionC["accessToken"] as? String, "login of C on node 1: \(createdC) \(sessionC)")
            #expect(try two.put("/v1/me/transfer", #"{"email":"race@example.com","temporaryPassword":"plum-harbor-71-sail"}"#, token: tokenC) == 201)
            let claimants = (0..<16).map { _ in Device() }
            let running = try claimants.enumerated().map { i, d in
                try (i % 2 == 0 ? one : two).startPost("/v1/transfers/claim", Self.claim("race@example.com", "plum-harbor-71-sail", d))
            }
            let statuses = running.map { $0.status() }
            #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == 401 }.count == 15, "\(statuses)")
            #expect(try one.post("/v1/devices/login", Self.body(c)).0 == 410)
            #expect(try two.post("/v1/devices/login", Self.body(c)).0 == 410)

            // Several accounts on one phone, across nodes: add on node 1, pick and log in on node 2.
            let phone = Device()
            let (_, first) = try one.post("/v1/devices/login", Self.body(phone))
            let added = #"{"deviceId":"\#(phone.id)","deviceSecret":"\#(phone.secret)","newAccount":true}"#
            let (addedStatus, second) = try two.post("/v1/devices/login", added)
            #expect(addedStatus == 201)
            let firstID = try #require(first["accountId"] as? String), secondID = try #require(second["accountId"] as? String)
            let (_, current) = try one.post("/v1/devices/login", Self.body(phone))
            #expect(current["accountId"] as? String == secondID, "the account added on node 2 is current on node 1")
            let (byID, picked) = try two.post("/v1/devices/login", #"{"deviceId":"\#(phone.id)","deviceSecret":"\#(phone.secret)","accountId":"\#(firstID)"}"#)
            #expect(byID == 200)
            #expect(picked["accountId"] as? String == firstID)
            #expect((picked["accounts"] as? [[String: Any]])?.count == 2)
        }
    }
    @Test("push routing through the real binaries: token on node 1, targets on node 2, a key revoked with the CLI fails on both at once",
          .enabled(if: StoreKind.available.contains(.postgres)))
    func pushAcrossNodes() async throws {
        try await TestPostgres.withDatabase { url in
            let (one, two) = try await Self.twoNodes(url)
            defer { one.stop(); two.stop() }
            try Self.pushStory(register: one, ask: two, database: url)
        }
    }

    /// The app registers its token on `register`; the backend, holding a key made with the
    /// CLI, asks `ask`; support revokes the key and both nodes refuse it at once.
    static func pushStory(register: Node, ask: Node, database: String) throws {
        let made = try CLI.transfer(["service-key", "create", "backend", "--reason", "test", "--json"], database: database)
        let key = try #require(try made.json["key"] as? String, "\(made)")
        let phone = Device()
        let (_, session) = try register.post("/v1/devices/login", Self.body(phone))
        let token = try #require(session["accessToken"] as? String), account = try #require(session["accountId"] as? String)
        let push = String(repeating: "ab", count: 32)
        #expect(try register.put("/v1/devices/push-token", #"{"provider":"apns","token":"\#(push)"}"#, token: token) == 204)
        let ask1 = #"{"accountIds":["\#(account)"]}"#
        let (status, answer) = try ask.post("/v1/service/push-targets", ask1, token: key)
        #expect(status == 200)
        let targets = answer["targets"] as? [[String: Any]]
        #expect(targets?.map { $0["token"] as? String } == [push], "\(answer)")
        #expect(targets?.first?["accountIds"] as? [String] == [account])
        #expect(try CLI.transfer(["service-key", "revoke", "backend", "--reason", "rotated"], database: database).code == 0)
        #expect(try register.post("/v1/service/push-targets", ask1, token: key).1["error"] as? String == "invalid_service_key")
        #expect(try ask.post("/v1/service/push-targets", ask1, token: key).1["error"] as? String == "invalid_service_key")
    }

    @Test("webhooks from two nodes: every event is delivered once, none twice at the same time",
          .enabled(if: StoreKind.available.contains(.postgres)))
    func webhooksAcrossNodes() async throws {
        try await TestPostgres.withDatabase { url in
            // Each answer takes 50 ms, so two nodes sending one event would overlap at the receiver.
            try await FakeWebhookReceiver.run(delay: .milliseconds(50)) { receiver in
                let webhook = ["--webhook-url", receiver.url, "--webhook-secret", FakeWebhookReceiver.secret]
                let (one, two) = try await Self.twoNodes(url, extra: webhook)
                defer { one.stop(); two.stop() }
                var accounts: Set<String> = []
                for i in 0..<40 {
                    let (status, session) = try (i % 2 == 0 ? one : two).post("/v1/devices/login", Self.body(Device()))
                    #expect(status == 201)
                    if let id = session["accountId"] as? String { accounts.insert(id) }
                }
                let all = try await receiver.wait(for: 40, timeout: .seconds(30))
                try await Task.sleep(for: .milliseconds(1500))  // time for a duplicate to show up
                let delivered = receiver.deliveries
                #expect(Set(delivered.map(\.accountID)) == accounts, "every account's account.created arrived")
                #expect(delivered.count == 40, "each event once: \(delivered.count) requests for \(all.count) events")
                #expect(receiver.concurrentDuplicates.load(ordering: .relaxed) == 0, "one event sent by both nodes at once")
                let logs = try one.log() + two.log()
                let failures = logs.split(separator: "\n").filter { $0.contains("outbox round failed") || $0.contains("recording a delivery failed") }
                #expect(failures.isEmpty, "\(failures.prefix(3))")
            }
        }
    }

    @Test("a key rotated with the CLI signs on both nodes within seconds; tokens of the old key keep working on both",
          .enabled(if: StoreKind.available.contains(.postgres)))
    func rotationAcrossNodes() async throws {
        try await TestPostgres.withDatabase { url in
            let (one, two) = try await Self.twoNodes(url)
            defer { one.stop(); two.stop() }
            let phone = Device()
            func kid(_ node: Node) throws -> String {
                let (_, session) = try node.post("/v1/devices/login", Self.body(phone))
                return try TokenText.kid(try #require(session["accessToken"] as? String, "\(session)"))
            }
            let (_, first) = try one.post("/v1/devices/login", Self.body(phone))
            let oldToken = try #require(first["accessToken"] as? String)
            let old = try TokenText.kid(oldToken)

            let rotated = try CLI.transfer(["keys", "rotate", "--reason", "yearly", "--json"], database: url)
            let new = try #require(try rotated.json["current"] as? String, "\(rotated)")
            #expect(new != old)
            var signing: (String, String) = ("", "")
            for _ in 0..<150 {
                signing = (try kid(one), try kid(two))
                if signing == (new, new) { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(signing == (new, new), "both nodes sign with the new key within 15 s (they look every 5 s)")
            #expect(try one.get("/v1/me", token: oldToken) == 200 && two.get("/v1/me", token: oldToken) == 200)
            for node in [one, two] {
                let jwks = try Curl.call(["\(node.base)/.well-known/jwks.json"]).body
                #expect(jwks.contains(old) && jwks.contains(new), "both keys published during the overlap: \(jwks)")
            }
        }
    }

    @Test("a hand-off across two nodes: the host's code from node 1 is redeemed on node 2; the sibling dies on both when the host's account moves",
          .enabled(if: StoreKind.available.contains(.postgres)))
    func handoffAcrossNodes() async throws {
        try await TestPostgres.withDatabase { url in
            let (one, two) = try await Self.twoNodes(url, extra: ["--handoff-clients", Handoff.news])
            defer { one.stop(); two.stop() }
            let host = Device()
            let (_, session) = try one.post("/v1/devices/login", Self.body(host))
            let token = try #require(session["accessToken"] as? String, "\(session)")
            let pkce = Handoff.PKCEPair()
            let (created, code) = try one.post(
                "/v1/handoff/codes", #"{"clientId":"\#(Handoff.news)","codeChallenge":"\#(pkce.challenge)","codeChallengeMethod":"S256"}"#,
                token: token)
            #expect(created == 201, "\(code)")
            let redeem = #"{"code":"\#(code["code"] as? String ?? "")","codeVerifier":"\#(pkce.verifier)","clientId":"\#(Handoff.news)"}"#
            let (redeemed, sibling) = try two.post("/v1/handoff/token", redeem)
            #expect(redeemed == 200, "\(sibling)")
            let siblingToken = try #require(sibling["accessToken"] as? String)
            #expect(try TokenText.claims(siblingToken)["azp"] as? String == Handoff.news)
            #expect(try one.get("/v1/me", token: siblingToken) == 200, "node 1 accepts the sibling node 2 opened")
            #expect(try one.post("/v1/handoff/token", redeem).0 == 400, "used, on the other node too")
            #expect(try two.get("/v1/me", token: siblingToken) == 401, "the replay with the verifier revoked it on every node")

            // A fresh hand-off, then the host's account moves to another phone.
            let again = Handoff.PKCEPair()
            let (_, second) = try two.post(
                "/v1/handoff/codes", #"{"clientId":"\#(Handoff.news)","codeChallenge":"\#(again.challenge)","codeChallengeMethod":"S256"}"#,
                token: token)
            let (_, fresh) = try one.post(
                "/v1/handoff/token", #"{"code":"\#(second["code"] as? String ?? "")","codeVerifier":"\#(again.verifier)","clientId":"\#(Handoff.news)"}"#)
            let freshToken = try #require(fresh["accessToken"] as? String, "\(fresh)")
            #expect(try one.put("/v1/me/transfer", #"{"email":"sibling@example.com","temporaryPassword":"plum-harbor-71-sail"}"#, token: token) == 201)
            #expect(try two.post("/v1/transfers/claim", Self.claim("sibling@example.com", "plum-harbor-71-sail", Device())).0 == 200)
            #expect(try one.get("/v1/me", token: freshToken) == 401)
            #expect(try two.get("/v1/me", token: freshToken) == 401)
        }
    }
}

/// The limits of contract v1.2 hold across nodes.
extension TwoNodeTests {
    /// Two `transfer-server` processes on one PostgreSQL database: one budget between them.
    @Test("two nodes on one PostgreSQL share each budget exactly", .enabled(if: StoreKind.available.contains(.postgres)))
    func twoNodesShareABudget() async throws {
        try await TestPostgres.withDatabase { url in
            let (one, two) = try await Self.twoNodes(
                url, extra: ["--claim-limit", "3/1m", "--account-creation-limit", "4/1m", "--trusted-proxy", "127.0.0.1,::1"])
            defer { one.stop(); two.stop() }
            func post(_ node: Node, _ path: String, _ json: String, from address: String) throws -> Int {
                try Curl.call(["-X", "POST", "-H", "Content-Type: application/json", "-H", "X-Forwarded-For: \(address)", "-d", json, "\(node.base)\(path)"]).status
            }
            // Claims alternate between the nodes: 3 in all, not 3 each.
            var claims: [Int] = []
            for i in 0..<6 {
                claims.append(try post(i % 2 == 0 ? one : two, "/v1/transfers/claim", Self.claim("nobody@example.com", "wrong-guess-1", Device()), from: "2001:db8:7::\(i + 1)"))
            }
            #expect(claims == [401, 401, 401, 429, 429, 429], "one /64, two nodes, --claim-limit 3/1m: \(claims)")
            // Eight creations at once over both nodes: exactly 4 accounts.
            let created = try await withThrowingTaskGroup(of: Int.self) { group in
                for i in 0..<8 {
                    group.addTask {
                        try await Curl.callOffPool(["-X", "POST", "-H", "Content-Type: application/json", "-H", "X-Forwarded-For: 198.51.100.20",
                            "-d", Self.body(Device()), "\(i % 2 == 0 ? one.base : two.base)/v1/devices/login"]).status
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(created.filter { $0 == 201 }.count == 4, "--account-creation-limit 4/1m on two nodes: \(created.sorted())")
            #expect(created.filter { $0 == 429 }.count == 4, "\(created.sorted())")
        }
    }
}
