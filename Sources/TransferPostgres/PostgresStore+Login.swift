import Foundation
import PostgresNIO
import TransferCore
import TransferSQL

/// The PostgreSQL fast path of auto-login: the one request every launch makes.
extension PostgresStore {
    public func login(_ c: LoginCommand) async throws -> Result<SessionGrant, TransferError> {
        if let grant = try await renewOpenSession(c) { return .success(grant) }
        return try await execute(c)
    }

    /// The common case of `LoginCommand` (the device's secret matches, the account is on it
    /// and its session is open) as one statement: one round trip and one row written instead
    /// of a transaction. The UPDATE's row lock and WHERE clause are the check-then-act: a claim
    /// or removal that ends the pair at the same time either commits first (no row: the
    /// transaction path then answers with the real state) or waits for this login. The secret
    /// is compared as SHA-256 digests, so the comparison's timing tells nothing.
    /// `nil`: not that case; the caller runs `LoginCommand` through `execute`.
    func renewOpenSession(_ c: LoginCommand) async throws -> SessionGrant? {
        let account: String?
        switch c.target {
        case .current: account = nil
        case .account(let id): account = id
        case .newAccount: return nil
        }
        let renewed: RenewOpenSession.Row? = try await withConnection { [self] conn in
            for try await row in try await conn.execute(RenewOpenSession(c, account: account), logger: logger) { return row }
            return nil
        }
        guard let renewed, let token = renewed.session.currentToken(deviceSecret: c.deviceSecret) else { return nil }
        return SessionGrant(
            account: renewed.account, deviceID: c.deviceID.value, sessionID: renewed.session.sessionID, refreshToken: token,
            created: false, accounts: renewed.accounts)
    }

    /// A prepared statement: each pooled connection plans it once, not on every login.
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
            SELECT p.account_id, a.user_name,
                   \(SQLText.migrationFlag(now: "$2").unboundText(.postgres)) AS flag,
                   p.session_id, p.session_started_at, p.refresh_generation, p.refresh_hash, p.key_by_device, p.current_account_id,
                   ARRAY(SELECT o.account_id FROM device_accounts o
                         WHERE o.device_id = $4 AND o.state = 'active' ORDER BY o.added_at, o.account_id) AS ids,
                   ARRAY(SELECT u.user_name FROM device_accounts o JOIN accounts u ON u.id = o.account_id
                         WHERE o.device_id = $4 AND o.state = 'active' ORDER BY o.added_at, o.account_id) AS names
            FROM p JOIN accounts a ON a.id = p.account_id
            """
        struct Row {
            var account: AccountSummary
            var session: PairSession
            var accounts: [ListedAccount]
        }
        let command: LoginCommand
        let account: String?
        init(_ command: LoginCommand, account: String?) {
            self.command = command
            self.account = account
        }

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
            let (id, userName, flag, sessionID, startedAt, generation, hash, key, current, ids, names) = try row.decode(
                (String, String, Bool, String, Int64, Int64, Data, Data, String?, [String], [String]).self)
            // The expiry is not read back: the session answer does not show it.
            let session = PairSession(
                sessionID: sessionID, startedAt: Timestamp(milliseconds: startedAt), generation: Int(generation),
                refreshHash: SecretHash(bytes: [UInt8](hash)), expiresAt: command.fresh.expiresAt, keyByDevice: [UInt8](key),
                keyByToken: nil)
            return Row(
                account: AccountSummary(accountID: id, userName: userName, migrationFlag: flag), session: session,
                accounts: zip(ids, names).map { ListedAccount(accountID: $0, userName: $1, current: $0 == current) })
        }
    }
}
