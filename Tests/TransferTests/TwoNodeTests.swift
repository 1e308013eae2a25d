import Foundation
import Testing

/// A real `transfer-server` process.
final class Node: @unchecked Sendable {
    let process = Process()
    /// Known once the server says where it listens: it binds port 0, so the kernel picks a
    /// free port (a random pick collided with the tests' own client ports).
    private(set) var port = 0
    /// The server's log goes to a file: an unread pipe would fill and block the server.
    let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-node-\(UUID().uuidString).log")
    var base: String { "http://127.0.0.1:\(port)" }

    init(database: String, extra: [String] = []) throws {
        process.executableURL = try ProcessTests.binary()
        process.arguments = [
            "--port", "0", "--database", database, "--argon2-memory-kib", "1024", "--argon2-iterations", "1",
            "--claim-limit", "off", "--account-creation-limit", "off",
        ] + extra
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let log = try FileHandle(forWritingTo: logFile)
        process.standardOutput = log
        process.standardError = log
        // The port is read from the start-up line, which is logged at info.
        process.environment = ProcessInfo.processInfo.environment.merging(["LOG_LEVEL": "info"]) { $1 }
        try process.run()
    }

    func waitReady() async throws -> Bool {
        for _ in 0..<300 {
            if port == 0, let log = try? String(contentsOf: logFile, encoding: .utf8),
                let range = log.range(of: #"listening on 127\.0\.0\.1:(\d+)"#, options: .regularExpression)
            {
                port = Int(log[range].split(separator: ":").last ?? "") ?? 0
            }
            if port != 0, try ProcessTests.curl(["\(base)/readyz"]).0 == 200 { return true }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        // Say why, for the test's report.
        let log = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
        print("node on port \(port) not ready (running: \(process.isRunning)); log tail:\n\(log.suffix(1500))")
        return false
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: logFile)
    }

    /// Starts a JSON POST without waiting for it, so many run at once.
    func startPost(_ path: String, _ json: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["curl", "-s", "-o", "/dev/null", "-m", "30", "-w", "%{http_code}", "-X", "POST",
                       "-H", "Content-Type: application/json", "-d", json, "\(base)\(path)"]
        p.standardOutput = Pipe()
        try p.run()
        return p
    }

    func post(_ path: String, _ json: String, token: String? = nil) throws -> (Int, [String: Any]) {
        var args = ["-X", "POST", "-H", "Content-Type: application/json", "-d", json]
        if let token { args += ["-H", "Authorization: Bearer \(token)"] }
        let (status, body) = try ProcessTests.curl(args + ["\(base)\(path)"])
        return (status, (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:])
    }

    func put(_ path: String, _ json: String, token: String) throws -> Int {
        try ProcessTests.curl(["-X", "PUT", "-H", "Content-Type: application/json", "-H", "Authorization: Bearer \(token)", "-d", json, "\(base)\(path)"]).0
    }

    func get(_ path: String, token: String) throws -> Int {
        try ProcessTests.curl(["-H", "Authorization: Bearer \(token)", "\(base)\(path)"]).0
    }
}

@Suite("Two nodes on one PostgreSQL database", .serialized)
struct TwoNodeTests {
    static func body(_ d: Device) -> String { #"{"deviceId":"\#(d.id)","deviceSecret":"\#(d.secret)"}"# }
    static func claim(_ email: String, _ password: String, _ d: Device) -> String {
        #"{"email":"\#(email)","temporaryPassword":"\#(password)","deviceId":"\#(d.id)","deviceSecret":"\#(d.secret)"}"#
    }

    @Test("set up on node 1, claim on node 2; 16 claims over both nodes: one winner; A refused on both",
          .enabled(if: StoreKind.available.contains(.postgres)))
    func twoNodes() async throws {
        try await TestPostgres.withDatabase { url in
            let one = try Node(database: url)
            let two = try Node(database: url)
            defer { one.stop(); two.stop() }
            #expect(try await one.waitReady())
            #expect(try await two.waitReady())

            // A token issued by node 1 is accepted by node 2: one signing key in the database.
            let a = Device()
            let (created, session) = try one.post("/v1/devices/login", Self.body(a))
            #expect(created == 201)
            let token = session["accessToken"] as? String ?? ""
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
            let (_, sessionC) = try one.post("/v1/devices/login", Self.body(c))
            let tokenC = sessionC["accessToken"] as? String ?? ""
            #expect(try two.put("/v1/me/transfer", #"{"email":"race@example.com","temporaryPassword":"plum-harbor-71-sail"}"#, token: tokenC) == 201)
            let claimants = (0..<16).map { _ in Device() }
            let running = try claimants.enumerated().map { i, d in
                try (i % 2 == 0 ? one : two).startPost("/v1/transfers/claim", Self.claim("race@example.com", "plum-harbor-71-sail", d))
            }
            var statuses: [String] = []
            for p in running {
                let out = (p.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile()
                p.waitUntilExit()
                statuses.append(String(decoding: out, as: UTF8.self))
            }
            #expect(statuses.filter { $0 == "200" }.count == 1)
            #expect(statuses.filter { $0 == "401" }.count == 15)
            #expect(try one.post("/v1/devices/login", Self.body(c)).0 == 410)
            #expect(try two.post("/v1/devices/login", Self.body(c)).0 == 410)
        }
    }
}
