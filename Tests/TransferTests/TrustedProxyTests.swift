import Foundation
import HTTPTypes
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.3, security round 3: "Trusted proxies are named". `X-Forwarded-For` is read
/// from the right only past hops that are trusted proxies; any other peer is counted by its
/// socket address.
@Suite("Trusted proxies are named")
struct TrustedProxyTests {
    static let forwarded = HTTPField.Name("X-Forwarded-For")!

    static func proxies(_ list: String) -> TrustedProxies { try! TrustedProxies(list) }

    @Test("CIDR ranges: IPv4 and IPv6, canonical, /0 to /32 and /128, IPv4-mapped IPv6 as IPv4")
    func ranges() throws {
        let good: [(String, String)] = [
            ("10.0.0.0/8", "10.0.0.0/8"), ("127.0.0.1", "127.0.0.1/32"), ("127.0.0.1/32", "127.0.0.1/32"), ("0.0.0.0/0", "0.0.0.0/0"),
            ("::/0", "::/0"), ("::1", "::1/128"), ("2001:DB8::/32", "2001:db8::/32"), ("2001:0db8:0000::0001/128", "2001:db8::1/128"),
            ("fd00::/8", "fd00::/8"), ("::ffff:10.0.0.0/104", "10.0.0.0/8"), ("::ffff:192.0.2.1", "192.0.2.1/32"),
            ("::FFFF:0:0/96", "0.0.0.0/0"), ("192.0.2.128/25", "192.0.2.128/25"), ("10.0.0.0/08", "10.0.0.0/8"),
        ]
        for (text, canonical) in good {
            #expect((try? AddressRange(text))?.description == canonical, "\(text) must read as \(canonical)")
        }
        let bad: [(String, String)] = [
            ("10.0.0.0/33", "'10.0.0.0/33': the prefix of an IPv4 range is 0 to 32"),
            ("::/129", "'::/129': the prefix of an IPv6 range is 0 to 128"),
            ("10.0.0.0/", "'10.0.0.0/': the prefix of an IPv4 range is 0 to 32"),
            ("10.0.0.0/-1", "'10.0.0.0/-1': the prefix of an IPv4 range is 0 to 32"),
            ("10.0.0.0/+8", "'10.0.0.0/+8': the prefix of an IPv4 range is 0 to 32"),
            ("10.0.0.0/8/8", "'10.0.0.0/8/8': the prefix of an IPv4 range is 0 to 32"),
            ("10.0.0.1/8", "'10.0.0.1/8' has bits set past its prefix; the range is 10.0.0.0/8"),
            ("2001:db8::1/32", "'2001:db8::1/32' has bits set past its prefix; the range is 2001:db8::/32"),
            ("::ffff:10.0.0.0/95", "'::ffff:10.0.0.0/95': an IPv4-mapped range needs a prefix of 96 or more (::ffff:0:0/96 is every IPv4 address)"),
            ("10.0.0", "'10.0.0' is not an IP address or a CIDR range (like 10.0.0.0/8, 127.0.0.1 or fd00::/8)"),
            ("[::1]", "'[::1]' is not an IP address or a CIDR range (like 10.0.0.0/8, 127.0.0.1 or fd00::/8)"),
            ("127.0.0.1:8080", "'127.0.0.1:8080' is not an IP address or a CIDR range (like 10.0.0.0/8, 127.0.0.1 or fd00::/8)"),
            ("fe80::1%eth0", "'fe80::1%eth0' is not an IP address or a CIDR range (like 10.0.0.0/8, 127.0.0.1 or fd00::/8)"),
            ("/8", "'/8' is not an IP address or a CIDR range (like 10.0.0.0/8, 127.0.0.1 or fd00::/8)"),
        ]
        for (text, message) in bad {
            do {
                let range = try AddressRange(text)
                Issue.record("\(text) was read as \(range)")
            } catch {
                #expect(error.description == message)
            }
        }
        let list = try TrustedProxies(" 10.0.0.0/8 , 127.0.0.1,10.0.0.0/8,::1 ")
        #expect(list.description == "10.0.0.0/8,127.0.0.1/32,::1/128", "trimmed, in order, without repeats")
        #expect(try TrustedProxies("off") == .none)
        #expect(try TrustedProxies("") == .none)
    }

    @Test("membership: a range holds the addresses of its family under its prefix; a mapped address is its IPv4 one")
    func membership() throws {
        func holds(_ range: String, _ address: String) throws -> Bool {
            try AddressRange(range).contains(try #require(ClientAddress(address)))
        }
        #expect(try holds("10.0.0.0/8", "10.255.1.2"))
        #expect(try !holds("10.0.0.0/8", "11.0.0.1"))
        #expect(try holds("192.0.2.128/25", "192.0.2.200"))
        #expect(try !holds("192.0.2.128/25", "192.0.2.127"))
        #expect(try holds("127.0.0.1", "::ffff:127.0.0.1"), "a dual-stack socket's mapped peer")
        #expect(try holds("0.0.0.0/0", "203.0.113.9"))
        #expect(try !holds("0.0.0.0/0", "2001:db8::1"), "/0 is every address of its family only")
        #expect(try holds("::/0", "2001:db8::1"))
        #expect(try !holds("::/0", "203.0.113.9"))
        #expect(try holds("fd00::/8", "FD12:3456::1"))
        #expect(try !holds("::1", "::2"))
    }

    @Test("the client: the socket unless the peer is trusted; then X-Forwarded-For from the right, past trusted hops")
    func clientAddress() {
        let proxies = Self.proxies("10.0.0.0/8,192.0.2.1,fd00::/8")
        func client(_ peer: String?, _ headers: [String], _ list: TrustedProxies = proxies) -> String {
            list.client(peer: peer) { headers }
        }
        // A peer that is no proxy of ours: its socket, whatever it writes.
        #expect(client("203.0.113.5", ["198.51.100.1"]) == "203.0.113.5")
        #expect(client("::ffff:203.0.113.5", ["198.51.100.1"]) == "203.0.113.5")
        #expect(client("203.0.113.5", ["198.51.100.1"], .none) == "203.0.113.5", "no --trusted-proxy: nothing is believed")
        #expect(client(nil, ["198.51.100.1"]) == "unknown")
        // One proxy: the hop it appended.
        #expect(client("10.0.0.2", ["198.51.100.7"]) == "198.51.100.7")
        #expect(client("10.0.0.2", ["spoofed, 198.51.100.7"]) == "198.51.100.7", "what the client wrote left of it is never read")
        // Chained proxies: the CDN's hop (192.0.2.1) is trusted, the load balancer (10.0.0.2) is the peer.
        #expect(client("10.0.0.2", ["203.0.113.66, 198.51.100.7, 192.0.2.1"]) == "198.51.100.7")
        #expect(client("10.0.0.2", ["198.51.100.7", "192.0.2.1, 10.9.9.9"]) == "198.51.100.7", "every header, in order, as one list")
        #expect(client("10.0.0.2", ["198.51.100.7:4431, [fd00::5]:443"]) == "198.51.100.7", "hops may carry ports")
        // All trusted: the leftmost.
        #expect(client("10.0.0.2", ["10.1.1.1, 192.0.2.1"]) == "10.1.1.1")
        #expect(client("10.0.0.2", []) == "10.0.0.2", "no header: the proxy itself")
        // A malformed hop ends the walk: the last trusted address seen.
        #expect(client("10.0.0.2", ["198.51.100.7, garbage"]) == "10.0.0.2")
        #expect(client("10.0.0.2", ["198.51.100.7, unknown, 192.0.2.1"]) == "192.0.2.1")
        #expect(client("10.0.0.2", ["198.51.100.7,,192.0.2.1"]) == "192.0.2.1", "an empty hop is malformed")
        #expect(client("10.0.0.2", [""]) == "10.0.0.2")
        // Canonical form; IPv6 is grouped later, by --ipv6-prefix (RateLimits.slot).
        #expect(client("10.0.0.2", ["2001:DB8:0:0::0001"]) == "2001:db8::1")
        #expect(client("fd00::1", ["::FFFF:198.51.100.7"]) == "198.51.100.7")
    }

    /// The red team's attack: code guesses from one socket, each with another spoofed
    /// `X-Forwarded-For`, through a server whose `--trusted-proxy` names a network the
    /// attacker is not in. All 500 came from one client: the limit refuses all but 30.
    @Test("500 code guesses from one socket with spoofed X-Forwarded-For are refused by the limit", arguments: StoreKind.available)
    func spoofedGuesses(_ kind: StoreKind) async throws {
        try await withServer(kind, configure: {
            $0.limits.claim = RateLimit(count: 30, period: .seconds(60))
            $0.trustedProxies = Self.proxies("10.0.0.0/8")
        }) { api, _ in
            var statuses: [Int: Int] = [:]
            for i in 0..<500 {
                let r = try await api.call(
                    .post, "/v1/transfers/claim",
                    json: ["transferCode": "0000-0000-0000-0000", "deviceId": UUID().uuidString, "deviceSecret": Device().secret],
                    headers: [Self.forwarded: "198.51.\(i / 256).\(i % 256), 10.0.0.1"])
                statuses[Int(r.status.code), default: 0] += 1
            }
            #expect(statuses == [401: 30, 429: 470], "one socket is one client: \(statuses)")
        }
    }

    /// A load balancer in front of a proxy on the host: both named, the client is the hop the
    /// balancer appended; its IPv6 /64 is one client.
    @Test("chained proxies: the client is the first hop from the right that is no proxy, and an IPv6 client is its /64")
    func chained() async throws {
        try await withServer(configure: {
            $0.limits.claim = RateLimit(count: 2, period: .seconds(60))
            $0.trustedProxies = Self.proxies("127.0.0.1,::1,10.0.0.0/8")
        }) { api, _ in
            func guess(_ header: String) async throws -> Int {
                let reply = try await api.call(
                    .post, "/v1/transfers/claim",
                    json: ["transferCode": "0000-0000-0000-0000", "deviceId": UUID().uuidString, "deviceSecret": Device().secret],
                    headers: [Self.forwarded: header])
                return Int(reply.status.code)
            }
            var statuses: [Int] = []
            for header in [
                "forged-by-the-client, 2001:db8:1:2::a, 10.0.0.9", "203.0.113.1, 2001:db8:1:2::b, 10.0.0.10", "2001:db8:1:2::c, 10.0.0.11",
                "2001:db8:1:3::c, 10.0.0.11", "10.0.0.5, 10.0.0.11", "10.0.0.5", "10.0.0.5",
            ] {
                statuses.append(try await guess(header))
            }
            // Three addresses of one /64 behind two proxies are one client; another /64 is
            // another; all hops trusted, the leftmost (10.0.0.5) is the client.
            #expect(statuses == [401, 401, 429, 401, 401, 401, 429], "\(statuses)")
        }
    }
}
