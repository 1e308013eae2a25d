import Synchronization

/// What one node signed and verified lately, so that a launch within the activity resolution
/// costs no Ed25519 signature and a token presented again costs no Ed25519 verification.
///
/// Kept by a `TokenService`, so a change of the signing keys starts a new memo: a token of a
/// key no longer published is never taken from it. Each map holds at most `limit` entries and
/// starts over when full (a miss only costs the signature or verification it saves).
final class TokenMemo: Sendable {
    struct Issued: Sendable {
        let token: String
        let issuedAt: Int64
        let expiresAt: Int64
    }

    private let issued = Mutex<[String: Issued]>([:])
    private let verified = Mutex<[String: AccessClaims]>([:])
    private let limit: Int

    init(limit: Int = 65_536) {
        self.limit = limit
    }

    /// The token signed for `session` at or after `since` (seconds), if any.
    func issued(for session: String, since: Int64) -> Issued? {
        issued.withLock { $0[session] }.flatMap { $0.issuedAt >= since ? $0 : nil }
    }

    func remember(_ token: Issued, for session: String) {
        issued.withLock { map in
            if map.count >= limit { map.removeAll(keepingCapacity: true) }
            map[session] = token
        }
    }

    /// The claims of `token` if its signature was verified before (by this memo's keys).
    func claims(of token: String) -> AccessClaims? {
        verified.withLock { $0[token] }
    }

    func remember(_ claims: AccessClaims, of token: String) {
        verified.withLock { map in
            if map.count >= limit { map.removeAll(keepingCapacity: true) }
            map[token] = claims
        }
    }
}
