import Foundation
import GRDB
import Testing
import TransferCore
@testable import TransferSQLite
@testable import TransferTestSupport

/// SQLite writes from concurrent requests share transactions; each request must still be
/// all-or-nothing on its own, and be answered only once its transaction has committed.
@Suite("SQLite group commit")
struct GroupCommitTests {
    struct Refused: Error, Equatable { let value: Int }

    @Test("a request that fails inside a shared transaction is rolled back alone; the others commit")
    func failureIsIsolated() async throws {
        try await SQLiteStore.withTemporary { store in
            try await store.pool.write { db in try db.execute(sql: "CREATE TABLE probe (v INTEGER PRIMARY KEY)") }

            // Hold the writer so that the requests below queue up and run as one batch.
            let holder = Task { try await store.pool.writeWithoutTransaction { _ in Thread.sleep(forTimeInterval: 0.3) } }
            try await Task.sleep(for: .milliseconds(50))
            let outcomes = await withTaskGroup(of: (Int, Result<Int, Refused>).self) { group in
                for i in 0..<100 {
                    group.addTask {
                        do {
                            let value = try await store.commits.write { db in
                                try db.execute(sql: "INSERT INTO probe (v) VALUES (?)", arguments: [i])
                                // Every tenth request fails after writing: its row must not survive.
                                if i % 10 == 0 { throw Refused(value: i) }
                                return i
                            }
                            return (i, .success(value))
                        } catch {
                            return (i, .failure((error as? Refused) ?? Refused(value: -1)))
                        }
                    }
                }
                return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            try await holder.value

            #expect(store.commits.largestBatch.withLock { $0 } > 1)
            for (i, outcome) in outcomes {
                #expect(outcome == (i % 10 == 0 ? .failure(Refused(value: i)) : .success(i)))
            }
            let stored = try await store.pool.read { db in try Int.fetchAll(db, sql: "SELECT v FROM probe ORDER BY v") }
            #expect(stored == (0..<100).filter { $0 % 10 != 0 })
        }
    }

    @Test("answers come after the commit: a reader sees each acknowledged write")
    func acknowledgedMeansCommitted() async throws {
        try await SQLiteStore.withTemporary { store in
            try await store.pool.write { db in try db.execute(sql: "CREATE TABLE probe (v INTEGER PRIMARY KEY)") }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<50 {
                    group.addTask {
                        try await store.commits.write { db in try db.execute(sql: "INSERT INTO probe (v) VALUES (?)", arguments: [i]) }
                        // A separate connection: only committed rows are visible to it.
                        let seen = try await store.pool.read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM probe WHERE v = ?)", arguments: [i]) }
                        #expect(seen == true)
                    }
                }
                try await group.waitForAll()
            }
        }
    }
}

@Suite("SQLite group read")
struct GroupReadTests {
    @Test("readiness is read on the connections logins read on: with them gone, the store is not ready")
    func pingUsesTheLoginReaders() async throws {
        try await SQLiteStore.withTemporary { store in
            try await store.ping()
            try store.reads.close()
            await #expect(throws: (any Error).self, "ping must fail once logins can no longer read") { try await store.ping() }
            // The pool's readers still answer: a ping through them would have stayed green.
            #expect(try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT 1") } == 1)
        }
    }
}

@Suite("Identifiers and tokens")
struct IdentifierTests {
    @Test("new row ids are lower-case UUIDv7, ordered by creation time")
    func uuidV7() {
        let earlier = Identifier.make(at: Timestamp(milliseconds: 1_790_000_000_000))
        let later = Identifier.make(at: Timestamp(milliseconds: 1_790_000_000_001))
        for id in [earlier, later, Identifier.make()] {
            #expect(DeviceID(id)?.value == id)  // canonical 8-4-4-4-12, lower-case
            #expect(Array(id)[14] == "7")
            #expect("89ab".contains(Array(id)[19]))
        }
        #expect(earlier < later)
        #expect(Set((0..<1000).map { _ in Identifier.make() }).count == 1000)
    }

    @Test("base64url matches Foundation's base64 with the URL alphabet and no padding")
    func base64url() {
        for count in 0..<70 {
            let bytes = RandomToken.randomBytes(count)
            let expected = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected)
        }
        #expect(RandomToken.make().count == 43)  // 32 bytes
        #expect(RandomToken.make() != RandomToken.make())
    }

    @Test("random bytes: as many as asked, filled to the last byte, never the same twice")
    func randomBytes() {
        for count in [1, 16, 64, 300] {
            let draws = (0..<64).map { _ in RandomToken.randomBytes(count) }
            #expect(draws.allSatisfy { $0.count == count })
            // Each position is nonzero in some draw: nothing is left unfilled (a zero byte is 1 in 256).
            #expect((0..<count).allSatisfy { i in draws.contains { $0[i] != 0 } }, "bytes left unfilled in \(count)")
            if count >= 16 { #expect(Set(draws).count == draws.count, "a draw of \(count) bytes repeated") }
        }
    }
}
