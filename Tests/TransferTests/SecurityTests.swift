import Crypto
import Foundation
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

@Suite("Secrets stay secret")
struct SecurityTests {
    let password = "plum-harbor-71-sail"

    @Test("the database holds an argon2id PHC string and never the temporary password or device secret")
    func databaseHoldsOnlyHashes() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        let a = Device()
        try await harness.run { api, _ in
            let session = try await api.login(a)
            _ = try await api.setUp(token: session.accessToken, email: "vault@example.com", password: password)
        }
        // The database file must be there; its WAL only if not checkpointed away.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: harness.database.path))
        let wal = harness.database.path + "-wal"
        if FileManager.default.fileExists(atPath: wal) { bytes.append(try Data(contentsOf: URL(fileURLWithPath: wal))) }
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains("$argon2id$v=19$m=256,t=1,p=1$"))
        #expect(!text.contains(password))
        #expect(!text.contains(a.secret))
    }

    @Test("logs of a whole scenario contain no password, secret, token or hash")
    func logsHoldNoSecrets() async throws {
        // With a webhook secret and the Apple team key configured: the service lifecycle logs
        // its services at debug level, and neither may show up there.
        let teamKey = P256.Signing.PrivateKey().pemRepresentation
        let port = try await FakeWebhookReceiver.closedPort()
        let harness = Harness { config in
            FakeWebhookReceiver.configure(&config, url: "http://127.0.0.1:\(port)/hooks")
            var apple = AppleConfiguration(clientIDs: [FakeApple.bundleID])
            apple.codeExchange = .init(teamID: FakeApple.teamID, keyID: FakeApple.keyID, privateKeyPEM: teamKey)
            config.apple = apple
        }
        defer { harness.database.remove() }
        let a = Device(), b = Device()
        let seen = LockedStrings()
        let keyLines = teamKey.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
        seen.add(String(FakeWebhookReceiver.secret.dropFirst(6)))
        for line in keyLines { seen.add(line) }
        try await harness.run { api, _ in
            let session = try await api.login(a)
            seen.add(try session.accessToken, try session.refreshToken)
            _ = try await api.setUp(token: session.accessToken, email: "logs@example.com", password: password)
            _ = try await api.claim(email: "logs@example.com", password: "wrong-guess-1", device: b)
            let claim = try await api.claim(email: "logs@example.com", password: password, device: b)
            seen.add(try claim.accessToken, try claim.refreshToken)
            let refreshed = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": claim.refreshToken])
            seen.add(try refreshed.accessToken, try refreshed.refreshToken)
            _ = try await api.call(.post, "/v1/logout", token: refreshed.accessToken)
            _ = try await api.login(a)
        }
        let logs = harness.logs.all
        #expect(logs.contains("/v1/transfers/claim"))
        for secret in [password, "wrong-guess-1", a.secret, b.secret, "$argon2id$"] + seen.all {
            #expect(!logs.contains(secret), "a secret reached the logs")
        }
    }

    @Test("an unknown email costs one argon2 verification, like a wrong password", arguments: ["unknown", "wrong", "expired", "cancelled", "claimed"])
    func noEnumeration(_ kind: String) async throws {
        try await withServer { api, harness in
            let session = try await api.login(Device())
            _ = try await api.setUp(token: session.accessToken, email: "known@example.com", password: password)
            var email = "known@example.com", guess = password
            switch kind {
            case "unknown": email = "unknown@example.com"
            case "wrong": guess = "wrong-guess-1"
            case "expired": harness.clock.advance(.seconds(86400))
            case "cancelled": _ = try await api.call(.delete, "/v1/me/transfer", token: session.accessToken)
            default: _ = try await api.claim(email: email, password: password, device: Device())
            }
            let before = harness.hasher.verifyCount
            let r = try await api.claim(email: email, password: guess, device: Device())
            #expect(harness.hasher.verifyCount - before == 1)
            #expect(r.status == .unauthorized)
            #expect(r.text == #"{"error":"invalid_transfer_credentials","message":"The email or temporary password is not valid."}"#)
        }
    }
}
