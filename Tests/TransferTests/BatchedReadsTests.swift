import Synchronization
import Testing
@testable import TransferPostgres

/// PostgreSQL's logins share a statement (`BatchedReads`): each read must get its own answer,
/// and a failed statement must fail only the reads it carried, unless the database is gone.
@Suite("PostgreSQL batched reads")
struct BatchedReadsTests {
    /// A `run` that records each batch and holds the ones numbered in `held` (from 1) until
    /// `release` of that number. A negative input fails its batch; -2 as an outage.
    final class Statement: Sendable {
        let batches = Mutex<[[Int]]>([])
        typealias Gate = (open: Bool, waiting: CheckedContinuation<Void, Never>?)
        let gates: Mutex<[Int: Gate]>

        init(held: Set<Int>) {
            var gates: [Int: Gate] = [:]
            for number in held { gates[number] = (false, nil) }
            self.gates = Mutex(gates)
        }

        /// Opens every gate: a test that stops early must not leave its reads held, or its task
        /// group would wait for them for ever.
        func releaseAll() {
            let waiting = gates.withLock { gates in
                defer { for number in gates.keys { gates[number] = (true, nil) } }
                return gates.values.compactMap(\.waiting)
            }
            for continuation in waiting { continuation.resume() }
        }

        func release(_ number: Int) {
            gates.withLock { gates in
                defer { gates[number] = (true, nil) }
                return gates[number]?.waiting
            }?.resume()
        }

        func run(_ inputs: [Int]) async throws -> [Int] {
            let number = batches.withLock { batches in
                batches.append(inputs)
                return batches.count
            }
            await withCheckedContinuation { continuation in
                let wait = gates.withLock { gates in
                    guard let gate = gates[number], !gate.open else { return false }
                    gates[number] = (false, continuation)
                    return true
                }
                if !wait { continuation.resume() }
            }
            if inputs.contains(-2) { throw Outage() }
            if inputs.contains(where: { $0 < 0 }) { throw Refused() }
            return inputs.map { $0 * 2 }
        }

        var sent: Int { batches.withLock { $0.count } }
    }

    struct Refused: Error {}
    struct Outage: Error {}

    /// Polls `condition`; fails after a minute (on a loaded machine, other tests that block
    /// the cooperative pool's threads have held a 1 ms sleep up for 20 s).
    static func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            try #require(ContinuousClock.now < deadline, "waited 60 s for \(what)")
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test("a read asked while the statement is free goes alone; those asked meanwhile go together, each answered with its own row, never more than the limit a statement")
    func batches() async throws {
        let reads = BatchedReads<Int, Int>(drainers: 1, batchLimit: 10)
        let statement = Statement(held: [1])
        try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            defer { statement.releaseAll() }
            group.addTask { (0, try await reads.read(0, with: statement.run)) }
            try await Self.waitUntil("the first statement") { statement.sent == 1 }
            for i in 1...25 { group.addTask { (i, try await reads.read(i, with: statement.run)) } }
            try await Self.waitUntil("25 reads queued") { reads.waiting == 25 }
            statement.release(1)
            for try await (input, output) in group { #expect(output == input * 2, "read \(input) got another read's answer") }
        }
        let sizes = statement.batches.withLock { $0.map(\.count) }
        #expect(sizes == [1, 10, 10, 5])
        #expect(reads.waiting == 0)
    }

    @Test("a statement that fails fails the reads it carried, and only those: the reads waiting meanwhile go out next")
    func failureStaysInItsBatch() async throws {
        let reads = BatchedReads<Int, Int>(drainers: 1)
        let statement = Statement(held: [1, 2])
        try await withThrowingTaskGroup(of: Void.self) { group in
            defer { statement.releaseAll() }
            group.addTask {
                let answer = try await reads.read(1, with: statement.run)
                #expect(answer == 2)
            }
            try await Self.waitUntil("the first statement") { statement.sent == 1 }
            for i in [-1, 2] {
                group.addTask { await #expect(throws: Refused.self) { try await reads.read(i, with: statement.run) } }
            }
            try await Self.waitUntil("2 reads queued") { reads.waiting == 2 }
            statement.release(1)
            try await Self.waitUntil("the failing statement") { statement.sent == 2 }
            group.addTask {
                let answer = try await reads.read(3, with: statement.run)
                #expect(answer == 6, "the read after a failed batch")
            }
            try await Self.waitUntil("1 read queued") { reads.waiting == 1 }
            statement.release(2)
            try await group.waitForAll()
        }
        #expect(statement.batches.withLock { $0 } == [[1], [-1, 2], [3]])
    }

    @Test("a statement that finds the database gone fails the reads waiting meanwhile too, at once, instead of each batch waiting out its deadline")
    func outageFailsTheWaiting() async throws {
        let reads = BatchedReads<Int, Int>(drainers: 1) { $0 is Outage }
        let statement = Statement(held: [1])
        try await withThrowingTaskGroup(of: Void.self) { group in
            defer { statement.releaseAll() }
            group.addTask { await #expect(throws: Outage.self) { try await reads.read(-2, with: statement.run) } }
            try await Self.waitUntil("the first statement") { statement.sent == 1 }
            for i in [4, 5] {
                group.addTask { await #expect(throws: Outage.self) { try await reads.read(i, with: statement.run) } }
            }
            try await Self.waitUntil("2 reads queued") { reads.waiting == 2 }
            statement.release(1)
            try await group.waitForAll()
        }
        #expect(statement.sent == 1, "the reads that waited were sent after the outage")
        #expect(try await reads.read(6, with: statement.run) == 12, "a read after the outage is sent")
    }
}
