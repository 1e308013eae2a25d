import Foundation
import Testing
import TransferCore
import TransferHTTP
import TransferSettings

/// Every flag declared once (`ServerFlags`), read from the command line, `TRANSFER_*`
/// variables and secret files, by the server and by the CLI alike.
@Suite("Configuration")
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
        let file = try ConfigurationTests.secretFile(Self.secret + "\n")
        defer { try? FileManager.default.removeItem(at: file) }
        let config = try Self.load(["--webhook-url", "https://backend.example.com/hooks"], ["TRANSFER_WEBHOOK_SECRET_FILE": file.path])
        let webhook = try #require(config.webhook)
        #expect(webhook.signature.sign(id: "m", timestamp: 1, body: "{}") == WebhookSignature(secret: Self.secret)?.sign(id: "m", timestamp: 1, body: "{}"))

        let database = try ConfigurationTests.secretFile("postgres://transfer:s3cret@db.internal:5432/transfer\n")
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
        let bad = try ConfigurationTests.secretFile("whsec_tooshort")
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

/// The configuration as `transfer-server` reads it (in the process suite, one process at a time).
extension ProcessTests {
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
        for arguments in [["--transfer-tll", "24h"], ["--port"]] {
            let run = try Executable.run("transfer-server", arguments)
            #expect(run.code == 64, "\(run)")
            #expect(lines(of: run.err).count == 1, "\(run)")
        }
        let run = try Executable.run("transfer-server", [], environment: ["TRANSFER_PORT": "eighty"])
        #expect(run.code == 2, "\(run)")
        #expect(run.err == "transfer-server: TRANSFER_PORT: 'eighty' is not a whole number from 0 to 65535\n", "\(run)")
    }

    @Test("the server reads a secret's file when it starts")
    func secretFileInProcess() throws {
        let file = try ConfigurationTests.secretFile("not-a-webhook-secret")
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try Executable.run(
            "transfer-server", ["--webhook-url", "https://backend.example.com/hooks"], environment: ["TRANSFER_WEBHOOK_SECRET_FILE": file.path])
        #expect(run.code == 2, "\(run)")
        #expect(run.err == "transfer-server: TRANSFER_WEBHOOK_SECRET_FILE: not whsec_ followed by the base64 of 24 to 64 random bytes\n", "\(run)")
    }
}

/// The settings `transfer` shares with the servers (in the CLI suite, one process at a time).
extension CLITests {
    @Test("transfer issue honours --transfer-ttl and TRANSFER_TRANSFER_TTL", arguments: StoreKind.available)
    func issueTTL(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let database = harness.databaseArgument
                /// The lifetime of a transfer `transfer issue` makes, to the minute.
                func issue(_ device: Device, _ extra: [String], _ environment: [String: String]) throws -> Duration {
                    let before = Date()
                    let run = try Executable.run(
                        "transfer", ["issue", device.id, "--email", "\(UUID().uuidString.prefix(8))@example.com", "--reason", "ticket 26", "--json",
                                     "--database", database] + extra,
                        environment: ["USER": "agent-smith"].merging(environment) { $1 })
                    #expect(run.code == 0, "\(run)")
                    let text = try #require(try run.json["expiresAt"] as? String, "\(run)")
                    let expires = try #require(ISO8601DateFormatter().date(from: text), "\(text)")
                    return .seconds(Int64((expires.timeIntervalSince(before) / 60).rounded()) * 60)
                }
                let cases: [([String], [String: String], Duration, String)] = [
                    ([], [:], .seconds(86_400), "the default, as the server's"),
                    ([], ["TRANSFER_TRANSFER_TTL": "2h"], .seconds(7200), "the servers' variable"),
                    (["--transfer-ttl", "45m"], ["TRANSFER_TRANSFER_TTL": "2h"], .seconds(45 * 60), "the flag over the variable"),
                ]
                for (extra, environment, expected, why) in cases {
                    let device = Device()
                    _ = try await api.login(device)
                    #expect(try issue(device, extra, environment) == expected, "\(why)")
                }
                let bad = try Executable.run(
                    "transfer", ["issue", "x", "--email", "a@example.com", "--reason", "r", "--database", database],
                    environment: ["USER": "agent-smith", "TRANSFER_TRANSFER_TTL": "2x"])
                #expect(bad.code == 2 && bad.err == "transfer: TRANSFER_TRANSFER_TTL: '2x' is not a duration like 90s, 15m, 24h or 7d\n", "\(bad)")
            }
        }
    }


    @Test("transfer keys list: a retired key leaves the JWKS an access-token lifetime (as configured) plus 2m after", arguments: StoreKind.available)
    func keysTTL(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                _ = try await api.login(Device())
                let database = harness.databaseArgument
                #expect(try CLITests.transfer(["keys", "rotate", "--reason", "ticket 26"], database: database).code == 0)
                func lingers(_ extra: [String], environment: [String: String]) throws -> Duration {
                    let run = try Executable.run(
                        "transfer", ["keys", "list", "--json", "--database", database] + extra,
                        environment: ["USER": "agent-smith"].merging(environment) { $1 })
                    #expect(run.code == 0, "\(run)")
                    let keys = try #require(try run.json["keys"] as? [[String: Any]])
                    let retired = try #require(keys.first { $0["state"] as? String == "retired" }, "\(run.out)")
                    let formatter = ISO8601DateFormatter()
                    formatter.formatOptions.insert(.withFractionalSeconds)
                    func date(_ key: String) throws -> Date {
                        let text = try #require(retired[key] as? String)
                        return try #require(formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text), "\(text)")
                    }
                    return .seconds(Int64(try date("leavesJWKSAt").timeIntervalSince(try date("retiredAt")).rounded()))
                }
                #expect(try lingers([], environment: [:]) == .seconds(15 * 60 + 120), "the default, as the server's")
                #expect(try lingers([], environment: ["TRANSFER_ACCESS_TOKEN_TTL": "1h"]) == .seconds(3600 + 120))
                #expect(try lingers(["--access-token-ttl", "30m"], environment: ["TRANSFER_ACCESS_TOKEN_TTL": "1h"]) == .seconds(1800 + 120))
            }
        }
    }
}
