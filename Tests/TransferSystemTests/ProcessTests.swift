import Foundation
import Testing
@testable import TransferTestSupport

/// The real `transfer-server` executable, started as `./run` and a deployment start it.
@Suite("transfer-server process", .serialized)
struct ProcessTests {
    /// The package's root folder (kept here for the suites that read files from it).
    static let root = Repository.root

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
        let (status, json) = try Curl.call(["-X", "POST", "-H", "Content-Type: application/json", "-d", body, "\(base)/v1/devices/login"])
        #expect(status == 201)
        #expect(json.contains("\"created\":true"))
        #expect(try Curl.call(["\(base)/healthz"]).status == 200)
        #expect(try Curl.call(["\(base)/.well-known/jwks.json"]).body.contains("Ed25519"))
        #expect(try Curl.call(["\(base)/openapi.yaml"]).body.contains("openapi: 3.1"))
        #expect(try Curl.call(["\(base)/metrics"]).body.contains("http_requests_total"))

        // A chunked body (no Content-Length) over 16 KiB is refused as it streams in.
        let big = FileManager.default.temporaryDirectory.appendingPathComponent("chunked-\(UUID().uuidString).json")
        try Data(("{\"deviceId\":\"" + String(repeating: "a", count: 64 * 1024) + "\"}").utf8).write(to: big)
        defer { try? FileManager.default.removeItem(at: big) }
        let (chunkedStatus, chunkedBody) = try Curl.call([
            "-X", "POST", "-H", "Content-Type: application/json", "-H", "Transfer-Encoding: chunked",
            "--data-binary", "@\(big.path)", "\(base)/v1/devices/login",
        ])
        #expect(chunkedStatus == 413)
        #expect(chunkedBody.contains("payload_too_large"))

        // Push routing, with a service key made by the CLI on the file the server is running on.
        try TwoNodeTests.pushStory(register: node, ask: node, database: "sqlite:\(db.path)")

        node.process.terminate()  // SIGTERM
        node.process.waitUntilExit()
        #expect(node.process.terminationStatus == 0)
        let output = try node.log()
        #expect(output.contains("database closed"))
        #expect(!output.contains(device.secret))
    }

    @Test("a bad flag value stops the server at once with one line")
    func badConfiguration() throws {
        let run = try Executable.run("transfer-server", ["--transfer-ttl", "2x"])
        #expect(run.code == 2, "\(run)")
        #expect(lines(of: run.err).count == 1, "\(run)")
        #expect(run.err.contains("--transfer-ttl"))
    }

    @Test("v1's bare --trusted-proxy stops the server at once with one line naming the new form")
    func bareTrustedProxy() throws {
        let run = try Executable.run("transfer-server", ["--trusted-proxy"])
        #expect(run.code == 64, "\(run)")
        #expect(lines(of: run.err).count == 1, "\(run)")
        #expect(run.err.contains("--trusted-proxy 10.0.0.0/8,127.0.0.1"), "\(run)")
    }
}
