import Foundation
import GRDB
import Testing
import TransferCore
import TransferSQLite

/// One suite that every `TransferStore` must pass, so each store keeps the contract's rules.
@Suite("Store conformance")
struct StoreConformanceTests {
    let t0 = Timestamp(milliseconds: 1_795_000_000_000)
    let hash = "$argon2id$v=19$m=256,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"

    func session(_ now: Timestamp) -> NewSession {
        NewSession(sessionID: Identifier.make(), refreshTokenHash: SecretHash(of: RandomToken.make()), refreshExpiresAt: now + .seconds(3600))
    }

    func login(_ store: any TransferStore, _ device: DeviceID, secret: String = "s", at now: Timestamp) async throws -> LoginResult {
        try await store.login(LoginCommand(
            deviceID: device, secretHash: SecretHash(of: secret), now: now, newAccountID: Identifier.make(),
            session: session(now), clientAddress: nil))
    }

    func account(_ r: LoginResult) -> String? {
        if case .loggedIn(let a, _) = r { return a.accountID }
        return nil
    }

    func newDevice() -> DeviceID { DeviceID(UUID().uuidString)! }

    func setUp(_ store: any TransferStore, account: String, email: String, at now: Timestamp) async throws -> (SetUpResult, String) {
        let transfer = NewTransfer(
            id: Identifier.make(), accountID: account, email: try FieldRules.email(email), passwordHash: hash, createdAt: now,
            expiresAt: now + .seconds(3600), issuedBy: .device)
        return (try await store.execute(SetUpCommand(transfer: transfer)), transfer.id)
    }

    @Test("login creates once, then logs in; a wrong secret changes nothing", arguments: StoreKind.available)
    func loginRules(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let d = newDevice()
            let first = try await login(store, d, at: t0)
            guard case .loggedIn(let a, true) = first else { Issue.record("not created: \(first)"); return }
            #expect(a.userName == d.value)
            let second = try await login(store, d, at: t0 + .seconds(1))
            #expect(second == .loggedIn(SessionAccount(accountID: a.accountID, userName: d.value, migrationFlag: false), created: false))
            #expect(try await login(store, d, secret: "other", at: t0) == .rejected(.invalidDeviceCredentials))
            let refused = try await store.login(LoginCommand(
                deviceID: newDevice(), secretHash: SecretHash(of: "s"), now: t0, newAccountID: Identifier.make(), allowCreate: false,
                session: session(t0), clientAddress: nil))
            #expect(refused == .creationRefused)

            // What a login leaves behind: a refresh token that rotates, and the audit trail.
            let token = RandomToken.make()
            let third = try await store.login(LoginCommand(
                deviceID: d, secretHash: SecretHash(of: "s"), now: t0 + .seconds(2), newAccountID: Identifier.make(),
                session: NewSession(sessionID: Identifier.make(), refreshTokenHash: SecretHash(of: token), refreshExpiresAt: t0 + .seconds(3600)),
                clientAddress: "203.0.113.7"))
            #expect(account(third) == a.accountID)
            let rotated = try await store.execute(RefreshCommand(
                tokenHash: SecretHash(of: token), now: t0 + .seconds(3), next: SecretHash(of: RandomToken.make()), nextExpiresAt: t0 + .seconds(3600)))
            guard case .rotated(let owner, let device, _) = rotated else { Issue.record("not rotated: \(rotated)"); return }
            #expect(owner.accountID == a.accountID)
            #expect(device == d.value)
            let history = try await store.history(accountID: a.accountID)
            #expect(history.map(\.kind) == [.accountCreated, .login, .loginFailed, .login])
            #expect(history.last?.clientAddress == "203.0.113.7")
            #expect(history.last?.deviceID == d.value)
        }
    }

    @Test("one pending transfer per email; an account replaces its own", arguments: StoreKind.available)
    func pendingPerEmail(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let a = try #require(account(try await login(store, newDevice(), at: t0)))
            let b = try #require(account(try await login(store, newDevice(), at: t0)))
            #expect(try await setUp(store, account: a, email: "x@example.com", at: t0).0 == .created)
            #expect(try await setUp(store, account: b, email: "X@EXAMPLE.com", at: t0).0 == .emailInUse)
            let (_, second) = try await setUp(store, account: a, email: "x@example.com", at: t0)
            #expect(try await store.pendingTransfer(emailKey: "x@example.com")?.id == second)
            // After expiry the email is free.
            #expect(try await setUp(store, account: b, email: "x@example.com", at: t0 + .seconds(3600)).0 == .created)
        }
    }

    @Test("concurrent wrong passwords are each counted exactly once", arguments: StoreKind.available)
    func exactCounting(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let a = try #require(account(try await login(store, newDevice(), at: t0)))
            let (_, id) = try await setUp(store, account: a, email: "count@example.com", at: t0)
            let policy = LockPolicy(consecutiveFailures: 1000, lockDuration: .seconds(60), totalFailures: 1000)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<40 {
                    group.addTask {
                        _ = try await store.execute(FailedClaimCommand(transferID: id, now: t0, policy: policy, clientAddress: nil))
                    }
                }
                try await group.waitForAll()
            }
            let t = try #require(try await store.pendingTransfer(emailKey: "count@example.com"))
            #expect(t.failedTotal == 40)
            #expect(t.failedConsecutive == 40)
        }
    }

    @Test("the 5th failure locks; failures during the lock are not counted; the 20th voids", arguments: StoreKind.available)
    func lockAndVoid(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let a = try #require(account(try await login(store, newDevice(), at: t0)))
            let (_, id) = try await setUp(store, account: a, email: "lock@example.com", at: t0)
            var now = t0
            @Sendable func fail(_ at: Timestamp) async throws -> FailedClaimResult {
                try await store.execute(FailedClaimCommand(transferID: id, now: at, policy: .standard, clientAddress: nil))
            }
            for _ in 1...4 { #expect(try await fail(now) == .counted) }
            #expect(try await fail(now) == .locked(until: now + .seconds(900)))
            #expect(try await fail(now) == .notCounted(.tooManyAttempts(retryAfterSeconds: 900)))
            for _ in 1...2 {
                now = now + .seconds(900)
                for _ in 1...4 { #expect(try await fail(now) == .counted) }
                #expect(try await fail(now) == .locked(until: now + .seconds(900)))
            }
            now = now + .seconds(900)
            for _ in 1...4 { #expect(try await fail(now) == .counted) }
            #expect(try await fail(now) == .voided)
            #expect(try await store.pendingTransfer(emailKey: "lock@example.com") == nil)
            #expect(try await fail(now) == .notCounted(.invalidTransferCredentials))
        }
    }

    @Test("sixteen concurrent claims of one transfer: one wins, the account has one active device", arguments: StoreKind.available)
    func claimRace(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let oldDevice = newDevice()
            let a = try #require(account(try await login(store, oldDevice, at: t0)))
            let (_, id) = try await setUp(store, account: a, email: "race@example.com", at: t0)
            let results = try await withThrowingTaskGroup(of: ClaimResult.self) { group in
                for _ in 0..<16 {
                    let device = newDevice()
                    group.addTask {
                        try await store.execute(ClaimCommand(
                            transferID: id, accountID: a, deviceID: device, secretHash: SecretHash(of: "b"), replaceExistingAccount: false,
                            now: t0, session: session(t0), clientAddress: nil))
                    }
                }
                return try await group.reduce(into: [ClaimResult]()) { $0.append($1) }
            }
            #expect(results.filter { if case .claimed = $0 { true } else { false } }.count == 1)
            #expect(results.filter { $0 == .rejected(.invalidTransferCredentials) }.count == 15)
            let profile = try #require(try await store.profile(accountID: a, at: t0))
            #expect(profile.activeDevices.count == 1)
            #expect(profile.activeDevices.first?.deviceID != oldDevice.value)
            #expect(try await login(store, oldDevice, at: t0) == .rejected(.deviceTransferred(at: t0)))
        }
    }

    @Test("concurrent refreshes of one token: at most one rotation", arguments: StoreKind.available)
    func refreshRace(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let token = RandomToken.make()
            let s = NewSession(sessionID: Identifier.make(), refreshTokenHash: SecretHash(of: token), refreshExpiresAt: t0 + .seconds(3600))
            _ = try await store.login(LoginCommand(
                deviceID: newDevice(), secretHash: SecretHash(of: "s"), now: t0, newAccountID: Identifier.make(), session: s, clientAddress: nil))
            let results = try await withThrowingTaskGroup(of: RefreshResult.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await store.execute(RefreshCommand(
                            tokenHash: SecretHash(of: token), now: t0, next: SecretHash(of: RandomToken.make()), nextExpiresAt: t0 + .seconds(60)))
                    }
                }
                return try await group.reduce(into: [RefreshResult]()) { $0.append($1) }
            }
            #expect(results.filter { $0 != .rejected }.count <= 1)
        }
    }

    @Test("the first signing key stays the key", arguments: StoreKind.available)
    func signingKey(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let one = SigningKeyRecord(kid: "one", algorithm: "EdDSA", privateKey: "a", createdAt: t0)
            let two = SigningKeyRecord(kid: "two", algorithm: "EdDSA", privateKey: "b", createdAt: t0)
            let first = try await store.execute(SigningKeysCommand(candidate: one, now: t0))
            let second = try await store.execute(SigningKeysCommand(candidate: two, now: t0))
            #expect(first == [one])
            #expect(second == [one])
        }
    }
}

/// The SQLite schema itself refuses what breaks the invariants, whatever the Swift code does.
@Suite("SQLite schema constraints")
struct SchemaConstraintTests {
    @Test("two active devices for one account, or one device in two accounts, are refused by the database")
    func constraints() async throws {
        let db = TempDatabase()
        defer { db.remove() }
        let store = try SQLiteStore(path: db.path)
        try await store.pool.write { db in
            try db.execute(sql: "INSERT INTO accounts (id, user_name, created_at) VALUES ('a1', 'u1', 0), ('a2', 'u2', 0)")
            try db.execute(sql: "INSERT INTO device_bindings (id, device_id, account_id, secret_hash, state, bound_at) VALUES ('b1', 'd1', 'a1', x'00', 'active', 0)")
        }
        await #expect(throws: DatabaseError.self) {
            try await store.pool.write { db in
                try db.execute(sql: "INSERT INTO device_bindings (id, device_id, account_id, secret_hash, state, bound_at) VALUES ('b2', 'd2', 'a1', x'00', 'active', 0)")
            }
        }
        await #expect(throws: DatabaseError.self) {
            try await store.pool.write { db in
                try db.execute(sql: "INSERT INTO device_bindings (id, device_id, account_id, secret_hash, state, bound_at) VALUES ('b3', 'd1', 'a2', x'00', 'active', 0)")
            }
        }
        let pending = "INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at) VALUES (?, ?, 'e', 'e', '$argon2id$x', 'pending', 0, 1)"
        try await store.pool.write { db in try db.execute(sql: pending, arguments: ["t1", "a1"]) }
        await #expect(throws: DatabaseError.self) {
            try await store.pool.write { db in try db.execute(sql: pending, arguments: ["t2", "a2"]) }
        }
        await #expect(throws: DatabaseError.self) {
            try await store.pool.write { db in
                try db.execute(sql: "INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at) VALUES ('t3', 'a2', 'f', 'f', 'plain', 'pending', 0, 1)")
            }
        }
        try store.close()
    }
}
