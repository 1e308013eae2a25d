import Foundation
import HTTPTypes
import Testing
import TransferArgon2
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.2, "Limits that hold under attack": who counts as one client, one budget for
/// every node, slots taken before the work, the new limits, claims first in the hash queue.
@Suite("Limits that hold under attack")
struct LimitTests {
    static let forwarded = HTTPField.Name("X-Forwarded-For")!

    @Test("addresses are compared in canonical form; an IPv6 client is its /64, an IPv4 client its address")
    func canonicalAddresses() throws {
        let cases: [(String, String?)] = [
            ("2001:DB8::0001", "2001:db8::1"), ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
            ("::ffff:192.0.2.1", "192.0.2.1"), ("::FFFF:c000:0201", "192.0.2.1"), ("[2001:db8::1]:443", "2001:db8::1"),
            ("192.0.2.1:443", "192.0.2.1"), (" 192.0.2.1 ", "192.0.2.1"), ("fe80::1%eth0", "fe80::1"), ("::1", "::1"),
            ("unknown", nil), ("", nil), ("1.2.3", nil), ("192.0.2.256", nil), ("2001:db8::1::2", nil), ("[2001:db8::1", nil),
            ("192.0.2.1:x", nil), ("2001:db8::1]:443", nil),
        ]
        for (text, canonical) in cases {
            #expect(ClientAddress(text)?.description == canonical, "\(text) must read as \(canonical ?? "no address")")
        }
        let v6 = try #require(ClientAddress("2001:db8:aaaa:bbbb:1:2:3:4"))
        #expect(v6.limitKey(ipv6Prefix: 64) == "2001:db8:aaaa:bbbb::/64")
        #expect(v6.limitKey(ipv6Prefix: 48) == "2001:db8:aaaa::/48")
        #expect(v6.limitKey(ipv6Prefix: 56) == "2001:db8:aaaa:bb00::/56")
        #expect(v6.limitKey(ipv6Prefix: 128) == "2001:db8:aaaa:bbbb:1:2:3:4")
        #expect(ClientAddress("2001:db8:aaaa:bbbb::ffff")?.limitKey(ipv6Prefix: 64) == v6.limitKey(ipv6Prefix: 64))
        #expect(ClientAddress("192.0.2.1")?.limitKey(ipv6Prefix: 64) == "192.0.2.1", "IPv4 is never grouped")
        #expect(ClientAddress("::ffff:192.0.2.1")?.limitKey(ipv6Prefix: 64) == "192.0.2.1", "IPv4-mapped IPv6 is IPv4")
    }

    /// Four wrong claims, each from another address of one /64 (through a trusted proxy):
    /// with `--claim-limit 3/1m` the fourth is refused, and another /64 still has its budget.
    @Test("a /64 is one client for the claim limit, whatever its addresses are written like", arguments: StoreKind.available)
    func ipv6Network(_ kind: StoreKind) async throws {
        try await withServer(kind, configure: {
            $0.limits.claim = RateLimit(count: 3, period: .seconds(60))
            $0.trustedProxies = .loopback
        }) { api, _ in
            func claim(from address: String) async throws -> Reply {
                try await api.call(
                    .post, "/v1/transfers/claim",
                    json: ["email": "nobody@example.com", "temporaryPassword": "wrong-guess-1", "deviceId": UUID().uuidString, "deviceSecret": Device().secret],
                    headers: [Self.forwarded: "198.51.100.7, \(address)"])
            }
            var statuses: [Int] = []
            for address in ["fd00:1::11", "FD00:1:0:0::12", "[fd00:1::13]:50000", "fd00:0001::14"] {
                statuses.append(Int(try await claim(from: address).status.code))
            }
            #expect(statuses == [401, 401, 401, 429], "four addresses of one /64 share one budget of 3")
            let refused = try await claim(from: "fd00:1::ffff")
            #expect(refused.error == "rate_limited")
            #expect(Int(refused.headers[.retryAfter] ?? "") ?? 0 > 0, "429 carries Retry-After in whole seconds")
            #expect(try await claim(from: "fd00:2::11").status == .unauthorized, "another /64 is another client")
            #expect(try await claim(from: "192.0.2.1").status == .unauthorized)
            #expect(try await claim(from: "::ffff:192.0.2.1").status == .unauthorized)
            #expect(try await claim(from: "192.0.2.1").status == .unauthorized)
            #expect(try await claim(from: "::FFFF:192.0.2.1").status == .tooManyRequests, "IPv4-mapped IPv6 is the same IPv4 client")
        }
    }

    @Test("code claims count against --claim-limit in their own transaction: won, lost and repeated alike", arguments: StoreKind.available)
    func codeClaims(_ kind: StoreKind) async throws {
        try await withServer(kind, configure: {
            $0.limits.claim = RateLimit(count: 3, period: .seconds(60))
            $0.trustedProxies = .loopback
        }) { api, _ in
            func claim(_ code: String, _ device: Device, from address: String) async throws -> Reply {
                try await api.call(
                    .post, "/v1/transfers/claim", json: ["transferCode": code, "deviceId": device.id, "deviceSecret": device.secret],
                    headers: [Self.forwarded: address])
            }
            let a = try await api.login(Device())
            let issued = try await api.call(.put, "/v1/me/transfer", json: ["method": "code"], token: a.accessToken)
            let code = try issued.string("transferCode")
            let b = Device()
            #expect(try await claim("0000-0000-0000-0000", Device(), from: "198.51.100.9").status == .unauthorized)
            #expect(try await claim(code, b, from: "198.51.100.9").status == .ok, "the second claim of the budget wins")
            #expect(try await claim(code, b, from: "198.51.100.9").status == .ok, "the winner's repeat answers as the first did")
            let spent = try await claim(code, b, from: "198.51.100.9")
            #expect(spent.status == .tooManyRequests, "the fourth claim in a minute is over the budget of 3, whatever it would find")
            #expect(spent.error == "rate_limited")
            #expect(try await claim("0000-0000-0000-0000", Device(), from: "198.51.100.10").status == .unauthorized, "another client")
        }
    }


    @Test("--ipv6-prefix 128 counts each IPv6 address on its own")
    func prefix128() async throws {
        try await withServer(configure: {
            $0.limits.claim = RateLimit(count: 1, period: .seconds(60))
            $0.limits.ipv6Prefix = 128
            $0.trustedProxies = .loopback
        }) { api, _ in
            for address in ["fd00:1::11", "fd00:1::12"] {
                let r = try await api.call(
                    .post, "/v1/transfers/claim",
                    json: ["email": "nobody@example.com", "temporaryPassword": "wrong-guess-1", "deviceId": UUID().uuidString, "deviceSecret": Device().secret],
                    headers: [Self.forwarded: address])
                #expect(r.status == .unauthorized, "\(address) has a budget of its own")
            }
        }
    }

    /// `API.login` used to check the budget before the transaction and count after it: 15
    /// logins at once got 8 accounts from a limit of 3.
    @Test("15 concurrent creations from one client with a limit of 3 create exactly 3 accounts", arguments: StoreKind.available)
    func concurrentCreations(_ kind: StoreKind) async throws {
        try await withServer(kind, configure: { $0.limits.accountCreation = RateLimit(count: 3, period: .seconds(60)) }) { api, harness in
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<15 { group.addTask { Int(try await api.login(Device()).status.code) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 201 }.count == 3, "statuses: \(statuses.sorted())")
            #expect(statuses.filter { $0 == 429 }.count == 12, "statuses: \(statuses.sorted())")
            // A refused creation left nothing behind: its device creates its account next window.
            harness.clock.advance(.seconds(61))
            #expect(try await api.login(Device()).status == .created)
        }
    }

    @Test("a login of an existing device is never limited, and a new account beside it counts", arguments: StoreKind.available)
    func existingDevices(_ kind: StoreKind) async throws {
        try await withServer(kind, configure: { $0.limits.accountCreation = RateLimit(count: 1, period: .seconds(60)) }) { api, _ in
            let phone = Device()
            #expect(try await api.login(phone).status == .created)
            for _ in 0..<5 { #expect(try await api.login(phone).status == .ok) }
            let second = try await api.login(phone, newAccount: true)
            #expect(second.status == .tooManyRequests, "newAccount creates an account: it counts")
            #expect(try await api.login(phone).status == .ok)
        }
    }

    @Test("--setup-limit counts set-ups per account; support's transfer issue does not count", arguments: StoreKind.available)
    func setUpLimit(_ kind: StoreKind) async throws {
        try await withServer(kind, configure: { $0.limits.setup = RateLimit(count: 2, period: .seconds(3600)) }) { api, harness in
            let phone = Device()
            let token = try await api.login(phone).accessToken
            #expect(try await api.setUp(token: token, email: "one@example.com", password: "plum-harbor-71-sail").status == .created)
            #expect(try await api.call(.put, "/v1/me/transfer", json: ["method": "code"], token: token).status == .created)
            let third = try await api.setUp(token: token, email: "three@example.com", password: "plum-harbor-71-sail")
            #expect(third.status == .tooManyRequests)
            #expect(third.error == "rate_limited")
            #expect(try await api.call(.put, "/v1/me/transfer", json: ["method": "code"], token: token).status == .tooManyRequests)
            // Another account has its own budget.
            let other = try await api.login(Device()).accessToken
            #expect(try await api.setUp(token: other, email: "other@example.com", password: "plum-harbor-71-sail").status == .created)
            // A set-up refused for its body (a weak password) never reaches the limit.
            let fresh = try await api.login(Device()).accessToken
            for _ in 0..<3 { #expect(try await api.setUp(token: fresh, email: "weak@example.com", password: "password").status == .badRequest) }
            #expect(try await api.setUp(token: fresh, email: "weak@example.com", password: "plum-harbor-71-sail").status == .created)
            harness.clock.advance(.seconds(3601))
            let later = try await api.login(phone).accessToken
            #expect(try await api.setUp(token: later, email: "four@example.com", password: "plum-harbor-71-sail").status == .created)
        }
    }

    @Test("--nonce-limit counts Apple nonces per client; --handoff-limit hand-off codes per account", arguments: StoreKind.available)
    func nonceAndHandoffLimits(_ kind: StoreKind) async throws {
        try await withServer(kind, configure: {
            $0.limits.nonce = RateLimit(count: 2, period: .seconds(60))
            $0.limits.handoff = RateLimit(count: 2, period: .seconds(3600))
            $0.trustedProxies = .loopback
            $0.apple = AppleConfiguration(clientIDs: ["com.example.app"])
            $0.handoff = HandoffPolicy(clients: ["com.example.widget"], codeTTL: .seconds(60))
        }) { api, _ in
            func nonce(_ address: String) async throws -> Reply {
                try await api.call(.post, "/v1/apple/nonce", headers: [Self.forwarded: address])
            }
            #expect(try await nonce("203.0.113.5").status == .created)
            #expect(try await nonce("203.0.113.5").status == .created)
            let refused = try await nonce("203.0.113.5")
            #expect(refused.status == .tooManyRequests)
            #expect(refused.error == "rate_limited")
            #expect(try await nonce("203.0.113.6").status == .created, "another client has its own budget")

            let token = try await api.login(Device()).accessToken
            let challenge = String(repeating: "a", count: 43)
            func code() async throws -> Reply {
                try await api.call(.post, "/v1/handoff/codes", json: ["clientId": "com.example.widget", "codeChallenge": challenge, "codeChallengeMethod": "S256"], token: token)
            }
            #expect(try await code().status == .created)
            #expect(try await code().status == .created)
            #expect(try await code().status == .tooManyRequests)
        }
    }

    /// The hash queue's last quarter is for claims: set-ups are refused first.
    @Test("claims come first: set-ups are refused while claims still find a place in the hash queue")
    func claimsFirstInTheQueue() async throws {
        // Slow enough that ten hashes queue up behind one worker.
        let hasher = Argon2Hasher(parameters: Argon2Parameters(memoryKiB: 65536, iterations: 2, parallelism: 1), workers: 1, queueDepth: 4)
        defer { Task { try? await hasher.shutdown() } }
        #expect(hasher.reservedForClaims == 1)
        let phc = try Argon2Hasher.hashNow("plum-harbor-71-sail", parameters: Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1))
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    do {
                        _ = try await hasher.hash("plum-harbor-71-sail")
                        return true
                    } catch TransferError.overloaded {
                        return false
                    }
                }
            }
            // Wait until the set-ups filled their part of the queue (1 running + 3 waiting).
            for _ in 0..<200 where hasher.inFlight < 4 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(hasher.inFlight == 4, "set-ups may take 1 worker + 3 of 4 places")
            #expect(try await hasher.verify("plum-harbor-71-sail", against: phc), "a claim finds the place kept for it")
            let done = try await group.reduce(into: [Bool]()) { $0.append($1) }
            #expect(done.filter { $0 }.count == 4, "4 set-ups admitted, 6 refused: \(done)")
        }
    }

    /// One free account flooding set-ups, and a real user's claim meanwhile: the claim is
    /// answered (200), never `503 overloaded`.
    @Test("a flood of set-ups never makes a claim answer 503", arguments: StoreKind.available)
    func setUpFloodBesideAClaim(_ kind: StoreKind) async throws {
        try await withHarness(kind, configure: {
            $0.argon2 = Argon2Parameters(memoryKiB: 32768, iterations: 2, parallelism: 1)
            $0.hashWorkers = 1
            $0.hashQueue = 4
        }) { harness in
            var harness = harness
            harness.injectHasher = false  // the real argon2 pool and its queue
            try await harness.run { api, _ in try await Self.floodBesideAClaim(api) }
        }
    }

    static func floodBesideAClaim(_ api: Client) async throws {
        do {
            let user = try await api.login(Device()).accessToken
            #expect(try await api.setUp(token: user, email: "real@example.com", password: "plum-harbor-71-sail").status == .created)
            var attackers: [String] = []
            for _ in 0..<12 { attackers.append(try await api.login(Device()).accessToken) }
            let claim = try await withThrowingTaskGroup(of: (String, Int).self) { group in
                for (i, token) in attackers.enumerated() {
                    group.addTask {
                        ("setup", Int(try await api.setUp(token: token, email: "flood\(i)@example.com", password: "plum-harbor-71-sail").status.code))
                    }
                }
                try await Task.sleep(for: .milliseconds(20))
                group.addTask {
                    ("claim", Int(try await api.claim(email: "real@example.com", password: "plum-harbor-71-sail", device: Device()).status.code))
                }
                var results: [(String, Int)] = []
                for try await r in group { results.append(r) }
                return results
            }
            let claimStatus = claim.first { $0.0 == "claim" }?.1
            #expect(claimStatus == 200, "the claim beside the flood: \(claim)")
            #expect(claim.contains { $0 == ("setup", 503) }, "the flood must have filled the set-ups' part of the queue: \(claim)")
        }
    }

    @Test("an email with a Unicode format character is refused", arguments: ["mia\u{200B}@example.com", "mia@exa\u{202E}moc.elpm", "\u{FEFF}mia@example.com", "mi\u{00AD}a@example.com"])
    func formatCharacters(_ email: String) async throws {
        try await withServer { api, _ in
            let token = try await api.login(Device()).accessToken
            let r = try await api.setUp(token: token, email: email, password: "plum-harbor-71-sail")
            #expect(r.status == .badRequest)
            #expect(r.error == "invalid_email")
            #expect(try await api.me(token).json["transfer"] is NSNull, "nothing was set up")
        }
    }

    /// A wrong password for an email with a pending transfer and for an unknown one run the
    /// same statements and commit; the unknown one is audited without an account.
    @Test("a wrong password does the same work for an unknown email as for a pending transfer", arguments: StoreKind.available)
    func constantWorkFailures(_ kind: StoreKind) async throws {
        try await withHarness(kind, configure: { $0.trustedProxies = .loopback }) { harness in
            try await harness.run { api, _ in
                let token = try await api.login(Device()).accessToken
                #expect(try await api.setUp(token: token, email: "known@example.com", password: "plum-harbor-71-sail").status == .created)
                for email in ["known@example.com", "unknown@example.com"] {
                    let r = try await api.call(
                        .post, "/v1/transfers/claim",
                        json: ["email": email, "temporaryPassword": "wrong-guess-1", "deviceId": UUID().uuidString, "deviceSecret": Device().secret],
                        headers: [Self.forwarded: "203.0.113.9"])
                    #expect(r.status == .unauthorized)
                    #expect(r.error == "invalid_transfer_credentials")
                }
                let failures = try await RawDatabase(location: harness.configuration.database).strings(
                    "SELECT COALESCE(account_id, 'none') || ' ' || client_address FROM audit_events WHERE kind = 'transfer.claim_failed' ORDER BY id")
                #expect(failures.count == 2, "both failures are audited: \(failures)")
                #expect(failures.last == "none 203.0.113.9", "the unknown email's failure has no account: \(failures)")
                #expect(failures.allSatisfy { $0.hasSuffix(" 203.0.113.9") })
                let me = try await api.me(token).json
                #expect((me["transfer"] as? [String: Any])?["email"] as? String == "known@example.com", "the pending transfer stays")
            }
        }
    }
}
