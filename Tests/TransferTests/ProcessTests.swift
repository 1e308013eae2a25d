import Foundation
import Testing

/// The real `transfer-server` executable, started as the README starts it.
@Suite("transfer-server process", .serialized)
struct ProcessTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func binary() throws -> URL {
        for dir in [".build/debug", ".build/release"] {
            let url = root.appendingPathComponent(dir).appendingPathComponent("transfer-server")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw CancellationError()
    }

    /// Runs curl and returns (status, body).
    static func curl(_ args: [String]) throws -> (Int, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["curl", "-s", "-m", "10", "-w", "\n%{http_code}"] + args
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    @Test("starts on SQLite, serves the story, and shuts down cleanly on SIGTERM")
    func realProcess() async throws {
        let db = TempDatabase()
        defer { db.remove() }
        let node = try Node(database: "sqlite:\(db.path)")
        defer { node.stop() }
        #expect(try await node.waitReady())
        let base = node.base

        let device = Device()
        let body = #"{"deviceId":"\#(device.id)","deviceSecret":"\#(device.secret)"}"#
        let (status, json) = try Self.curl(["-X", "POST", "-H", "Content-Type: application/json", "-d", body, "\(base)/v1/devices/login"])
        #expect(status == 201)
        #expect(json.contains("\"created\":true"))
        #expect(try Self.curl(["\(base)/healthz"]).0 == 200)
        #expect(try Self.curl(["\(base)/.well-known/jwks.json"]).1.contains("Ed25519"))
        #expect(try Self.curl(["\(base)/openapi.yaml"]).1.contains("openapi: 3.1"))
        #expect(try Self.curl(["\(base)/metrics"]).1.contains("http_requests_total"))

        // A chunked body (no Content-Length) over 16 KiB is refused as it streams in.
        let big = FileManager.default.temporaryDirectory.appendingPathComponent("chunked-\(UUID().uuidString).json")
        try Data(("{\"deviceId\":\"" + String(repeating: "a", count: 64 * 1024) + "\"}").utf8).write(to: big)
        defer { try? FileManager.default.removeItem(at: big) }
        let (chunkedStatus, chunkedBody) = try Self.curl([
            "-X", "POST", "-H", "Content-Type: application/json", "-H", "Transfer-Encoding: chunked",
            "--data-binary", "@\(big.path)", "\(base)/v1/devices/login",
        ])
        #expect(chunkedStatus == 413)
        #expect(chunkedBody.contains("payload_too_large"))

        node.process.terminate()  // SIGTERM
        node.process.waitUntilExit()
        #expect(node.process.terminationStatus == 0)
        let output = (try? String(contentsOf: node.logFile, encoding: .utf8)) ?? ""
        #expect(output.contains("database closed"))
        #expect(!output.contains(device.secret))
    }

    @Test("a bad flag value stops the server at once with one line")
    func badConfiguration() throws {
        let p = Process()
        p.executableURL = try Self.binary()
        p.arguments = ["--transfer-ttl", "2x"]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = Pipe()
        try p.run()
        p.waitUntilExit()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(p.terminationStatus == 2)
        #expect(text.split(separator: "\n").count == 1)
        #expect(text.contains("--transfer-ttl"))
    }
}
