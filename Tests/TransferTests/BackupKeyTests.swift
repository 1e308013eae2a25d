import Foundation
import HTTPTypes
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.3, "Backup keys: a way back the user never sees" and "A won claim can always be
/// repeated by the device that won it".
@Suite("Backup keys and claims that can always be repeated")
struct BackupKeyTests {
    static let password = "plum-harbor-71-sail"
    static let day = Duration.seconds(86_400)

    static func makeKey(_ api: Client, _ token: String, store: String = "icloud-keychain") async throws -> Reply {
        try await api.call(.put, "/v1/me/backup-key", json: ["store": store], token: token)
    }

    static func key(_ api: Client, _ token: String, store: String = "icloud-keychain") async throws -> String {
        let reply = try await makeKey(api, token, store: store)
        #expect(reply.status == .created, "PUT /v1/me/backup-key: \(reply.text)")
        return try reply.string("backupKey")
    }

    static func claim(_ api: Client, key: String, device: Device, extra: [String: Any] = [:], headers: HTTPFields = [:]) async throws -> Reply {
        var body: [String: Any] = ["backupKey": key, "deviceId": device.id, "deviceSecret": device.secret]
        body.merge(extra) { $1 }
        return try await api.call(.post, "/v1/transfers/claim", json: body, headers: headers)
    }

    static func waysBack(_ api: Client, _ token: String) async throws -> [String] {
        let me = try await api.me(token)
        return try #require(me["waysBack"] as? [String], "\(me.text)")
    }

    static func backupKeys(_ api: Client, _ token: String) async throws -> [String] {
        let me = try await api.me(token)
        let keys = try #require(me["backupKeys"] as? [[String: Any]], "GET /v1/me has backupKeys: \(me.text)")
        return keys.map { "\($0["store"] as? String ?? "?") \($0["createdAt"] is String)" }
    }

    /// The answer every failed claim gets.
    static func reference(_ api: Client) async throws -> Reply {
        try await api.claim(email: "nobody@example.com", password: password, device: Device())
    }

    @Test("a backup key: 43 base64url characters, shown once, one per store (a new one replaces that store's), listed in /v1/me and waysBack, touching neither recovery code nor transfer nor flag",
          arguments: StoreKind.available)
    func setUpReplaceDelete(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let reference = try await Self.reference(api)
            let token = try await api.login(Device()).accessToken
            #expect(try await Self.backupKeys(api, token) == [], "none yet")
            let recovery = try await api.call(.put, "/v1/me/recovery-code", token: token)
            #expect(recovery.status == .created)
            #expect(try await api.setUp(token: token, email: "mia@example.com", password: Self.password).status == .created)

            let made = try await Self.makeKey(api, token)
            #expect(made.status == .created, "\(made.text)")
            let first = try made.string("backupKey")
            #expect(first.wholeMatch(of: /[A-Za-z0-9_-]{43}/) != nil, "43 base64url characters: \(first)")
            #expect(Base64URL.decode(first)?.count == 32, "256 bits")
            #expect(made["store"] as? String == "icloud-keychain" && made["createdAt"] is String, "\(made.text)")
            #expect(try await Self.waysBack(api, token) == ["transfer", "recoveryCode", "backupKey"])
            #expect(try await Self.backupKeys(api, token) == ["icloud-keychain true"])
            let me = try await api.me(token)
            #expect(!me.text.contains(first), "the key is shown once, never in /v1/me")
            #expect(me["migrationFlag"] as? Bool == true && (me["transfer"] as? [String: Any])?["email"] as? String == "mia@example.com",
                    "the pending transfer is untouched: \(me.text)")

            let android = try await Self.key(api, token, store: "block-store")
            #expect(try await Self.backupKeys(api, token) == ["block-store true", "icloud-keychain true"], "one per store")
            let second = try await Self.key(api, token)
            #expect(second != first && second != android)
            #expect(try await Self.backupKeys(api, token) == ["block-store true", "icloud-keychain true"], "the new one replaced that store's")
            let replaced = try await Self.claim(api, key: first, device: Device())
            #expect(replaced.status == .unauthorized && replaced.text == reference.text, "the replaced key: \(replaced.text)")

            let bad = try await Self.makeKey(api, token, store: "dropbox")
            #expect(bad.status == .badRequest && bad.error == "invalid_request", "\(bad.text)")
            let none = try await api.call(.put, "/v1/me/backup-key", json: [:], token: token)
            #expect(none.status == .badRequest && none.error == "invalid_request", "\(none.text)")

            #expect(try await api.call(.delete, "/v1/me/backup-key?store=icloud-keychain", token: token).status == .noContent)
            #expect(try await Self.backupKeys(api, token) == ["block-store true"])
            #expect(try await api.call(.delete, "/v1/me/backup-key?store=block-store", token: token).status == .noContent)
            #expect(try await api.call(.delete, "/v1/me/backup-key?store=block-store", token: token).status == .noContent, "deleting none is fine")
            #expect(try await Self.waysBack(api, token) == ["transfer", "recoveryCode"], "the recovery code and the transfer stay")
            let noStore = try await api.call(.delete, "/v1/me/backup-key", token: token)
            #expect(noStore.status == .badRequest && noStore.error == "invalid_request", "\(noStore.text)")
            let wrongStore = try await api.call(.delete, "/v1/me/backup-key?store=keychain", token: token)
            #expect(wrongStore.status == .badRequest && wrongStore.error == "invalid_request", "\(wrongStore.text)")
            let deleted = try await Self.claim(api, key: second, device: Device())
            #expect(deleted.status == .unauthorized && deleted.text == reference.text, "a deleted key: \(deleted.text)")
            let stillPrinted = try await api.call(
                .post, "/v1/transfers/claim", json: ["recoveryCode": try recovery.string("recoveryCode"), "deviceId": Device().id, "deviceSecret": RandomToken.make()])
            #expect(stillPrinted.status == .ok, "backup keys never touched the recovery code: \(stillPrinted.text)")
        }
    }

    @Test("a new phone claims with the key: the account moves, a pending transfer is cancelled, the key is used up (the other store's stays); wrong, malformed, used and mixed proofs",
          arguments: StoreKind.available)
    func claimWithKey(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let reference = try await Self.reference(api)
            let a = Device(), b = Device()
            let onA = try await api.login(a)
            let account = try onA.accountID
            let token = try onA.accessToken
            let key = try await Self.key(api, token)
            _ = try await Self.key(api, token, store: "block-store")
            #expect(try await api.setUp(token: token, email: "mia@example.com", password: Self.password).status == .created)

            for wrong in [RandomToken.make(byteCount: 32), "not-a-key", "", String(key.dropLast()), key + "A", key.uppercased() == key ? key.lowercased() : key.uppercased()] {
                let reply = try await Self.claim(api, key: wrong, device: Device())
                #expect(reply.status == .unauthorized && reply.text == reference.text, "\(wrong.count) characters: \(reply.text)")
            }
            for other in [["email": "mia@example.com"], ["temporaryPassword": Self.password], ["transferCode": "7KQM-2XD4-R9HW-C3NB"],
                          ["recoveryCode": "0000-0000-0000-0000-0000"]] {
                let mixed = try await Self.claim(api, key: key, device: b, extra: other)
                #expect(mixed.status == .badRequest && mixed.error == "invalid_request", "backupKey with \(other.keys): \(mixed.text)")
            }

            let claimed = try await Self.claim(api, key: key, device: b)
            #expect(claimed.status == .ok, "\(claimed.text)")
            #expect(try claimed.accountID == account && claimed["migrationFlag"] as? Bool == false, "\(claimed.text)")
            #expect(try await api.login(a).error == "device_transferred", "the old phone hears 410")
            let onB = try await api.login(b)
            #expect(try onB.accountID == account)
            #expect(try await api.claim(email: "mia@example.com", password: Self.password, device: Device()).status == .unauthorized,
                    "the pending transfer was cancelled")
            #expect(try await Self.waysBack(api, try onB.accessToken) == ["backupKey"], "the key is used up; block-store's stays")
            #expect(try await Self.backupKeys(api, try onB.accessToken) == ["block-store true"])
            let used = try await Self.claim(api, key: key, device: Device())
            #expect(used.status == .unauthorized && used.text == reference.text, "a used key on another phone: \(used.text)")
        }
    }

    @Test("a backup key is a way back: removal and a replacing claim let the account go without abandon", arguments: StoreKind.available)
    func wayBackForRemoval(kind: StoreKind) async throws {
        try await withServer(kind) { api, _ in
            let phone = Device()
            _ = try await api.login(phone)
            let second = try await api.login(phone, newAccount: true)
            let refused = try await api.remove(try second.accessToken, account: try second.accountID)
            #expect(refused.error == "account_would_be_lost", "\(refused.text)")
            let key = try await Self.key(api, try second.accessToken, store: "block-store")
            #expect(try await api.remove(try second.accessToken, account: try second.accountID).status == .noContent)
            let back = try await Self.claim(api, key: key, device: Device())
            let secondID = try second.accountID
            #expect(back.status == .ok && (try? back.accountID) == secondID, "it comes back with its key: \(back.text)")

            // A replacing claim pushes the phone's account off: with a key it is no loss.
            let c = Device()
            let own = try await api.login(c)
            let other = try await api.login(Device())
            let code = try await api.call(.put, "/v1/me/transfer", json: ["method": "code"], token: try other.accessToken).string("transferCode")
            let body: [String: Any] = ["transferCode": code, "deviceId": c.id, "deviceSecret": c.secret, "replaceExistingAccount": true]
            let lost = try await api.call(.post, "/v1/transfers/claim", json: body)
            #expect(lost.error == "account_would_be_lost", "\(lost.text)")
            _ = try await Self.key(api, try own.accessToken)
            let replaced = try await api.call(.post, "/v1/transfers/claim", json: body)
            #expect(replaced.status == .ok, "the phone's own account has a backup key now: \(replaced.text)")
        }
    }

    @Test("key changes send account.ways_back_changed with the store; a key claim sends transfer.claimed with method backup_key; no key anywhere",
          arguments: StoreKind.available)
    func webhooks(kind: StoreKind) async throws {
        try await FakeWebhookReceiver.run { receiver in
            let url = receiver.url
            try await withServer(kind, configure: { FakeWebhookReceiver.configure(&$0, url: url) }) { api, _ in
                let a = Device(), b = Device()
                let onA = try await api.login(a)
                let token = try onA.accessToken
                _ = try await Self.key(api, token)
                let key = try await Self.key(api, token)
                #expect(try await api.call(.delete, "/v1/me/backup-key?store=icloud-keychain", token: token).status == .noContent)
                let last = try await Self.key(api, token, store: "block-store")
                #expect(try await Self.claim(api, key: last, device: b).status == .ok)
                // account.created, 4 ways_back_changed, transfer.claimed.
                let all = try await receiver.wait(for: 6)
                let changes = all.filter { $0.type == "account.ways_back_changed" }
                #expect(changes.map { "\($0.data["change"] as? String ?? "?") \($0.data["store"] as? String ?? "?")" } == [
                    "backup_key.created icloud-keychain", "backup_key.replaced icloud-keychain", "backup_key.deleted icloud-keychain",
                    "backup_key.created block-store",
                ])
                #expect(changes.allSatisfy { $0.data["deviceId"] as? String == a.id }, "\(changes.map(\.data))")
                let claimed = try #require(all.first { $0.type == "transfer.claimed" }, "\(all.map(\.type))")
                #expect(claimed.data["method"] as? String == "backup_key", "\(claimed.data)")
                #expect(claimed.data["fromDeviceId"] as? String == a.id && claimed.data["toDeviceId"] as? String == b.id)
                #expect(claimed.data["transferId"] is NSNull, "no transfer was claimed: \(claimed.data)")
                for event in all { #expect(!event.body.contains(key) && !event.body.contains(last), "no key in a webhook: \(event.body)") }
            }
        }
    }

    @Test("backup-key changes count against --setup-limit per account; key claims against --claim-limit per client", arguments: StoreKind.available)
    func limits(kind: StoreKind) async throws {
        try await withServer(kind, configure: {
            $0.limits.setup = RateLimit(count: 3, period: .seconds(3600))
            $0.limits.claim = RateLimit(count: 2, period: .seconds(60))
        }) { api, harness in
            let token = try await api.login(Device()).accessToken
            _ = try await Self.key(api, token)
            #expect(try await api.call(.delete, "/v1/me/backup-key?store=icloud-keychain", token: token).status == .noContent)
            let key = try await Self.key(api, token, store: "block-store")
            let over = try await Self.makeKey(api, token)
            #expect(over.status == .tooManyRequests && over.error == "rate_limited", "the 4th change in an hour: \(over.text)")
            #expect(over.headers[.retryAfter] != nil)
            let overDelete = try await api.call(.delete, "/v1/me/backup-key?store=block-store", token: token)
            #expect(overDelete.status == .tooManyRequests, "a deletion counts too: \(overDelete.text)")
            #expect(try await Self.waysBack(api, token) == ["backupKey"], "the refused deletion changed nothing")
            let other = try await api.login(Device()).accessToken
            #expect(try await Self.makeKey(api, other).status == .created, "another account has its own budget")

            #expect(try await Self.claim(api, key: RandomToken.make(), device: Device()).status == .unauthorized)
            let b = Device()
            #expect(try await Self.claim(api, key: key, device: b).status == .ok, "the second claim of the budget wins")
            let spent = try await Self.claim(api, key: key, device: b)
            #expect(spent.status == .tooManyRequests && spent.error == "rate_limited", "the third claim in a minute, a repeat too: \(spent.text)")
            harness.clock.advance(.seconds(61))
            #expect(try await Self.claim(api, key: key, device: b).status == .ok, "a minute later the winner's repeat fits again")
        }
    }

    @Test("PUT and DELETE /v1/me/backup-key need the device's secret, and a sibling app's token is 403 insufficient_scope")
    func deviceProofAndSibling() async throws {
        try await withServer(.sqlite, configure: HandoffTests.configure) { api, _ in
            let (phone, host, sibling) = try await HandoffTests.handedOff(api)
            let token = try host.accessToken
            for proof in [DeviceProof.none, .secret(RandomToken.make(byteCount: 32))] {
                let made = try await api.call(.put, "/v1/me/backup-key", json: ["store": "icloud-keychain"], token: token, proof: proof)
                #expect(made.status == .unauthorized && made.error == "device_proof_required", "\(made.text)")
                let deleted = try await api.call(.delete, "/v1/me/backup-key?store=icloud-keychain", token: token, proof: proof)
                #expect(deleted.status == .unauthorized && deleted.error == "device_proof_required", "\(deleted.text)")
            }
            #expect(try await Self.waysBack(api, token) == [], "nothing was made")
            for (method, path, json) in [(HTTPRequest.Method.put, "/v1/me/backup-key", ["store": "icloud-keychain"]),
                                         (.delete, "/v1/me/backup-key?store=icloud-keychain", nil)] as [(HTTPRequest.Method, String, [String: Any]?)] {
                let reply = try await api.call(method, path, json: json, token: try sibling.accessToken, proof: .secret(phone.secret))
                #expect(reply.status == .forbidden && reply.error == "insufficient_scope", "\(path): \(reply.text)")
            }
        }
    }

    @Test("transfer account shows each store's key, when it was made and used, never a key", arguments: StoreKind.available)
    func support(kind: StoreKind) async throws {
        try await withHarness(kind) { harness in
            let found = LockedStrings()
            try await harness.run { api, _ in
                let session = try await api.login(Device())
                let b = Device()
                let used = try await Self.key(api, try session.accessToken, store: "block-store")
                let kept = try await Self.key(api, try session.accessToken)
                #expect(try await Self.claim(api, key: used, device: b).status == .ok)
                found.add(try session.accountID, used, kept, b.id)
            }
            let (account, used, kept, b) = (found.all[0], found.all[1], found.all[2], found.all[3])
            let text = try CLI.transfer(["account", account], database: harness.databaseArgument)
            #expect(text.code == 0, "\(text)")
            #expect(text.out.contains("Backup keys") && text.out.contains("icloud-keychain") && text.out.contains("not used (a way back)"), "\(text.out)")
            #expect(text.out.contains("block-store") && text.out.contains("by device \(b)"), "\(text.out)")
            #expect(!text.out.contains(used) && !text.out.contains(kept), "never a key: \(text.out)")
            let json = try CLI.transfer(["account", account, "--json"], database: harness.databaseArgument)
            let keys = try #require(try json.json["backupKeys"] as? [[String: Any]], "\(json.out)")
            #expect(keys.map { $0["store"] as? String ?? "?" } == ["block-store", "icloud-keychain"])
            #expect(keys[0]["usedAt"] is String && keys[0]["usedByDeviceId"] as? String == b && keys[1]["usedAt"] == nil, "\(keys)")
            #expect(keys.allSatisfy { $0["createdAt"] is String })
            #expect(!json.out.contains(used) && !json.out.contains(kept))
        }
    }

    @Test("deleting the account erases its backup keys; a backup key does not keep an inactive account", arguments: StoreKind.available)
    func deletionAndInactivity(kind: StoreKind) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { api, parts in
                let reference = try await Self.reference(api)
                let session = try await api.login(Device())
                let key = try await Self.key(api, try session.accessToken)
                #expect(try await api.call(.delete, "/v1/me", token: try session.accessToken).status == .noContent)
                let gone = try await Self.claim(api, key: key, device: Device())
                #expect(gone.status == .unauthorized && gone.text == reference.text, "a deleted account's key: \(gone.text)")
                let report = try await parts.store.report(accountID: try session.accountID, at: harness.clock.now(), recentEvents: 5)
                #expect(report?.backupKeys == [], "erased with the account")

                let idle = try await api.login(Device())
                _ = try await Self.key(api, try idle.accessToken)
                harness.clock.advance(Self.day * 31)
                let now = harness.clock.now()
                let counts = try #require(try await parts.store.prune(
                    PruneCutoffs(now: now, retainedSince: now - Self.day * 400, inactiveBefore: now - Self.day * 30), batchSize: 500))
                #expect(counts.inactiveAccounts == 1, "the account with only a backup key is erased as inactive: \(counts)")
                #expect(try await ActivityTests.deleted(parts.store, try idle.accountID))
            }
        }
    }

    @Test("the database holds a backup key's SHA-256, never the key; no log line holds it")
    func keyNotInClear() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        let keys = LockedStrings()
        try await harness.run { api, _ in
            let key = try await Self.key(api, try await api.login(Device()).accessToken)
            keys.add(key)
            #expect(try await Self.claim(api, key: key, device: Device()).status == .ok)
        }
        var bytes = try Data(contentsOf: URL(fileURLWithPath: harness.database.path))
        let wal = harness.database.path + "-wal"
        if FileManager.default.fileExists(atPath: wal) { bytes.append(try Data(contentsOf: URL(fileURLWithPath: wal))) }
        let key = try #require(keys.all.first)
        #expect(bytes.range(of: Data(key.utf8)) == nil, "the key is not stored")
        #expect(bytes.range(of: Data(SecretHash(of: key).bytes)) != nil, "its SHA-256 is")
        #expect(!harness.logs.all.contains(key), "no key in a log line")
    }
}

// MARK: Repeats

extension BackupKeyTests {
    /// Sets up what `kind` claims with on a fresh phone; returns the claim body's proof fields.
    static func proof(_ kind: String, _ api: Client, token: String, email: String) async throws -> [String: Any] {
        switch kind {
        case "password":
            #expect(try await api.setUp(token: token, email: email, password: password).status == .created)
            return ["email": email, "temporaryPassword": password]
        case "transferCode":
            return ["transferCode": try await api.call(.put, "/v1/me/transfer", json: ["method": "code"], token: token).string("transferCode")]
        case "recoveryCode":
            return ["recoveryCode": try await api.call(.put, "/v1/me/recovery-code", token: token).string("recoveryCode")]
        default:
            return ["backupKey": try await key(api, token)]
        }
    }

    static func claim(_ api: Client, _ fields: [String: Any], from device: Device, extra: [String: Any] = [:]) async throws -> Reply {
        var body = fields
        body["deviceId"] = device.id
        body["deviceSecret"] = device.secret
        body.merge(extra) { $1 }
        return try await api.call(.post, "/v1/transfers/claim", json: body)
    }

    static func history(_ store: any SupportStore, _ account: String) async throws -> [String] {
        try await store.history(accountID: account).map { "\($0.kind.rawValue) \($0.deviceID ?? "-") \($0.repeats)" }
    }

    @Test("the winner repeats its claim a month later: 200, nothing changes but a transfer.claim_repeated event; after the account left the phone, 401",
          arguments: StoreKind.available, ["password", "transferCode", "recoveryCode", "backupKey"])
    func repeatWithoutTimeLimit(kind: StoreKind, proof: String) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { api, parts in
                let reference = try await Self.reference(api)
                let a = Device(), b = Device()
                let onA = try await api.login(a)
                let account = try onA.accountID
                let fields = try await Self.proof(proof, api, token: try onA.accessToken, email: "rene@example.com")
                let first = try await Self.claim(api, fields, from: b)
                #expect(first.status == .ok, "\(first.text)")

                harness.clock.advance(Self.day * 31)
                let repeated = try await Self.claim(api, fields, from: b)
                #expect(repeated.status == .ok, "a month later, the winner's repeat: \(repeated.text)")
                #expect(try repeated.accountID == account)
                #expect(try repeated.accounts.map { "\($0.id) \($0.current)" } == (try first.accounts.map { "\($0.id) \($0.current)" }))
                let again = try await Self.claim(api, fields, from: b)
                #expect(again.status == .ok, "and again: \(again.text)")
                let events = try await Self.history(parts.store, account)
                #expect(events.contains("transfer.claim_repeated \(b.id) 2"), "two repeats in one hour share one audit row: \(events)")
                #expect(try await api.login(a).error == "device_transferred", "nothing else changed")

                let wrongSecret = try await Self.claim(api, fields, from: Device(id: b.id, secret: RandomToken.make()))
                #expect(wrongSecret.status == .unauthorized && wrongSecret.text == reference.text, "\(wrongSecret.text)")
                let other = try await Self.claim(api, fields, from: Device())
                #expect(other.status == .unauthorized && other.text == reference.text, "another phone: \(other.text)")
                let after = try await Self.history(parts.store, account)
                #expect(after.filter { $0.hasPrefix("transfer.claim_repeated") } == ["transfer.claim_repeated \(b.id) 2"],
                        "refused repeats write no repeat: \(after)")

                // The account leaves the phone: nothing left to repeat.
                let onB = try await api.login(b)
                _ = try await api.login(b, newAccount: true)  // so the account is not the phone's last
                let removed = try await api.remove(try onB.accessToken, account: account, abandon: true)
                #expect(removed.status == .noContent, "\(removed.text)")
                let late = try await Self.claim(api, fields, from: b)
                #expect(late.status == .unauthorized && late.text == reference.text, "after the account left the phone: \(late.text)")
            }
        }
    }

    @Test("only the winning move is the repeat's proof: an account that left the phone and came back another way is not the old claim's",
          arguments: StoreKind.available)
    func onlyTheWinningMove(kind: StoreKind) async throws {
        try await withServer(kind) { api, harness in
            let reference = try await Self.reference(api)
            let a = Device(), b = Device(), c = Device()
            let onA = try await api.login(a)
            let code = try await Self.proof("transferCode", api, token: try onA.accessToken, email: "")
            let key = try await Self.key(api, try onA.accessToken)
            let recovery = try await Self.proof("recoveryCode", api, token: try onA.accessToken, email: "")
            #expect(try await Self.claim(api, code, from: b).status == .ok, "B wins with the transfer code")
            _ = try await api.login(b, newAccount: true)  // B keeps an account of its own, so it is not retired
            harness.clock.advance(.seconds(1))
            #expect(try await Self.claim(api, recovery, from: c).status == .ok, "C takes it with the recovery code")
            harness.clock.advance(.seconds(1))
            let back = try await Self.claim(api, ["backupKey": key], from: b, extra: ["addAccount": true])
            #expect(back.status == .ok, "B takes it back with the backup key: \(back.text)")
            let stale = try await Self.claim(api, code, from: b)
            #expect(stale.status == .unauthorized && stale.text == reference.text,
                    "the account is on B by the backup key, not the transfer code: \(stale.text)")
            #expect(try await Self.claim(api, ["backupKey": key], from: b).status == .ok, "the backup key's claim is B's to repeat")
            let gone = try await Self.claim(api, recovery, from: c)
            #expect(gone.status == .unauthorized && gone.text == reference.text, "C no longer holds the account: \(gone.text)")
        }
    }

    @Test("an Apple repeat is accepted only when the account arrived by the Apple move, with no time limit", arguments: StoreKind.available)
    func appleRepeat(kind: StoreKind) async throws {
        try await FakeApple.run { apple in
            try await withServer(kind, configure: { apple.configure(&$0) }) { api, harness in
                let tests = AppleTests()
                let sub = "001234.repeat.0101"
                let (a, session) = try await tests.linkedPhone(api, apple, harness, sub: sub)
                let account = try session.accountID
                let notMoved = try await tests.move(api, apple, harness, sub: sub, to: a)
                #expect(notMoved.error == "device_already_bound", "created on A, not moved there by Apple: no repeat: \(notMoved.text)")

                let b = Device()
                #expect(try await tests.move(api, apple, harness, sub: sub, to: b).status == .ok)
                harness.clock.advance(Self.day * 2)
                let repeated = try await tests.move(api, apple, harness, sub: sub, to: b)
                #expect(repeated.status == .ok && (try? repeated.accountID) == account, "two days later, B's repeat: \(repeated.text)")

                // The account moves on to C with a backup key: on C it did not arrive by Apple.
                let onB = try await api.login(b)
                let key = try await Self.key(api, try onB.accessToken)
                let c = Device()
                harness.clock.advance(.seconds(1))
                #expect(try await Self.claim(api, key: key, device: c).status == .ok)
                let notApple = try await tests.move(api, apple, harness, sub: sub, to: c)
                #expect(notApple.error == "device_already_bound", "on C by a backup key, not by Apple: no Apple repeat: \(notApple.text)")
                // The Apple ID is still linked, a lasting way back: from B it is a new move, not a repeat.
                harness.clock.advance(.seconds(1))
                let again = try await tests.move(api, apple, harness, sub: sub, to: Device())
                #expect(again.status == .ok && (try? again.accountID) == account, "\(again.text)")
                let stale = try await tests.move(api, apple, harness, sub: sub, to: b)
                #expect(stale.error == "device_retired", "B gave the account up and was retired with it: \(stale.text)")
            }
        }
    }
}
