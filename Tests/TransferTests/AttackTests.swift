import Foundation
import HTTPTypes
import NIOCore
import Testing
import TransferCore
@testable import TransferTestSupport

@Suite("Brute force and garbage")
struct AttackTests {
    let password = "plum-harbor-71-sail"

    @Test("email case and surrounding spaces do not give an attacker a second counter", arguments: StoreKind.available)
    func oneCounterPerTransfer(store: StoreKind) async throws {
        try await withServer(store) { api, _ in
            let session = try await api.login(Device())
            _ = try await api.setUp(token: session.accessToken, email: "mia@example.com", password: password)
            for email in ["MIA@example.com", "  mia@example.com ", "Mia@Example.COM", "mia@EXAMPLE.com\n", "mia@example.com"] {
                #expect(try await api.claim(email: email, password: "wrong-guess-1", device: Device()).error == "invalid_transfer_credentials")
            }
            let locked = try await api.claim(email: "mia@example.com", password: password, device: Device())
            #expect(locked.status == .tooManyRequests)
            #expect(locked.error == "too_many_attempts")
        }
    }

    @Test("a new set-up starts a fresh count")
    func setUpResets() async throws {
        try await withServer { api, _ in
            let session = try await api.login(Device())
            _ = try await api.setUp(token: session.accessToken, email: "reset@example.com", password: password)
            for _ in 1...4 { _ = try await api.claim(email: "reset@example.com", password: "wrong-guess-1", device: Device()) }
            _ = try await api.setUp(token: session.accessToken, email: "reset@example.com", password: password)
            for _ in 1...4 { _ = try await api.claim(email: "reset@example.com", password: "wrong-guess-1", device: Device()) }
            #expect(try await api.claim(email: "reset@example.com", password: password, device: Device()).status == .ok)
        }
    }

    /// The test's socket peer is 127.0.0.1: trusted only when `--trusted-proxy` names it.
    @Test("X-Forwarded-For is believed only from a peer --trusted-proxy names", arguments: ["off", "10.0.0.0/8", "127.0.0.1"])
    func forwardedFor(trusted: String) async throws {
        try await withServer(configure: {
            $0.limits.claim = RateLimit(count: 2, period: .seconds(60))
            $0.trustedProxies = try! TrustedProxies(trusted)
        }) { api, _ in
            var statuses: [HTTPResponse.Status] = []
            for i in 0..<4 {
                let r = try await api.call(
                    .post, "/v1/transfers/claim",
                    json: ["email": "x@example.com", "temporaryPassword": "wrong-guess-1", "deviceId": UUID().uuidString, "deviceSecret": Device().secret],
                    headers: [HTTPField.Name("X-Forwarded-For")!: "203.0.113.\(i), 10.0.0.\(i)"])
                statuses.append(r.status)
            }
            if trusted == "127.0.0.1" {
                #expect(statuses.allSatisfy { $0 == .unauthorized })  // four different clients (10.0.0.i: not trusted)
            } else {
                #expect(statuses.filter { $0 == .tooManyRequests }.count == 2)  // one client, whatever the header says
            }
        }
    }

    @Test("voided transfers answer exactly like unknown emails, at the cost of one verification")
    func voidedLooksUnknown() async throws {
        try await withServer { api, harness in
            let session = try await api.login(Device())
            _ = try await api.setUp(token: session.accessToken, email: "gone@example.com", password: password)
            for round in 1...4 {
                for _ in 1...5 { _ = try await api.claim(email: "gone@example.com", password: "wrong-guess-1", device: Device()) }
                if round < 4 { harness.clock.advance(.seconds(900)) }
            }
            let before = harness.hasher.verifyCount
            let voided = try await api.claim(email: "gone@example.com", password: password, device: Device())
            let unknown = try await api.claim(email: "never@example.com", password: password, device: Device())
            #expect(harness.hasher.verifyCount - before == 2)
            #expect(voided.status == unknown.status)
            #expect(voided.text == unknown.text)
        }
    }

    /// Raw bodies that must each get a contract error, never a 500.
    static let corpus: [(String, [UInt8])] = {
        let device = UUID().uuidString
        let secret = String(repeating: "a", count: 40)
        func body(_ s: String) -> [UInt8] { Array(s.utf8) }
        return [
            ("invalid UTF-8", [0x7B, 0x22, 0x64, 0x65, 0x76, 0x69, 0x63, 0x65, 0x49, 0x64, 0x22, 0x3A, 0x22, 0xFF, 0xFE, 0x22, 0x7D]),
            ("NUL in a field", body(#"{"deviceId":"\#(device)\u0000","deviceSecret":"\#(secret)"}"#)),
            ("raw NUL byte", [0x7B, 0x00, 0x7D]),
            ("10 000-character field", body(#"{"deviceId":"\#(String(repeating: "9", count: 10_000))","deviceSecret":"\#(secret)"}"#)),
            ("deeply nested", body(String(repeating: "[", count: 5_000) + String(repeating: "]", count: 5_000))),
            ("deeply nested object", body(String(repeating: #"{"a":"#, count: 2_000) + "1" + String(repeating: "}", count: 2_000))),
            ("number for a string", body(#"{"deviceId":12345,"deviceSecret":"\#(secret)"}"#)),
            ("boolean for a string", body(#"{"deviceId":true,"deviceSecret":"\#(secret)"}"#)),
            ("object for a string", body(#"{"deviceId":{"$ne":null},"deviceSecret":"\#(secret)"}"#)),
            ("duplicate keys", body(#"{"deviceId":"\#(device)","deviceId":"x","deviceSecret":"\#(secret)"}"#)),
            ("SQL injection", body(#"{"deviceId":"' OR 1=1 --","deviceSecret":"'; DROP TABLE accounts; --aaaaaaaaaaaaaaa"}"#)),
            ("header injection", body(#"{"deviceId":"\#(device)\r\nX-Evil: 1","deviceSecret":"\#(secret)"}"#)),
            ("huge number", body(#"{"deviceId":1e999999,"deviceSecret":"\#(secret)"}"#)),
            ("trailing garbage", body(#"{"deviceId":"\#(device)","deviceSecret":"\#(secret)"} trailing"#)),
            ("empty object", body("{}")),
            ("null", body("null")),
            ("1 MiB", [UInt8](repeating: 0x61, count: 1 << 20)),
        ]
    }()

    @Test("garbage bodies get the contract's JSON errors and change nothing")
    func garbage() async throws {
        let harness = Harness()
        defer { harness.database.remove() }
        try await harness.run { api, parts in
            for path in ["/v1/devices/login", "/v1/transfers/claim", "/v1/tokens/refresh"] {
                for (what, bytes) in Self.corpus {
                    let r = try await api.client.execute(
                        uri: path, method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(bytes: bytes)
                    ) { Reply(status: $0.status, headers: $0.headers, body: $0.body) }
                    #expect((400..<500).contains(Int(r.status.code)), "\(what) on \(path): \(r.status)")
                    #expect(r.error != nil && r["message"] is String, "\(what) on \(path): \(r.text.prefix(200))")
                }
            }
            // A 1 MiB password is refused before any hashing: the body limit stops it.
            let huge = try await api.claim(email: "x@example.com", password: String(repeating: "p", count: 1 << 20), device: Device())
            #expect(huge.status == .contentTooLarge)
            // Wrong content types.
            for type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
                let r = try await api.call(.post, "/v1/devices/login", raw: "deviceId=x", headers: [.contentType: type])
                #expect(r.status == .unsupportedMediaType)
                #expect(r.error == "unsupported_media_type")
            }
            // Nothing was created by any of it.
            let stats = try await parts.store.stats(at: harness.clock.now())
            #expect(stats.accounts == 0)
            #expect(stats.transfersPending == 0)
        }
    }
}
