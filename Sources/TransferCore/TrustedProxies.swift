import Foundation

// Who the client is behind proxies (contract v1.3, security round 3): `--trusted-proxy` names
// the proxies, and `X-Forwarded-For` is believed only as far as they wrote it.

/// A range of addresses, `network/prefix` (CIDR). An address alone is its own range (/32 or
/// /128); an IPv4-mapped IPv6 range (`::ffff:10.0.0.0/104`) is the IPv4 range it maps
/// (`10.0.0.0/8`), as a mapped address is its IPv4 address (`ClientAddress`).
public struct AddressRange: Sendable, Hashable, CustomStringConvertible {
    /// The network: 4 or 16 bytes, no bit set past the prefix.
    public let network: [UInt8]
    public let prefix: Int

    /// What is wrong with an entry: one line that names it.
    public struct Problem: Error, CustomStringConvertible {
        public let description: String
    }

    /// `10.0.0.0/8`, `127.0.0.1`, `fd00::/8`, `::1`. Refused: anything else, a prefix out of
    /// range, and a network with bits set past its prefix (`10.0.0.1/8`: a typo for an
    /// address, or for another range; the message names the range it would be).
    public init(_ entry: some StringProtocol) throws(Problem) {
        let text = String(entry)
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = ClientAddress(exactly: parts[0]) else {
            throw Problem(description: "'\(text)' is not an IP address or a CIDR range (like 10.0.0.0/8, 127.0.0.1 or fd00::/8)")
        }
        let bits = address.bytes.count * 8
        // An IPv4-mapped IPv6 address reads as its IPv4 address: its prefix counts past the 96 mapping bits.
        let mapped = !address.isIPv6 && parts[0].contains(":")
        var prefix = bits
        if parts.count == 2 {
            let given = parts[1]
            let most = mapped ? 128 : bits
            guard (1...3).contains(given.count), given.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(given), n <= most else {
                throw Problem(description: "'\(text)': the prefix of an \(mapped || address.isIPv6 ? "IPv6" : "IPv4") range is 0 to \(most)")
            }
            guard !mapped || n >= 96 else {
                throw Problem(description: "'\(text)': an IPv4-mapped range needs a prefix of 96 or more (::ffff:0:0/96 is every IPv4 address)")
            }
            prefix = mapped ? n - 96 : n
        }
        let network = Self.mask(address.bytes, prefix)
        self.network = network
        self.prefix = prefix
        guard network == address.bytes else {
            throw Problem(description: "'\(text)' has bits set past its prefix; the range is \(description)")
        }
    }

    /// `10.0.0.0/8`, `2001:db8::/32`, `127.0.0.1/32`.
    public var description: String { "\(ClientAddress.text(network))/\(prefix)" }

    public func contains(_ address: ClientAddress) -> Bool {
        address.bytes.count == network.count && Self.mask(address.bytes, prefix) == network
    }

    /// `bytes` with every bit past the first `prefix` cleared.
    static func mask(_ bytes: [UInt8], _ prefix: Int) -> [UInt8] {
        var masked = bytes
        for i in masked.indices {
            let keep = max(0, min(8, prefix - i * 8))
            masked[i] &= keep == 8 ? 0xFF : ~(UInt8(0xFF) >> keep)
        }
        return masked
    }
}

/// `--trusted-proxy`: the proxies whose `X-Forwarded-For` is believed. None by default: every
/// client is its socket peer, whatever it writes in the header.
public struct TrustedProxies: Sendable, Equatable, CustomStringConvertible {
    /// In the order given, without repeats.
    public let ranges: [AddressRange]

    public static let none = TrustedProxies(ranges: [])

    public init(ranges: [AddressRange]) {
        var unique: [AddressRange] = []
        for range in ranges where !unique.contains(range) { unique.append(range) }
        self.ranges = unique
    }

    /// Comma-separated entries (`10.0.0.0/8,127.0.0.1`); `off` or nothing is none. The first
    /// bad entry is refused, by name.
    public init(_ list: String) throws(AddressRange.Problem) {
        let trimmed = list.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.lowercased() != "off" else {
            self.init(ranges: [])
            return
        }
        var ranges: [AddressRange] = []
        for entry in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            let entry = entry.trimmingCharacters(in: .whitespaces)
            guard !entry.isEmpty else { throw AddressRange.Problem(description: "'\(list)' has an empty entry") }
            ranges.append(try AddressRange(entry))
        }
        self.init(ranges: ranges)
    }

    /// The form the contract names, for the messages that refuse v1's bare switch.
    public static let example = "--trusted-proxy 10.0.0.0/8,127.0.0.1"

    /// `10.0.0.0/8,127.0.0.1/32`, or `off`.
    public var description: String { ranges.isEmpty ? "off" : ranges.map(\.description).joined(separator: ",") }

    public func contains(_ address: ClientAddress) -> Bool { ranges.contains { $0.contains(address) } }

    /// The client's address in canonical form: the socket peer, unless the peer is a trusted
    /// proxy. Then `X-Forwarded-For` (every such header, in order, as one comma-separated
    /// list) is read from the right, hop by hop, past the hops that are trusted proxies too:
    /// the first hop that is not is the client. All trusted: the leftmost (the first proxy
    /// was the client's own). A hop that is no IP address (garbage, `unknown`, an empty
    /// entry) ends the walk, and the last trusted address seen is the client: a proxy that
    /// writes garbage then shows up as one busy client, never as a way around the limits, and
    /// nothing left of the garbage is believed. No socket (router tests): `unknown`.
    ///
    /// `forwardedFor` is asked for only when the peer is trusted.
    public func client(peer: String?, forwardedFor: () -> [String]) -> String {
        guard let peer else { return "unknown" }
        // NIO writes an IPv4 peer as a dotted quad already: with no proxy to trust, only IPv6
        // (an IPv4-mapped one on a dual-stack socket among them) needs the parse.
        if ranges.isEmpty { return peer.utf8.contains(UInt8(ascii: ":")) ? ClientAddress(peer)?.description ?? peer : peer }
        guard let socket = ClientAddress(peer) else { return peer }
        guard contains(socket) else { return socket.description }
        var last = socket
        for header in forwardedFor().reversed() {
            for hop in header.split(separator: ",", omittingEmptySubsequences: false).reversed() {
                guard let address = ClientAddress(hop) else { return last.description }
                guard contains(address) else { return address.description }
                last = address
            }
        }
        return last.description
    }
}
