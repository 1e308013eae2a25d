import Foundation
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.1, "Webhooks to the app backend": the app backend hears what happened to its
/// users' accounts through a local receiver, on every store.
@Suite("Webhooks to the app backend")
struct WebhookTests {
    let password = "plum-harbor-71-sail"

    /// A server on `kind` whose webhooks go to `receiver`, with the parts (support's service) at hand.
    func withServer(
        _ kind: StoreKind, receiver url: String,
        _ body: @Sendable (Client, TransferApp.Parts, Harness) async throws -> Void
    ) async throws {
        try await withHarness(kind, configure: { FakeWebhookReceiver.configure(&$0, url: url) }) { harness in
            try await harness.run { api, parts in try await body(api, parts, harness) }
        }
    }

    @Test("every event of the contract reaches the app backend for its story, signed, oldest first, ids and times only",
          arguments: StoreKind.available)
    func everyEvent(kind: StoreKind) async throws {
        try await FakeWebhookReceiver.run { receiver in
            try await withServer(kind, receiver: receiver.url) { api, parts, harness in
                var secrets: [String] = [password]
                // A moves to B with a transfer; a second try is cancelled first.
                let a = Device(), b = Device()
                secrets.append(a.secret)
                secrets.append(b.secret)
                let first = try await api.login(a)
                let account = try first.accountID
                secrets += [try first.accessToken, try first.refreshToken]
                #expect(try await api.setUp(token: first.accessToken, email: "mia@example.com", password: password).status == .created)
                #expect(try await api.call(.delete, "/v1/me/transfer", token: first.accessToken).status == .noContent)
                #expect(try await api.setUp(token: first.accessToken, email: "mia@example.com", password: password).status == .created)
                let claimed = try await api.claim(email: "mia@example.com", password: password, device: b)
                #expect(claimed.status == .ok, "\(claimed.text)")

                // On B a transfer is guessed at: locked after 5 wrong passwords, three times; void at 20.
                #expect(try await api.setUp(token: claimed.accessToken, email: "mia@example.com", password: password).status == .created)
                for round in 1...4 {
                    for _ in 1...5 {
                        _ = try await api.claim(email: "mia@example.com", password: "wrong-guess-\(round)-xx", device: Device())
                    }
                    harness.clock.advance(.seconds(16 * 60))
                }

                // Phone C is revoked by support; phone D removes its second account; B deletes the account.
                let c = Device(), d = Device()
                let onC = try await api.login(c)
                #expect(try await parts.service.revokeDevice(DeviceID(c.id)!, by: .support(operator: "ana"), reason: "stolen") == [try onC.accountID])
                let onD = try await api.login(d)
                let second = try await api.login(d, newAccount: true)
                #expect(try await api.remove(second.accessToken, account: try second.accountID, abandon: true).status == .noContent)
                // An hour passed: the access token from the claim has expired; B logs in again.
                let deleted = try await api.call(.delete, "/v1/me", token: try await api.login(b).accessToken)
                #expect(deleted.status == .noContent, "\(deleted.text)")

                let expected: [String: [String]] = [
                    account: [
                        "account.created", "transfer.set_up", "account.ways_back_changed", "transfer.cancelled", "account.ways_back_changed",
                        "transfer.set_up", "account.ways_back_changed", "transfer.claimed", "transfer.set_up", "account.ways_back_changed",
                        "transfer.locked", "transfer.locked", "transfer.locked", "transfer.voided", "account.deleted",
                    ],
                    try onC.accountID: ["account.created", "device.revoked"],
                    try onD.accountID: ["account.created"],
                    try second.accountID: ["account.created", "account.removed_from_device"],
                ]
                let all = try await receiver.wait(for: expected.values.map(\.count).reduce(0, +))
                for (id, types) in expected {
                    #expect(all.filter { $0.accountID == id }.map(\.type) == types, "events of account \(id), oldest first")
                }
                #expect(Set(all.map(\.id)).count == all.count, "each event has its own webhook-id")

                let move = all.first { $0.type == "transfer.claimed" }
                #expect(move?.data["fromDeviceId"] as? String == a.id)
                #expect(move?.data["toDeviceId"] as? String == b.id)
                #expect(move?.data["method"] as? String == "password")
                #expect(all.first { $0.type == "device.revoked" }?.data["deviceId"] as? String == c.id)
                #expect(all.first { $0.type == "account.removed_from_device" }?.data["deviceId"] as? String == d.id)
                #expect(all.first { $0.type == "transfer.locked" }?.data["lockedUntil"] is String)
                let wayBack = all.first { $0.type == "account.ways_back_changed" }
                #expect(wayBack?.data["deviceId"] as? String == a.id && wayBack?.data["change"] as? String == "transfer.set_up")
                #expect(all.first { $0.type == "account.deleted" }?.data["reason"] as? String == "requested", "the app's own DELETE /v1/me")

                for delivery in all {
                    #expect(try FakeWebhookReceiver.verifiedIndependently(delivery), "signature of \(delivery.type) \(delivery.id)")
                    #expect(Timestamp(rfc3339: delivery.json["timestamp"] as? String ?? "") != nil, "timestamp of \(delivery.type)")
                    for secret in secrets + ["mia@example.com", "$argon2id$"] {
                        #expect(!delivery.body.contains(secret), "\(delivery.type) must carry ids and times only")
                    }
                }
            }
        }
    }

    @Test("a receiver that fails three times gets the event four times, with one webhook-id, after 5, 10 and 20 s")
    func retries() async throws {
        try await FakeWebhookReceiver.run { receiver in
            receiver.failuresLeft.withLock { $0 = 3 }
            try await withServer(.sqlite, receiver: receiver.url) { api, parts, harness in
                _ = try await api.login(Device())
                for (n, wait) in [5, 10, 20].enumerated() {
                    // The failure is recorded (its next attempt set) before the clock moves.
                    try await Self.waitFor(parts.store) { $0.first?.attempts == n + 1 }
                    // Not before its time: the retry waits for the clock.
                    harness.clock.advance(.seconds(wait - 1))
                    try await Task.sleep(for: .milliseconds(100))
                    #expect(receiver.deliveries.count == n + 1, "retry \(n + 1) must wait \(wait) s")
                    harness.clock.advance(.seconds(1))
                    try await receiver.wait(for: n + 2)
                }
                let all = receiver.deliveries
                #expect(all.count == 4)
                #expect(Set(all.map(\.id)).count == 1, "the same webhook-id on every attempt")
                #expect(Set(all.map(\.body)).count == 1, "the same body on every attempt")
                try await Self.waitUntilEmpty(parts.store)
            }
        }
    }

    @Test("a receiver that is down during a claim gets the event once it is back", arguments: StoreKind.available)
    func receiverDown(kind: StoreKind) async throws {
        let port = try await FakeWebhookReceiver.closedPort()
        try await withServer(kind, receiver: "http://127.0.0.1:\(port)/hooks") { api, parts, harness in
            let a = Device(), b = Device()
            let first = try await api.login(a)
            #expect(try await api.setUp(token: first.accessToken, email: "noa@example.com", password: password).status == .created)
            #expect(try await api.claim(email: "noa@example.com", password: password, device: b).status == .ok)
            // The first attempts fail (nothing listens); the events wait.
            try await Self.waitFor(parts.store) { $0.contains { $0.attempts > 0 } }
            #expect(try await parts.store.outbox(limit: 10).allSatisfy { $0.state == .pending })
            try await FakeWebhookReceiver.run(port: port) { receiver in
                harness.clock.advance(.seconds(3600))
                let all = try await receiver.wait(for: 4)
                let left = try await parts.store.outbox(limit: 10)
                #expect(all.map(\.type) == ["account.created", "transfer.set_up", "account.ways_back_changed", "transfer.claimed"], "outbox: \(left)")
            }
        }
    }

    @Test("after three days of failures an event is failed; support sends it again", arguments: StoreKind.available)
    func failedThenRetried(kind: StoreKind) async throws {
        try await FakeWebhookReceiver.run { receiver in
            receiver.failuresLeft.withLock { $0 = 1_000 }
            try await withServer(kind, receiver: receiver.url) { api, parts, harness in
                _ = try await api.login(Device())
                // An attempt an hour: the first failure past three days fails the event.
                var attempts = 0
                while true {
                    try await Self.waitFor(parts.store) { [attempts] in $0.first?.attempts == attempts + 1 }
                    attempts += 1
                    if try await parts.store.outbox(limit: 10).first?.state == .failed { break }
                    try #require(attempts < 200, "the event never failed")
                    harness.clock.advance(.seconds(3600))
                }
                let failed = try #require(try await parts.store.outbox(limit: 10).first)
                #expect(failed.lastError == "HTTP 500")
                #expect(failed.attempts == receiver.deliveries.count)
                #expect(failed.attempts == 73, "attempts at 0 h, 1 h … 72 h")

                receiver.failuresLeft.withLock { $0 = 0 }
                let count = receiver.deliveries.count
                let retried = try await parts.store.execute(
                    RetryOutboxCommand(id: nil, now: harness.clock.now(), by: .support(operator: "ana"), reason: "receiver fixed")
                ).get()
                #expect(retried.map(\.id) == [failed.id])
                let again = try await receiver.wait(for: count + 1)
                #expect(again.last?.id == failed.id, "sent again with its webhook-id")
                try await Self.waitUntilEmpty(parts.store)
            }
        }
    }

    // MARK: Helpers


    static func waitFor(
        _ store: any SupportStore, timeout: Duration = .seconds(10), _ condition: ([OutboxMessage]) -> Bool,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(try await store.outbox(limit: 1000)) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("the outbox never reached the expected state: \(try await store.outbox(limit: 1000))", sourceLocation: sourceLocation)
    }

    static func waitUntilEmpty(_ store: any SupportStore, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await waitFor(store, { $0.isEmpty }, sourceLocation: sourceLocation)
    }
}
