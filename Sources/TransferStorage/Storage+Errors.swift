import PostgresNIO
import TransferPostgres

// What the server and the CLI need around a store beyond opening it, so that only this
// module (and the tests) import a store's module.
extension Storage {
    /// Runs `operation`, or throws `TimedOut` after `limit` (a database that does not answer
    /// makes connection leases wait; callers that must answer promptly bound them).
    public static func withTimeout<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        try await PostgresStore.withTimeout(limit, operation)
    }

    public typealias TimedOut = PostgresStore.TimedOut

    /// A short, secret-free description of a database error for one-line messages.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            return "\(error.code)"
        }
        if error is TimedOut { return "timed out" }
        if let error = error as? PostgresStore.ReadOnlyHost { return error.description }
        return "\(type(of: error))"
    }

    /// What kind of error `error` is, for the log of an unexpected one: its type and, for a
    /// database error, its code and SQLSTATE (never its message or detail, which may quote values).
    public static func kind(of error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(type(of: error))" }
        return "PSQLError \(error.code)" + (error.serverInfo?[.sqlState].map { " \($0)" } ?? "")
    }
}
