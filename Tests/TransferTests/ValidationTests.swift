import Foundation
import HTTPTypes
import Testing
import TransferCore
import TransferSettings
@testable import TransferTestSupport

@Suite("Field rules and malformed requests")
struct ValidationTests {
    @Test("deviceId must be an RFC 4122 UUID", arguments: ["", "abc", "11111111-2222-4333-8444-55555555555", "11111111-2222-4333-8444-5555555555555", "1111111122224333844455555555555555", "g1111111-2222-4333-8444-555555555555", "{11111111-2222-4333-8444-555555555555}"])
    func badDeviceID(_ id: String) async throws {
        try await withServer { api, _ in
            let r = try await api.call(.post, "/v1/devices/login", json: ["deviceId": id, "deviceSecret": Device().secret])
            #expect(r.status == .badRequest)
            #expect(r.error == "invalid_device_id")
        }
    }

    @Test("deviceSecret is 32–128 characters of [A-Za-z0-9_-]", arguments: [String(repeating: "a", count: 31), String(repeating: "a", count: 129), String(repeating: "a", count: 31) + "=", String(repeating: "ä", count: 40), String(repeating: "a", count: 31) + " "])
    func badSecret(_ secret: String) async throws {
        try await withServer { api, _ in
            let r = try await api.call(.post, "/v1/devices/login", json: ["deviceId": UUID().uuidString, "deviceSecret": secret])
            #expect(r.status == .badRequest)
            #expect(r.error == "invalid_device_secret")
        }
    }

    @Test("secrets of exactly 32 and 128 characters are accepted")
    func secretBounds() async throws {
        try await withServer { api, _ in
            for n in [32, 128] {
                let r = try await api.call(.post, "/v1/devices/login", json: ["deviceId": UUID().uuidString, "deviceSecret": String(repeating: "Az0_-", count: 26).prefix(n).description])
                #expect(r.status == .created)
            }
        }
    }

    @Test("email rules", arguments: ["ab", "no-at-sign", "@example.com", "mia@", "mia@@example.com", "mi a@example.com", "mia@exa\tmple.com", "mia\u{0}@example.com", String(repeating: "a", count: 250) + "@b.co"])
    func badEmail(_ email: String) async throws {
        try await withServer { api, _ in
            let session = try await api.login(Device())
            let r = try await api.setUp(token: session.accessToken, email: email, password: "plum-harbor-71-sail")
            #expect(r.status == .badRequest)
            #expect(r.error == "invalid_email")
            #expect(try await api.me(session.accessToken)["migrationFlag"] as? Bool == false)
        }
    }

    @Test("temporary password rules, each with its own message", arguments: [
        ("short7!", "at least 8"),
        (String(repeating: "x", count: 65), "at most 64"),
        ("aaaaaaaaaa", "repeated"),
        ("Mia@Example.com", "email"),
        ("password", "common"),
        ("Sunshine", "common"),
        ("QWERTYUIOP", "common"),
    ])
    func weakPassword(_ password: String, _ why: String) async throws {
        try await withServer { api, _ in
            let session = try await api.login(Device())
            let r = try await api.setUp(token: session.accessToken, email: "mia@example.com", password: password)
            #expect(r.status == .badRequest)
            #expect(r.error == "weak_password")
            let message = try #require(r["message"] as? String, "\(r.text)")
            #expect(message.contains(why))
        }
    }

    @Test("passwords are NFC-normalised: a decomposed é claims a transfer set up with a composed one")
    func nfc() async throws {
        try await withServer { api, _ in
            let session = try await api.login(Device())
            #expect(try await api.setUp(token: session.accessToken, email: "nfc@example.com", password: "caf\u{e9}-au-lait-42").status == .created)
            #expect(try await api.claim(email: "nfc@example.com", password: "cafe\u{301}-au-lait-42", device: Device()).status == .ok)
        }
    }

    @Test("passwords of exactly 8 and 64 characters are accepted")
    func passwordBounds() async throws {
        try await withServer { api, _ in
            for (i, p) in ["kq7-zp2w", String(repeating: "kq7-zp2w", count: 8)].enumerated() {
                let session = try await api.login(Device())
                #expect(try await api.setUp(token: session.accessToken, email: "b\(i)@example.com", password: p).status == .created)
            }
        }
    }

    @Test("malformed bodies get 400 invalid_request naming the field", arguments: [
        ("not json", "JSON"),
        ("[1,2]", "object"),
        ("\"text\"", "object"),
        ("{}", "deviceId"),
        (#"{"deviceId": 5, "deviceSecret": "x"}"#, "deviceId"),
        (#"{"deviceId": "11111111-2222-4333-8444-555555555555"}"#, "deviceSecret"),
        (#"{"deviceId": "11111111-2222-4333-8444-555555555555", "deviceSecret": ["a"]}"#, "deviceSecret"),
        ("", "object"),
    ])
    func malformed(_ body: String, _ field: String) async throws {
        try await withServer { api, _ in
            let r = try await api.call(.post, "/v1/devices/login", raw: body)
            #expect(r.status == .badRequest)
            #expect(r.error == "invalid_request")
            let message = try #require(r["message"] as? String, "\(r.text)")
            #expect(message.contains(field))
        }
    }

    @Test("replaceExistingAccount must be a boolean")
    func replaceType() async throws {
        try await withServer { api, _ in
            let body: [String: Any] = ["email": "x@example.com", "temporaryPassword": "plum-harbor-71-sail", "deviceId": UUID().uuidString, "deviceSecret": Device().secret, "replaceExistingAccount": 1]
            let r = try await api.call(.post, "/v1/transfers/claim", json: body)
            #expect(r.status == .badRequest)
            #expect(r.error == "invalid_request")
            let message = try #require(r["message"] as? String, "\(r.text)")
            #expect(message.contains("replaceExistingAccount"))
        }
    }

    @Test("bodies over 16 KiB get 413 payload_too_large")
    func tooLarge() async throws {
        try await withServer { api, _ in
            let r = try await api.call(.post, "/v1/devices/login", raw: "{\"deviceId\": \"" + String(repeating: "a", count: 17 * 1024) + "\"}")
            #expect(r.status == .contentTooLarge)
            #expect(r.error == "payload_too_large")
        }
    }

    @Test("unknown paths and wrong methods answer JSON 404 and 405")
    func notFoundAndMethod() async throws {
        try await withServer { api, _ in
            let missing = try await api.call(.get, "/v1/nothing")
            #expect(missing.status == .notFound)
            #expect(missing.error == "not_found")
            let method = try await api.call(.get, "/v1/transfers/claim")
            #expect(method.status == .methodNotAllowed)
            #expect(method.error == "method_not_allowed")
            #expect(method.headers[.allow] == "POST")
        }
    }

    @Test("bearer endpoints refuse missing and malformed tokens with WWW-Authenticate", arguments: [nil, "Bearer", "Bearer abc.def.ghi", "Basic dXNlcjpwYXNz"])
    func badTokens(_ header: String?) async throws {
        try await withServer { api, _ in
            var headers = HTTPFields()
            if let header { headers[.authorization] = header }
            let r = try await api.call(.get, "/v1/me", headers: headers)
            #expect(r.status == .unauthorized)
            #expect(r.error == "invalid_token")
            #expect(r.headers[.wwwAuthenticate] == "Bearer")
        }
    }

    @Test("per-address limits answer 429 rate_limited with Retry-After")
    func rateLimits() async throws {
        try await withServer(configure: {
            $0.limits.accountCreation = RateLimit(count: 2, period: .seconds(60))
            $0.limits.claim = RateLimit(count: 3, period: .seconds(60))
        }) { api, harness in
            let known = Device()
            #expect(try await api.login(known).status == .created)
            #expect(try await api.login(Device()).status == .created)
            let third = try await api.login(Device())
            #expect(third.status == .tooManyRequests)
            #expect(third.error == "rate_limited")
            #expect(third.headers[.retryAfter] != nil)
            // Existing devices still log in.
            #expect(try await api.login(known).status == .ok)
            for _ in 1...3 { _ = try await api.claim(email: "nobody@example.com", password: "wrong-guess-1", device: Device()) }
            let claim = try await api.claim(email: "nobody@example.com", password: "wrong-guess-1", device: Device())
            #expect(claim.status == .tooManyRequests)
            #expect(claim.error == "rate_limited")
            harness.clock.advance(.seconds(60))
            #expect(try await api.login(Device()).status == .created)
        }
    }

    @Test("configuration: durations, limits and database URLs are validated with one-line errors")
    func configuration() throws {
        let ttl = ServerFlags.transferTTL, limit = ServerFlags.claimLimit
        #expect(try ttl.parse("2s") == .seconds(2))
        #expect(try ttl.parse("24h") == .seconds(86400))
        #expect(try ttl.parse("7d") == .seconds(7 * 86400))
        for bad in ["", "0s", "-1h", "5", "h", "1w", "1.5h"] {
            #expect(throws: (any Error).self) { try ttl.parse(bad) }
        }
        #expect(try limit.parse("off") == nil)
        #expect(try limit.parse("60/1m")?.count == 60)
        #expect(throws: (any Error).self) { try limit.parse("60") }
        #expect(throws: (any Error).self) { try limit.parse("0/1m") }
    }
}

@testable import TransferHTTP

@Suite("OpenAPI document")
struct OpenAPIDocumentTests {
    @Test("openapi.yaml describes every route the server answers, with its methods")
    func everyRoute() async throws {
        try await withServer { api, _ in
            let doc = try await api.call(.get, "/openapi.yaml")
            #expect(doc.status == .ok)
            let text = doc.text
            #expect(text.hasPrefix("openapi: 3.1"))
            for (route, methods) in API<TransferRequestContext>.allowedMethods {
                // Router parameters (`:accountId`) are OpenAPI's `{accountId}`.
                let path = route.split(separator: "/", omittingEmptySubsequences: false)
                    .map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }.joined(separator: "/")
                #expect(text.contains("\n  \(path):\n"), "missing \(path)")
                for m in methods {
                    #expect(text.contains("\n  \(path):\n") && text.contains("    \(m.rawValue.lowercased()):"), "missing \(m) \(path)")
                }
            }
        }
    }
}

@Suite("Duplicate JSON keys")
struct DuplicateKeyTests {
    @Test("equal keys in one object are found, also when escaped differently", arguments: [
        (#"{"a":1,"a":2}"#, "a"),
        (#"{"a\u0041":1,"aA":2}"#, "aA"),
        (#"{"x":"a\",\"a","y":{"b":1,"b":2}}"#, "b"),
        (#"{"a":"x,y","b":[1,{"a":1}],"a":3}"#, "a"),
    ])
    func found(_ json: String, _ key: String) throws {
        #expect(try JSONParser.parse(Array(json.utf8)).duplicateKey == key)
    }

    @Test("the same key in different objects is fine", arguments: [
        #"{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}"#,
        #"{"a":"\"a\":1,\"a\":2"}"#,
    ])
    func fine(_ json: String) throws {
        #expect(try JSONParser.parse(Array(json.utf8)).duplicateKey == nil)
    }
}

@Suite("RFC 3339 times (push feedback's at)")
struct RFC3339Tests {
    @Test("offsets, fractions, case and leap seconds are read; anything else is refused")
    func parse() {
        let base = Timestamp(rfc3339: "2026-11-22T10:00:00Z")
        #expect(base?.milliseconds == 1_795_341_600_000)
        #expect(Timestamp(rfc3339: "2026-11-22t10:00:00z") == base)
        #expect(Timestamp(rfc3339: "2026-11-22T19:00:00+09:00") == base)
        #expect(Timestamp(rfc3339: "2026-11-22T05:30:00-04:30") == base)
        #expect(Timestamp(rfc3339: "2026-11-22T10:00:00-00:00") == base)
        #expect(Timestamp(rfc3339: "2026-11-22T10:00:00.25Z")?.milliseconds == 1_795_341_600_250)
        #expect(Timestamp(rfc3339: "2026-11-22T10:00:00.123456789Z")?.milliseconds == 1_795_341_600_123)
        #expect(Timestamp(rfc3339: "2016-12-31T23:59:60Z") == Timestamp(rfc3339: "2017-01-01T00:00:00Z"), "a leap second")
        #expect(Timestamp(rfc3339: "2016-12-31T23:59:60.5Z")! > Timestamp(rfc3339: "2016-12-31T23:59:59.9Z")!, "keeps the order")
        #expect(Timestamp(rfc3339: "2024-02-29T00:00:00Z") != nil)
        #expect(Timestamp(rfc3339: "2026-11-22T10:00:00Z")?.rfc3339 == "2026-11-22T10:00:00Z")
        for bad in [
            "", "yesterday", "2026-11-22", "2026-11-22T10:00:00", "2026-11-22 10:00:00Z", "2026-11-22T10:00Z",
            "2026-13-01T00:00:00Z", "2026-04-31T00:00:00Z", "2025-02-29T00:00:00Z", "2026-11-22T24:00:00Z",
            "2026-11-22T10:17:60Z", "2026-11-22T10:00:00.Z", "2026-11-22T10:00:00+0900", "2026-11-22T10:00:00Z ",
            "2026-11-22T10:00:00+09:00x", "+2026-11-22T10:00:00Z",
        ] {
            #expect(Timestamp(rfc3339: bad) == nil, "\(bad)")
        }
    }

    @Test("times are written as RFC 3339 in UTC with whole seconds, as String(format:) wrote them, before 1970 and after 9999 included")
    func write() {
        func reference(_ at: Timestamp) -> String {
            var t = time_t(at.seconds)
            var parts = tm()
            gmtime_r(&t, &parts)
            return String(
                format: "%04d-%02d-%02dT%02d:%02d:%02dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
        }
        var seconds: [Int64] = [0, 59, 86_399, 951_782_400, 1_795_341_599, 253_402_300_799, 253_402_300_800, -1, -62_167_219_200, -62_167_219_201]
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<2000 {
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            seconds.append(Int64(x % 253_402_300_800))
        }
        for second in seconds {
            let at = Timestamp(milliseconds: second * 1000 + (second >= 0 ? 999 : 0))
            #expect(at.rfc3339 == reference(at), "\(second) s")
        }
        #expect(Timestamp(milliseconds: 1_795_341_600_999).rfc3339 == "2026-11-22T10:00:00Z")
    }
}
