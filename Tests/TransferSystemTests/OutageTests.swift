import Foundation
import Testing
@testable import TransferTestSupport

/// A PostgreSQL cluster of the test's own, which it may stop and start (the shared test
/// database must stay up for the other tests). As the `postgres` user when run as root.
final class OwnCluster: @unchecked Sendable {
    static var binaries: String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root))?.sorted { $0.compare($1, options: .numeric) == .orderedAscending }
        guard let version = versions?.last, FileManager.default.isExecutableFile(atPath: "\(root)/\(version)/bin/pg_ctl") else { return nil }
        return "\(root)/\(version)/bin"
    }

    let directory = "/tmp/transfer-outage-\(UUID().uuidString.prefix(8))"
    let port: Int
    var url: String { "postgres://transfer@127.0.0.1:\(port)/postgres" }

    init() throws {
        let bin = try #require(Self.binaries, "PostgreSQL's server binaries")
        let socket = try Self.freePort()
        port = socket
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if getuid() == 0 { try Self.run("/bin/chown", ["postgres", directory]) }
        try asPostgres("\(bin)/initdb", ["-D", "\(directory)/data", "-U", "transfer", "--auth=trust", "-E", "UTF8"])
        try start()
    }

    func start() throws {
        try asPostgres("\(Self.binaries!)/pg_ctl", [
            "-D", "\(directory)/data", "-l", "\(directory)/log", "-w", "-o",
            "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off", "start",
        ])
    }

    /// `-m fast`: open connections are told the server is shutting down, as in a failover or a restart.
    func stop() throws {
        try asPostgres("\(Self.binaries!)/pg_ctl", ["-D", "\(directory)/data", "-m", "fast", "-w", "stop"])
    }

    func remove() {
        _ = try? asPostgres("\(Self.binaries!)/pg_ctl", ["-D", "\(directory)/data", "-m", "immediate", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func asPostgres(_ tool: String, _ arguments: [String]) throws {
        if getuid() == 0 { try Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", tool] + arguments) } else { try Self.run(tool, arguments) }
    }

    /// `tool` to its end (a ChildProcess: Foundation's `Process.waitUntilExit` never returned
    /// for `pg_ctl start`, whose server outlives it).
    private static func run(_ tool: String, _ arguments: [String]) throws {
        let run = try ChildProcess.capture(URL(fileURLWithPath: tool), arguments)
        guard run.code == 0 else {
            throw TestFailure("\(tool) \(arguments.joined(separator: " ")) exited \(run.code): \(String(decoding: run.err, as: UTF8.self))")
        }
    }

    static func freePort() throws -> Int {
        let run = try ChildProcess.capture(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["python3", "-c", "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"])
        let text = String(decoding: run.out, as: UTF8.self)
        return try #require(Int(text.trimmingCharacters(in: .whitespacesAndNewlines)))
    }
}

@Suite("PostgreSQL outage")
struct OutageTests {
    /// One request through curl: its status, `Retry-After`, body, and how long it took by
    /// curl's own clock (connecting to the last byte: a loaded machine's process start is not
    /// the server's time).
    static func timed(_ arguments: [String]) throws -> (status: Int, retryAfter: String?, body: String, seconds: Double) {
        let files = FileManager.default.temporaryDirectory.appendingPathComponent("outage-\(UUID().uuidString)")
        let headers = files.appendingPathExtension("headers"), body = files.appendingPathExtension("body")
        defer {
            try? FileManager.default.removeItem(at: headers)
            try? FileManager.default.removeItem(at: body)
        }
        let run = try ChildProcess.capture(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["curl", "-sS", "-m", "10", "-D", headers.path, "-o", body.path, "-w", "%{http_code} %{time_total}"] + arguments)
        let written = String(decoding: run.out, as: UTF8.self).split(separator: " ")
        guard written.count == 2, let status = Int(written[0]), status != 0, let seconds = Double(written[1]) else {
            throw TestFailure("curl \(arguments.joined(separator: " ")) got no HTTP answer: exit \(run.code), \(String(decoding: run.err, as: UTF8.self))")
        }
        let lines = (try? String(contentsOf: headers, encoding: .utf8))?.split(separator: "\r\n") ?? []
        let retry = lines.first { $0.lowercased().hasPrefix("retry-after:") }.map { $0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces) }
        return (status, retry, (try? String(contentsOf: body, encoding: .utf8)) ?? "", seconds)
    }

    /// `timed` on a thread of its own: curl blocks its caller, and the cooperative pool has a
    /// thread a core, so requests sent from the pool would go out two at a time.
    static func timedOffPool(_ arguments: [String]) async throws -> (status: Int, retryAfter: String?, body: String, seconds: Double) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try timed(arguments) }) }
        }
    }

    @Test("PostgreSQL stops under a running node: 503 unavailable with Retry-After within 2 s, nothing half-applied, and the node recovers by itself",
          .enabled(if: StoreKind.available.contains(.postgres) && OwnCluster.binaries != nil))
    func outage() async throws {
        let cluster = try OwnCluster()
        defer { cluster.remove() }
        let node = try Node(database: cluster.url)
        defer { node.stop() }
        #expect(try await node.waitReady())
        let phone = Device()
        let (created, session) = try node.post("/v1/devices/login", TwoNodeTests.body(phone))
        #expect(created == 201)
        let token = try #require(session["accessToken"] as? String, "\(session)")
        let json = ["-H", "Content-Type: application/json"]

        try cluster.stop()
        let calls: [(String, [String])] = [
            ("login", ["-X", "POST"] + json + ["-d", TwoNodeTests.body(phone), "\(node.base)/v1/devices/login"]),
            ("first launch", ["-X", "POST"] + json + ["-d", TwoNodeTests.body(Device()), "\(node.base)/v1/devices/login"]),
            ("GET /v1/me", Node.auth(token) + ["\(node.base)/v1/me"]),
            ("set-up", ["-X", "PUT"] + json + Node.auth(token) + ["-d",
                #"{"email":"outage@example.com","temporaryPassword":"plum-harbor-71-sail"}"#, "\(node.base)/v1/me/transfer"]),
            ("readiness", ["\(node.base)/readyz"]),
        ]
        for round in 1...2 {
            for (what, arguments) in calls {
                let answer = try Self.timed(arguments)
                #expect(answer.status == 503, "\(what), round \(round): \(answer.status) \(answer.body)")
                #expect(answer.seconds < 2, "\(what), round \(round): answered after \(answer.seconds) s (the contract's limit is 2 s)")
                if what != "readiness" {
                    #expect(answer.body.contains(#""error":"unavailable""#), "\(what): \(answer.body)")
                    #expect(answer.retryAfter != nil, "\(what): Retry-After")
                }
            }
        }
        #expect(try Self.timed(["\(node.base)/healthz"]).status == 200, "the process itself is alive")

        try cluster.start()
        var recovered = false
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if (try? node.post("/v1/devices/login", TwoNodeTests.body(phone)))?.0 == 200 {
                recovered = true
                break
            }
            try await Task.sleep(for: .milliseconds(250))
        }
        #expect(recovered, "the node answers again once PostgreSQL is back, without a restart")
        #expect(try node.get("/v1/me", token: token) == 200, "the session from before the outage still works")
        let (_, me) = try Curl.call(["-H", "Authorization: Bearer \(token)", "\(node.base)/v1/me"])
        #expect(me.contains(#""migrationFlag":false"#), "the set-up refused during the outage left nothing: \(me)")
        #expect(try node.put("/v1/me/transfer", #"{"email":"outage@example.com","temporaryPassword":"plum-harbor-71-sail"}"#, token: token) == 201)
    }

    @Test("PostgreSQL goes silent under concurrent launches, its connections open: each launch hears 503 within 2 s, readiness too, and launches work again once it answers",
          .enabled(if: StoreKind.available.contains(.postgres) && OwnCluster.binaries != nil))
    func silence() async throws {
        let cluster = try OwnCluster()
        defer { cluster.remove() }
        let node = try Node(database: cluster.url)
        defer { node.stop() }
        #expect(try await node.waitReady())
        // Phones with open sessions: their launches within the resolution are one batched read.
        let phones = (0..<24).map { _ in Device() }
        var accounts: [String: String] = [:]
        for phone in phones {
            let (status, session) = try node.post("/v1/devices/login", TwoNodeTests.body(phone))
            #expect(status == 201)
            accounts[phone.id] = session["accountId"] as? String
        }
        let json = ["-H", "Content-Type: application/json"]
        let launches = phones.map { ["-X", "POST"] + json + ["-d", TwoNodeTests.body($0), "\(node.base)/v1/devices/login"] }
        let readiness = ["\(node.base)/readyz"]

        cluster.signal(SIGSTOP)
        defer { cluster.signal(SIGCONT) }
        let answers = try await withThrowingTaskGroup(of: (status: Int, retryAfter: String?, body: String, seconds: Double).self) { group in
            for arguments in launches + [readiness] { group.addTask { try await Self.timedOffPool(arguments) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for answer in answers {
            #expect(answer.status == 503, "\(answer.status) \(answer.body)")
            #expect(answer.seconds < 2, "answered after \(answer.seconds) s (the contract's limit is 2 s): \(answer.body)")
        }
        #expect(answers.filter { $0.body.contains(#""error":"unavailable""#) && $0.retryAfter != nil }.count == phones.count,
                "each launch says unavailable, with Retry-After: \(answers.map(\.body))")

        cluster.signal(SIGCONT)
        let deadline = Date().addingTimeInterval(60)
        var waiting = phones
        while !waiting.isEmpty, Date() < deadline {
            waiting = try waiting.filter { phone in
                let (status, session) = try node.post("/v1/devices/login", TwoNodeTests.body(phone))
                if status == 200 { #expect(session["accountId"] as? String == accounts[phone.id], "each phone keeps its account") }
                return status != 200
            }
            if !waiting.isEmpty { try await Task.sleep(for: .milliseconds(250)) }
        }
        #expect(waiting.isEmpty, "\(waiting.count) phones still not logged in a minute after PostgreSQL answered again")
    }
}
