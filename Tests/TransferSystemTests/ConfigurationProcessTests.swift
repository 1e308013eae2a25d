import Foundation
import Testing
import TransferCore
import TransferHTTP
import TransferSettings
@testable import TransferTestSupport

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
        let file = try SecretFile.make("not-a-webhook-secret")
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
                #expect(try CLI.transfer(["keys", "rotate", "--reason", "ticket 26"], database: database).code == 0)
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
