import Foundation
import HTTPTypes
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.3, "Security round 3": changing a way back needs the device, not only a token.
/// A stolen 15-minute access token could replace the user's recovery code (the printed one then
/// failed) or set up a transfer to the attacker's email, silently.
@Suite("Changing a way back needs the device's secret beside the token")
struct DeviceProofTests {
    static let password = "plum-harbor-71-sail"

    /// A server on `kind` with Sign in with Apple (a local fake) and webhooks to a local receiver.
    func withServer(
        _ kind: StoreKind, configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (Client, FakeApple, FakeWebhookReceiver, Harness) async throws -> Void
    ) async throws {
        try await FakeApple.run { apple in
            try await FakeWebhookReceiver.run { receiver in
                let url = receiver.url
                try await TransferTestSupport.withServer(kind, configure: {
                    apple.configure(&$0)
                    FakeWebhookReceiver.configure(&$0, url: url)
                    configure(&$0)
                }) { api, harness in try await body(api, apple, receiver, harness) }
            }
        }
    }

    /// Every route that changes a way back or deletes the account, with a body it accepts.
    func changes(_ api: Client, _ apple: FakeApple, _ harness: Harness) async throws -> [(String, HTTPRequest.Method, String, [String: Any]?)] {
        let nonce = try await api.appleNonce()
        let identity = try apple.token(apple.claims(sub: "001234.\(UUID().uuidString.prefix(8)).0101", nonce: nonce, now: harness.clock.now()))
        return [
            ("set up a transfer to another email", .put, "/v1/me/transfer", ["email": "attacker@example.com", "temporaryPassword": Self.password]),
            ("set up a transfer code", .put, "/v1/me/transfer", ["method": "code"]),
            ("cancel the user's transfer", .delete, "/v1/me/transfer", nil),
            ("replace the recovery code", .put, "/v1/me/recovery-code", nil),
            ("delete the recovery code", .delete, "/v1/me/recovery-code", nil),
            ("make a backup key", .put, "/v1/me/backup-key", ["store": "icloud-keychain"]),
            ("delete the backup key", .delete, "/v1/me/backup-key?store=icloud-keychain", nil),
            ("link another Apple ID", .put, "/v1/me/apple", ["identityToken": identity, "nonce": nonce]),
            ("unlink the Apple ID", .delete, "/v1/me/apple", nil),
            ("delete the account", .delete, "/v1/me", nil),
        ]
    }

    @Test("a token without the device's secret, with a wrong one or another device's: 401 device_proof_required, and nothing changes",
          arguments: StoreKind.available)
    func tokenAlone(kind: StoreKind) async throws {
        try await withServer(kind) { api, apple, receiver, harness in
            let phone = Device(), other = Device()
            let session = try await api.login(phone)
            _ = try await api.login(other)
            let token = try session.accessToken
            // The user's ways back: a pending transfer and a printed recovery code.
            #expect(try await api.setUp(token: token, email: "mia@example.com", password: Self.password).status == .created)
            let code = try await api.call(.put, "/v1/me/recovery-code", token: token).string("recoveryCode")
            let before = try await api.me(token)
            let eventsBefore = try await receiver.wait(for: 5).count  // created ×2, set_up, 2 ways_back_changed

            for proof in [DeviceProof.none, .secret(RandomToken.make(byteCount: 32)), .secret(other.secret), .secret("short")] {
                for (change, method, path, json) in try await changes(api, apple, harness) {
                    let reply = try await api.call(method, path, json: json, token: token, proof: proof)
                    #expect(reply.status == .unauthorized && reply.error == "device_proof_required", "\(change) with \(proof): \(reply.text)")
                    #expect(reply.headers[.wwwAuthenticate] == nil, "the token is good: no Bearer challenge")
                }
            }
            let after = try await api.me(token)
            #expect(after["transfer"] as? NSDictionary == before["transfer"] as? NSDictionary, "the pending transfer is the user's: \(after.text)")
            #expect(after["waysBack"] as? [String] == ["transfer", "recoveryCode"], "\(after.text)")
            #expect(after["apple"] is NSNull, "no Apple ID was linked: \(after.text)")
            try await Task.sleep(for: .milliseconds(200))
            #expect(receiver.deliveries.count == eventsBefore, "no event for a refused change: \(receiver.deliveries.map(\.type))")
            // The printed recovery code still brings the account to a new phone.
            let claimed = try await api.call(
                .post, "/v1/transfers/claim", json: ["recoveryCode": code, "deviceId": Device().id, "deviceSecret": RandomToken.make()])
            let account = try session.accountID
            #expect(claimed.status == .ok && (try? claimed.accountID) == account, "\(claimed.text)")
        }
    }

    @Test("with the device's secret each change is made and sends account.ways_back_changed naming the device and the change",
          arguments: StoreKind.available)
    func withTheSecret(kind: StoreKind) async throws {
        try await withServer(kind) { api, apple, receiver, harness in
            let phone = Device()
            let session = try await api.login(phone)
            let token = try session.accessToken, account = try session.accountID
            for (change, method, path, json) in try await changes(api, apple, harness) where path != "/v1/me" {
                let reply = try await api.call(method, path, json: json, token: token, proof: .secret(phone.secret))
                #expect((200..<300).contains(reply.status.code), "\(change): \(reply.text)")
            }
            // Made again: a replacement says so.
            #expect(try await api.call(.put, "/v1/me/recovery-code", token: token).status == .created)
            #expect(try await api.call(.put, "/v1/me/recovery-code", token: token).status == .created)
            let expected = [
                "transfer.set_up", "transfer.set_up", "transfer.cancelled", "recovery_code.created", "recovery_code.deleted",
                "backup_key.created", "backup_key.deleted", "apple.linked", "apple.unlinked", "recovery_code.created", "recovery_code.replaced",
            ]
            // account.created, two transfer.set_up, transfer.cancelled, apple.linked, apple.unlinked, and one each.
            let all = try await receiver.wait(for: 6 + expected.count)
            let changes = all.filter { $0.type == "account.ways_back_changed" }
            #expect(changes.map { $0.data["change"] as? String ?? "?" } == expected)
            for event in changes {
                #expect(event.accountID == account && event.data["deviceId"] as? String == phone.id, "\(event.data)")
                let backupKey = (event.data["change"] as? String)?.hasPrefix("backup_key.") == true
                #expect(Set(event.data.keys) == (backupKey ? ["accountId", "deviceId", "change", "store"] : ["accountId", "deviceId", "change"]),
                        "ids, the change and a backup key's store only: \(event.data)")
                if backupKey { #expect(event.data["store"] as? String == "icloud-keychain", "\(event.data)") }
            }
            let deleted = try await api.call(.delete, "/v1/me", token: token, proof: .secret(phone.secret))
            #expect(deleted.status == .noContent, "\(deleted.text)")
        }
    }

    @Test("support's transfer issue and cancel send account.ways_back_changed with no device")
    func support() async throws {
        try await FakeWebhookReceiver.run { receiver in
            let url = receiver.url
            try await withHarness(.sqlite, configure: { FakeWebhookReceiver.configure(&$0, url: url) }) { harness in
                try await harness.run { api, parts in
                    let account = try await api.login(Device()).accountID
                    _ = try await parts.service.issueTransfer(
                        accountID: account, email: try FieldRules.email("mia@example.com"), by: .support(operator: "ana"), reason: "lost phone")
                    #expect(try await parts.service.cancelTransfer(accountID: account, by: .support(operator: "ana"), reason: "found it"))
                    // Delivered at least once: a slow answer may bring a second delivery of an event.
                    var changes: [FakeWebhookReceiver.Delivery] = []
                    for _ in 0..<500 where Set(changes.map(\.id)).count < 2 {
                        try await Task.sleep(for: .milliseconds(20))
                        changes = receiver.deliveries.filter { $0.type == "account.ways_back_changed" }
                    }
                    changes = changes.reduce(into: []) { unique, event in if !unique.contains(where: { $0.id == event.id }) { unique.append(event) } }
                    #expect(changes.map { $0.data["change"] as? String } == ["transfer.set_up", "transfer.cancelled"])
                    #expect(changes.allSatisfy { $0.data["deviceId"] is NSNull }, "support made them: \(changes.map(\.data))")
                }
            }
        }
    }

    @Test("--device-proof off: a token alone changes a way back, as in v1.2, and the server warns at start")
    func off() async throws {
        let harness = Harness { $0.deviceProof = false }
        try await harness.run { api, _ in
            let token = try await api.login(Device()).accessToken
            let made = try await api.call(.put, "/v1/me/recovery-code", token: token, proof: .none)
            #expect(made.status == .created, "\(made.text)")
        }
        #expect(harness.logs.all.contains("--device-proof off"), "the server warns at start: \(harness.logs.all)")
        #expect(throws: Never.self) { try ServerConfiguration.load(arguments: ["--device-proof", "off"], environment: [:]) }
        #expect(try ServerConfiguration.load(arguments: [], environment: ["TRANSFER_DEVICE_PROOF": "off"]).deviceProof == false)
        #expect(try ServerConfiguration.load(arguments: [], environment: [:]).deviceProof == true, "on unless turned off")
        let refused = #expect(throws: (any Error).self) { try ServerConfiguration.load(arguments: ["--device-proof", "maybe"], environment: [:]) }
        #expect("\(refused.map { "\($0)" } ?? "")".contains("--device-proof"), "names the flag: \(String(describing: refused))")
    }

    @Test("a sibling app's token is refused for what it is (403 insufficient_scope), not asked for a device proof")
    func siblingFirst() async throws {
        try await withServer(.sqlite, configure: { $0.handoff = HandoffPolicy(clients: [HandoffTests.news], codeTTL: .seconds(60)) }) { api, _, _, _ in
            let (phone, _, sibling) = try await HandoffTests.handedOff(api)
            let reply = try await api.call(.put, "/v1/me/recovery-code", token: try sibling.accessToken, proof: .secret(phone.secret))
            #expect(reply.status == .forbidden && reply.error == "insufficient_scope", "\(reply.text)")
        }
    }
}
