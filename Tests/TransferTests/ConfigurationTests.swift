import Foundation
import Testing
import TransferCore
import TransferHTTP
import TransferSettings

/// Issue 26: every flag declared once (`ServerFlags`), read from the command line, `TRANSFER_*`
/// variables and secret files.
@Suite("Configuration", .serialized)
struct ConfigurationTests {
    static func load(_ arguments: [String] = [], _ environment: [String: String] = [:]) throws -> ServerConfiguration {
        try ServerConfiguration.load(arguments: arguments, environment: environment)
    }

    /// A file in the temporary folder holding `text`, mode 0600.
    static func secretFile(_ text: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)")
        try Data(text.utf8).write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        return url
    }

    static let secret = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()

    @Test("transfer-server --help names every flag, its environment variable and its default")
    func help() throws {
        let run = try Executable.run("transfer-server", ["--help"])
        #expect(run.code == 0, "\(run)")
        for setting in ServerFlags.all {
            #expect(run.out.contains(setting.flag), "\(setting.flag) is not in --help")
            #expect(run.out.contains(setting.environmentName), "\(setting.environmentName) is not in --help")
            #expect(run.out.contains("default \(setting.defaultText)"), "\(setting.flag)'s default is not in --help")
            if let file = setting.fileEnvironmentName { #expect(run.out.contains(file), "\(file) is not in --help") }
        }
        #expect(Set(ServerFlags.all.map(\.name)).count == ServerFlags.all.count, "a flag is declared twice")
    }

    @Test("an unknown flag or a missing value exits 64 with one line; a bad value exits 2 naming where it came from")
    func usage() throws {
        for arguments in [["--transfer-tll", "24h"], ["--port"], ["--trusted-proxy=on"], ["serve"]] {
            let run = try Executable.run("transfer-server", arguments)
            #expect(run.code == 64, "\(run)")
            #expect(lines(of: run.err).count == 1, "\(run)")
        }
        let run = try Executable.run("transfer-server", [], environment: ["TRANSFER_PORT": "eighty"])
        #expect(run.code == 2, "\(run)")
        #expect(run.err == "transfer-server: TRANSFER_PORT: 'eighty' is not a whole number from 0 to 65535\n", "\(run)")
    }

    @Test("a flag wins over its variable; the variable over the default; both forms of a flag read alike")
    func precedence() throws {
        #expect(try Self.load().transferTTL == .seconds(86_400))
        #expect(try Self.load([], ["TRANSFER_TRANSFER_TTL": "2h"]).transferTTL == .seconds(7200))
        #expect(try Self.load(["--transfer-ttl", "3h"], ["TRANSFER_TRANSFER_TTL": "2h"]).transferTTL == .seconds(3 * 3600))
        #expect(try Self.load(["--transfer-ttl=4h"]).transferTTL == .seconds(4 * 3600))
        #expect(try Self.load(["--trusted-proxy"]).trustedProxy)
        #expect(try Self.load([], ["TRANSFER_TRUSTED_PROXY": "on"]).trustedProxy)
        #expect(try Self.load([], ["TRANSFER_ACCOUNT_CREATION_LIMIT": "off"]).accountCreationLimit == nil)
        #expect(try Self.load(["--handoff-clients", "com.a, com.b"]).handoff?.clients == ["com.a", "com.b"])
        do {
            _ = try Self.load(["--access-token-ttl", "90m"], ["TRANSFER_SIGNING_KEY_MAX_AGE": "1h"])
            Issue.record("a signing key rotated sooner than a token lives was accepted")
        } catch {
            #expect("\(error)" == "TRANSFER_SIGNING_KEY_MAX_AGE: '1h' is too short; at least 1h and longer than --access-token-ttl")
        }
    }

    @Test("a secret can come from a file (TRANSFER_WEBHOOK_SECRET_FILE, TRANSFER_DATABASE_FILE), never from both places")
    func secretFromFile() throws {
        let file = try Self.secretFile(Self.secret + "\n")
        defer { try? FileManager.default.removeItem(at: file) }
        let config = try Self.load(["--webhook-url", "https://backend.example.com/hooks"], ["TRANSFER_WEBHOOK_SECRET_FILE": file.path])
        let webhook = try #require(config.webhook)
        #expect(webhook.signature.sign(id: "m", timestamp: 1, body: "{}") == WebhookSignature(secret: Self.secret)?.sign(id: "m", timestamp: 1, body: "{}"))

        let database = try Self.secretFile("postgres://transfer:s3cret@db.internal:5432/transfer\n")
        defer { try? FileManager.default.removeItem(at: database) }
        #expect(try Self.load([], ["TRANSFER_DATABASE_FILE": database.path]).database == .postgres(url: "postgres://transfer:s3cret@db.internal:5432/transfer"))

        func failure(_ environment: [String: String]) -> String {
            do {
                _ = try Self.load(["--webhook-url", "https://backend.example.com/hooks"], environment)
                return "accepted"
            } catch { return "\(error)" }
        }
        #expect(failure(["TRANSFER_WEBHOOK_SECRET_FILE": "/nonexistent/secret"]) == "TRANSFER_WEBHOOK_SECRET_FILE: cannot read '/nonexistent/secret'")
        #expect(failure(["TRANSFER_WEBHOOK_SECRET_FILE": file.path, "TRANSFER_WEBHOOK_SECRET": Self.secret])
            == "TRANSFER_WEBHOOK_SECRET and TRANSFER_WEBHOOK_SECRET_FILE are both set; keep one")
        let bad = try Self.secretFile("whsec_tooshort")
        defer { try? FileManager.default.removeItem(at: bad) }
        let message = failure(["TRANSFER_WEBHOOK_SECRET_FILE": bad.path])
        #expect(message.hasPrefix("TRANSFER_WEBHOOK_SECRET_FILE: not whsec_"), "\(message)")
        #expect(!message.contains("tooshort"), "a secret is never repeated in a message")
        // Only secrets are read from files: a variable with _FILE beside another flag is ignored.
        #expect(try Self.load([], ["TRANSFER_PORT_FILE": "/nonexistent"]).port == 8080)
    }

    @Test("the server reads a secret's file when it starts")
    func secretFileInProcess() throws {
        let file = try Self.secretFile("not-a-webhook-secret")
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try Executable.run(
            "transfer-server", ["--webhook-url", "https://backend.example.com/hooks"], environment: ["TRANSFER_WEBHOOK_SECRET_FILE": file.path])
        #expect(run.code == 2, "\(run)")
        #expect(run.err == "transfer-server: TRANSFER_WEBHOOK_SECRET_FILE: not whsec_ followed by the base64 of 24 to 64 random bytes\n", "\(run)")
    }

    @Test("the README's configuration names every flag")
    func readme() throws {
        let readme = try String(contentsOf: Repository.root.appendingPathComponent("README.md"), encoding: .utf8)
        for setting in ServerFlags.all { #expect(readme.contains("`\(setting.flag)"), "README.md does not mention \(setting.flag)") }
    }
}
