import Synchronization

/// What one node signed and verified lately, so that a launch within the activity resolution
/// costs no Ed25519 signature and a token presented again costs no Ed25519 verification.
///
/// Kept by a `TokenService`, so a change of the signing keys starts a new memo: a token of a
/// key no longer published is never taken from it. Each map keeps the last `limit` to
/// `2 × limit` entries used (`Generations`); a miss only costs the signature or verification
/// it saves. At the default, up to about 80 MB a map (docs/operating.md).
final class TokenMemo: Sendable {
    struct Issued: Sendable {
        let token: String
        let issuedAt: Int64
        let expiresAt: Int64
    }

    private let issued: Mutex<Generations<Issued>>
    private let verified: Mutex<Generations<AccessClaims>>

    init(limit: Int = 65_536) {
        issued = Mutex(Generations(limit: limit))
        verified = Mutex(Generations(limit: limit))
    }

    /// The token signed for `session` at or after `since` (seconds), if any.
    func issued(for session: String, since: Int64) -> Issued? {
        // What a full generation drops is freed here, outside the lock (as in `remember`).
        issued.withLock { $0.value(for: session) }.value.flatMap { $0.issuedAt >= since ? $0 : nil }
    }

    func remember(_ token: Issued, for session: String) {
        // What a full generation drops is freed here, outside the lock.
        _ = issued.withLock { $0.insert(token, for: session) }
    }

    /// The claims of `token` if its signature was verified before (by this memo's keys).
    func claims(of token: String) -> AccessClaims? {
        verified.withLock { $0.value(for: token) }.value
    }

    func remember(_ claims: AccessClaims, of token: String) {
        _ = verified.withLock { $0.insert(claims, for: token) }
    }
}

/// A map that forgets what was not used lately: entries go into the newer of two
/// generations; when it holds `limit`, it becomes the older and the older is dropped. An entry
/// found in the older generation moves to the newer. So it keeps at least the last `limit`
/// entries used, and a working set that fits is never dropped all at once (a map that
/// started over when full lost every entry at each turn: with 100 000 sessions launching
/// at random and room for 65 536, three launches in five signed a new token).
struct Generations<Value> {
    private var newer: [String: Value] = [:]
    private var older: [String: Value] = [:]
    let limit: Int

    init(limit: Int) {
        precondition(limit > 0)
        self.limit = limit
    }

    var count: Int { newer.count + older.count }

    /// The value for `key`, and the generation dropped when moving it up filled the newer one
    /// (for the caller to free).
    mutating func value(for key: String) -> (value: Value?, dropped: [String: Value]) {
        if let value = newer[key] { return (value, [:]) }
        guard let value = older[key] else { return (nil, [:]) }
        return (value, insert(value, for: key))
    }

    /// Inserts `value`; returns the generation dropped to make room, for the caller to free.
    mutating func insert(_ value: Value, for key: String) -> [String: Value] {
        newer[key] = value
        guard newer.count >= limit else { return [:] }
        let dropped = older
        older = newer
        newer = Dictionary(minimumCapacity: limit)
        return dropped
    }
}
