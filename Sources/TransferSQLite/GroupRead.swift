import GRDB
import Synchronization

/// Group read: the reads of concurrent requests share a read transaction, as their writes
/// share one in `GroupCommit`.
///
/// A read waits in a queue; a drainer (one for each of the group's own read-only
/// connections) takes every read waiting, opens a read transaction and runs them one after
/// another on that snapshot; then the next batch, on a new snapshot, while reads wait. The
/// snapshot begins after the batch was taken, so a read sees every commit made before it was
/// asked for: a claim, revocation, removal or deletion answered a moment ago. Reads never wait
/// for the writer (WAL).
///
/// Why: a no-write login is a few index lookups (about 30 µs), and GRDB's asynchronous `read`
/// cost each one two thread switches besides, more than the SQL. Measured A/B, logins read
/// one by one ran at 70 % of the logins that still wrote through the group commit. The
/// connections are the group's own, not the pool's: the pool's `asyncRead` is two dispatches
/// (one to wait for a free reader, one to the reader), a drainer's is one.
final class GroupRead: Sendable {
    private struct Job: Sendable {
        let run: @Sendable (Result<Database, any Error>) -> Void
    }

    private struct Queue {
        var jobs: [Job] = []
        /// The connections no drainer runs on.
        var idle: [Int]
    }

    private let readers: [DatabaseQueue]
    private let queue: Mutex<Queue>

    /// `readers`: read-only connections to the database, each drained by one drainer at a time.
    init(readers: [DatabaseQueue]) {
        self.readers = readers
        queue = Mutex(Queue(idle: Array(readers.indices)))
    }

    func close() throws {
        for reader in readers { try reader.close() }
    }

    /// Runs `body` on a snapshot that holds every commit made before this call.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let job = Job { db in continuation.resume(with: Result { try body(db.get()) }) }
            let reader = queue.withLock { queue in
                queue.jobs.append(job)
                return queue.idle.popLast()
            }
            if let reader { drain(reader) }
        }
    }

    /// Batches on one connection, each on a new snapshot, while reads are waiting; then the
    /// last snapshot ends (an open one would hold the WAL's checkpoints back) and the
    /// connection is idle again.
    private func drain(_ index: Int) {
        readers[index].asyncUnsafeRead { opened in
            while true {
                let batch = self.queue.withLock { queue in
                    if queue.jobs.isEmpty { queue.idle.append(index) }
                    defer { queue.jobs.removeAll(keepingCapacity: true) }
                    return queue.jobs
                }
                // A new drain of this connection waits on its serial queue until this one has
                // returned, with no transaction left (GRDB stops the process on one).
                if batch.isEmpty {
                    if case .success(let db) = opened { Self.endSnapshot(db) }
                    return
                }
                let db = opened.flatMap { db in
                    Result {
                        Self.endSnapshot(db)
                        try db.beginTransaction(.deferred)
                        return db
                    }
                }
                for job in batch { job.run(db) }
            }
        }
    }

    /// Ends the last batch's read transaction, if SQLite still holds one (a failure it answers
    /// with a rollback of its own, out of memory or an I/O error, leaves none): committed, or
    /// rolled back when the commit fails, as GRDB's own reads end theirs.
    static func endSnapshot(_ db: Database) {
        guard db.isInsideTransaction else { return }
        do { try db.commit() } catch { try? db.rollback() }
    }
}
