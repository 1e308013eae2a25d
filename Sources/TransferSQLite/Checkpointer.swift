import Dispatch
import GRDB
import Synchronization

/// Copies committed WAL frames into the database file from its own connection and thread,
/// so the single writer does not do it between two transactions.
///
/// SQLite's automatic checkpoint runs on the connection that commits: on a busy server the
/// writer stopped every few hundred logins to copy pages and fsync the database file. Here a
/// PASSIVE checkpoint (it never blocks the writer or readers) runs every `interval`; the
/// writer's own automatic checkpoint stays on as the bound on the WAL's size and as what
/// restarts the WAL, and finds almost nothing left to copy. An idle server does no work:
/// a round without a commit since the last one is skipped.
final class Checkpointer: Sendable {
    private let connection: DatabaseQueue
    private let queue = DispatchQueue(label: "transfer.sqlite.checkpoint", qos: .utility)
    private let interval: DispatchTimeInterval
    private let stopped = Atomic<Bool>(false)
    private let commits: GroupCommit

    init(path: String, interval: DispatchTimeInterval, commits: GroupCommit) throws {
        var config = Configuration()
        config.label = "checkpoint"
        connection = try DatabaseQueue(path: path, configuration: config)
        self.interval = interval
        self.commits = commits
        schedule()
    }

    private func schedule() {
        // Weak: a store released without `close()` takes its checkpointer with it.
        queue.asyncAfter(deadline: .now() + interval) { [weak self] in
            guard let self, !stopped.load(ordering: .acquiring) else { return }
            if commits.committedSinceLastAsked() {
                // A failure (e.g. the file is busy with a support tool's TRUNCATE) is retried next time.
                _ = try? connection.writeWithoutTransaction { db in try db.checkpoint(.passive) }
            }
            schedule()
        }
    }

    /// Stops the loop and waits for a checkpoint in progress.
    func stop() throws {
        stopped.store(true, ordering: .releasing)
        queue.sync {}
        try connection.close()
    }
}
