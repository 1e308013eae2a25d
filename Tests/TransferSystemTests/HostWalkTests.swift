import Foundation
import Logging
import PostgresNIO
import Testing
import TransferCore
import TransferPostgres
import TransferStorage
@testable import TransferTestSupport

/// Contract v1.3: several database hosts. Each new connection tries the URL's hosts in order
/// and keeps the first that qualifies; a host that turns read-only is left for the next that
/// qualifies; a database that stops answering gets `503` within the contract's 2 s.
/// (The whole failover, a real standby promoted under load, is `scripts/failover-test`.)
@Suite("Several database hosts", .serialized)
struct HostWalkTests {
    static var enabled: Bool { StoreKind.available.contains(.postgres) && OwnCluster.binaries != nil }
    let t0 = Timestamp(milliseconds: 1_795_000_000_000)
    func newDevice() -> DeviceID { DeviceID(UUID().uuidString)! }

    /// Runs `body` with two clusters of the test's own, both migrated, `readOnly` set read-only
    /// (`default_transaction_read_only`, as a primary fenced off), and a port where nothing listens.
    static func withClusters(_ body: (_ writable: OwnCluster, _ readOnly: OwnCluster, _ deadPort: Int) async throws -> Void) async throws {
        let writable = try OwnCluster()
        defer { writable.remove() }
        let readOnly = try OwnCluster()
        defer { readOnly.remove() }
        for cluster in [writable, readOnly] {
            try await Storage.withStore(.postgres(url: cluster.url), poolSize: 2, logger: quiet) { _ in }
        }
        try await setReadOnly(readOnly, true)
        try await body(writable, readOnly, try OwnCluster.freePort())
    }

    static var quiet: Logger {
        var logger = Logger(label: "test.hosts")
        logger.logLevel = .critical
        return logger
    }

    /// `default_transaction_read_only` for the whole cluster, open sessions included (a reload).
    static func setReadOnly(_ cluster: OwnCluster, _ on: Bool) async throws {
        try await TestPostgres.withClient(cluster.url) { client in
            _ = try await client.query(PostgresQuery(unsafeSQL: "ALTER SYSTEM SET default_transaction_read_only = \(on ? "on" : "off")"))
            _ = try await client.query("SELECT pg_reload_conf()")
        }
        try await Task.sleep(for: .milliseconds(300))  // the reload reaches every backend
    }

    static func url(_ ports: [Int], _ attributes: String?) -> String {
        "postgres://transfer@" + ports.map { "127.0.0.1:\($0)" }.joined(separator: ",") + "/postgres"
            + (attributes.map { "?target_session_attrs=\($0)" } ?? "")
    }

    /// Runs `body` on a store for `url` (not migrated: the clusters are).
    static func withStore(_ url: String, _ body: @Sendable (PostgresStore) async throws -> Void) async throws {
        try await Storage.withStore(.postgres(url: url), poolSize: 4, logger: quiet, migrate: false) { store in
            try await body(try #require(store as? PostgresStore))
        }
    }

    /// The port of the server a pooled connection of `store` is on.
    static func serverPort(_ store: PostgresStore) async throws -> Int {
        try await store.client.withConnection { conn in
            for try await port in try await conn.query("SELECT inet_server_port()", logger: quiet).decode(Int.self) { return port }
            throw TestFailure("no port")
        }
    }

    @Test("read-write skips a dead host and a read-only one; primary and any keep the read-only primary, whose writes answer unavailable",
          .enabled(if: enabled))
    func walk() async throws {
        try await Self.withClusters { [t0] writable, readOnly, dead in
            let hosts = [dead, readOnly.port, writable.port]
            try await Self.withStore(Self.url(hosts, "read-write")) { store in
                let calls = StoreCalls(store: store)
                #expect(try await calls.login(newDevice(), at: t0).grant?.created == true, "a write lands on the writable host")
                #expect(try await Self.serverPort(store) == writable.port)
                try await store.ping()
            }
            for attributes in ["primary", nil] {
                let name = attributes ?? "any"
                try await Self.withStore(Self.url(hosts, attributes)) { store in
                    let port = try await Self.serverPort(store)
                    #expect(port == readOnly.port, "\(name): the first host that is a primary / answers")
                    let calls = StoreCalls(store: store)
                    await #expect(throws: TransferError.unavailable(outcomeUnknown: false), "\(name): a write on a read-only host is 503, not 500") {
                        try await calls.login(newDevice(), at: t0)
                    }
                    await #expect(throws: PostgresStore.ReadOnlyHost.self, "/readyz: not ready on a host that cannot write") {
                        try await store.ping()
                    }
                }
            }
        }
    }

    @Test("a connection on a host that turns read-only answers 503 once and is dropped; the next connection walks on to the host that became writable",
          .enabled(if: enabled))
    func hostTurnsReadOnly() async throws {
        try await Self.withClusters { writable, readOnly, _ in
            // Listed first, so the walk finds it first once it is writable.
            try await Self.withStore(Self.url([writable.port, readOnly.port], "read-write")) { store in
                let calls = StoreCalls(store: store)
                #expect(try await calls.login(newDevice(), at: t0).grant?.created == true)
                #expect(try await Self.serverPort(store) == writable.port)

                // The roles swap, as after a switchover behind a proxy: the pooled connections stay open.
                try await Self.setReadOnly(writable, true)
                try await Self.setReadOnly(readOnly, false)
                var answers: [String] = []
                var wrote = false
                for _ in 0..<6 where !wrote {
                    do {
                        let result = try await calls.login(newDevice(), at: t0)
                        answers.append("\(result.grant?.created == true ? "created" : "\(result)")")
                        wrote = result.grant?.created == true
                    } catch {
                        answers.append("\(error)")
                        #expect(error as? TransferError == .unavailable(outcomeUnknown: false), "never anything but 503 unavailable: \(error)")
                    }
                }
                #expect(wrote, "a later write reaches the host that became writable: \(answers)")
                #expect(try await Self.serverPort(store) == readOnly.port)
                try await store.ping()
            }
        }
    }

    @Test("a database that stops answering (its processes frozen): requests get 503 unavailable with Retry-After within 2 s, /readyz 503; it serves again once it answers",
          .enabled(if: enabled))
    func frozenDatabase() async throws {
        let cluster = try OwnCluster()
        defer {
            cluster.signal(SIGCONT)
            cluster.remove()
        }
        let node = try Node(database: Self.url([cluster.port], "read-write"))
        defer { node.stop() }
        #expect(try await node.waitReady())
        let phone = Device()
        #expect(try node.post("/v1/devices/login", TwoNodeTests.body(phone)).0 == 201)
        let json = ["-H", "Content-Type: application/json"]

        // No RST, no FIN: a host gone without a word, as a crashed machine or a cut network.
        cluster.signal(SIGSTOP)
        for (what, arguments) in [
            ("login", ["-X", "POST"] + json + ["-d", TwoNodeTests.body(phone), "\(node.base)/v1/devices/login"]),
            ("first launch", ["-X", "POST"] + json + ["-d", TwoNodeTests.body(Device()), "\(node.base)/v1/devices/login"]),
            ("readiness", ["\(node.base)/readyz"]),
        ] {
            let answer = try OutageTests.timed(["-m", "30"] + arguments)
            #expect(answer.status == 503, "\(what): \(answer.status) \(answer.body)")
            #expect(answer.seconds < 2, "\(what): answered after \(answer.seconds) s (the contract's limit is 2 s)")
            #expect(answer.retryAfter != nil, "\(what): Retry-After")
        }
        cluster.signal(SIGCONT)
        var recovered = false
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline && !recovered {
            recovered = (try? node.post("/v1/devices/login", TwoNodeTests.body(phone)))?.0 == 200
            if !recovered { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(recovered, "the node serves again without a restart")
    }
}

extension OwnCluster {
    /// Sends `signal` to the cluster's postmaster and every process it started (its backends).
    func signal(_ signal: Int32) {
        guard let pidText = try? String(contentsOfFile: "\(directory)/data/postmaster.pid", encoding: .utf8),
            let first = pidText.split(separator: "\n").first, let postmaster = Int32(first)
        else { return }
        var pids = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == postmaster { pids.append(pid) }
        }
        for pid in pids { kill(pid, signal) }
    }
}
