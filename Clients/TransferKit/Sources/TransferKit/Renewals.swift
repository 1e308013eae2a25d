/// The token renewals under way, one per key (an account id, or a sibling app's client id): a
/// caller that needs a renewal while one runs waits for that one (single flight).
///
/// The owner (an actor) drops a key's renewal when its session ends (sign-out, the account
/// leaving the phone, a new hand-off). A renewal checks ``isCurrent(_:for:)`` before it keeps
/// the tokens it brought, so a dropped renewal's result is thrown away.
struct Renewals {
    struct Flight {
        let id: Int
        let task: Task<String, any Error>
    }

    private var flights: [String: Flight] = [:]
    private var lastId = 0

    /// The renewal running for `key`, or a new one: `start` makes its task, given its flight id.
    mutating func join(_ key: String, start: (_ flight: Int) -> Task<String, any Error>) -> Flight {
        if let running = flights[key] { return running }
        lastId += 1
        let flight = Flight(id: lastId, task: start(lastId))
        flights[key] = flight
        return flight
    }

    /// Whether the renewal `flight` still runs for `key`: not dropped, not finished.
    func isCurrent(_ flight: Int, for key: String) -> Bool {
        flights[key]?.id == flight
    }

    /// Called by each caller once `flight` has answered it: later callers start a new renewal.
    mutating func finished(_ flight: Flight, for key: String) {
        if flights[key]?.id == flight.id { flights[key] = nil }
    }

    /// Drops the renewal of `key`: its result will not be kept.
    mutating func drop(_ key: String) {
        flights[key] = nil
    }

    /// Drops every renewal.
    mutating func dropAll() {
        flights.removeAll()
    }
}
