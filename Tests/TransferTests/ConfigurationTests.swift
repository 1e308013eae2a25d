import Foundation
import Testing
import TransferCore
import TransferHTTP
import TransferSettings
@testable import TransferTestSupport

/// Every flag declared once (`ServerFlags`), read from the command line, `TRANSFER_*`
/// variables and secret files, by the server and by the CLI alike.
@Suite("Configuration")
struct ConfigurationTests {
    static func load(_ arguments: [String] = [], _ environment: [String: String] = [:]) throws -> ServerConfiguration {
        try ServerConfiguration.load(arguments: arguments, environment: environment)
    }

    /// A file in the temporary folder holding `text`, mode 0600.

    static let secret = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()

    @Test("the command line: --name value and --name=value; anything else is a usage error")
    func commandLine() throws {
        let all = ServerFlags.all
        #expect(try SettingsCommandLine.parse(["--port", "1", "--hostname=::", "--trusted-proxy", "10.0.0.0/8"], settings: all)
            == .flags(["port": "1", "hostname": "::", "trusted-proxy": "10.0.0.0/8"]))
        #expect(try SettingsCommandLine.parse(["--port", "1", "-h"], settings: all) == .help)
        for bad in [["--transfer-tll", "24h"], ["--port"], ["--port", "--hostname", "x"], ["--trusted-proxy"], ["serve"]] {
            #expect(throws: SettingsCommandLine.UsageError.self, "\(bad)") { try SettingsCommandLine.parse(bad, settings: all) }
        }
    }


    /// Contract v1.3: the switch trusted whoever connected; the list names the proxies.
    @Test("v1's bare --trusted-proxy is refused at start in one line that names the new form; so is a bad entry, by name")
    func trustedProxyForms() throws {
        let form = "--trusted-proxy 10.0.0.0/8,127.0.0.1"
        for bare in [["--trusted-proxy"], ["--trusted-proxy", "--port", "8080"]] {
            do {
                _ = try SettingsCommandLine.parse(bare, settings: ServerFlags.all)
                Issue.record("\(bare) was accepted")
            } catch {
                #expect(error.description == "--trusted-proxy names the proxies now, addresses or CIDR ranges: \(form)")
            }
        }
        func failure(_ arguments: [String], _ environment: [String: String] = [:]) -> String {
            do {
                let config = try Self.load(arguments, environment)
                return "accepted: \(config.trustedProxies)"
            } catch { return "\(error)" }
        }
        #expect(failure([], ["TRANSFER_TRUSTED_PROXY": "on"])
            == "TRANSFER_TRUSTED_PROXY: 'on' was v1's switch; name the proxies, addresses or CIDR ranges: \(form)")
        #expect(failure(["--trusted-proxy=true"]) == "--trusted-proxy: 'true' was v1's switch; name the proxies, addresses or CIDR ranges: \(form)")
        #expect(failure(["--trusted-proxy", "10.0.0.0/8,10.0.0.0/33"]) == "--trusted-proxy: '10.0.0.0/33': the prefix of an IPv4 range is 0 to 32")
        #expect(failure(["--trusted-proxy", "127.0.0.1,proxy.internal"])
            == "--trusted-proxy: 'proxy.internal' is not an IP address or a CIDR range (like 10.0.0.0/8, 127.0.0.1 or fd00::/8)")
        #expect(failure(["--trusted-proxy", "127.0.0.1,"]) == "--trusted-proxy: '127.0.0.1,' has an empty entry")
        for message in [failure(["--trusted-proxy", "10.0.0.0/33"]), failure([], ["TRANSFER_TRUSTED_PROXY": "on"])] {
            #expect(!message.contains("\n"), "one line: \(message)")
        }
    }

    @Test("a flag wins over its variable; the variable over the default; both forms of a flag read alike")
    func precedence() throws {
        #expect(try Self.load().transferTTL == .seconds(86_400))
        #expect(try Self.load([], ["TRANSFER_TRANSFER_TTL": "2h"]).transferTTL == .seconds(7200))
        #expect(try Self.load(["--transfer-ttl", "3h"], ["TRANSFER_TRANSFER_TTL": "2h"]).transferTTL == .seconds(3 * 3600))
        #expect(try Self.load(["--transfer-ttl=4h"]).transferTTL == .seconds(4 * 3600))
        #expect(try Self.load(["--trusted-proxy", "10.0.0.0/8, 127.0.0.1"]).trustedProxies.description == "10.0.0.0/8,127.0.0.1/32")
        #expect(try Self.load([], ["TRANSFER_TRUSTED_PROXY": "fd00::/8"]).trustedProxies.description == "fd00::/8")
        #expect(try Self.load([], ["TRANSFER_TRUSTED_PROXY": "off"]).trustedProxies == .none)
        #expect(try Self.load([], ["TRANSFER_ACCOUNT_CREATION_LIMIT": "off"]).limits.accountCreation == nil)
        #expect(try Self.load(["--handoff-clients", "com.a, com.b"]).handoff?.clients == ["com.a", "com.b"])
        do {
            _ = try Self.load(["--access-token-ttl", "90m"], ["TRANSFER_SIGNING_KEY_MAX_AGE": "1h"])
            Issue.record("a signing key rotated sooner than a token lives was accepted")
        } catch {
            #expect("\(error)" == "TRANSFER_SIGNING_KEY_MAX_AGE: '1h' is too short; at least 1h and longer than --access-token-ttl")
        }
        // With no queue, set-ups could hold every hash worker and a claim would get 503.
        #expect(throws: (any Error).self, "--hash-queue 0 is refused") { try Self.load(["--hash-queue", "0"]) }
        #expect(try Self.load(["--hash-queue", "1"]).hashQueue == 1)
    }


    @Test("a secret can come from a file (TRANSFER_WEBHOOK_SECRET_FILE, TRANSFER_DATABASE_FILE), never from both places")
    func secretFromFile() throws {
        let file = try SecretFile.make(Self.secret + "\n")
        defer { try? FileManager.default.removeItem(at: file) }
        let config = try Self.load(["--webhook-url", "https://backend.example.com/hooks"], ["TRANSFER_WEBHOOK_SECRET_FILE": file.path])
        let webhook = try #require(config.webhook)
        #expect(webhook.signature.sign(id: "m", timestamp: 1, body: "{}") == WebhookSignature(secret: Self.secret)?.sign(id: "m", timestamp: 1, body: "{}"))

        let database = try SecretFile.make("postgres://transfer:s3cret@db.internal:5432/transfer\n")
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
        let bad = try SecretFile.make("whsec_tooshort")
        defer { try? FileManager.default.removeItem(at: bad) }
        let message = failure(["TRANSFER_WEBHOOK_SECRET_FILE": bad.path])
        #expect(message.hasPrefix("TRANSFER_WEBHOOK_SECRET_FILE: not whsec_"), "\(message)")
        #expect(!message.contains("tooshort"), "a secret is never repeated in a message")
        // Only secrets are read from files: a variable with _FILE beside another flag is ignored.
        #expect(try Self.load([], ["TRANSFER_PORT_FILE": "/nonexistent"]).port == 8080)
    }

    /// The operator's table is made from the declarations (`ServerFlags.table`); with
    /// `UPDATE_DOCS=1` this test writes it into the file instead of failing.
    @Test("docs/operating.md's flag table is the one the declarations make, every flag with its text")
    func flagTable() throws {
        for setting in ServerFlags.all {
            #expect(!setting.documentation.isEmpty, "\(setting.flag) has no .documented(…) text for the flag table")
        }
        let url = Repository.root.appendingPathComponent("docs/operating.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        let start = try #require(text.range(of: ServerFlags.tableStart + "\n"), "docs/operating.md has no line \(ServerFlags.tableStart)")
        let end = try #require(
            text.range(of: ServerFlags.tableEnd, range: start.upperBound..<text.endIndex), "docs/operating.md has no line \(ServerFlags.tableEnd)")
        // The lines between the markers, each with its line break.
        let inFile = String(text[start.upperBound..<end.lowerBound])
        let made = ServerFlags.table + "\n"
        guard inFile != made else { return }
        if ProcessInfo.processInfo.environment["UPDATE_DOCS"] == "1" {
            try (text[..<start.upperBound] + made + text[end.lowerBound...]).write(to: url, atomically: true, encoding: .utf8)
            return
        }
        let changes = made.split(separator: "\n").difference(from: inFile.split(separator: "\n"))
        let lines = changes.map { change in
            switch change {
            case .remove(_, let line, _): "- \(line)"
            case .insert(_, let line, _): "+ \(line)"
            }
        }
        Issue.record("""
            docs/operating.md's flag table differs from the declarations in ServerFlags (- the file, + made):
            \(lines.joined(separator: "\n"))
            Refresh it with: UPDATE_DOCS=1 swift test --filter ConfigurationTests
            """)
    }
}
