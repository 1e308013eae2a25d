import AsyncHTTPClient
import Foundation
import GRDB
import NIOCore
import NIOHTTP1
import PostgresNIO
import Synchronization
import Testing
import TransferCore
@testable import TransferTestSupport

/// What the clients were told, to check against the database after the crashes.
final class Ledger: Sendable {
    struct State {
        var accounts: [String: (device: Device, account: String)] = [:]  // device id → account created (201)
        var transfers: [String: (account: String, password: String)] = [:]  // email → set up (201)
        var claims: [String: (device: Device, account: String)] = [:]  // email → claim answered 200
        var claimAttempts: [String: [Device]] = [:]  // email → every device that tried
    }
    let state = Mutex(State())
}

/// Kills the server with SIGKILL while logins, set-ups and claims are in flight, restarts it
/// on the same database, again and again; then checks every invariant from outside.
@Suite("Crash safety", .serialized)
struct CrashTests {
    static let password = "plum-harbor-71-sail"

    /// Whether the node the current burst talks to is still running (false once it is killed).
    @TaskLocal static var nodeAlive: (@Sendable () -> Bool)?

    /// The status and JSON body of one call; nil when the server died under it (the outcome is
    /// unknown). A complete answer whose body is not a JSON object is recorded as an issue at the caller.
    static func post(
        _ http: HTTPClient, _ base: String, _ path: String, _ json: [String: Any], token: String? = nil, method: HTTPMethod = .POST,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async -> (Int, [String: Any])? {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        request.headers.add(name: "Content-Type", value: "application/json")
        if let token {
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            if let secret = Keychain.secret(forToken: token) { request.headers.add(name: "X-Device-Secret", value: secret) }
        }
        request.body = .bytes(ByteBuffer(bytes: try! JSONSerialization.data(withJSONObject: json)))
        let status: Int, body: ByteBuffer
        do {
            let response = try await http.execute(request, timeout: .seconds(3))
            status = Int(response.status.code)
            body = try await response.body.collect(upTo: 1 << 20)
        } catch {
            return nil  // the server died under this request: the outcome is unknown
        }
        // Once the server is killed its port is free, and another suite's server (a fake
        // collector or receiver, running in parallel) may take it: what answers there then is
        // not the server under test.
        if let alive = nodeAlive, !alive() { return nil }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] else {
            Issue.record("\(method) \(path) answered \(status) with a body that is not a JSON object: \(String(buffer: body))", sourceLocation: sourceLocation)
            return nil
        }
        return (status, object)
    }

    /// One burst of mixed traffic against `base`.
    static func workload(_ http: HTTPClient, _ base: String, _ ledger: Ledger, round: Int) async {
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<12 {
                group.addTask {
                    // A new phone logs in; half of them set up a transfer; the transfer is claimed twice at once.
                    let a = Device()
                    guard let (status, session) = await post(http, base, "/v1/devices/login", a.loginBody), status == 201 else { return }
                    guard let account = session["accountId"] as? String, let token = session["accessToken"] as? String else {
                        Issue.record("login answered 201 without accountId and accessToken: \(session)")
                        return
                    }
                    ledger.state.withLock { $0.accounts[a.id] = (a, account) }
                    guard i % 2 == 0 else {
                        _ = await post(http, base, "/v1/devices/login", a.loginBody)
                        return
                    }
                    let email = "r\(round)-\(i)-\(UUID().uuidString.prefix(8))@example.com"
                    guard let (setUp, _) = await post(http, base, "/v1/me/transfer", ["email": email, "temporaryPassword": password], token: token, method: .PUT),
                        setUp == 201
                    else { return }
                    ledger.state.withLock { $0.transfers[email] = (account, password) }
                    await withTaskGroup(of: Void.self) { claims in
                        for _ in 0..<2 {
                            claims.addTask {
                                let b = Device()
                                ledger.state.withLock { $0.claimAttempts[email, default: []].append(b) }
                                let body: [String: Any] = ["email": email, "temporaryPassword": password, "deviceId": b.id, "deviceSecret": b.secret]
                                guard let (status, claim) = await post(http, base, "/v1/transfers/claim", body), status == 200 else { return }
                                guard let account = claim["accountId"] as? String else {
                                    Issue.record("claim answered 200 without accountId: \(claim)")
                                    return
                                }
                                ledger.state.withLock { $0.claims[email] = (b, account) }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Invariant queries: each returns the number of violating rows.
    static let invariants: [(String, String)] = [
        ("an account with two active devices",
         "SELECT account_id FROM device_accounts WHERE state = 'active' GROUP BY account_id HAVING COUNT(*) > 1"),
        ("a retired device that still holds an account",
         "SELECT d.id FROM devices d WHERE d.retired_at IS NOT NULL AND EXISTS (SELECT 1 FROM device_accounts p WHERE p.device_id = d.id AND p.state = 'active')"),
        ("a device with no account left that is not retired",
         "SELECT d.id FROM devices d WHERE d.retired_at IS NULL AND NOT EXISTS (SELECT 1 FROM device_accounts p WHERE p.device_id = d.id AND p.state = 'active')"),
        ("a claimed transfer whose device is not the account's active device",
         "SELECT t.id FROM transfers t WHERE t.state = 'claimed' AND NOT EXISTS (SELECT 1 FROM device_accounts p WHERE p.account_id = t.account_id AND p.device_id = t.claimed_by_device AND p.state = 'active')"),
        ("a claimed transfer whose account does not point at its device",
         "SELECT t.id FROM transfers t JOIN accounts a ON a.id = t.account_id WHERE t.state = 'claimed' AND (a.moved_to_device_id IS NULL OR a.moved_to_device_id <> t.claimed_by_device)"),
        ("a pending transfer on an account that already moved",
         "SELECT t.id FROM transfers t WHERE t.state = 'pending' AND EXISTS (SELECT 1 FROM device_accounts p WHERE p.account_id = t.account_id AND p.state = 'moved')"),
        ("an account without an active device",
         "SELECT a.id FROM accounts a WHERE NOT EXISTS (SELECT 1 FROM device_accounts p WHERE p.account_id = a.id AND p.state = 'active')"),
        ("an account that left a device but still has a session there",
         "SELECT p.account_id FROM device_accounts p WHERE p.state <> 'active' AND p.session_id IS NOT NULL"),
    ]

    static func violations(_ location: DatabaseLocation, _ sql: String) async throws -> Int {
        let count = "SELECT COUNT(*) FROM (\(sql)) v"
        switch location {
        case .sqlite(let path):
            let queue = try DatabaseQueue(path: path)
            guard let n = try await queue.read({ db in try Int.fetchOne(db, sql: count) }) else { throw TestFailure("no row from \(count)") }
            return n
        case .postgres(let url):
            return try await TestPostgres.withClient(url) { client in
                for try await n in try await client.query(PostgresQuery(unsafeSQL: count)).decode(Int64.self) { return Int(n) }
                throw TestFailure("no row from \(count)")
            }
        }
    }

    @Test("kill -9 during traffic, restart, repeat: nothing half-done, nothing lost", arguments: StoreKind.available)
    func killNine(store: StoreKind) async throws {
        try await store.withDatabaseLocation { location, _ in
            let argument = location.argument
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            let ledger = Ledger()
            var kills = 0
            do {
                for round in 0..<8 {
                    let node = try Node(database: argument)
                    #expect(try await node.waitReady(), "restart \(round) did not become ready")
                    let dead = Atomic<Bool>(false)
                    let traffic = Task {
                        // Bursts until the server is gone, so the kill lands mid-request.
                        var burst = 0
                        while !dead.load(ordering: .relaxed) {
                            await Self.$nodeAlive.withValue({ !dead.load(ordering: .relaxed) }) {
                                await Self.workload(http, node.base, ledger, round: round * 1000 + burst)
                            }
                            burst += 1
                        }
                    }
                    try await Task.sleep(for: .milliseconds(Int.random(in: 300...900)))
                    // Dead first: an answer from here on may come from whoever takes the port next.
                    dead.store(true, ordering: .relaxed)
                    node.process.signal(SIGKILL)
                    defer { node.stop() }
                    node.process.waitUntilExit()
                    kills += 1
                    await traffic.value
                }
                // Checks from outside, on a fresh node.
                let node = try Node(database: argument)
                defer { node.stop() }
                #expect(try await node.waitReady())
                for (what, sql) in Self.invariants {
                    let n = try await Self.violations(location, sql)
                    #expect(n == 0, "\(n) × \(what)")
                }
                let state = ledger.state.withLock { $0 }
                #expect(!state.accounts.isEmpty)
                print("crash test (\(store)): \(state.accounts.count) accounts, \(state.transfers.count) transfers, \(state.claims.count) claims answered 200 over \(kills) kills")
                // No account lost: every phone told "created" still logs in, to its account or is told it moved.
                for (_, entry) in state.accounts {
                    let r = await Self.post(http, node.base, "/v1/devices/login", entry.device.loginBody)
                    #expect(r?.0 == 200 || r?.0 == 410, "a created account's device got \(String(describing: r?.0)) \(String(describing: r?.1))")
                    if r?.0 == 200 { #expect(r?.1["accountId"] as? String == entry.account) }
                }
                // Every claim answered 200 holds: that phone logs in to that account.
                for (_, claim) in state.claims {
                    let r = await Self.post(http, node.base, "/v1/devices/login", claim.device.loginBody)
                    #expect(r?.0 == 200)
                    #expect(r?.1["accountId"] as? String == claim.account)
                }
                // Every transfer set up and not claimed is still claimable (unless a claim was applied
                // and its answer lost in the crash: then one of the claimants owns the account).
                for (email, transfer) in state.transfers where state.claims[email] == nil {
                    let owners = await withTaskGroup(of: Bool.self) { group in
                        for d in state.claimAttempts[email] ?? [] {
                            group.addTask { await Self.post(http, node.base, "/v1/devices/login", d.loginBody)?.1["accountId"] as? String == transfer.account }
                        }
                        return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                    }
                    if owners == 0 {
                        let b = Device()
                        let r = await Self.post(http, node.base, "/v1/transfers/claim", ["email": email, "temporaryPassword": transfer.password, "deviceId": b.id, "deviceSecret": b.secret])
                        #expect(r?.0 == 200, "pending transfer \(email) not claimable: \(String(describing: r?.0))")
                    } else {
                        #expect(owners == 1)
                    }
                }
            } catch {
                try? await http.shutdown()
                throw error
            }
            try await http.shutdown()
            #expect(kills == 8)
        }
    }

    @Test("kill -9 between a commit and its webhook's delivery: the event is delivered after the restart", arguments: StoreKind.available)
    func killBeforeDelivery(store: StoreKind) async throws {
        try await store.withDatabaseLocation { location, _ in
            // The receiver is down when the claim commits, so the first delivery cannot happen;
            // the server is killed while the events wait in the outbox.
            let port = try await FakeWebhookReceiver.closedPort()
            let webhook = ["--webhook-url", "http://127.0.0.1:\(port)/hooks", "--webhook-secret", FakeWebhookReceiver.secret]
            let node = try Node(database: location.argument, extra: webhook)
            #expect(try await node.waitReady())
            let a = Device(), b = Device()
            let (_, session) = try node.post("/v1/devices/login", TwoNodeTests.body(a))
            let token = try #require(session["accessToken"] as? String)
            #expect(try node.put("/v1/me/transfer", #"{"email":"crash@example.com","temporaryPassword":"plum-harbor-71-sail"}"#, token: token) == 201)
            #expect(try node.post("/v1/transfers/claim", TwoNodeTests.claim("crash@example.com", "plum-harbor-71-sail", b)).0 == 200)
            node.process.signal(SIGKILL)
            node.process.waitUntilExit()
            node.stop()

            try await FakeWebhookReceiver.run(port: port) { receiver in
                let restarted = try Node(database: location.argument, extra: webhook)
                defer { restarted.stop() }
                #expect(try await restarted.waitReady())
                // A failed first attempt waits 5 s; one that was in flight, its 60 s lease.
                let all = try await receiver.wait(for: 4, timeout: .seconds(90))
                #expect(all.map(\.type) == ["account.created", "transfer.set_up", "account.ways_back_changed", "transfer.claimed"])
                #expect(all.allSatisfy { (try? FakeWebhookReceiver.verifiedIndependently($0)) == true })
            }
        }
    }
}
