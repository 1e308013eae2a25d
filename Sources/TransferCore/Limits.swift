import Foundation

// Limits that hold under attack (contract v1.2): who counts as one client, and the slots a
// client or an account takes from a limit's budget. The budget lives in the store (the
// `rate_slots` table), so every node of a PostgreSQL deployment draws on one budget, and a
// slot is taken in a statement that cannot overrun under concurrency.

/// A client's address in canonical form: IPv4 dotted quad; IPv6 as `inet_ntop` writes it
/// (lower case, the longest run of zeros compressed, RFC 5952); an IPv4-mapped IPv6 address
/// is its IPv4 address.
public struct ClientAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 or 16 bytes.
    public let bytes: [UInt8]
    public let description: String

    /// nil when `text` is not an IP address. Also takes `[v6]:port`, `v4:port` and a zone
    /// (`fe80::1%eth0`, dropped), as proxies write them in `X-Forwarded-For`.
    public init?(_ text: some StringProtocol) {
        var t = Substring(text.trimmingCharacters(in: .whitespaces))
        if t.hasPrefix("[") {
            guard let close = t.firstIndex(of: "]") else { return nil }
            let rest = t[t.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isNumber) && rest.count > 1) else { return nil }
            t = t[t.index(after: t.startIndex)..<close]
        } else if t.filter({ $0 == ":" }).count == 1, let colon = t.firstIndex(of: ":") {
            let port = t[t.index(after: colon)...]
            guard !port.isEmpty, port.allSatisfy(\.isNumber) else { return nil }
            t = t[..<colon]
        }
        if let percent = t.firstIndex(of: "%") { t = t[..<percent] }
        self.init(exactly: t)
    }

    /// An address written alone, as `inet_pton` reads it: no port, brackets, zone or spaces
    /// (a `--trusted-proxy` entry).
    public init?(exactly t: some StringProtocol) {
        guard !t.isEmpty, t.utf8.count <= 45 else { return nil }
        let text = String(t)
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(bytes: withUnsafeBytes(of: v4) { Array($0) })
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            let b = withUnsafeBytes(of: v6) { Array($0) }
            if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF {
                self.init(bytes: Array(b[12..<16]))
            } else {
                self.init(bytes: b)
            }
        } else {
            return nil
        }
    }

    init(bytes: [UInt8]) {
        self.bytes = bytes
        description = Self.text(bytes)
    }

    public var isIPv6: Bool { bytes.count == 16 }

    /// Who counts as one client for the per-address limits: an IPv4 address itself; an IPv6
    /// address's network of `ipv6Prefix` bits, written `network/prefix` (`2001:db8:1:2::/64`).
    public func limitKey(ipv6Prefix: Int) -> String {
        guard isIPv6, ipv6Prefix < 128 else { return description }
        return Self.text(AddressRange.mask(bytes, ipv6Prefix)) + "/\(ipv6Prefix)"
    }

    static func text(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        _ = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// So many events per period (`60/1m`).
public struct RateLimit: Sendable, Equatable {
    public var count: Int
    public var period: Duration
    public init(count: Int, period: Duration) {
        self.count = count
        self.period = period
    }
}

/// Which budget a slot is taken from. The raw value is stored (`rate_slots.kind`).
public enum LimitKind: String, Sendable, CaseIterable {
    /// New accounts per client (`--account-creation-limit`).
    case accountCreation = "account_creation"
    /// Claim attempts per client (`--claim-limit`), Apple moves included.
    case claim
    /// Transfer set-ups per account (`--setup-limit`).
    case setup
    /// Apple nonces and attestation challenges per client (`--nonce-limit`).
    case nonce
    /// Hand-off codes per account (`--handoff-limit`).
    case handoff
}

/// Every limit's budget; nil is off.
public struct RateLimits: Sendable, Equatable {
    public var accountCreation: RateLimit?
    public var claim: RateLimit?
    public var setup: RateLimit?
    public var nonce: RateLimit?
    public var handoff: RateLimit?
    /// The bits of an IPv6 address that name one client (`--ipv6-prefix`).
    public var ipv6Prefix: Int

    public init(
        accountCreation: RateLimit? = nil, claim: RateLimit? = nil, setup: RateLimit? = nil, nonce: RateLimit? = nil,
        handoff: RateLimit? = nil, ipv6Prefix: Int = 64
    ) {
        self.accountCreation = accountCreation
        self.claim = claim
        self.setup = setup
        self.nonce = nonce
        self.handoff = handoff
        self.ipv6Prefix = ipv6Prefix
    }

    /// No limits: what tests and tools that are no server get.
    public static let off = RateLimits()

    public subscript(kind: LimitKind) -> RateLimit? {
        switch kind {
        case .accountCreation: accountCreation
        case .claim: claim
        case .setup: setup
        case .nonce: nonce
        case .handoff: handoff
        }
    }

    /// The slot a request of `kind` takes at `now`: keyed by the client (an address's
    /// `limitKey`, "unknown" without one) or by the account; nil while the limit is off.
    public func slot(_ kind: LimitKind, client: String?, now: Timestamp) -> RateSlot? {
        guard let limit = self[kind] else { return nil }
        guard let client else { return RateSlot(kind: kind, key: "unknown", limit: limit, at: now) }
        // The HTTP layer hands over canonical addresses: an IPv4 one is its own key, and only
        // IPv6 is parsed for its network (every login builds this slot, most never take it).
        let key = client.utf8.contains(UInt8(ascii: ":")) ? ClientAddress(client)?.limitKey(ipv6Prefix: ipv6Prefix) ?? client : client
        return RateSlot(kind: kind, key: key, limit: limit, at: now)
    }

    public func slot(_ kind: LimitKind, account: String, now: Timestamp) -> RateSlot? {
        self[kind].map { RateSlot(kind: kind, key: account, limit: $0, at: now) }
    }
}

/// One event counted against a budget: the `kind` budget of `key` (a client or an account).
/// Every node counts in the same row (GCRA: the key's theoretical arrival time, see
/// `interval`), so any period holds at most about `limit.count` events in all.
public struct RateSlot: Sendable, Equatable {
    public var kind: LimitKind
    public var key: String
    public var limit: RateLimit
    /// When the slot is taken.
    public var at: Timestamp

    public init(kind: LimitKind, key: String, limit: RateLimit, at: Timestamp) {
        self.kind = kind
        self.key = key
        self.limit = limit
        self.at = at
    }

    /// The limit's period shared out over its count (GCRA's emission interval, at least 1 ms):
    /// each event takes this much of the period, and a key's budget refills by one slot per
    /// interval instead of all at once at a window's end.
    public var interval: Duration { .milliseconds(max(1, limit.period.milliseconds / Int64(limit.count))) }

    /// Where the key's budget stands after a first event: one interval taken.
    public var windowEnd: Timestamp { at + interval }

    /// The store's answer to taking the slot: the slots in use with this one (the intervals
    /// from now to the key's theoretical arrival time, to the nearest) and that time, which a
    /// refusal left where it was. Over the limit: the seconds until one more fits (at least 1).
    public func refusal(used: Int, windowEnd end: Timestamp) -> TransferError? {
        guard used > limit.count else { return nil }
        let free = Timestamp(milliseconds: end.milliseconds + interval.milliseconds * Int64(1 - limit.count))
        return .rateLimited(retryAfterSeconds: max(1, at.secondsUntil(free)))
    }
}

/// Takes a slot on its own, before work that must not start without one (a hash, a set-up):
/// throws `rateLimited` when the budget is spent. Counted in the store, shared by all nodes.
public struct TakeSlotCommand: StoreOperation {
    public var slot: RateSlot
    public init(_ slot: RateSlot) { self.slot = slot }
    public var now: Timestamp { slot.at }
    public var reads: [FactKey] { [] }
    public func plan(_ facts: Facts) throws -> Plan<Void> { Plan((), [.takeSlot(slot)]) }
}

/// Gives back a slot taken by `TakeSlotCommand` when nothing was tried after all (the hash
/// queue was full): the key gets back the interval it took.
public struct GiveBackSlotCommand: StoreOperation {
    public var slot: RateSlot
    public var now: Timestamp
    public init(_ slot: RateSlot, now: Timestamp) {
        self.slot = slot
        self.now = now
    }
    public var reads: [FactKey] { [] }
    public func plan(_ facts: Facts) throws -> Plan<Void> { Plan((), [.giveBackSlot(slot)]) }
}

extension TransferService {
    /// Runs a claim (`work`: with a password, a code, a recovery code or Apple) holding a slot
    /// of `--claim-limit` for the client, taken before anything is verified. Every attempt
    /// counts, won or lost; the slot is given back only when nothing was tried (the hash queue
    /// was full, the database could not be reached).
    public func withClaimSlot<T>(client: String?, _ work: () async throws -> T) async throws -> T {
        try await withSlot(policy.limits.slot(.claim, client: client, now: clock.now()), keepsSlot: Self.wasTried, work)
    }

    /// Whether a request that failed with `error` still counts against its limit: it does,
    /// unless it was refused before any work (the hash queue was full, the database could not
    /// be reached). A set-up refused for an email in use was hashed: it counts.
    static func wasTried(_ error: any Error) -> Bool {
        switch error as? TransferError {
        case .overloaded?, .unavailable(outcomeUnknown: false)?: false
        default: true
        }
    }

    /// Runs `work` holding a slot of `slot`'s budget (none needed when the limit is off). The
    /// slot is given back when `work` throws an error for which nothing was tried (`keeps`
    /// says which errors still count; by default none do).
    func withSlot<T>(
        _ slot: RateSlot?, keepsSlot keeps: (any Error) -> Bool = { _ in false }, _ work: () async throws -> T
    ) async throws -> T {
        guard let slot else { return try await work() }
        try await store.execute(TakeSlotCommand(slot)).get()
        do {
            return try await work()
        } catch {
            if !keeps(error) { _ = try? await store.execute(GiveBackSlotCommand(slot, now: clock.now())) }
            throw error
        }
    }
}
