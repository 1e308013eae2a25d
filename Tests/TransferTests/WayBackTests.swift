import Foundation
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.2, "A way back for every account": recovery codes, `waysBack`, and claims
/// whose answer was lost.
@Suite("A way back for every account")
struct WayBackTests {
    let password = "plum-harbor-71-sail"

    func makeRecoveryCode(_ api: Client, token: String) async throws -> String {
        let reply = try await api.call(.put, "/v1/me/recovery-code", token: token)
        #expect(reply.status == .created, "\(reply.text)")
        #expect(reply["createdAt"] is String)
        return try reply.string("recoveryCode")
    }

    func claim(_ api: Client, _ field: String, _ code: String, device: Device, extra: [String: Any] = [:]) async throws -> Reply {
        var body: [String: Any] = [field: code, "deviceId": device.id, "deviceSecret": device.secret]
        body.merge(extra) { $1 }
        return try await api.call(.post, "/v1/transfers/claim", json: body)
    }

    func waysBack(_ api: Client, _ token: String) async throws -> [String] {
        let me = try await api.me(token)
        return try #require(me["waysBack"] as? [String], "\(me.text)")
    }

    @Test("a recovery code: made, replaced (the old one dead), claimed on a new phone, used up; wrong and used codes get the claim's 401",
          arguments: StoreKind.available)
    func recoveryCode(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let reference = try await api.claim(email: "nobody@example.com", password: password, device: Device())
            let a = Device(), b = Device()
            let onA = try await api.login(a)
            let token = try onA.accessToken
            #expect(try await waysBack(api, token) == [], "a fresh account has no way back")
            let first = try await makeRecoveryCode(api, token: token)
            #expect(first.wholeMatch(of: /[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){4}/) != nil, "five groups of Crockford base32: \(first)")
            #expect(try await waysBack(api, token) == ["recoveryCode"])
            #expect(try await api.me(token)["migrationFlag"] as? Bool == false, "a recovery code raises no flag")
            let second = try await makeRecoveryCode(api, token: token)
            #expect(second != first)
            let replaced = try await claim(api, "recoveryCode", first, device: Device())
            #expect(replaced.status == .unauthorized && replaced.text == reference.text, "the replaced code: \(replaced.text)")
            let wrong = try await claim(api, "recoveryCode", "0000-0000-0000-0000-0000", device: Device())
            #expect(wrong.status == .unauthorized && wrong.text == reference.text, "\(wrong.text)")

            // A pending transfer is cancelled by the move, as with Sign in with Apple.
            #expect(try await api.setUp(token: token, email: "mia@example.com", password: password).status == .created)
            let claimed = try await claim(api, "recoveryCode", second.lowercased().replacingOccurrences(of: "-", with: " "), device: b)
            #expect(claimed.status == .ok, "\(claimed.text)")
            #expect(try claimed.accountID == (try onA.accountID))
            #expect(try await api.login(a).error == "device_transferred")
            let onB = try await api.login(b)
            #expect(onB["migrationFlag"] as? Bool == false, "the pending transfer was cancelled")
            #expect(try await api.claim(email: "mia@example.com", password: password, device: Device()).status == .unauthorized)
            #expect(try await waysBack(api, try onB.accessToken) == [], "the code is used up")
            let again = try await claim(api, "recoveryCode", second, device: Device())
            #expect(again.status == .unauthorized && again.text == reference.text, "a used code: \(again.text)")

            let mixed = try await claim(api, "recoveryCode", second, device: Device(), extra: ["transferCode": "7KQM-2XD4-R9HW-C3NB"])
            #expect(mixed.status == .badRequest && mixed.error == "invalid_request", "\(mixed.text)")
            let withEmail = try await claim(api, "recoveryCode", second, device: Device(), extra: ["email": "mia@example.com"])
            #expect(withEmail.status == .badRequest && withEmail.error == "invalid_request", "\(withEmail.text)")
        }
    }

    @Test("waysBack follows a transfer's set-up and cancel, and the recovery code's set-up and deletion; a code keeps a removed account reachable",
          arguments: StoreKind.available)
    func waysBackFollow(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let a = Device()
            let token = try await api.login(a).accessToken
            #expect(try await api.setUp(token: token, email: "mia@example.com", password: password).status == .created)
            #expect(try await waysBack(api, token) == ["transfer"])
            _ = try await makeRecoveryCode(api, token: token)
            #expect(try await waysBack(api, token) == ["transfer", "recoveryCode"])
            #expect(try await api.call(.delete, "/v1/me/transfer", token: token).status == .noContent)
            #expect(try await waysBack(api, token) == ["recoveryCode"])
            #expect(try await api.call(.delete, "/v1/me/recovery-code", token: token).status == .noContent)
            #expect(try await waysBack(api, token) == [])
            #expect(try await api.call(.delete, "/v1/me/recovery-code", token: token).status == .noContent, "deleting none is fine")

            // A second account on the phone: without a way back its removal is refused; a recovery code is one.
            let second = try await api.login(a, newAccount: true)
            let refused = try await api.remove(try second.accessToken, account: try second.accountID)
            #expect(refused.error == "account_would_be_lost", "\(refused.text)")
            let code = try await makeRecoveryCode(api, token: try second.accessToken)
            #expect(try await api.remove(try second.accessToken, account: try second.accountID).status == .noContent)
            let b = Device()
            #expect(try await claim(api, "recoveryCode", code, device: b).status == .ok, "the removed account comes back with its code")
        }
    }

    @Test("one phone sends the same claim twice at once (a retry while the first is queued): both answer 200 for the account",
          arguments: StoreKind.available, ["transferCode", "recoveryCode"])
    func duplicateClaimAtOnce(store: StoreKind, kind: String) async throws {
        try await withServer(store) { api, _ in
            let onA = try await api.login(Device())
            let fields = try await proof(kind, api, token: try onA.accessToken, email: "dup@example.com")
            let b = Device()
            var body = fields.compactMapValues { $0 as? String }
            body["deviceId"] = b.id
            body["deviceSecret"] = b.secret
            let sent = body
            let answers = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        let reply = try await api.call(.post, "/v1/transfers/claim", json: sent as [String: Any])
                        return "\(reply.status.code) \(reply["accountId"] as? String ?? reply.text)"
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(answers == ["200 \(try onA.accountID)", "200 \(try onA.accountID)"], "\(answers)")
        }
    }

    @Test("eight phones claim with one recovery code at once: exactly one wins", arguments: StoreKind.available)
    func racingRecoveryClaims(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let onA = try await api.login(Device())
            let code = try await makeRecoveryCode(api, token: try onA.accessToken)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 { group.addTask { Int(try await claim(api, "recoveryCode", code, device: Device()).status.code) } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1 && statuses.allSatisfy { $0 == 200 || $0 == 401 }, "\(statuses)")
        }
    }

    @Test("the database holds a recovery code's SHA-256, never the code")
    func recoveryCodeNotInClear() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        let codes = LockedStrings()
        try await harness.run { api, _ in
            let onA = try await api.login(Device())
            codes.add(try await makeRecoveryCode(api, token: try onA.accessToken))
        }
        var bytes = try Data(contentsOf: URL(fileURLWithPath: harness.database.path))
        let wal = harness.database.path + "-wal"
        if FileManager.default.fileExists(atPath: wal) { bytes.append(try Data(contentsOf: URL(fileURLWithPath: wal))) }
        let text = String(decoding: bytes, as: UTF8.self)
        let code = try #require(codes.all.first)
        #expect(!text.contains(code) && !text.contains(code.replacingOccurrences(of: "-", with: "")))
        #expect(bytes.range(of: Data(try #require(OneTimeCode(typed: code, characters: 20)).hash.bytes)) != nil)
    }

    /// Sets up what `kind` claims with on a fresh phone A; returns the claim body's proof fields.
    func proof(_ kind: String, _ api: Client, token: String, email: String) async throws -> [String: Any] {
        switch kind {
        case "password":
            #expect(try await api.setUp(token: token, email: email, password: password).status == .created)
            return ["email": email, "temporaryPassword": password]
        case "transferCode":
            let reply = try await api.call(.put, "/v1/me/transfer", json: ["method": "code"], token: token)
            return ["transferCode": try reply.string("transferCode")]
        default:
            return ["recoveryCode": try await makeRecoveryCode(api, token: token)]
        }
    }

    @Test("a claim repeated by its winner answers 200 for the account and changes nothing, also after 10 minutes; another phone gets 401",
          arguments: StoreKind.available, ["password", "transferCode", "recoveryCode"])
    func repeatedClaim(store: StoreKind, kind: String) async throws {
        try await withServer(store) { api, harness in
            let reference = try await api.claim(email: "nobody@example.com", password: password, device: Device())
            let a = Device(), b = Device()
            let onA = try await api.login(a)
            let account = try onA.accountID
            let fields = try await proof(kind, api, token: try onA.accessToken, email: "rene@example.com")
            func claimFrom(_ device: Device) async throws -> Reply {
                var body = fields
                body["deviceId"] = device.id
                body["deviceSecret"] = device.secret
                return try await api.call(.post, "/v1/transfers/claim", json: body)
            }
            let first = try await claimFrom(b)
            #expect(first.status == .ok, "\(first.text)")

            harness.clock.advance(.seconds(9 * 60))
            let repeated = try await claimFrom(b)
            #expect(repeated.status == .ok, "the winner's repeat within 10 minutes: \(repeated.text)")
            #expect(try repeated.accountID == account)
            #expect(try repeated.accounts.map { "\($0.id) \($0.current)" } == (try first.accounts.map { "\($0.id) \($0.current)" }),
                    "the same answer as the first: \(repeated.text)")
            // The pairs as the first claim left them (a login records only its time).
            func bound(_ token: String) async throws -> [String] {
                let devices = try await api.me(token)["devices"] as? [[String: Any]] ?? []
                return devices.map { "\($0["deviceId"] ?? "") \($0["boundAt"] ?? "") \($0["current"] ?? "")" }
            }
            #expect(try await bound(try repeated.accessToken) == (try await bound(try first.accessToken)), "nothing else changed")
            #expect(try await api.login(a).error == "device_transferred")

            let wrongSecret = try await claimFrom(Device(id: b.id, secret: Device().secret))
            #expect(wrongSecret.status == .unauthorized && wrongSecret.text == reference.text,
                    "the repeat needs the winner's secret, and tells no one else who won: \(wrongSecret.text)")
            let other = try await claimFrom(Device())
            #expect(other.status == .unauthorized && other.text == reference.text, "another phone: \(other.text)")
            harness.clock.advance(.seconds(61))
            let late = try await claimFrom(b)
            #expect(late.status == .ok, "after 10 minutes too, while the account is on the phone (contract v1.3): \(late.text)")
        }
    }
}

extension WayBackTests {
    @Test("transfer account finds an account by its Apple ID's email and shows its recovery code's state, never the code",
          arguments: StoreKind.available)
    func supportSeesTheWayBack(store: StoreKind) async throws {
        try await withHarness(store) { harness in
            let database = harness.databaseArgument
            let found = LockedStrings()
            try await harness.run { api, parts in
                let session = try await api.login(Device())
                let account = try session.accountID
                found.add(account, try await makeRecoveryCode(api, token: try session.accessToken))
                let now = harness.clock.now()
                try await parts.store.execute(IssueNonceCommand(.appleSignIn, hash: SecretHash(of: "n"), now: now, expiresAt: now + .seconds(300))).get()
                let linked = try await parts.store.execute(LinkAppleCommand(
                    accountID: account, identity: AppleIdentity(sub: "001234.abc", email: "Lost.Phone@privaterelay.appleid.com"),
                    nonceHash: SecretHash(of: "n"), now: now))
                #expect(linked != .failure(.appleIDNotLinked))
            }
            let (account, code) = (found.all[0], found.all[1])
            let text = try CLI.transfer(["account", "lost.phone@privaterelay.appleid.com"], database: database)
            #expect(text.code == 0, "\(text)")
            #expect(text.out.contains("Apple ID email") && text.out.contains(account), "\(text.out)")
            #expect(text.out.contains("not used (a way back)"), "\(text.out)")
            #expect(!text.out.contains(code) && !text.out.contains(code.replacingOccurrences(of: "-", with: "")))
            let json = try CLI.transfer(["account", account, "--json"], database: database).json
            let recovery = try #require(json["recoveryCode"] as? [String: Any], "\(json)")
            #expect(recovery["createdAt"] is String && recovery["usedAt"] == nil)
        }
    }
}
