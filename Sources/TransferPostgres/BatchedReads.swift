import Synchronization

/// Reads of concurrent requests sent as one statement: PostgreSQL's counterpart of the
/// SQLite store's `GroupRead`.
///
/// A read waits in a queue; a drainer (at most `drainers` at a time) takes every read waiting,
/// up to `batchLimit`, and answers them with one call of `run`: one connection lease, one
/// statement and one round trip for the batch, where each login used to pay all three (on
/// the server the lease, deadline and row stream, on PostgreSQL the statement's execution).
/// The statement begins after the batch was taken, so each read sees every commit made
/// before it was asked for: a claim, revocation, removal or deletion answered a moment ago.
///
/// Nothing waits for a batch to fill: a read asked while a drainer is free is sent at once,
/// alone, and reads asked meanwhile make up the next batch.
final class BatchedReads<Input: Sendable, Output: Sendable>: Sendable {
    private struct Job: Sendable {
        let input: Input
        let continuation: CheckedContinuation<Output, any Error>
    }

    private struct Queue {
        var jobs: [Job] = []
        var drainers = 0
    }

    private let queue = Mutex(Queue())
    let drainers: Int
    let batchLimit: Int
    /// Whether a failure of `run` says the database cannot be reached: the reads waiting
    /// meanwhile then fail with it at once, instead of each batch waiting out its own deadline
    /// (a request must hear `503` within 2 seconds of an outage).
    let isOutage: @Sendable (any Error) -> Bool

    init(drainers: Int, batchLimit: Int = 128, isOutage: @escaping @Sendable (any Error) -> Bool = { _ in false }) {
        precondition(drainers > 0 && batchLimit > 0)
        self.drainers = drainers
        self.batchLimit = batchLimit
        self.isOutage = isOutage
    }

    /// The answer to `input`, from a call of `run` with it and the inputs of the reads waiting
    /// beside it. `run` answers its inputs in their order, one output each; every caller
    /// passes the same function (the one given by the read that starts a drainer serves the
    /// reads it drains). An error of `run` fails every read of its batch, and every read
    /// waiting when it is an outage (`isOutage`).
    func read(_ input: Input, with run: @escaping @Sendable ([Input]) async throws -> [Output]) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            let start = queue.withLock { queue in
                queue.jobs.append(Job(input: input, continuation: continuation))
                guard queue.drainers < drainers else { return false }
                queue.drainers += 1
                return true
            }
            if start { Task { await self.drain(run) } }
        }
    }

    /// Reads asked and not yet taken into a batch.
    var waiting: Int { queue.withLock { $0.jobs.count } }

    private func drain(_ run: @Sendable ([Input]) async throws -> [Output]) async {
        while true {
            let batch = queue.withLock { queue -> [Job] in
                if queue.jobs.isEmpty {
                    queue.drainers -= 1
                    return []
                }
                let count = min(queue.jobs.count, batchLimit)
                defer { queue.jobs.removeFirst(count) }
                return Array(queue.jobs.prefix(count))
            }
            if batch.isEmpty { return }
            do {
                let outputs = try await run(batch.map(\.input))
                precondition(outputs.count == batch.count, "a batched read answers each of its inputs")
                for (job, output) in zip(batch, outputs) { job.continuation.resume(returning: output) }
            } catch {
                var failed = batch
                if isOutage(error) {
                    failed += queue.withLock { queue -> [Job] in
                        defer { queue.jobs.removeAll(keepingCapacity: true) }
                        return queue.jobs
                    }
                }
                for job in failed { job.continuation.resume(throwing: error) }
            }
        }
    }
}
