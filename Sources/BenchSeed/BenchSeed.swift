import Foundation
import GRDB
import TransferArgon2
import TransferCore
import TransferSQLite

/// Seeds a SQLite database for the benchmark in bulk, in one transaction, through the
/// store's own pool and schema: ACCOUNTS accounts each with an active device, TRANSFERS
/// pending transfers (password `bench-password-1`, hashed once with the given argon2
/// parameters) and SESSIONS refresh tokens `bench-refresh-<i>`.
/// Device i is `00000000-0000-4000-8000-<i as 12 digits>`, its secret `BenchSeed.secret`.
/// Usage: bench-seed PATH ACCOUNTS TRANSFERS SESSIONS MEMORY_KIB ITERATIONS
@main
struct BenchSeed {
    static let secret = "benchSecretBenchSecretBenchSecret01"

    static func id(_ prefix: String, _ i: Int) -> String {
        let digits = String(i)
        return prefix + String(repeating: "0", count: 12 - digits.count) + digits
    }

    static func main() async throws {
        let args = Array(CommandLine.arguments.dropFirst())
        guard args.count == 6, let accounts = Int(args[1]), let transfers = Int(args[2]), let sessions = Int(args[3]),
            let memory = UInt32(args[4]), let iterations = UInt32(args[5])
        else {
            FileHandle.standardError.write(Data("usage: bench-seed PATH ACCOUNTS TRANSFERS SESSIONS MEMORY_KIB ITERATIONS\n".utf8))
            exit(2)
        }
        let store = try SQLiteStore(path: args[0])
        let phc = try Argon2Hasher.hashNow("bench-password-1", parameters: Argon2Parameters(memoryKiB: memory, iterations: iterations))
        let secretHash = Data(SecretHash(of: secret).bytes)
        let now = Timestamp(Date()).milliseconds
        let start = ContinuousClock.now
        try await store.pool.write { db in
            let account = try db.makeStatement(sql: "INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)")
            let binding = try db.makeStatement(sql: "INSERT INTO device_bindings (id, device_id, account_id, secret_hash, state, bound_at, last_login_at) VALUES (?, ?, ?, ?, 'active', ?, ?)")
            let transfer = try db.makeStatement(sql: "INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)")
            let session = try db.makeStatement(sql: "INSERT INTO sessions (id, account_id, device_id, created_at) VALUES (?, ?, ?, ?)")
            let token = try db.makeStatement(sql: "INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at) VALUES (?, ?, ?, ?)")
            for i in 0..<accounts {
                let a = id("a0000000-0000-4000-8000-", i), d = id("00000000-0000-4000-8000-", i)
                try account.execute(arguments: [a, d, now])
                try binding.execute(arguments: [id("b0000000-0000-4000-8000-", i), d, a, secretHash, now, now])
                if i < transfers {
                    let email = "bench\(i)@example.com"
                    try transfer.execute(arguments: [id("c0000000-0000-4000-8000-", i), a, email, email, phc, now, now + 86_400_000])
                }
            }
            // Sessions may outnumber accounts: session i belongs to account i mod ACCOUNTS.
            for i in 0..<sessions {
                let s = id("d0000000-0000-4000-8000-", i), j = i % max(accounts, 1)
                try session.execute(arguments: [s, id("a0000000-0000-4000-8000-", j), id("00000000-0000-4000-8000-", j), now])
                try token.execute(arguments: [Data(SecretHash(of: "bench-refresh-\(i)").bytes), s, now, now + 86_400_000])
            }
        }
        try store.close()
        print("seeded \(accounts) accounts, \(min(transfers, accounts)) transfers, \(sessions) sessions in \(ContinuousClock.now - start)")
    }
}
