import Foundation
import Logging
import PostgresNIO
import Testing
import TransferCore
@testable import TransferPostgres
import TransferSQL
import TransferStorage
@testable import TransferTestSupport

/// Storage grows with devices and accounts, not with launches: what the pruner removes, and
/// that nothing a user still needs goes with it.
@Suite("Pruner")
struct PrunerTests {
    let t0 = Timestamp(milliseconds: 1_795_000_000_000)

    @Test("expired sessions lose their secrets, rotated tokens and old events go, live ones stay", arguments: StoreKind.available)
    func prunes(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let old = DeviceID(UUID().uuidString)!, live = DeviceID(UUID().uuidString)!
            let first = try #require(try await calls.login(old, at: t0).grant)
            let second = try #require(try await calls.refresh(first.refreshToken, at: t0 + .seconds(1)).grant)
            _ = try #require(try await calls.refresh(second.refreshToken, at: t0 + .seconds(2)).grant)
            _ = try await calls.setUp(account: first.account.accountID, email: "old@example.com", at: t0)
            let later = t0 + .seconds(7200)
            let liveSession = try #require(try await calls.login(live, at: later).grant)

            // Two hours on: the old session (3600 s) and its rotated tokens have expired, and so has the transfer.
            let counts = try #require(try await store.prune(PruneCutoffs(now: later, retainedSince: t0 - .seconds(1)), batchSize: 1))
            #expect(counts.expiredSessions == 1)
            #expect(counts.rotatedTokens == 2)
            #expect(counts.expiredTransfers == 1)
            #expect(counts.endedTransfers == 0 && counts.auditEvents == 0, "nothing is older than the retention yet: \(counts)")
            #expect(try await store.pendingTransfer(emailKey: "old@example.com") == nil)
            #expect(try await calls.refresh(first.refreshToken, at: later) == .failure(.invalidRefreshToken))
            #expect(try await store.isSessionValid(sessionID: liveSession.sessionID, accountID: liveSession.account.accountID, deviceID: live.value, clientID: nil))
            // The old device logs in again: a new session, on the same account.
            let back = try #require(try await calls.login(old, at: later).grant)
            #expect(back.account.accountID == first.account.accountID)
            #expect(back.sessionID != first.sessionID)

            // Past the retention: the ended transfer and the events before it go; the accounts stay.
            let retained = try #require(try await store.prune(PruneCutoffs(now: later, retainedSince: later), batchSize: 2))
            #expect(retained.endedTransfers == 1)
            #expect(retained.auditEvents >= 2, "account.created ×2 and transfer.set_up: \(retained)")
            #expect(try await store.history(accountID: first.account.accountID).isEmpty)
            #expect(try await calls.login(live, at: later).grant?.refreshToken == liveSession.refreshToken)
            let again = try #require(try await store.prune(PruneCutoffs(now: later, retainedSince: later), batchSize: 2))
            #expect(again.total == 0, "a second round finds nothing: \(again)")

            // No webhook receiver: the events wait three days for one, then go.
            let events = try await store.outboxStats(kind: .webhook).pending
            #expect(events == 4, "account.created ×2, transfer.set_up and its account.ways_back_changed")
            let kept = try #require(try await store.prune(PruneCutoffs(now: t0 + .seconds(3 * 86_400 - 1), retainedSince: t0), batchSize: 2))
            #expect(kept.outbox == 0)
            let gone = try #require(try await store.prune(PruneCutoffs(now: later + .seconds(3 * 86_400), retainedSince: t0), batchSize: 2))
            #expect(gone.outbox == events, "\(gone)")
        }
    }

    @Test("a claimed transfer past the retention stays while the account is on its claimer by that claim (the proof of a repeat), then goes",
          arguments: StoreKind.available)
    func claimedTransferKeptForItsRepeat(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let a = DeviceID(UUID().uuidString)!, b = DeviceID(UUID().uuidString)!, c = DeviceID(UUID().uuidString)!
            let account = try await calls.account(a, at: t0)
            let won = try await calls.setUp(account: account, email: "won@example.com", at: t0)
            #expect(try await calls.claim(transfer: won, account: account, device: b, at: t0 + .seconds(1)).grant != nil)
            let later = t0 + .seconds(86_400)
            let kept = try #require(try await store.prune(PruneCutoffs(now: later, retainedSince: later), batchSize: 10))
            #expect(kept.endedTransfers == 0, "the winner may still repeat its claim: \(kept)")
            #expect(try await calls.claim(transfer: won, account: account, device: b, at: later)
                    == .success(.repeated(accountID: account, method: .transfer(id: won), wonAt: t0 + .seconds(1))),
                    "a day after winning, past the retention, the claimed transfer is still found")
            let repeatCheck = RepeatClaimCommand(
                target: ClaimTarget(deviceID: b, deviceSecret: StoreCalls.secret(b)), accountID: account, method: .transfer(id: won),
                wonAt: t0 + .seconds(1), now: later, clientAddress: nil)
            #expect(try await store.execute(repeatCheck).refusal == nil, "and the repeat holds")
            // The account moves on to C: the claimed transfer proves nothing any more.
            let next = try await calls.setUp(account: account, email: "next@example.com", at: later)
            #expect(try await calls.claim(transfer: next, account: account, device: c, at: later + .seconds(1)).grant != nil)
            #expect(try await store.execute(repeatCheck).refusal == .invalidTransferCredentials, "the account left B")
            let end = later + .seconds(86_400)
            let gone = try #require(try await store.prune(PruneCutoffs(now: end, retainedSince: later + .seconds(2)), batchSize: 10))
            #expect(gone.endedTransfers == 1, "the first one goes, the second is C's proof: \(gone)")
            let none = try #require(try await store.prune(PruneCutoffs(now: end, retainedSince: end), batchSize: 10))
            #expect(none.endedTransfers == 0, "\(none)")
        }
    }

    @Test("Apple notification ids are kept 30 days: a repeat within them is recognised, an older notification is ignored by its iat",
          arguments: StoreKind.available)
    func appleNotificationIDs(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let event = AppleEvent(jti: "jti-\(UUID().uuidString)", issuedAt: t0, kind: .emailDisabled, sub: "001234.pruned.0101")
            #expect(try await store.execute(AppleNotificationCommand(event: event, now: t0)) == .success(.notLinked))
            let day = 86_400
            let within = try #require(try await store.prune(PruneCutoffs(now: t0 + .seconds(29 * day), retainedSince: t0), batchSize: 10))
            #expect(within.appleNotifications == 0)
            #expect(try await store.execute(AppleNotificationCommand(event: event, now: t0 + .seconds(29 * day))) == .success(.repeated))
            let after = try #require(try await store.prune(PruneCutoffs(now: t0 + .seconds(31 * day), retainedSince: t0), batchSize: 10))
            #expect(after.appleNotifications == 1, "\(after)")
            #expect(try await store.execute(AppleNotificationCommand(event: event, now: t0 + .seconds(31 * day))) == .success(.stale),
                    "its jti is forgotten, and its iat says it is too old to act on")
        }
    }

    @Test("on PostgreSQL one node prunes at a time: a round finds the lock taken and skips (a session's lock, or with --database-pooling transaction a transaction's)",
          .enabled(if: StoreKind.available.contains(.postgres) && TestPostgres.pooler == nil, "needs PostgreSQL, directly: set TRANSFER_TEST_POSTGRES_URL (CI does)"),
          arguments: DatabasePooling.allCases)
    func oneNodeAtATime(pooling: DatabasePooling) async throws {
        try await StoreKind.postgres.withDatabaseLocation { location, _ in
            guard case .postgres(let url) = location else { return }
            try await Storage.withStore(location, pooling: pooling, logger: .init(label: "test")) { store in
                try await TestPostgres.withClient(url) { client in
                    try await client.withConnection { conn in
                        _ = try await conn.query("SELECT pg_advisory_lock(\(PostgresStore.advisoryLockKey + 2))", logger: .init(label: "test"))
                        let skipped = try await store.prune(PruneCutoffs(now: t0, retainedSince: t0), batchSize: 10)
                        #expect(skipped == nil, "another node holds the pruning lock")
                        _ = try await conn.query("SELECT pg_advisory_unlock(\(PostgresStore.advisoryLockKey + 2))", logger: .init(label: "test"))
                    }
                }
                #expect(try await store.prune(PruneCutoffs(now: t0, retainedSince: t0), batchSize: 10) != nil)
                // Twice in a row: the lock went with the round (a transaction's ends with it).
                #expect(try await store.prune(PruneCutoffs(now: t0, retainedSince: t0), batchSize: 10) != nil)
            }
        }
    }

    @Test("every count of a round but inactive accounts comes from a rule declared once in TransferSQL")
    func everyCountHasARule() {
        func field(_ counts: PruneCounts) -> String? { Mirror(reflecting: counts).children.first { $0.value as? Int == 1 }?.label }
        let counted = Set(PruneRule.all.compactMap { rule -> String? in
            var counts = PruneCounts()
            counts[keyPath: rule.counts] = 1
            return field(counts)
        })
        let fields = Set(Mirror(reflecting: PruneCounts()).children.compactMap(\.label))
        #expect(counted == fields.subtracting(["inactiveAccounts"]), "no rule counts \(fields.subtracting(counted).subtracting(["inactiveAccounts"]).sorted())")
    }
}
