import Testing
import TransferCore
import TransferSQL
@testable import TransferTestSupport

/// How any list of facts is read, without a database: the statements a store is asked to run.
@Suite("Facts read by their declarations")
struct FactsPlanTests {
    let t0 = Timestamp(milliseconds: 1_795_000_000_000)

    /// The statements the plan asks for, each answered with no rows, and the facts it files.
    func run(_ keys: [FactKey], lock: Bool = true, dialect: SQLDialect = .postgres) throws -> (statements: [String], facts: Facts) {
        var plan = FactsPlan(keys, at: t0, lock: lock, dialect: dialect)
        var statements: [String] = []
        while let sql = plan.next() {
            statements.append(sql.render(dialect).text)
            try plan.take([NoRow]())
        }
        return (statements, plan.finish())
    }

    @Test("facts are read in the lock order whatever order an operation lists them, and a chained fact brings its source first")
    func lockOrder() throws {
        let token = SecretHash(of: "refresh")
        let (statements, facts) = try run([.account(.id("a")), .refreshTokenDevice(token), .transfer(id: "t")])
        #expect(statements.map { String($0.prefix(30)) } == [
            "SELECT * FROM transfers WHERE ",
            "SELECT device_id, account_id, ",
            "SELECT a.id AS account_id, a.u",
        ], "transfer (rank 0), the refresh token (the device's source; no token, so no device to read), then the account")
        #expect(try facts.refreshToken(token) == nil, "the source is filed though the operation did not list it")
        #expect(try facts.refreshTokenDevice(token) == nil)
        #expect(try facts.account("a") == nil)
    }

    @Test("outside a transaction nothing is locked: a snapshot read writes no row lock on PostgreSQL")
    func snapshotsDoNotLock() throws {
        let keys: [FactKey] = [.device("d"), .account(.id("a")), .recoveryCode(.id("a")), .signingKeys, .appleLinkBySub("s")]
        let unlocked = try run(keys, lock: false).statements
        #expect(!unlocked.contains { $0.contains("FOR UPDATE") || $0.contains("pg_advisory") }, "\(unlocked)")
        let locked = try run(keys, lock: true).statements
        #expect(locked.filter { $0.contains("FOR UPDATE") }.count == 4, "\(locked)")
        #expect(locked.contains { $0.contains("pg_advisory_xact_lock") }, "writers serialise on the signing keys")
    }

    @Test("a code leads to its account inside the statements: the account's facts need no read before the transaction")
    func accountOfACode() throws {
        let code = SecretHash(of: "code")
        let statements = try run([.accountDevices(.ofRecoveryCode(code)), .account(.ofTransferCode(code)), .appleLink(.ofAppleID("s"))]).statements
        #expect(statements.contains { $0.contains("account_id = (SELECT account_id FROM recovery_codes WHERE code_hash = $1)") })
        #expect(statements.contains { $0.contains("a.id = (SELECT account_id FROM transfers WHERE code_hash = $2)") })
        #expect(statements.contains { $0.contains("account_id = (SELECT account_id FROM apple_links WHERE sub = $1)") })
    }
}

extension FactsPlanTests {
    @Test("an undeclared fact's error names the fact's kind, never its lookup key (a token's hash, an Apple ID)")
    func undeclaredFactSaysNoKey() {
        let hash = SecretHash(of: "refresh-token")
        let text = UndeclaredFact(key: .refreshToken(hash)).description + FactKey.appleLinkBySub("001234.apple-sub").description
        #expect(text.contains("refreshToken") && text.contains("appleLinkBySub"), "\(text)")
        #expect(!text.contains("SecretHash") && !text.contains("bytes"), "\(text)")
        #expect(!text.contains("apple-sub"), "\(text)")
        #expect(FactKey.signingKeys.description == "the fact signingKeys")
    }
}

/// A row type for plans answered with no rows.
private struct NoRow: SQLRow {
    func text(_ column: String) throws -> String { fatalError() }
    func textOrNil(_ column: String) throws -> String? { fatalError() }
    func integer(_ column: String) throws -> Int64 { fatalError() }
    func integerOrNil(_ column: String) throws -> Int64? { fatalError() }
    func blob(_ column: String) throws -> [UInt8] { fatalError() }
    func blobOrNil(_ column: String) throws -> [UInt8]? { fatalError() }
    func bool(_ column: String) throws -> Bool { fatalError() }
    func text(at index: Int) throws -> String { fatalError() }
    func textOrNil(at index: Int) throws -> String? { fatalError() }
    func integer(at index: Int) throws -> Int64 { fatalError() }
}
