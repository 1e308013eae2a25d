import Foundation
import JWTKit
import Testing
import TransferCore
@testable import TransferHTTP
@testable import TransferTestSupport

/// CLI.md v1.1 `transfer keys list|rotate` and `--signing-key-max-age`: a new signing key signs
/// from its commit on, on every node, and the old one stays published until the tokens it
/// signed have expired. On every store.
@Suite("Signing-key rotation")
struct KeyRotationTests {
    /// The `kid` in a token's header.

    /// The kids `/.well-known/jwks.json` publishes.
    static func published(_ api: Client) async throws -> [String] {
        let keys = try await api.call(.get, "/.well-known/jwks.json").json["keys"] as? [[String: Any]] ?? []
        return keys.compactMap { $0["kid"] as? String }
    }

    /// Polls `condition` every 20 ms for up to 5 s (nodes look for rotations every `signingKeyPollInterval`).
    static func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
        for _ in 0..<250 {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    static func fastPolling(_ config: inout ServerConfiguration) { config.signingKeyPollInterval = .milliseconds(20) }

    @Test("tokens signed before a rotation work until they expire, new ones carry the new kid, the JWKS has both, then the old leaves",
          arguments: StoreKind.available)
    func rotation(kind: StoreKind) async throws {
        try await withHarness(kind, configure: Self.fastPolling) { harness in
            try await harness.run { api, parts in
                let device = Device()
                let before = try await api.login(device)
                let old = try TokenText.kid(try before.accessToken)
                #expect(try await Self.published(api) == [old])

                let result = try await parts.service.rotateSigningKey(replacing: nil, kek: nil, by: .support(operator: "ana"), reason: "yearly")
                guard case .rotated(let retired, let new) = result else {
                    Issue.record("no rotation: \(result)")
                    return
                }
                #expect(retired?.kid == old)
                #expect(try await Self.eventually { try TokenText.kid(try await api.login(device).accessToken) == new.kid },
                        "the node signs with the new key within its poll")
                let after = try await api.login(device)
                #expect(try await api.me(try before.accessToken).status == .ok, "a token of the retired key still works")
                #expect(try await api.me(try after.accessToken).status == .ok)

                // An app backend verifying with the JWKS accepts both during the overlap.
                let jwks = try await api.call(.get, "/.well-known/jwks.json")
                #expect(Set(try await Self.published(api)) == [old, new.kid])
                let backend = try await JWTKeyCollection().add(jwksJSON: jwks.text)
                _ = try await backend.verify(try before.accessToken, as: TokenAttackTests.BackendClaims.self)
                _ = try await backend.verify(try after.accessToken, as: TokenAttackTests.BackendClaims.self)

                // Once every token of the old key has expired (15 min) and the margin passed, it leaves the JWKS.
                harness.clock.advance(harness.configuration.accessTokenTTL + SigningKeys.margin + .seconds(1))
                #expect(try await Self.eventually { try await Self.published(api) == [new.kid] }, "the retired key left the JWKS")
                #expect(try await api.me(try before.accessToken).status == .unauthorized)

                // A day after it left, the pruner deletes it (its private key with it).
                let now = harness.clock.now() + SigningKeys.keptAfterLeaving + .seconds(1)
                let pruned = try await parts.store.prune(
                    PruneCutoffs(
                        now: now, retainedSince: harness.clock.now() - .seconds(86_400 * 400),
                        signingKeysRetiredBefore: SigningKeys.pruneRetiredBefore(now: now, accessTTL: harness.configuration.accessTokenTTL)),
                    batchSize: 10)
                #expect(pruned?.signingKeys == 1)
                #expect(try await parts.store.signingKeys().map(\.kid) == [new.kid])
            }
        }
    }

    @Test("eight rotations of one key at once make one new key; exactly one key is current", arguments: StoreKind.available)
    func concurrentRotations(kind: StoreKind) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { _, parts in
                let first = try #require(SigningKeys.current(try await parts.store.signingKeys()))
                let results = try await withThrowingTaskGroup(of: Rotation.self) { group in
                    for n in 0..<8 {
                        group.addTask { try await parts.service.rotateSigningKey(replacing: first.kid, kek: nil, by: .support(operator: "op\(n)"), reason: "at once") }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let rotated = results.filter { if case .rotated = $0 { true } else { false } }
                #expect(rotated.count == 1, "\(results)")
                let keys = try await parts.store.signingKeys()
                #expect(keys.count == 2 && keys.filter { $0.retiredAt == nil }.count == 1, "\(keys.map(\.kid))")
            }
        }
    }

    @Test("--signing-key-max-age: an old key is rotated by the nodes, once however many decide together", arguments: StoreKind.available)
    func maxAge(kind: StoreKind) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { api, parts in
                let first = try TokenText.kid(try await api.login(Device()).accessToken)
                let watchers = (0..<4).map { _ in
                    SigningKeyWatcher(
                        service: parts.service, tokenBox: TokenBox(), kek: nil, issuer: "transfer-server",
                        audience: "transfer-api", accessTTL: .seconds(900), interval: .seconds(5), maxAge: .seconds(90 * 86_400),
                        logger: harness.logs.logger)
                }
                for watcher in watchers {
                    watcher.tokenBox.set(try await TokenService.load(
                        store: parts.store, kek: nil, issuer: "transfer-server", audience: "transfer-api", accessTTL: .seconds(900), now: harness.clock.now()))
                }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for watcher in watchers { group.addTask { try await watcher.check() } }
                    try await group.waitForAll()
                }
                #expect(try await parts.store.signingKeys().count == 1, "a young key is not rotated")

                harness.clock.advance(.seconds(90 * 86_400))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for watcher in watchers { group.addTask { try await watcher.check() } }
                    try await group.waitForAll()
                }
                let keys = try await parts.store.signingKeys()
                #expect(keys.count == 2, "one rotation for four nodes: \(keys.map(\.kid))")
                let current = try #require(SigningKeys.current(keys))
                #expect(current.kid != first)
                #expect(try watchers.allSatisfy { try $0.tokenBox.tokens.currentKid == current.kid }, "every node signs with it")
                let events = try await RawDatabase(location: harness.configuration.database).strings(
                    "SELECT actor FROM audit_events WHERE kind = 'signing_key.rotated'")
                #expect(events == ["system"], "one rotation, by the system")
            }
        }
    }

    @Test("transfer keys list and rotate: kid, state, when it leaves; the operator and reason recorded; never a private key",
          arguments: StoreKind.available)
    func cli(kind: StoreKind) async throws {
        try await withHarness(kind) { harness in
            try await harness.run { api, parts in
                _ = try await api.login(Device())
                let database = harness.databaseArgument
                let listed = try CLI.transfer(["keys", "list", "--json"], database: database)
                #expect(listed.code == 0, "\(listed.err)")
                let keys = try #require(try listed.json["keys"] as? [[String: Any]])
                #expect(keys.count == 1 && keys[0]["state"] as? String == "current", "\(listed.out)")

                let rotated = try CLI.transfer(["keys", "rotate", "--reason", "ticket 42", "--json"], database: database)
                #expect(rotated.code == 0, "\(rotated.err)")
                let answer = try rotated.json
                #expect(answer["rotated"] as? Bool == true && answer["retired"] as? String == keys[0]["kid"] as? String, "\(answer)")
                #expect(try CLI.transfer(["keys", "rotate"], database: database).code != 0, "--reason is required")

                let text = try CLI.transfer(["keys", "list"], database: database)
                #expect(text.out.contains("current") && text.out.contains("retired"), "\(text.out)")
                for key in try await parts.store.signingKeys() {
                    #expect(!(listed.out + rotated.out + text.out).contains(key.privateKey), "a private key was printed")
                }
                let events = try await RawDatabase(location: harness.configuration.database).strings(
                    "SELECT actor || ' ' || reason FROM audit_events WHERE kind = 'signing_key.rotated'")
                #expect(events.count == 1 && events[0].hasPrefix("operator:agent-smith ") && events[0].contains("ticket 42"), "\(events)")
            }
        }
    }
}
