import Foundation
import Testing

/// `schema.sql` (SQLite) is the current schema; `schema.postgres.sql` says the same in
/// PostgreSQL's dialect. Their tables, columns, checks and indexes must not drift apart.
@Suite("Schema parity")
struct SchemaParityTests {
    struct Shape: Equatable, CustomStringConvertible {
        var tables: [String: [String]] = [:]
        var checks: [String: [String]] = [:]
        var indexes: [String] = []
        var description: String { "tables \(tables)\nchecks \(checks)\nindexes \(indexes)" }
    }

    static func shape(of file: String) throws -> Shape {
        let text = try String(contentsOf: ProcessTests.root.appendingPathComponent(file), encoding: .utf8)
        let sql = text.split(separator: "\n").map { line in line.range(of: "--").map { String(line[..<$0.lowerBound]) } ?? String(line) }
            .joined(separator: "\n")
        var shape = Shape()
        for statement in sql.components(separatedBy: ";") {
            let s = statement.trimmingCharacters(in: .whitespacesAndNewlines)
            if s.hasPrefix("CREATE TABLE") {
                let name = s.split(separator: " ")[2].description
                let body = s[s.index(after: s.firstIndex(of: "(")!)..<s.lastIndex(of: ")")!]
                var columns: [String] = [], checks: [String] = []
                for line in body.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) where !line.isEmpty {
                    if line.hasPrefix("FOREIGN KEY") {
                        continue  // PostgreSQL adds the circular devices → device_accounts key with ALTER TABLE
                    } else if line.hasPrefix("CHECK") {
                        checks.append(line.trimmingCharacters(in: CharacterSet(charactersIn: ",")))
                    } else {
                        columns.append(String(line.split(separator: " ")[0]))
                        if let check = line.range(of: "CHECK") {
                            checks.append(String(line[check.lowerBound...]).trimmingCharacters(in: CharacterSet(charactersIn: ",")))
                        }
                    }
                }
                shape.tables[name] = columns
                shape.checks[name] = checks
            } else if s.hasPrefix("CREATE UNIQUE INDEX") || s.hasPrefix("CREATE INDEX") {
                shape.indexes.append(s.split(whereSeparator: \.isWhitespace).joined(separator: " "))
            }
        }
        return shape
    }

    @Test("both dialects define the same tables, columns, checks and indexes")
    func sameShape() throws {
        let sqlite = try Self.shape(of: "schema.sql")
        let postgres = try Self.shape(of: "schema.postgres.sql")
        #expect(sqlite.tables.count == 18, "v13 added attestation_challenges: \(sqlite.tables.keys.sorted())")
        #expect(sqlite.tables == postgres.tables)
        #expect(sqlite.checks == postgres.checks)
        #expect(sqlite.indexes == postgres.indexes)
    }
}
