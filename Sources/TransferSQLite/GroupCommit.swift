import GRDB
import Synchronization

/// Group commit for SQLite's single writer.
///
/// Write requests that arrive while a transaction is being written wait in a queue; the
/// writer then runs all of them in the next transaction, each inside its own savepoint,
/// and commits once. A request is answered only after the commit that contains it, so
/// durability is exactly that of one transaction per request; a request whose body throws
/// is rolled back to its savepoint alone and the others still commit. Under light load a
/// batch holds one request and this is an ordinary transaction.
///
/// Why: on auto-login the serialized writer, not the CPU, was the limit. Per-commit costs
/// (WAL frame writes for the pages every login touches — the tail pages of the session,
/// refresh-token and audit tables — locking, the commit itself) are paid once a batch.
final class GroupCommit: Sendable {
    private struct Job: Sendable {
        /// Runs the request's body in a savepoint (on the writer).
        let execute: @Sendable (Database) -> Void
        /// Answers the request: with its own result when `commitError` is nil.
        let complete: @Sendable (_ commitError: (any Error)?) -> Void
    }

    private struct Queue {
        var jobs: [Job] = []
        var draining = false
    }

    private let writer: DatabasePool
    private let maxBatch: Int
    private let queue = Mutex(Queue())
    /// The most requests one transaction has held so far (for tests and diagnostics).
    let largestBatch = Mutex(0)
    private let committed = Atomic<Bool>(false)

    /// Whether a transaction has committed since the previous call (for `Checkpointer`).
    func committedSinceLastAsked() -> Bool {
        committed.exchange(false, ordering: .acquiringAndReleasing)
    }

    init(writer: DatabasePool, maxBatch: Int = 256) {
        self.writer = writer
        self.maxBatch = maxBatch
    }

    /// Runs `body` in a transaction shared with other concurrent requests; returns once
    /// that transaction has committed.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let slot = Slot<T>()
        return try await withCheckedThrowingContinuation { continuation in
            let job = Job(
                execute: { db in
                    let result: Result<T, any Error>
                    do {
                        var value: T?
                        try db.inSavepoint {
                            value = try body(db)
                            return .commit
                        }
                        result = .success(value!)
                    } catch {
                        result = .failure(error)
                    }
                    slot.result.withLock { $0 = result }
                },
                complete: { commitError in
                    if let commitError {
                        continuation.resume(throwing: commitError)
                    } else {
                        continuation.resume(with: slot.result.withLock { $0 } ?? .failure(Aborted()))
                    }
                })
            let start = queue.withLock { queue in
                queue.jobs.append(job)
                defer { queue.draining = true }
                return !queue.draining
            }
            if start { writer.asyncWriteWithoutTransaction { db in self.drain(db) } }
        }
    }

    /// Runs batches until the queue is empty. Only one drain runs at a time.
    private func drain(_ db: Database) {
        while true {
            let batch: [Job] = queue.withLock { queue in
                guard !queue.jobs.isEmpty else {
                    queue.draining = false
                    return []
                }
                let count = min(queue.jobs.count, maxBatch)
                defer { queue.jobs.removeFirst(count) }
                return Array(queue.jobs.prefix(count))
            }
            guard !batch.isEmpty else { return }
            largestBatch.withLock { $0 = max($0, batch.count) }
            do {
                try db.inTransaction(.immediate) {
                    for job in batch {
                        // SQLite rolls the whole transaction back by itself on some errors (disk
                        // full, I/O); what would follow must not run outside it.
                        guard db.isInsideTransaction else { throw Aborted() }
                        job.execute(db)
                    }
                    return .commit
                }
                committed.store(true, ordering: .releasing)
                for job in batch { job.complete(nil) }
            } catch {
                for job in batch { job.complete(error) }
            }
        }
    }

    /// The shared transaction ended before this request's result was known.
    struct Aborted: Error {}

    /// Where a request's result waits for its transaction's commit.
    private final class Slot<T: Sendable>: Sendable {
        let result = Mutex<Result<T, any Error>?>(nil)
    }
}
