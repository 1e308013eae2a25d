import Foundation

extension PostgresStore {
    /// Runs `operation`, or throws `TimedOut` after `limit` (a database that does not answer
    /// makes connection leases wait; callers that must answer promptly bound them). The server
    /// and the CLI reach it as `Storage.withTimeout`.
    public static func withTimeout<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try await Task.sleep(for: limit)
                throw TimedOut()
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    public struct TimedOut: Error, CustomStringConvertible {
        public var description: String { "timed out" }
    }
}
