import Foundation
import PostgresNIO
import TransferCore
import TransferSQL

/// The PostgreSQL fast path of auto-login: the one request every launch makes.
extension PostgresStore {
    /// A login of an open session is one SELECT, on the primary (every claim, revocation,
    /// removal and deletion committed before it is seen): within the activity resolution
    /// (`LoginCommand.writes`, the core's rule) that row is the answer and nothing is written.
    /// When activity is due, the one-statement UPDATE renews the session; any other case (no
    /// open session, a refusal, a new account, a race) runs `LoginCommand` through `execute`.
    public func login(_ c: LoginCommand) async throws -> Result<SessionGrant, TransferError> {
        if let open = try await openSession(c) {
            if !c.writes(lastLoginAt: open.lastLoginAt, sessionExpiresAt: open.row.session.expiresAt),
                var grant = open.row.grant(c)
            {
                grant.wrote = false
                return .success(grant)
            }
            if let grant = try await renewOpenSession(c) { return .success(grant) }
        }
        return try await execute(c)
    }

    /// The account a login of `target` is for (nil: the device's current one); nil for a new account.
    private func loginAccount(of target: LoginTarget) -> String?? {
        switch target {
        case .current: .some(nil)
        case .account(let id): .some(id)
        case .newAccount: nil
        }
    }

    /// The pair's open session as `RenewOpenSession` would renew it, read without writing; nil:
    /// not that case. Concurrent logins share the statement (`BatchedReads`).
    func openSession(_ c: LoginCommand) async throws -> OpenSession? {
        // An empty account id is no account (and would read as the batch's "current" sentinel).
        guard case .some(let account) = loginAccount(of: c.target), account?.isEmpty != true else { return nil }
        return try await openSessions.read(ReadOpenSessions.Login(command: c, account: account)) { [self] logins in
            let rows = try await withConnection { [self] conn in try await all(conn, ReadOpenSessions(logins: logins)) }
            var found = [OpenSession?](repeating: nil, count: logins.count)
            for (index, row) in rows where found.indices.contains(index) { found[index] = row }
            return found
        }
    }

    typealias OpenSession = (row: RenewOpenSession.Row, lastLoginAt: Timestamp?)

    /// The common case of `LoginCommand` when activity is due (the device's secret matches, the
    /// account is on it and its session is open) as one statement: one round trip and one row
    /// written instead of a transaction. The UPDATE's row lock and WHERE clause are the
    /// check-then-act: a claim or removal that ends the pair at the same time either commits
    /// first (no row: the transaction path then answers with the real state) or waits for this
    /// login. The secret is compared as SHA-256 digests, so the comparison's timing tells nothing.
    /// `nil`: not that case; the caller runs `LoginCommand` through `execute`.
    func renewOpenSession(_ c: LoginCommand) async throws -> SessionGrant? {
        guard case .some(let account) = loginAccount(of: c.target) else { return nil }
        let renewed: RenewOpenSession.Row? = try await withConnection(writes: true) { [self] conn in
            try await first(conn, RenewOpenSession(command: c, account: account))
        }
        return renewed?.grant(c)
    }

    /// What both statements answer, from the pair `p`, its account `a`, the device's current
    /// account `current` and the device's accounts `l` (`deviceAccounts`); `now` is their parameter.
    static func answerColumns(now: String, current: String) -> String {
        """
        p.account_id, a.user_name,
               \(SQLText.migrationFlag(now: SQLText(stringLiteral: now)).unboundText(.postgres)) AS flag,
               p.session_id, p.session_started_at, p.refresh_generation, p.refresh_hash, p.key_by_device, \(current), l.ids, l.names
        """
    }

    /// The device's active accounts, ids and names in the order they were added, as `l`: one
    /// scan of its pairs (an aggregate always answers one row; the login's own pair is among them).
    static func deviceAccounts(device: String) -> String {
        """
        CROSS JOIN LATERAL (
                SELECT COALESCE(array_agg(o.account_id ORDER BY o.added_at, o.account_id), '{}') AS ids,
                       COALESCE(array_agg(u.user_name ORDER BY o.added_at, o.account_id), '{}') AS names
                FROM device_accounts o JOIN accounts u ON u.id = o.account_id
                WHERE o.device_id = \(device) AND o.state = 'active') l
        """
    }

    /// The read of `RenewOpenSession` for a batch of logins: the login's place in the batch
    /// (`i`, from 0) and what decides whether it writes, then the same answer, on the same
    /// conditions. A login that is not that case has no row. Prepared, like it.
    struct ReadOpenSessions: PostgresPreparedStatement {
        static let sql = """
            SELECT r.i - 1, p.refresh_expires_at, p.last_login_at,
                   \(PostgresStore.answerColumns(now: "r.at_ms", current: "d.current_account_id"))
            FROM unnest($1::bigint[], $2::text[], $3::bytea[], $4::text[]) WITH ORDINALITY AS r(at_ms, device_id, secret_hash, account_id, i)
            JOIN devices d ON d.id = r.device_id AND d.secret_hash = r.secret_hash AND d.retired_at IS NULL
            JOIN device_accounts p ON p.device_id = d.id AND p.account_id = COALESCE(NULLIF(r.account_id, ''), d.current_account_id)
            JOIN accounts a ON a.id = p.account_id
            \(PostgresStore.deviceAccounts(device: "r.device_id"))
            WHERE p.state = 'active' AND p.session_id IS NOT NULL AND p.refresh_expires_at > r.at_ms AND p.key_by_device IS NOT NULL
            """

        /// One login of the batch; `account` nil: the device's current account (sent as '',
        /// which no account id is: arrays of PostgresNIO hold no NULL).
        struct Login: Sendable {
            let command: LoginCommand
            let account: String?
        }
        let logins: [Login]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 4)
            bindings.append(logins.map(\.command.now.milliseconds))
            bindings.append(logins.map(\.command.deviceID.value))
            bindings.append(logins.map { ByteBuffer(bytes: $0.command.secretHash.bytes) })
            bindings.append(logins.map { $0.account ?? "" })
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> (Int, OpenSession) {
            var cells = Cells(row)
            let index = try cells.next(Int64.self), expiresAt = try cells.next(Int64.self), lastLoginAt = try cells.next(Int64?.self)
            let answer = try RenewOpenSession.Row(&cells, expiresAt: Timestamp(milliseconds: expiresAt))
            return (Int(index), (answer, lastLoginAt.map(Timestamp.init(milliseconds:))))
        }
    }

    /// A prepared statement: each pooled connection plans it once, not on every login (through
    /// a pooler in transaction mode, it is sent unnamed each time: `first`).
    /// PostgresNIO numbers its parameters, so the migration flag (written once in TransferSQL)
    /// comes in as a fragment that binds nothing; `unboundText` stops the program, and the
    /// login tests fail, the day it binds a value.
    struct RenewOpenSession: PostgresPreparedStatement {
        static let sql = """
            WITH p AS (
                UPDATE device_accounts p SET refresh_expires_at = $1, last_login_at = $2, last_address = $3
                FROM devices d
                WHERE d.id = $4 AND d.secret_hash = $5 AND d.retired_at IS NULL
                  AND p.device_id = d.id AND p.account_id = COALESCE($6::text, d.current_account_id)
                  AND p.state = 'active' AND p.session_id IS NOT NULL AND p.refresh_expires_at > $2 AND p.key_by_device IS NOT NULL
                RETURNING p.account_id, p.session_id, p.session_started_at, p.refresh_generation, p.refresh_hash, p.key_by_device,
                          d.current_account_id
            )
            SELECT \(PostgresStore.answerColumns(now: "$2", current: "p.current_account_id"))
            FROM p JOIN accounts a ON a.id = p.account_id \(PostgresStore.deviceAccounts(device: "$4"))
            """
        struct Row {
            var account: AccountSummary
            var session: PairSession
            var accounts: [ListedAccount]

            /// From `answerColumns`, in their order; the expiry is the caller's (the answer does not hold it).
            init(_ cells: inout Cells, expiresAt: Timestamp) throws {
                let id = try cells.next(String.self), userName = try cells.next(String.self), flag = try cells.next(Bool.self)
                let sessionID = try cells.next(String.self), startedAt = try cells.next(Int64.self)
                let generation = try cells.next(Int64.self), hash = try cells.next(ByteBuffer.self), key = try cells.next(ByteBuffer.self)
                let current = try cells.next(String?.self), ids = try cells.next([String].self), names = try cells.next([String].self)
                account = AccountSummary(accountID: id, userName: userName, migrationFlag: flag)
                session = PairSession(
                    sessionID: sessionID, startedAt: Timestamp(milliseconds: startedAt), generation: Int(generation),
                    refreshHash: SecretHash(bytes: [UInt8](hash.readableBytesView)), expiresAt: expiresAt,
                    keyByDevice: [UInt8](key.readableBytesView), keyByToken: nil)
                accounts = zip(ids, names).map { ListedAccount(accountID: $0, userName: $1, current: $0 == current) }
            }

            /// The login's answer; nil when the device secret does not give the session's token
            /// (a session from schema v2: the transaction path opens a new one).
            func grant(_ c: LoginCommand) -> SessionGrant? {
                guard let token = session.currentToken(deviceSecret: c.deviceSecret) else { return nil }
                return SessionGrant(
                    account: account, deviceID: c.deviceID.value, sessionID: session.sessionID, refreshToken: token, created: false,
                    accounts: accounts)
            }
        }
        let command: LoginCommand
        let account: String?

        func makeBindings() throws -> PostgresBindings {
            let c = command
            var bindings = PostgresBindings(capacity: 6)
            bindings.append(c.fresh.expiresAt.milliseconds)
            bindings.append(c.now.milliseconds)
            if let address = c.clientAddress { bindings.append(address) } else { bindings.appendNull() }
            bindings.append(c.deviceID.value)
            try bindings.append(Data(c.secretHash.bytes))
            if let account { bindings.append(account) } else { bindings.appendNull() }
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            var cells = Cells(row)
            // The expiry is not read back: the session answer does not show it.
            return try Row(&cells, expiresAt: command.fresh.expiresAt)
        }
    }
}

/// A row's cells in order, each decoded as a concrete type (PostgresNIO's tuple `decode` went
/// through generic metadata at run time: 2.6 % of a PostgreSQL login's CPU in a profile).
struct Cells {
    private var iterator: PostgresRow.Iterator

    init(_ row: PostgresRow) { iterator = row.makeIterator() }

    mutating func next<T: PostgresDecodable>(_ type: T.Type) throws -> T {
        guard let cell = iterator.next() else { throw MissingColumn() }
        return try cell.decode(T.self)
    }

    struct MissingColumn: Error {}
}
