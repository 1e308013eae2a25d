import Foundation
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.2, "Transfer codes": the old phone shows a code, the new phone types or scans
/// it; no email, no password, no argon2.
@Suite("Transfer codes")
struct TransferCodeTests {
    let password = "plum-harbor-71-sail"

    func setUpCode(_ api: Client, token: String) async throws -> String {
        let reply = try await api.call(.put, "/v1/me/transfer", json: ["method": "code"], token: token)
        #expect(reply.status == .created, "\(reply.text)")
        return try reply.string("transferCode")
    }

    func claim(_ api: Client, code: String, device: Device, extra: [String: Any] = [:]) async throws -> Reply {
        var body: [String: Any] = ["transferCode": code, "deviceId": device.id, "deviceSecret": device.secret]
        body.merge(extra) { $1 }
        return try await api.call(.post, "/v1/transfers/claim", json: body)
    }

    @Test("A sets up a code, B claims it, B relaunches into the account, A is told it moved; no argon2 anywhere",
          arguments: StoreKind.available)
    func moveByCode(store: StoreKind) async throws {
        try await withServer(store) { api, harness in
            let a = Device(), b = Device()
            let onA = try await api.login(a)
            let hashed = harness.hasher.hashes.load(ordering: .relaxed)  // the server's dummy hash, made at start
            let code = try await setUpCode(api, token: try onA.accessToken)
            #expect(code.wholeMatch(of: /[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){3}/) != nil, "four groups of Crockford base32: \(code)")
            let me = try await api.me(try onA.accessToken)
            #expect(me["migrationFlag"] as? Bool == true, "the flag goes up as for a password transfer")
            let pending = try #require(me["transfer"] as? [String: Any], "\(me.text)")
            #expect(pending["method"] as? String == "code")
            #expect(pending["email"] == nil, "a code transfer has no email")
            #expect(!me.text.contains(code) && !me.text.contains(code.replacingOccurrences(of: "-", with: "")), "the code is never shown again")

            let claimed = try await claim(api, code: code, device: b)
            #expect(claimed.status == .ok, "\(claimed.text)")
            #expect(try claimed.accountID == (try onA.accountID))
            #expect(claimed["migrationFlag"] as? Bool == false)
            #expect(try await api.login(b)["accountId"] as? String == (try onA.accountID))
            let old = try await api.login(a)
            #expect(old.status == .gone && old.error == "device_transferred", "\(old.text)")
            #expect(harness.hasher.verifyCount == 0 && harness.hasher.hashes.load(ordering: .relaxed) == hashed, "codes never touch argon2")
        }
    }

    @Test("the code is read as Crockford says: any case, spaces and hyphens ignored, I and L are 1, O is 0",
          arguments: StoreKind.available)
    func readingRules(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let variants: [(String, (String) -> String)] = [
                ("lower case", { $0.lowercased() }),
                ("no hyphens", { $0.replacingOccurrences(of: "-", with: "") }),
                ("spaces instead of hyphens", { $0.replacingOccurrences(of: "-", with: " ") }),
                ("aliases", { String($0.map { $0 == "1" ? "l" : $0 == "0" ? "O" : $0 }) }),
                ("spaces inside a group", { " " + $0.prefix(2) + " " + $0.dropFirst(2) + " " }),
            ]
            for (name, variant) in variants {
                let a = Device()
                let code = try await setUpCode(api, token: try await api.login(a).accessToken)
                let claimed = try await claim(api, code: variant(code), device: Device())
                #expect(claimed.status == .ok, "\(name): \(variant(code)) → \(claimed.text)")
            }
        }
        // The aliases, certainly exercised: random codes need not hold a 0 or a 1.
        #expect(OneTimeCode(typed: "iiii-llll-oooo-OOOO", characters: 16)?.canonical == "1111111100000000")
        #expect(OneTimeCode(typed: "7kqm 2xd4 r9hw c3nb", characters: 16)?.grouped == "7KQM-2XD4-R9HW-C3NB")
        #expect(OneTimeCode(typed: "7KQM-2XD4-R9HW-C3N", characters: 16) == nil, "15 characters")
        #expect(OneTimeCode(typed: "7KQM-2XD4-R9HW-C3NBX", characters: 16) == nil, "17 characters")
        #expect(OneTimeCode(typed: "7KQM-2XD4-R9HW-C3NU", characters: 16) == nil, "U is never issued")
        #expect(OneTimeCode(typed: "7KQM-2XD4-R9HW-C3N\u{0301}", characters: 16) == nil, "not ASCII")
        #expect("\(OneTimeCode.make(characters: 16))" == "<code>", "a code never prints itself")
    }

    @Test("a used, expired, cancelled, replaced, unknown or malformed code: the password claim's 401, byte for byte",
          arguments: StoreKind.available)
    func refusals(store: StoreKind) async throws {
        try await withServer(store) { api, harness in
            // The reference: a wrong password.
            let reference = try await api.claim(email: "nobody@example.com", password: password, device: Device())
            #expect(reference.status == .unauthorized)

            var refused: [String: Reply] = [:]
            let a = Device()
            let onA = try await api.login(a)
            let used = try await setUpCode(api, token: try onA.accessToken)
            let b = Device()
            #expect(try await claim(api, code: used, device: b).status == .ok)
            refused["used"] = try await claim(api, code: used, device: Device())

            let onB = try await api.login(b)
            let cancelled = try await setUpCode(api, token: try onB.accessToken)
            #expect(try await api.call(.delete, "/v1/me/transfer", token: try onB.accessToken).status == .noContent)
            refused["cancelled"] = try await claim(api, code: cancelled, device: Device())

            let replaced = try await setUpCode(api, token: try onB.accessToken)
            let replacing = try await setUpCode(api, token: try onB.accessToken)
            refused["replaced"] = try await claim(api, code: replaced, device: Device())
            // A password set-up replaces a code too.
            #expect(try await api.setUp(token: try onB.accessToken, email: "mia@example.com", password: password).status == .created)
            refused["replaced by a password"] = try await claim(api, code: replacing, device: Device())

            let expiring = try await setUpCode(api, token: try onB.accessToken)
            harness.clock.advance(harness.configuration.transferTTL + .seconds(1))
            refused["expired"] = try await claim(api, code: expiring, device: Device())
            refused["unknown"] = try await claim(api, code: "7KQM-2XD4-R9HW-C3NB", device: Device())
            refused["malformed"] = try await claim(api, code: "not a code", device: Device())
            refused["empty"] = try await claim(api, code: "", device: Device())

            for (kind, reply) in refused {
                #expect(reply.status == .unauthorized && reply.text == reference.text, "\(kind): \(reply.text)")
            }
            #expect(try await api.login(b)["accountId"] as? String == (try onA.accountID), "nothing moved")
        }
    }

    @Test("a code goes alone: with an email or a password, set-up and claim are 400 and change nothing")
    func codeGoesAlone() async throws {
        try await withServer { api, _ in
            let a = Device()
            let token = try await api.login(a).accessToken
            for extra in [["email": "mia@example.com"], ["temporaryPassword": password], ["email": "mia@example.com", "temporaryPassword": password]] {
                var body: [String: Any] = ["method": "code"]
                body.merge(extra) { $1 }
                let reply = try await api.call(.put, "/v1/me/transfer", json: body, token: token)
                #expect(reply.status == .badRequest && reply.error == "invalid_request", "\(extra.keys): \(reply.text)")
            }
            let unknown = try await api.call(.put, "/v1/me/transfer", json: ["method": "sms"], token: token)
            #expect(unknown.status == .badRequest && unknown.error == "invalid_request", "\(unknown.text)")
            #expect(try await api.me(token)["migrationFlag"] as? Bool == false, "no transfer was set up")

            let code = try await setUpCode(api, token: token)
            for extra in [["email": "mia@example.com"], ["temporaryPassword": password]] {
                let reply = try await claim(api, code: code, device: Device(), extra: extra)
                #expect(reply.status == .badRequest && reply.error == "invalid_request", "\(extra.keys): \(reply.text)")
            }
            #expect(try await claim(api, code: code, device: Device()).status == .ok, "the code was not used up by the refusals")
        }
    }

    @Test("eight phones claim one code at once: exactly one wins, the others get 401", arguments: StoreKind.available)
    func racingClaims(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device()
            let onA = try await api.login(a)
            let code = try await setUpCode(api, token: try onA.accessToken)
            let phones = (0..<8).map { _ in Device() }
            let statuses = try await withThrowingTaskGroup(of: (String, Int).self) { group in
                for phone in phones {
                    group.addTask { (phone.id, Int(try await claim(api, code: code, device: phone).status.code)) }
                }
                return try await group.reduce(into: [(String, Int)]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0.1 == 200 }.count == 1, "\(statuses)")
            #expect(statuses.allSatisfy { $0.1 == 200 || $0.1 == 401 }, "\(statuses)")
            let winner = try #require(statuses.first { $0.1 == 200 }?.0)
            let onWinner = try await api.login(try #require(phones.first { $0.id == winner }))
            #expect(try onWinner.accountID == (try onA.accountID))
        }
    }

    @Test("the database holds the code's SHA-256, never the code")
    func codeNotInClear() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        let codes = LockedStrings()
        try await harness.run { api, _ in
            let onA = try await api.login(Device())
            codes.add(try await setUpCode(api, token: try onA.accessToken))
            let onB = try await api.login(Device())
            let claimed = try await setUpCode(api, token: try onB.accessToken)
            codes.add(claimed)
            #expect(try await claim(api, code: claimed, device: Device()).status == .ok)
        }
        var bytes = try Data(contentsOf: URL(fileURLWithPath: harness.database.path))
        let wal = harness.database.path + "-wal"
        if FileManager.default.fileExists(atPath: wal) { bytes.append(try Data(contentsOf: URL(fileURLWithPath: wal))) }
        let text = String(decoding: bytes, as: UTF8.self)
        for code in codes.all {
            #expect(!text.contains(code) && !text.contains(code.replacingOccurrences(of: "-", with: "")))
            let hash = try #require(OneTimeCode(typed: code, characters: 16)).hash.bytes
            #expect(bytes.range(of: Data(hash)) != nil, "the code's SHA-256 is what is stored")
        }
    }

    @Test("transfer.set_up and transfer.claimed tell the app backend the method", arguments: StoreKind.available)
    func webhooksCarryTheMethod(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            try await harness.run { api, parts in
                let a = Device()
                let onA = try await api.login(a)
                let code = try await setUpCode(api, token: try onA.accessToken)
                #expect(try await claim(api, code: code, device: Device()).status == .ok)
                let onC = try await api.login(Device())
                #expect(try await api.setUp(token: try onC.accessToken, email: "mia@example.com", password: password).status == .created)
                #expect(try await api.claim(email: "mia@example.com", password: password, device: Device()).status == .ok)

                let events = try await parts.store.outbox(limit: 100).map { (type: $0.type, account: $0.accountID, body: $0.body) }
                func method(_ type: String, _ account: String) -> String? {
                    guard let event = events.first(where: { $0.type == type && $0.account == account }),
                        let json = try? JSONSerialization.jsonObject(with: Data(event.body.utf8)) as? [String: Any],
                        let data = json["data"] as? [String: Any]
                    else { return nil }
                    return data["method"] as? String
                }
                #expect(method("transfer.set_up", try onA.accountID) == "code")
                #expect(method("transfer.claimed", try onA.accountID) == "code")
                #expect(method("transfer.set_up", try onC.accountID) == "password")
                #expect(method("transfer.claimed", try onC.accountID) == "password")
                for event in events { #expect(!event.body.contains(code) && !event.body.contains("mia@"), "\(event.body)") }
            }
        }
    }

    @Test("transfer issue --code prints a code once; the claim says support; transfer account shows the method, never the code",
          arguments: StoreKind.available)
    func supportIssuesACode(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            let database = harness.databaseArgument
            let account = LockedStrings()
            try await harness.run { api, _ in account.add(try await api.login(Device()).accountID) }
            let id = try #require(account.all.first)
            let issued = try CLI.transfer(["issue", id, "--code", "--reason", "lost phone, ticket 42", "--json"], database: database)
            #expect(issued.code == 0, "\(issued.err)")
            let code = try #require(issued.json["transferCode"] as? String, "\(issued.out)")
            let shown = try CLI.transfer(["account", id], database: database)
            #expect(shown.out.contains("transfer code"), "\(shown.out)")
            #expect(!shown.out.contains(code) && !shown.out.contains(code.replacingOccurrences(of: "-", with: "")))
            let both = try CLI.transfer(["issue", id, "--code", "--email", "mia@example.com", "--reason", "x"], database: database)
            #expect(both.code == 2, "--code takes no --email (a usage error): \(both.err)")
            try await harness.run { api, parts in
                #expect(try await claim(api, code: code, device: Device()).status == .ok)
                let claimed = try await parts.store.outbox(limit: 100).first { $0.type == "transfer.claimed" }
                #expect(claimed?.body.contains("\"method\":\"support\"") == true, "\(claimed?.body ?? "no event")")
            }
        }
    }
}
