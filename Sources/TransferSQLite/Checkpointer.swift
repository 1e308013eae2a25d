import Dispatch
import GRDB
import Synchronization

/// Copies committed WAL frames into the database file from its own connection and thread,
/// so the single writer does not do it between two transactions.
///
/// SQLite's automatic checkpoint runs on the connection that commits: on a busy server the
/// writer stopped every few hundred logins to copy pages and fsync the database file. Here a
/// PASSIVE checkpoint (it never blocks the writer or readers) runs every `interval`.
///
/// The WAL only starts over after a checkpoint that has caught up with the writer, which a
/// checkpoint running beside a busy writer rarely does. So once the WAL holds more than
/// `restartFrames`, the writer itself checkpoints between two transactions: it copies only
/// what this connection has not copied yet, and the next transaction restarts the WAL.
/// (Left to SQLite, the writer's automatic checkpoint fired on every commit past its
/// threshold, competing with this one for the checkpoint lock and fsyncing each time.)
/// An idle server does no work: a round without a commit since the last one is skipped.
final class Checkpointer: Sendable {
    private let connection: DatabaseQueue
    private let queue = DispatchQueue(label: "transfer.sqlite.checkpoint", qos: .utility)
    private let interval: DispatchTimeInterval
    private let stopped = Atomic<Bool>(false)
    private let commits: GroupCommit
    private let writer: DatabasePool
    private let restartFrames: Int

    init(path: String, interval: DispatchTimeInterval, commits: GroupCommit, writer: DatabasePool, restartFrames: Int) throws {
        var config = Configuration()
        config.label = "checkpoint"
        connection = try DatabaseQueue(path: path, configuration: config)
        self.interval = interval
        self.commits = commits
        self.writer = writer
        self.restartFrames = restartFrames
        schedule()
    }

    private func schedule() {
        // Weak: a store released without `close()` takes its checkpointer with it.
        queue.asyncAfter(deadline: .now() + interval) { [weak self] in
            guard let self, !stopped.load(ordering: .acquiring) else { return }
            if commits.committedSinceLastAsked() {
                // A failure (e.g. the file is busy with a support tool's TRUNCATE) is retried next time.
                let frames = (try? connection.writeWithoutTransaction { db in try db.checkpoint(.passive) })?.walFrameCount ?? 0
                if frames > restartFrames {
                    _ = try? writer.writeWithoutTransaction { db in try db.checkpoint(.passive) }
                }
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
