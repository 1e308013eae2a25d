import Foundation
import Testing

/// The package's root folder, the one that holds `Package.swift`.
enum Repository {
    static let root: URL = {
        var folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: folder.appendingPathComponent("Package.swift").path) {
            let parent = folder.deletingLastPathComponent()
            precondition(parent.path != folder.path, "no Package.swift in any folder above \(#filePath)")
            folder = parent
        }
        return folder
    }()

    /// A file of the repository, as text.
    static func file(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }
}

/// The executables `swift build` puts in `.build`, run as a person would run them.
enum Executable {
    /// The built `name`; throws, naming it and how to build it, when it is not there.
    static func url(_ name: String) throws -> URL {
        for dir in [".build/debug", ".build/release"] {
            let url = Repository.root.appendingPathComponent(dir).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw TestFailure("`.build/debug/\(name)` is missing: run `swift build --build-tests` first")
    }

    /// Runs `name` (or the binary at `executable`) with `arguments` to its end, in `folder` when
    /// given. `environment` nil keeps the test's own.
    static func run(
        _ name: String, _ arguments: [String], environment: [String: String]? = nil, executable: URL? = nil,
        folder: URL? = nil
    ) throws -> ProcessRun {
        let run = try ChildProcess.capture(try executable ?? url(name), arguments, environment: environment, folder: folder)
        return ProcessRun(
            command: ([name] + arguments).joined(separator: " "), code: run.code,
            out: String(decoding: run.out, as: UTF8.self), err: String(decoding: run.err, as: UTF8.self))
    }
}

/// How a process ended and what it wrote.
struct ProcessRun: CustomStringConvertible {
    let command: String
    let code: Int32
    let out: String
    let err: String

    /// Standard output as a JSON object; throws, with the exit code and both outputs, when it is not one.
    var json: [String: Any] {
        get throws {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any] else {
                throw TestFailure("the output of `\(command)` is not a JSON object: \(self)")
            }
            return object
        }
    }

    var description: String { "exit \(code), stdout: \(out.isEmpty ? "(empty)" : out), stderr: \(err.isEmpty ? "(empty)" : err)" }
}

/// The lines of `text`, empty ones included; the newline that ends the last line does not start another.
func lines(of text: String) -> [Substring] {
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    if lines.last?.isEmpty == true { lines.removeLast() }
    return lines
}

/// curl, as a client outside the server's process calls it.
enum Curl {
    /// `call` on a thread outside Swift's cooperative pool: for a request whose answer needs a
    /// server in this test process (a fake Apple), which a blocked pool thread could starve.
    static func callOffPool(_ arguments: [String]) async throws -> (status: Int, body: String) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try call(arguments) }) }
        }
    }

    /// The HTTP status and body curl got. Throws, with curl's own error, when no HTTP answer came at all.
    static func call(_ arguments: [String]) throws -> (status: Int, body: String) {
        let run = try ChildProcess.capture(URL(fileURLWithPath: "/usr/bin/env"), ["curl", "-sS", "-m", "10", "-w", "\n%{http_code}"] + arguments)
        let data = run.out, error = String(decoding: run.err, as: UTF8.self)
        let text = String(decoding: data, as: UTF8.self)
        // `-w` writes the status on a line of its own after the body; the body keeps its own newlines.
        guard let cut = text.lastIndex(of: "\n"), let status = Int(text[text.index(after: cut)...]), status != 0 else {
            throw TestFailure(
                "curl \(arguments.joined(separator: " ")) got no HTTP answer: exit \(run.code), \(error.isEmpty ? "no error" : error), output: \(text)")
        }
        return (status, String(text[..<cut]))
    }
}

/// A request `Node.startPost` started.
struct StartedRequest {
    let curl: ChildProcess
    let output: URL

    /// The HTTP status once curl has ended (0: no answer).
    func status() -> Int {
        curl.waitUntilExit()
        defer { try? FileManager.default.removeItem(at: output) }
        return Int((try? String(contentsOf: output, encoding: .utf8)) ?? "") ?? 0
    }
}

/// A real `transfer-server` process.
final class Node: @unchecked Sendable {
    let process: ChildProcess
    /// Known once the server says where it listens: it binds port 0, so the kernel picks a
    /// free port (a random pick collided with the tests' own client ports).
    private(set) var port = 0
    /// The server's log goes to a file: an unread pipe would fill and block the server.
    let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-node-\(UUID().uuidString).log")
    var base: String { "http://127.0.0.1:\(port)" }

    /// `database` nil starts the server on its default (`sqlite:./transfer.sqlite` in `folder`);
    /// `environment` nil gives it the test's own.
    init(
        database: String?, extra: [String] = [], executable: URL? = nil, folder: URL? = nil,
        environment: [String: String]? = nil
    ) throws {
        let arguments = ["--port", "0"] + (database.map { ["--database", $0] } ?? []) + [
            "--argon2-memory-kib", "1024", "--argon2-iterations", "1",
            "--claim-limit", "off", "--account-creation-limit", "off",
        ] + (TestPostgres.pooler != nil && database?.hasPrefix("postgres") == true ? ["--database-pooling", "transaction"] : []) + extra
        // The port is read from the start-up line, which is logged at info.
        let environment = (environment ?? ProcessInfo.processInfo.environment).merging(["LOG_LEVEL": "info"]) { $1 }
        process = ChildProcess(
            try executable ?? Executable.url("transfer-server"), arguments, environment: environment, folder: folder,
            stdout: logFile.path, stderr: logFile.path)
        try process.run()
    }

    /// The server's log so far.
    func log() throws -> String { try String(contentsOf: logFile, encoding: .utf8) }

    /// True once `/readyz` answers 200; false, with the reason and the log's tail printed, after 30 s
    /// or when the process ends first.
    func waitReady() async throws -> Bool {
        var lastAnswer = "no port in the log yet"
        for _ in 0..<300 {
            if port == 0, let range = try log().range(of: #"listening on 127\.0\.0\.1:\d+"#, options: .regularExpression) {
                let line = try log()[range]
                guard let number = line.split(separator: ":").last, let parsed = Int(number) else {
                    throw TestFailure("no port in the start-up line \"\(line)\"")
                }
                port = parsed
            }
            if port != 0 {
                // Refused connections are expected until the server listens: keep asking.
                do {
                    let (status, body) = try Curl.call(["\(base)/readyz"])
                    if status == 200 { return true }
                    lastAnswer = "/readyz answered \(status) \(body)"
                } catch {
                    lastAnswer = "\(error)"
                }
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        // Say why, for the test's report.
        let tail = (try? log()).map { String($0.suffix(1500)) } ?? "(the log file cannot be read)"
        print("node on port \(port) not ready (running: \(process.isRunning); last: \(lastAnswer)); log tail:\n\(tail)")
        return false
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: logFile)
    }

    /// Starts a JSON POST without waiting for it, so many run at once; `status()` waits for its HTTP status.
    func startPost(_ path: String, _ json: String) throws -> StartedRequest {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("post-\(UUID().uuidString).status")
        let curl = ChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["curl", "-s", "-o", "/dev/null", "-m", "30", "-w", "%{http_code}", "-X", "POST",
             "-H", "Content-Type: application/json", "-d", json, "\(base)\(path)"],
            stdout: output.path)
        try curl.run()
        return StartedRequest(curl: curl, output: output)
    }

    /// POSTs `json`; throws, with the status and the body, when the answer is not a JSON object.
    func post(_ path: String, _ json: String, token: String? = nil) throws -> (Int, [String: Any]) {
        var args = ["-X", "POST", "-H", "Content-Type: application/json", "-d", json]
        if let token { args += Self.auth(token) }
        let (status, body) = try Curl.call(args + ["\(base)\(path)"])
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] else {
            throw TestFailure("POST \(path) answered \(status) with a body that is not a JSON object: \(body)")
        }
        return (status, object)
    }

    func put(_ path: String, _ json: String, token: String) throws -> Int {
        try Curl.call(["-X", "PUT", "-H", "Content-Type: application/json"] + Self.auth(token) + ["-d", json, "\(base)\(path)"]).status
    }

    func get(_ path: String, token: String) throws -> Int {
        try Curl.call(Self.auth(token) + ["\(base)\(path)"]).status
    }

    /// The token, and the secret of its device as the app sends it beside (`X-Device-Secret`).
    static func auth(_ token: String) -> [String] {
        ["-H", "Authorization: Bearer \(token)"] + (Keychain.secret(forToken: token).map { ["-H", "X-Device-Secret: \($0)"] } ?? [])
    }
}

/// The `transfer` CLI, run as support staff run it.
enum CLI {
    /// Runs `transfer` as the operator `agent-smith`.
    static func transfer(_ args: [String], database: String?) throws -> ProcessRun {
        try Executable.run("transfer", args + (database.map { ["--database", $0] } ?? []), environment: ["USER": "agent-smith"])
    }
}
