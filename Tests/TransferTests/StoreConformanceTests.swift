import Foundation
import GRDB
import Testing
import TransferCore
@testable import TransferSQLite
@testable import TransferTestSupport

/// One suite that every `TransferStore` must pass, so each store keeps the contract's rules.
@Suite("Store conformance")
struct StoreConformanceTests {
    let t0 = Timestamp(milliseconds: 1_795_000_000_000)
    let hash = "$argon2id$v=19$m=256,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"

    func login(_ store: any TransferStore, _ device: DeviceID, secret: String = "s", at now: Timestamp) async throws -> Result<SessionGrant, TransferError> {
        try await StoreCalls(store: store).login(device, secret: secret, at: now)
    }

    func account(_ r: Result<SessionGrant, TransferError>) -> String? { r.grant?.account.accountID }

    func newDevice() -> DeviceID { DeviceID(UUID().uuidString)! }

    func setUp(_ store: any TransferStore, account: String, email: String, at now: Timestamp) async throws -> (Result<Void, TransferError>, String) {
        let transfer = NewTransfer(
            id: Identifier.make(), accountID: account, email: try FieldRules.email(email), passwordHash: hash, createdAt: now,
            expiresAt: now + .seconds(3600), issuedBy: .device)
        return (try await store.execute(SetUpCommand(transfer: transfer)), transfer.id)
    }

    @Test("login creates once, then renews the same session; a wrong secret changes nothing", arguments: StoreKind.available)
    func loginRules(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let d = newDevice()
            let first = try await login(store, d, at: t0)
            guard let a = first.grant, a.created else { Issue.record("not created: \(first)"); return }
            #expect(a.account.userName == d.value)
            #expect(a.accounts == [ListedAccount(accountID: a.account.accountID, userName: d.value, current: true)])
            // The next launch renews the open session: the same session and the same refresh token.
            let second = try #require(try await calls.login(d, secret: "s", at: t0 + .seconds(1), address: "203.0.113.7").grant)
            #expect(second.account == AccountSummary(accountID: a.account.accountID, userName: d.value, migrationFlag: false))
            #expect(!second.created)
            #expect(second.sessionID == a.sessionID)
            #expect(second.refreshToken == a.refreshToken, "a login must not rotate the refresh token an extension may hold")
            #expect(try await login(store, d, secret: "other", at: t0) == .failure(.invalidDeviceCredentials))
            // A creation whose limit is spent changes nothing: the slot rolls the transaction back.
            let slot = RateSlot(kind: .accountCreation, key: "198.51.100.1", limit: RateLimit(count: 1, period: .seconds(60)), at: t0)
            #expect(try await calls.login(newDevice(), secret: "s", at: t0, creationSlot: slot).grant?.created == true)
            let refused = newDevice()
            await #expect(throws: TransferError.rateLimited(retryAfterSeconds: 60), "the second creation of a 1/1m budget") {
                try await calls.login(refused, secret: "s", at: t0 + .seconds(0), creationSlot: slot)
            }
            #expect(try await calls.login(refused, secret: "s", at: t0).grant?.created == true, "the refused creation left its device behind")

            // A refresh rotates in place; the next login hands out the rotated-to token.
            let rotated = try #require(try await calls.refresh(a.refreshToken, at: t0 + .seconds(3)).grant)
            #expect(rotated.account.accountID == a.account.accountID)
            #expect(rotated.deviceID == d.value)
            #expect(rotated.refreshToken != a.refreshToken)
            let third = try #require(try await login(store, d, at: t0 + .seconds(4)).grant)
            #expect(third.refreshToken == rotated.refreshToken)
            // Logins are not audit events; the pair keeps the last one that wrote: within the
            // activity resolution (an hour) none did, past it the next one does.
            let history = try await store.history(accountID: a.account.accountID)
            #expect(history.map(\.kind) == [.accountCreated])
            #expect(try await store.device(d.value, at: t0)?.active.first?.lastLoginAt == t0)
            let past = try #require(try await login(store, d, at: t0 + .seconds(3601)).grant)
            #expect(past.refreshToken == rotated.refreshToken && past.wrote)
            let device = try #require(try await store.device(d.value, at: t0))
            #expect(device.active.first?.lastLoginAt == t0 + .seconds(3601))
        }
    }

    @Test("a limit slides: no burst of twice the limit around a window's end, and one slot frees each period/count",
          arguments: StoreKind.available)
    func slidingLimit(kind: StoreKind) async throws {
        try await kind.withStore { store in
            // A fixed window opened at 0 s took 4 at 59.9 s and 4 more at 60.1 s: 8 within 0.2 s.
            let times = [0, 59.9, 59.9, 59.9, 60.1, 60.1, 60.2, 75.1, 75.2, 200, 200, 200, 200]
            var answers: [String] = []
            for seconds in times {
                answers.append(try await Self.take(store, RateLimit(count: 4, period: .seconds(60)), at: t0 + .milliseconds(Int64(seconds * 1000))))
            }
            let refused = "rateLimited(retryAfterSeconds: 15)"
            #expect(answers == [
                "taken", "taken", "taken", "taken",
                "taken",  // the fourth within the minute
                refused,  // no fifth: one slot frees every 60 s / 4
                refused,  // a refusal took nothing
                "taken", refused,  // one slot back 15 s later
                "taken", "taken", "taken", "taken",  // the whole budget after a quiet period
            ])
        }
    }

    /// "taken", or the refusal.
    static func take(_ store: any SupportStore, _ limit: RateLimit, at: Timestamp) async throws -> String {
        do {
            try await store.execute(TakeSlotCommand(RateSlot(kind: .claim, key: "203.0.113.9", limit: limit, at: at))).get()
            return "taken"
        } catch let refusal as TransferError {
            return "\(refusal)"
        }
    }

    @Test("any earlier refresh token of a session ends it, not only the last one", arguments: StoreKind.available)
    func refreshReuse(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let d = newDevice()
            let first = try #require(try await calls.login(d, at: t0).grant)
            let second = try #require(try await calls.refresh(first.refreshToken, at: t0 + .seconds(1)).grant)
            let third = try #require(try await calls.refresh(second.refreshToken, at: t0 + .seconds(2)).grant)
            #expect(try await calls.refresh(first.refreshToken, at: t0 + .seconds(3)) == .failure(.invalidRefreshToken))
            #expect(try await calls.refresh(third.refreshToken, at: t0 + .seconds(4)) == .failure(.invalidRefreshToken), "the session ended with the reuse")
            #expect(try await store.isSessionValid(sessionID: first.sessionID, accountID: first.account.accountID, deviceID: d.value, clientID: nil) == false)
            // The next launch opens a new session.
            let next = try #require(try await calls.login(d, at: t0 + .seconds(5)).grant)
            #expect(next.sessionID != first.sessionID)
            #expect(try await calls.refresh(next.refreshToken, at: t0 + .seconds(6)).grant != nil)
        }
    }

    @Test("the profile read for a session answers only while that session is open, as isSessionValid decides, in the same read", arguments: StoreKind.available)
    func profileWhileOpen(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let d = newDevice()
            let first = try #require(try await calls.login(d, at: t0).grant)
            let account = first.account.accountID
            func profile(_ session: OpenSession) async throws -> AccountProfile? {
                try await store.profile(accountID: account, whileOpen: session, at: t0 + .seconds(3))
            }
            let open = OpenSession(sessionID: first.sessionID, deviceID: d.value, clientID: nil)
            #expect(try await profile(open)?.accountID == account, "the open session's profile")
            #expect(try await profile(OpenSession(sessionID: "other", deviceID: d.value, clientID: nil)) == nil, "another session id")
            #expect(try await profile(OpenSession(sessionID: first.sessionID, deviceID: newDevice().value, clientID: nil)) == nil, "another device")
            #expect(try await profile(OpenSession(sessionID: first.sessionID, deviceID: d.value, clientID: "com.example.sibling")) == nil,
                    "a sibling app's session that does not exist")
            // A rotated-token reuse ends the session: the profile goes with it.
            let second = try #require(try await calls.refresh(first.refreshToken, at: t0 + .seconds(1)).grant)
            #expect(try await profile(open)?.accountID == account, "a refresh keeps the session")
            _ = try await calls.refresh(first.refreshToken, at: t0 + .seconds(2))
            #expect(try await calls.refresh(second.refreshToken, at: t0 + .seconds(2)) == .failure(.invalidRefreshToken))
            #expect(try await profile(open) == nil, "the ended session reads no profile")
            #expect(try await store.profile(accountID: account, whileOpen: nil, at: t0 + .seconds(3))?.accountID == account, "without a session: the profile")
        }
    }

    @Test("one pending transfer per email; an account replaces its own", arguments: StoreKind.available)
    func pendingPerEmail(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let a = try #require(account(try await login(store, newDevice(), at: t0)))
            let b = try #require(account(try await login(store, newDevice(), at: t0)))
            #expect(try await setUp(store, account: a, email: "x@example.com", at: t0).0.refusal == nil)
            #expect(try await setUp(store, account: b, email: "X@EXAMPLE.com", at: t0).0.refusal == .emailInUse)
            let (_, second) = try await setUp(store, account: a, email: "x@example.com", at: t0)
            #expect(try await store.pendingTransfer(emailKey: "x@example.com")?.id == second)
            // After expiry the email is free.
            #expect(try await setUp(store, account: b, email: "x@example.com", at: t0 + .seconds(3600)).0.refusal == nil)
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
            @Sendable func fail(_ at: Timestamp) async throws -> Result<CountedFailure, TransferError> {
                try await store.execute(FailedClaimCommand(transferID: id, now: at, policy: .standard, clientAddress: nil))
            }
            for _ in 1...4 { #expect(try await fail(now) == .success(.counted)) }
            #expect(try await fail(now) == .success(.locked(until: now + .seconds(900))))
            #expect(try await fail(now) == .failure(.tooManyAttempts(retryAfterSeconds: 900)))
            for _ in 1...2 {
                now = now + .seconds(900)
                for _ in 1...4 { #expect(try await fail(now) == .success(.counted)) }
                #expect(try await fail(now) == .success(.locked(until: now + .seconds(900))))
            }
            now = now + .seconds(900)
            for _ in 1...4 { #expect(try await fail(now) == .success(.counted)) }
            #expect(try await fail(now) == .success(.voided))
            #expect(try await store.pendingTransfer(emailKey: "lock@example.com") == nil)
            #expect(try await fail(now) == .failure(.invalidTransferCredentials))
        }
    }

    @Test("sixteen concurrent claims of one transfer: one wins, the account has one active device", arguments: StoreKind.available)
    func claimRace(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let oldDevice = newDevice()
            let a = try #require(account(try await login(store, oldDevice, at: t0)))
            let (_, id) = try await setUp(store, account: a, email: "race@example.com", at: t0)
            let results = try await withThrowingTaskGroup(of: Result<ClaimOutcome, TransferError>.self) { group in
                for _ in 0..<16 {
                    let device = newDevice()
                    group.addTask {
                        try await StoreCalls(store: store).claim(transfer: id, account: a, device: device, at: t0)
                    }
                }
                return try await group.reduce(into: [Result<ClaimOutcome, TransferError>]()) { $0.append($1) }
            }
            #expect(results.filter { if case .success(.claimed) = $0 { true } else { false } }.count == 1)
            #expect(results.filter { $0 == .failure(.invalidTransferCredentials) }.count == 15)
            let profile = try #require(try await store.profile(accountID: a, whileOpen: nil, at: t0))
            #expect(profile.activeDevices.count == 1)
            #expect(profile.activeDevices.first?.deviceID != oldDevice.value)
            #expect(try await login(store, oldDevice, at: t0) == .failure(.deviceTransferred(at: t0)))
        }
    }

    @Test("sixteen claims racing onto phones that hold accounts (addAccount): one wins; the old phone keeps its other account", arguments: StoreKind.available)
    func claimRaceSeveralAccounts(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let oldDevice = newDevice()
            let stays = try await calls.account(oldDevice, at: t0)
            let moves = try await calls.account(oldDevice, .newAccount, at: t0)
            let id = try await calls.setUp(account: moves, email: "race2@example.com", at: t0)
            var phones: [DeviceID] = []
            for _ in 0..<16 {
                let phone = newDevice()
                _ = try await calls.account(phone, at: t0)
                phones.append(phone)
            }
            let results = try await withThrowingTaskGroup(of: Result<ClaimOutcome, TransferError>.self) { group in
                for phone in phones {
                    group.addTask { try await calls.claim(transfer: id, account: moves, device: phone, add: true, at: t0) }
                }
                return try await group.reduce(into: [Result<ClaimOutcome, TransferError>]()) { $0.append($1) }
            }
            let winners = results.compactMap(\.grant)
            #expect(winners.count == 1)
            #expect(results.filter { $0 == .failure(.invalidTransferCredentials) }.count == 15)
            #expect(winners.first?.accounts.count == 2, "the winner holds its own account and the claimed one")
            let old = try #require(try await store.device(oldDevice.value, at: t0))
            #expect(old.active.map(\.account.accountID) == [stays])
            #expect(old.retiredAt == nil)
            #expect(old.account(moves)?.state == .moved)
            #expect(try await calls.login(oldDevice, .account(stays), at: t0).grant != nil)
        }
    }

    @Test("concurrent refreshes of one token: at most one rotation", arguments: StoreKind.available)
    func refreshRace(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let token = try #require(try await login(store, newDevice(), at: t0).grant).refreshToken
            let results = try await withThrowingTaskGroup(of: Result<SessionGrant, TransferError>.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await StoreCalls(store: store).refresh(token, at: t0)
                    }
                }
                return try await group.reduce(into: [Result<SessionGrant, TransferError>]()) { $0.append($1) }
            }
            #expect(results.filter { $0 != .failure(.invalidRefreshToken) }.count <= 1)
        }
    }

    @Test("the first signing key stays the key", arguments: StoreKind.available)
    func signingKey(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let one = SigningKeyRecord(kid: "one", algorithm: "EdDSA", privateKey: "a", createdAt: t0)
            let two = SigningKeyRecord(kid: "two", algorithm: "EdDSA", privateKey: "b", createdAt: t0)
            let first = try await store.execute(SigningKeysCommand(candidate: one, kek: nil, now: t0)).get()
            let second = try await store.execute(SigningKeysCommand(candidate: two, kek: nil, now: t0)).get()
            #expect(first == [one])
            #expect(second == [one])
        }
    }
}

/// The SQLite schema itself refuses what breaks the invariants, whatever the Swift code does.
@Suite("SQLite schema constraints")
struct SchemaConstraintTests {
    @Test("two active devices for one account, a current account not on the device, a retired device bound again: refused by the database")
    func constraints() async throws {
        try await SQLiteStore.withTemporary { store in
            try await store.pool.write { db in
                try db.execute(sql: "INSERT INTO accounts (id, user_name, created_at) VALUES ('a1', 'u1', 0), ('a2', 'u2', 0), ('a3', 'u3', 0), ('a4', 'u4', 0)")
                try db.execute(sql: "INSERT INTO devices (id, secret_hash, created_at) VALUES ('d1', x'00', 0), ('d2', x'00', 0), ('d3', x'00', 0)")
                try db.execute(sql: "INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES ('d1', 'a1', 'active', 0)")
                // One device may hold several accounts.
                try db.execute(sql: "INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES ('d1', 'a2', 'active', 0)")
            }
            func refused(_ sql: String, _ why: Comment) async {
                await #expect(throws: DatabaseError.self, why) { try await store.pool.write { db in try db.execute(sql: sql) } }
            }
            await refused("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES ('d2', 'a1', 'active', 0)",
                          "an account is active on at most one device")
            await refused("UPDATE devices SET current_account_id = 'a3' WHERE id = 'd1'", "the current account is one of the device's accounts")
            await refused("UPDATE devices SET retired_at = 1 WHERE id = 'd1'", "a device that holds accounts is not retired")
            try await store.pool.write { db in
                try db.execute(sql: "INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES ('d3', 'a3', 'active', 0)")
                try db.execute(sql: "UPDATE device_accounts SET state = 'removed', ended_at = 1 WHERE device_id = 'd3'")
                try db.execute(sql: "UPDATE devices SET retired_at = 1 WHERE id = 'd3'")
            }
            await refused("UPDATE device_accounts SET state = 'active', ended_at = NULL WHERE device_id = 'd3'", "a retired device is never bound again")
            await refused("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES ('d3', 'a4', 'active', 0)", "… nor given another account")
            await refused("UPDATE devices SET retired_at = NULL WHERE id = 'd3'", "a retired device stays retired")
            let pending = "INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at) VALUES (?, ?, 'e', 'e', '$argon2id$x', 'pending', 0, 1)"
            try await store.pool.write { db in try db.execute(sql: pending, arguments: ["t1", "a1"]) }
            await #expect(throws: DatabaseError.self) {
                try await store.pool.write { db in try db.execute(sql: pending, arguments: ["t2", "a3"]) }
            }
            await #expect(throws: DatabaseError.self) {
                try await store.pool.write { db in
                    try db.execute(sql: "INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at) VALUES ('t3', 'a2', 'f', 'f', 'plain', 'pending', 0, 1)")
                }
            }
        }
    }
}
