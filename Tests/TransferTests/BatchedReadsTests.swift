import Synchronization
import Testing
@testable import TransferPostgres

/// PostgreSQL's logins share a statement (`BatchedReads`): each read must get its own answer,
/// and a failed statement must fail only the reads it carried.
@Suite("PostgreSQL batched reads")
struct BatchedReadsTests {
    /// A `run` that records each batch and holds the first one until `release()`.
    final class Statement: Sendable {
        let batches = Mutex<[[Int]]>([])
        let gate = Mutex<(open: Bool, waiting: CheckedContinuation<Void, Never>?)>((false, nil))

        func release() {
            gate.withLock { gate in
                gate.open = true
                defer { gate.waiting = nil }
                return gate.waiting
            }?.resume()
        }

        func run(_ inputs: [Int]) async throws -> [Int] {
            let first = batches.withLock { batches in
                batches.append(inputs)
                return batches.count == 1
            }
            if first {
                await withCheckedContinuation { continuation in
                    let open = gate.withLock { gate in
                        if !gate.open { gate.waiting = continuation }
                        return gate.open
                    }
                    if open { continuation.resume() }
                }
            }
            if inputs.contains(where: { $0 < 0 }) { throw Refused() }
            return inputs.map { $0 * 2 }
        }
    }

    struct Refused: Error {}

    static func waitUntil(_ reads: BatchedReads<Int, Int>, holds count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while reads.waiting < count {
            try #require(ContinuousClock.now < deadline, "only \(reads.waiting) of \(count) reads queued")
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test("a read asked while the statement is free goes alone; those asked meanwhile go together, each answered with its own row, never more than the limit a statement")
    func batches() async throws {
        let reads = BatchedReads<Int, Int>(drainers: 1, batchLimit: 10)
        let statement = Statement()
        try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            group.addTask { (0, try await reads.read(0, with: statement.run)) }
            while statement.batches.withLock({ $0.count }) == 0 { try await Task.sleep(for: .milliseconds(1)) }
            for i in 1...25 { group.addTask { (i, try await reads.read(i, with: statement.run)) } }
            try await Self.waitUntil(reads, holds: 25)
            statement.release()
            for try await (input, output) in group { #expect(output == input * 2, "read \(input) got another read's answer") }
        }
        let sizes = statement.batches.withLock { $0.map(\.count) }
        #expect(sizes == [1, 10, 10, 5])
        #expect(reads.waiting == 0)
    }

    @Test("a statement that fails fails the reads it carried, and only those: the next batch is answered")
    func failureStaysInItsBatch() async throws {
        let reads = BatchedReads<Int, Int>(drainers: 1)
        let statement = Statement()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                let answer = try await reads.read(1, with: statement.run)
                #expect(answer == 2)
            }
            while statement.batches.withLock({ $0.count }) == 0 { try await Task.sleep(for: .milliseconds(1)) }
            for i in [-1, 2] {
                group.addTask { await #expect(throws: Refused.self) { try await reads.read(i, with: statement.run) } }
            }
            try await Self.waitUntil(reads, holds: 2)
            statement.release()
            try await group.waitForAll()
        }
        #expect(try await reads.read(3, with: statement.run) == 6, "the drainer went on after a failed batch")
        #expect(statement.batches.withLock { $0 } == [[1], [-1, 2], [3]])
    }
}
