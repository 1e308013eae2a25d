import Foundation
import GRDB
import Testing
import TransferSQL
@testable import TransferSQLite
@testable import TransferTestSupport

/// The SQLite store reads rows through SQLite's C API (`Database.all`); they must decode as
/// GRDB's rows did, and fail with the column's name where they cannot.
@Suite("SQLite rows")
struct SQLiteRowTests {
    @Test("readers map the file into memory (launches read index pages without a copy each), the writer does not")
    func readersMapTheFile() async throws {
        try await SQLiteStore.withTemporary { store in
            let reader = try await store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA mmap_size") }
            let writer = try await store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA mmap_size") }
            #expect(reader == SQLiteStore.readerMapBytes, "a reader's mmap_size; 0 means this SQLite was built without memory maps")
            #expect(writer != SQLiteStore.readerMapBytes, "the writer's mmap_size")
        }
    }

    @Test("values decode by exact or case-insensitive name and by position, with GRDB's conversions; a mismatch names its column")
    func decoding() async throws {
        try await SQLiteStore.withTemporary { store in
            let bytes: [UInt8] = [0, 1, 255]
            let rows = try await store.pool.read { db in
                try db.all("""
                    SELECT \(Int64(42)) AS n, 7.0 AS whole, 7.5 AS half, \("héllo") AS t, \(bytes) AS b, NULL AS absent,
                           'Mixed' AS CamelCase, CAST('utf8' AS BLOB) AS textBlob, \([UInt8]()) AS empty
                    """)
            }
            #expect(rows.count == 1)
            let row = try #require(rows.first)
            #expect(try row.integer("n") == 42)
            #expect(try row.integer(at: 0) == 42)
            #expect(try row.integer("whole") == 7, "a real reads as an integer, as GRDB read it")
            #expect(try row.integer("half") == 7, "truncated toward zero, as GRDB truncated it")
            #expect(try row.bool("n") && row.bool("half"))
            #expect(try row.text("t") == "héllo")
            #expect(try row.text(at: 3) == "héllo")
            #expect(try row.blob("b") == bytes)
            #expect(try row.blob("empty") == [])
            #expect(try row.textOrNil("absent") == nil && row.integerOrNil("absent") == nil && row.blobOrNil("absent") == nil)
            #expect(try row.text("camelcase") == "Mixed", "SQLite's names are case-insensitive")
            #expect(try row.text("textBlob") == "utf8")

            #expect(throws: SQLiteRow.Mismatch.self, "NULL in a non-optional column") { try row.text("absent") }
            #expect(throws: SQLiteRow.Mismatch.self, "text is not an integer") { try row.integer("t") }
            #expect(throws: SQLiteRow.Mismatch.self, "no such column") { try row.text("missing") }
            do {
                _ = try row.text("absent")
            } catch {
                #expect("\(error)".contains("absent"), "the error names the column: \(error)")
            }
        }
    }

    @Test("a failing statement throws GRDB's DatabaseError with SQLite's code and no bound value; its cached statement works again after it")
    func failure() async throws {
        try await SQLiteStore.withTemporary { store in
            try await store.pool.write { db in
                try db.execute(sql: "CREATE TABLE probe (v INTEGER PRIMARY KEY, note TEXT)")
                try db.execute(sql: "INSERT INTO probe (v) VALUES (1)")
            }
            try await store.pool.write { db in
                let insert: SQLText = "INSERT INTO probe (v, note) VALUES (\(Int64(1)), \("secret-value")) RETURNING v"
                let error = try #require(throws: DatabaseError.self) { try db.all(insert) }
                #expect(error.extendedResultCode == .SQLITE_CONSTRAINT_PRIMARYKEY)
                #expect(!"\(error)".contains("secret-value"), "a bound value reached the error: \(error)")
                let again: SQLText = "INSERT INTO probe (v, note) VALUES (\(Int64(2)), \("x")) RETURNING v"
                #expect(try db.all(again).first?.integer("v") == 2)
            }
        }
    }

    @Test("one statement text read by `all` and run by GRDB, in either order, binds its own values each time")
    func sharedStatement() async throws {
        try await SQLiteStore.withTemporary { store in
            try await store.pool.write { db in
                try db.execute(sql: "CREATE TABLE probe (v INTEGER PRIMARY KEY)")
                try db.execute(sql: "INSERT INTO probe (v) VALUES (1), (2), (3)")
            }
            try await store.pool.write { db in
                func select(_ v: Int64) -> SQLText { "SELECT v FROM probe WHERE v >= \(v)" }
                // GRDB runs the text (binding 3, then stepping it to its end), then `all` reads it with 2.
                try db.run(select(3))
                #expect(try db.all(select(2)).map { try $0.integer("v") } == [2, 3])
                // And GRDB again after `all`: it binds its own value, not what `all` left.
                let (statement, _) = try db.statement(select(1))
                #expect(try Int64.fetchAll(statement, arguments: [Int64(3)]) == [3])
                #expect(try db.all(select(1)).count == 3)
            }
        }
    }
}
