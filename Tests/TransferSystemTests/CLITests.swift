import Foundation
import Testing
import TransferCore
@testable import TransferTestSupport

/// The `transfer` executable, run as support staff run it, against a database a scenario
/// prepared through the service (which keeps running on the same file).
@Suite("transfer CLI", .serialized)
struct CLITests {

    let password = "plum-harbor-71-sail"

    @Test("account finds the account by id, userName, device and email, and says which matched", arguments: StoreKind.available)
    func account(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let a = Device(), b = Device()
                let session = try await api.login(a)
                let account = try #require(session["accountId"] as? String)
                _ = try await api.setUp(token: session.accessToken, email: "Ann@Example.com", password: password)
                _ = try await api.claim(email: "ann@example.com", password: "wrong-guess-1", device: b)
                let db = harness.databaseArgument
                for (query, field) in [(account, "accountId"), (a.id.uppercased(), "userName"), ("ANN@example.com", "email")] {
                    let run = try CLI.transfer(["account", query, "--json"], database: db)
                    #expect(run.code == 0, "\(run)")
                    #expect(try run.json["accountId"] as? String == account)
                    #expect(try run.json["matchedBy"] as? String == field)
                }
                let text = try CLI.transfer(["account", "ann@example.com"], database: db)
                #expect(text.code == 0)
                #expect(text.out.contains("matched by transfer email"))
                #expect(text.out.contains("active"))
                #expect(text.out.contains("1 in a row, 1 in total"))
                #expect(text.out.contains("expires in 23 h"))
                #expect(!text.out.contains("$argon2id$"))
                #expect(!text.out.contains(a.secret))
                let json = try CLI.transfer(["account", account, "--json"], database: db).json
                let transfer = try #require(json["transfer"] as? [String: Any])
                #expect(transfer["email"] as? String == "Ann@Example.com")
                #expect(transfer["failedAttemptsTotal"] as? Int == 1)
                #expect((json["devices"] as? [[String: Any]])?.first?["state"] as? String == "active")
                #expect(json["migrationFlag"] as? Bool == true)

                let missing = try CLI.transfer(["account", "nobody@example.com"], database: db)
                #expect(missing.code == 1)
                #expect(lines(of: missing.err).count == 1, "\(missing)")
            }
        }
    }

    @Test("the database and --json may stand before the command, as support staff type them, or after it", arguments: StoreKind.available)
    func optionsBeforeTheCommand(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let account = try #require(try await api.login(Device())["accountId"] as? String)
                let db = harness.databaseArgument
                let before = try Executable.run("transfer", ["--database", db, "--json", "account", account], environment: ["USER": "agent-smith"])
                #expect(before.code == 0, "\(before)")
                #expect(try before.json["accountId"] as? String == account)
                let equals = try Executable.run("transfer", ["--database=\(db)", "history", account], environment: ["USER": "agent-smith"])
                #expect(equals.code == 0, "\(equals)")
                let after = try CLI.transfer(["account", account, "--json"], database: db)
                #expect(try after.json["accountId"] as? String == account)
                let help = try Executable.run("transfer", ["--help"], environment: [:])
                #expect(help.out.split(whereSeparator: \.isWhitespace).joined(separator: " ").contains("--json, before or after the command"),
                    "--help says where the shared options go: \(help.out)")
            }
        }
    }

    @Test("account shows, for each device, the other accounts it holds and which is current", arguments: StoreKind.available)
    func otherAccounts(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let phone = Device()
                let personal = try await api.login(phone)
                let work = try await api.login(phone, newAccount: true)
                let personalID = try personal.accountID, workID = try work.accountID
                let db = harness.databaseArgument
                let json = try CLI.transfer(["account", personalID, "--json"], database: db).json
                let device = try #require((json["devices"] as? [[String: Any]])?.first)
                #expect(device["deviceId"] as? String == phone.id)
                #expect(device["current"] as? Bool == false)
                let others = try #require(device["otherAccounts"] as? [[String: Any]])
                #expect(others.map { $0["accountId"] as? String } == [workID])
                #expect(others.first?["current"] as? Bool == true)
                let text = try CLI.transfer(["account", personalID], database: db)
                #expect(text.out.contains("other accounts on \(phone.id): \(workID) (current)"), "\(text.out)")
                #expect(!text.out.contains(phone.secret))
                // The device id names both accounts: ambiguous, with both listed.
                let byDevice = try CLI.transfer(["account", phone.id], database: db)
                #expect(byDevice.code == 3)
                #expect(byDevice.err.contains(personalID) && byDevice.err.contains(workID), "\(byDevice)")
            }
        }
    }

    @Test("a device that moved between accounts is ambiguous: exit 3 with the candidates", arguments: StoreKind.available)
    func ambiguous(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let a = Device(), b = Device()
                let sessionA = try await api.login(a)
                let sessionB = try await api.login(b)
                _ = try await api.setUp(token: sessionA.accessToken, email: "amb@example.com", password: password)
                _ = try await api.claim(email: "amb@example.com", password: password, device: b, replace: true, abandon: true)
                let run = try CLI.transfer(["account", b.id], database: harness.databaseArgument)
                #expect(run.code == 3)
                let accountA = try #require(sessionA["accountId"] as? String)
                let accountB = try #require(sessionB["accountId"] as? String)
                #expect(run.err.contains(accountA), "\(run)")
                #expect(run.err.contains(accountB), "\(run)")
            }
        }
    }

    @Test("unlock, then the right password claims; the audit trail names the operator and the reason", arguments: StoreKind.available)
    func unlock(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let session = try await api.login(Device())
                _ = try await api.setUp(token: session.accessToken, email: "locked@example.com", password: password)
                for _ in 1...5 { _ = try await api.claim(email: "locked@example.com", password: "wrong-guess-1", device: Device()) }
                #expect(try await api.claim(email: "locked@example.com", password: password, device: Device()).status == .tooManyRequests)
                let db = harness.databaseArgument
                #expect(try CLI.transfer(["unlock", "locked@example.com"], database: db).code == 2)  // --reason is required
                let run = try CLI.transfer(["unlock", "locked@example.com", "--reason", "ticket 7: owner verified by phone"], database: db)
                #expect(run.code == 0)
                #expect(run.out.contains("was locked until"))
                #expect(try await api.claim(email: "locked@example.com", password: password, device: Device()).status == .ok)
                let account = try #require(session["accountId"] as? String)
                let history = try CLI.transfer(["history", account, "--json"], database: db)
                let events = try #require(history.json["events"] as? [[String: Any]], "\(history)")
                let unlock = try #require(events.first { $0["kind"] as? String == "transfer.unlocked" })
                #expect(unlock["actor"] as? String == "operator:agent-smith")
                #expect(unlock["reason"] as? String == "ticket 7: owner verified by phone")
            }
        }
    }

    @Test("issue prints a password once; the user claims with it on the new phone", arguments: StoreKind.available)
    func issue(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let lost = Device()
                let session = try await api.login(lost)
                let run = try CLI.transfer(
                    ["issue", lost.id, "--email", "lost@example.com", "--reason", "ticket 9: lost phone, id checked", "--operator", "kim", "--json"],
                    database: harness.databaseArgument)
                #expect(run.code == 0)
                let temporary = try #require(run.json["temporaryPassword"] as? String)
                #expect(temporary.count >= 16)
                #expect(try run.json["expiresAt"] is String)
                let claim = try await api.claim(email: "lost@example.com", password: temporary, device: Device())
                #expect(claim.status == .ok)
                #expect(claim["accountId"] as? String == session["accountId"] as? String)
                #expect(try await api.login(lost).status == .gone)
                let history = try CLI.transfer(["history", lost.id], database: harness.databaseArgument)
                #expect(history.out.contains("transfer.issued"))
                #expect(history.out.contains("operator:kim"))
                #expect(!history.out.contains(temporary))
            }
        }
    }

    @Test("issue hashes with the servers' argon2 parameters (TRANSFER_ARGON2_*), not the built-in defaults")
    func issueUsesServerArgon2() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        try await harness.run { api, _ in
            let lost = Device()
            _ = try await api.login(lost)
            let environment = ["USER": "kim", "TRANSFER_ARGON2_MEMORY_KIB": "8192", "TRANSFER_ARGON2_ITERATIONS": "3"]
            let bad = try Executable.run(
                "transfer", ["issue", lost.id, "--email", "lost@example.com", "--reason", "ticket 10", "--database", harness.databaseArgument],
                environment: environment.merging(["TRANSFER_ARGON2_MEMORY_KIB": "lots"]) { $1 })
            #expect(bad.code == 2, "an unreadable server setting is a usage error, not a password hashed some other way: \(bad)")
            let run = try Executable.run(
                "transfer", ["issue", lost.id, "--email", "lost@example.com", "--reason", "ticket 10", "--database", harness.databaseArgument],
                environment: environment)
            #expect(run.code == 0, "\(run)")
        }
        var bytes = try Data(contentsOf: URL(fileURLWithPath: harness.database.path))
        let wal = harness.database.path + "-wal"
        if FileManager.default.fileExists(atPath: wal) { bytes.append(try Data(contentsOf: URL(fileURLWithPath: wal))) }
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains("$argon2id$v=19$m=8192,t=3,p=1$"), "the stored hash carries the servers' parameters")
    }

    @Test("revoke-device: the stolen phone gets 403 and its tokens die at once", arguments: StoreKind.available)
    func revoke(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let stolen = Device()
                let session = try await api.login(stolen)
                let run = try CLI.transfer(["revoke-device", stolen.id, "--reason", "ticket 11: stolen"], database: harness.databaseArgument)
                #expect(run.code == 0)
                #expect(run.out.contains("active → revoked"))
                #expect(try await api.login(stolen).error == "device_revoked")
                #expect(try await api.me(session.accessToken).status == .unauthorized)
                let again = try CLI.transfer(["revoke-device", stolen.id, "--reason", "again"], database: harness.databaseArgument)
                #expect(again.code == 3)
                #expect(try CLI.transfer(["revoke-device", UUID().uuidString, "--reason", "x"], database: harness.databaseArgument).code == 1)
                #expect(try CLI.transfer(["revoke-device", "not-a-uuid", "--reason", "x"], database: harness.databaseArgument).code == 2)
            }
        }
    }

    @Test("cancel and stats", arguments: StoreKind.available)
    func cancelAndStats(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let session = try await api.login(Device())
                _ = try await api.login(Device())
                _ = try await api.setUp(token: session.accessToken, email: "stats@example.com", password: password)
                _ = try await api.claim(email: "stats@example.com", password: "wrong-guess-1", device: Device())
                let db = harness.databaseArgument
                let stats = try CLI.transfer(["stats", "--json"], database: db).json
                #expect(stats["accounts"] as? Int == 2)
                #expect(stats["activeDevices"] as? Int == 2)
                #expect(stats["transfersPending"] as? Int == 1)
                #expect(stats["claimsFailedLast24h"] as? Int == 1)
                let cancel = try CLI.transfer(["cancel", "stats@example.com", "--reason", "user asked"], database: db)
                #expect(cancel.code == 0)
                #expect(try await api.me(session.accessToken)["migrationFlag"] as? Bool == false)
                #expect(try CLI.transfer(["cancel", "stats@example.com", "--reason", "again"], database: db).code == 1)
                let after = try CLI.transfer(["stats", "--json"], database: db).json
                #expect(after["transfersCancelled"] as? Int == 1)
                #expect(after["transfersPending"] as? Int == 0)
            }
        }
    }

    @Test("transfer stats counts every claim: a recovery code won, guessed transfer and recovery codes failed (as /metrics does)",
          arguments: StoreKind.available)
    func statsCountCodeClaims(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let session = try await api.login(Device())
                let code = try await api.call(.put, "/v1/me/recovery-code", token: session.accessToken).string("recoveryCode")
                func claim(_ api: Client, _ field: String, _ code: String, _ device: Device, _ extra: [String: Any]) async throws -> Reply {
                    try await api.call(.post, "/v1/transfers/claim", json: [field: code, "deviceId": device.id, "deviceSecret": device.secret])
                }
                #expect(try await claim(api, "recoveryCode", code, Device(), [:]).status == .ok)
                #expect(try await claim(api, "recoveryCode", "0000-0000-0000-0000-0000", Device(), [:]).status == .unauthorized)
                #expect(try await claim(api, "transferCode", "7KQM-2XD4-R9HW-C3NB", Device(), [:]).status == .unauthorized)
                let stats = try CLI.transfer(["stats", "--json"], database: harness.databaseArgument).json
                #expect(stats["claimsWonLast24h"] as? Int == 1, "the recovery code's claim is a claim won: \(stats)")
                #expect(stats["claimsFailedLast24h"] as? Int == 2, "a guessed code is a claim failed, as a wrong password is: \(stats)")
            }
        }
    }

    @Test("a database that is not there: exit 4, one sentence")
    func unreachable() throws {
        let run = try CLI.transfer(["stats"], database: "sqlite:/nonexistent/transfer.sqlite")
        #expect(run.code == 4)
        #expect(lines(of: run.err).count == 1, "\(run)")
    }
    @Test("service-key create prints the key once; list never shows it; revoke stops it at once", arguments: StoreKind.available)
    func serviceKeys(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let db = harness.databaseArgument
                let session = try await api.login(Device())
                let ids = [try session.accountID]
                func targets(_ key: String) async throws -> Reply {
                    try await api.call(.post, "/v1/service/push-targets", json: ["accountIds": ids], token: key)
                }
                let made = try CLI.transfer(["service-key", "create", "shop-backend", "--reason", "ticket 9", "--json"], database: db)
                #expect(made.code == 0, "\(made)")
                let key = try #require(try made.json["key"] as? String)
                #expect(key.hasPrefix("tsk_") && key.count == 47)
                #expect(try await targets(key).status == .ok)
                let text = try CLI.transfer(["service-key", "create", "news-backend", "--reason", "ticket 10"], database: db)
                #expect(text.code == 0 && text.out.contains("(shown once)"), "\(text)")
                let again = try CLI.transfer(["service-key", "create", "shop-backend", "--reason", "again"], database: db)
                #expect(again.code == 3 && lines(of: again.err).count == 1, "a taken name: \(again)")
                let badName = try CLI.transfer(["service-key", "create", "shop backend", "--reason", "x"], database: db)
                #expect(badName.code == 2, "\(badName)")

                let list = try CLI.transfer(["service-key", "list", "--json"], database: db)
                #expect(list.code == 0)
                let keys = try #require(try list.json["keys"] as? [[String: Any]])
                #expect(keys.map { $0["name"] as? String } == ["shop-backend", "news-backend"])
                #expect(keys.first?["createdBy"] as? String == "operator:agent-smith")
                #expect(keys.first?["lastUsedAt"] as? String != nil, "the call above was recorded")
                #expect(keys.last?["lastUsedAt"] == nil || keys.last?["lastUsedAt"] is NSNull)
                let table = try CLI.transfer(["service-key", "list"], database: db)
                #expect(table.out.contains("shop-backend") && table.out.contains("never"), "\(table)")
                #expect(!list.out.contains(key) && !table.out.contains(key), "the key is shown once only")

                let revoke = try CLI.transfer(["service-key", "revoke", "shop-backend", "--reason", "leaked in a log"], database: db)
                #expect(revoke.code == 0, "\(revoke)")
                let refused = try await targets(key)
                #expect(refused.status == .unauthorized && refused.error == "invalid_service_key", "revoked at once: \(refused.text)")
                #expect(try CLI.transfer(["service-key", "revoke", "nobody", "--reason", "x"], database: db).code == 1)
                let listed = try CLI.transfer(["service-key", "list", "--json"], database: db).json["keys"] as? [[String: Any]]
                #expect(listed?.first?["revokedBy"] as? String == "operator:agent-smith")
                let revokedTable = try CLI.transfer(["service-key", "list"], database: db).out
                #expect(revokedTable.contains("by operator:agent-smith"), "\(revokedTable)")
            }
        }
    }

    @Test("run through sudo as the service's user, a change records the person who ran sudo")
    func operatorUnderSudo() async throws {
        try await withHarness(.sqlite) { harness in
            try await harness.run { _, _ in  // the server made the database
                let db = harness.databaseArgument
                let asService = ["USER": "transfer", "LOGNAME": "transfer", "SUDO_USER": "agent-smith"]
                let made = try Executable.run(
                    "transfer", ["service-key", "create", "backend", "--reason", "ticket 9", "--database", db], environment: asService)
                #expect(made.code == 0, "\(made)")
                let keys = try CLI.transfer(["service-key", "list", "--json"], database: db).json["keys"] as? [[String: Any]]
                #expect(keys?.first?["createdBy"] as? String == "operator:agent-smith", "\(String(describing: keys))")
            }
        }
    }

    @Test("account shows the push tokens on the account's phone, their last 8 characters only, and whether they reach it", arguments: StoreKind.available)
    func pushRouting(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, _ in
                let db = harness.databaseArgument
                let phone = Device()
                let personal = try await api.login(phone)
                let work = try await api.login(phone, newAccount: true)
                let token = String(repeating: "0123456789abcdef", count: 4)
                _ = try await api.call(.put, "/v1/devices/push-token", json: ["provider": "apns", "token": token, "environment": "sandbox"], token: try work.accessToken)
                _ = try await api.call(.put, "/v1/me/push", json: ["enabled": false], token: try personal.accessToken)

                let json = try CLI.transfer(["account", try work.accountID, "--json"], database: db).json
                let tokens = try #require(json["pushTokens"] as? [[String: Any]])
                #expect(tokens.count == 1)
                #expect(tokens.first?["tokenEnding"] as? String == "89abcdef")
                #expect(tokens.first?["environment"] as? String == "sandbox")
                #expect(tokens.first?["reachesAccount"] as? Bool == true)
                let muted = try CLI.transfer(["account", try personal.accountID], database: db)
                #expect(muted.out.contains("…89abcdef"), "\(muted.out)")
                #expect(muted.out.contains("no: the account turned its pushes off on this device"), "\(muted.out)")
                #expect(!muted.out.contains(token), "never the whole token")
                let jsonText = try CLI.transfer(["account", try work.accountID, "--json"], database: db).out
                #expect(!jsonText.contains(token), "never the whole token, also in --json")
                let device = try #require((try CLI.transfer(["account", try personal.accountID, "--json"], database: db).json["devices"] as? [[String: Any]])?.first)
                #expect(device["pushEnabled"] as? Bool == false && device["pushMode"] as? String == "all")
            }
        }
    }
}
