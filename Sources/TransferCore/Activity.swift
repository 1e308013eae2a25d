/// `--activity-resolution` (contract v1.3): how finely the use of a session is recorded.
///
/// Auto-login runs on every app launch and is nearly all of the traffic; recording each one
/// made every launch a write. A pair's `lastLoginAt` (its last activity: a login, a refresh of
/// its session or of a sibling app's session on it, or a hand-off) is written only when it is
/// older than the resolution, so a launch within it writes nothing. What reads it (the
/// inactive-account rule, `lastLoginAt` in the answers) is accurate to the resolution; the
/// inactive-account TTL is at least 30 days, so at most a thirtieth of it.
public struct ActivityResolution: Sendable, Equatable {
    public static let standard = ActivityResolution(.seconds(3600))
    /// The bounds the flag accepts: finer would write nearly every launch again, coarser would
    /// let a session end a day early (see `LoginCommand.writes`).
    public static let bounds = Duration.seconds(60)...Duration.seconds(86_400)

    public var duration: Duration
    public init(_ duration: Duration) { self.duration = duration }

    /// Whether a use at `now` of a pair whose activity was last recorded at `last` is recorded.
    public func isDue(last: Timestamp?, now: Timestamp) -> Bool {
        guard let last else { return true }
        return last <= now - duration
    }

    /// The effect that records a use at `now` of the pair, when one is due.
    func record(_ pair: PairRecord, deviceID: String, at now: Timestamp) -> [Effect] {
        isDue(last: pair.lastLoginAt, now: now) ? [.recordActivity(deviceID: deviceID, accountID: pair.account.accountID, at: now)] : []
    }
}
