import Foundation
import Testing
import TransferCore
@testable import TransferTestSupport

/// Whole stories run through each store, compared line by line with one expected trail, so
/// every store leaves the same audit trail and device states behind.
@Suite("Stories on every store")
struct StoryTests {
    let t0 = Timestamp(milliseconds: 1_795_000_000_000)
    let hash = "$argon2id$v=19$m=256,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
    let a = DeviceID("aaaaaaaa-0000-4000-8000-000000000001")!
    let b = DeviceID("bbbbbbbb-0000-4000-8000-000000000002")!
    let c = DeviceID("cccccccc-0000-4000-8000-000000000003")!

    /// An audit line with device ids written as A, B, C.
    func line(_ e: AuditEvent) -> String {
        var text = "\(e.kind.rawValue)\(e.repeats > 1 ? " ×\(e.repeats)" : "") by \(e.actor)"
        if let d = e.deviceID { text += " on \(d)" }
        if let r = e.reason { text += ": \(r)" }
        if let addr = e.clientAddress { text += " from \(addr)" }
        return names(text)
    }

    func names(_ text: String) -> String {
        text.replacingOccurrences(of: a.value, with: "A").replacingOccurrences(of: b.value, with: "B")
            .replacingOccurrences(of: c.value, with: "C")
    }

    func at(_ seconds: Int64) -> Timestamp { t0 + .seconds(seconds) }

    func login(_ store: any SupportStore, _ device: DeviceID, at now: Timestamp, id: String) async throws -> Result<SessionGrant, TransferError> {
        try await StoreCalls(store: store).login(device, at: now, newAccount: "acct-\(id)", address: "203.0.113.9")
    }

    /// A's first launch: creates the account.
    func firstLaunch(_ store: any SupportStore) async throws -> String {
        let first = try await login(store, a, at: at(0), id: "1")
        guard let grant = first.grant, grant.created else { throw TestFailure("A's first launch did not create its account: \(first)") }
        return grant.account.accountID
    }

    func setUp(_ store: any SupportStore, account: String, id: String, at now: Timestamp, by: Initiator = .device, reason: String? = nil) async throws {
        _ = try await StoreCalls(store: store).setUp(account: account, id: id, at: now, by: by, reason: reason)
    }

    func claim(_ store: any SupportStore, transfer: String, account: String, device: DeviceID, at now: Timestamp) async throws -> Result<ClaimOutcome, TransferError> {
        try await StoreCalls(store: store).claim(transfer: transfer, account: account, device: device, at: now, address: "198.51.100.4")
    }

    /// What a store leaves behind: the audit trail and every binding with its state and reason.
    func transcript(_ store: any SupportStore, account: String) async throws -> [String] {
        let report = try #require(try await store.report(accountID: account, at: at(100), recentEvents: 0))
        return try await store.history(accountID: account).map(line)
            + report.devices.compactMap { device in
                device.account(account).map { names("device \(device.id) \($0.state.rawValue)\($0.endedReason.map { ": \($0)" } ?? "")") }
            }
            + ["moved to \(names(report.movedToDeviceID ?? "nowhere"))"]
    }

    @Test("A → B → C: each claim moves the account on and retires the phone before", arguments: StoreKind.available)
    func chain(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let acct = try await firstLaunch(store)
            _ = try await login(store, a, at: at(1), id: "2")
            try await setUp(store, account: acct, id: "t1", at: at(2))
            let claimed = try await claim(store, transfer: "t1", account: acct, device: b, at: at(3)).grant
            #expect(claimed?.account == AccountSummary(accountID: acct, userName: a.value, migrationFlag: false))
            #expect(claimed?.accounts == [ListedAccount(accountID: acct, userName: a.value, current: true)])
            try await setUp(store, account: acct, id: "t2", at: at(4))
            _ = try await claim(store, transfer: "t2", account: acct, device: c, at: at(5))
            #expect(try await login(store, a, at: at(6), id: "3") == .failure(.deviceTransferred(at: at(3))))
            #expect(try await login(store, b, at: at(7), id: "4") == .failure(.deviceTransferred(at: at(5))))
            #expect(try await transcript(store, account: acct) == [
                "account.created by device on A from 203.0.113.9",
                "transfer.set_up by device",
                "device.moved by device on A: moved to device B from 198.51.100.4",
                "transfer.claimed by device on B from 198.51.100.4",
                "transfer.set_up by device",
                "device.moved by device on B: moved to device C from 198.51.100.4",
                "transfer.claimed by device on C from 198.51.100.4",
                "device A moved: moved to device B",
                "device B moved: moved to device C",
                "device C active",
                "moved to C",
            ])
        }
    }

    @Test("a lockout, support's unlock, then a void at 20", arguments: StoreKind.available)
    func lockout(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let acct = try await firstLaunch(store)
            try await setUp(store, account: acct, id: "t1", at: at(0))
            func fail(_ now: Timestamp) async throws -> Result<CountedFailure, TransferError> {
                try await store.execute(FailedClaimCommand(transferID: "t1", now: now, policy: .standard, clientAddress: "192.0.2.1"))
            }
            for _ in 1...5 { _ = try await fail(at(1)) }
            #expect(try await fail(at(2)) == .failure(.tooManyAttempts(retryAfterSeconds: 899)))
            let unlocked = try await store.execute(UnlockTransferCommand(accountID: acct, now: at(3), by: .support(operator: "sam"), reason: "ticket 7")).get()
            #expect(unlocked?.failedConsecutive == 0 && unlocked?.lockedUntil == at(1) + .seconds(900))
            // After the unlock: three more series of five, a lock after each of the first two, void at the 20th.
            var last = Result<CountedFailure, TransferError>.success(.counted)
            var now = at(4)
            for _ in 0..<3 {
                for _ in 0..<5 { last = try await fail(now) }
                now = now + .seconds(900)
            }
            #expect(last == .success(.voided))
            let trail = try await transcript(store, account: acct)
            // Every guess came from one client within the hour: one row counts them all.
            let locked = "transfer.locked by system: 5 wrong passwords in a row"
            let expected: [String] = [
                "account.created by device on A from 203.0.113.9", "transfer.set_up by device",
                "transfer.claim_failed ×20 by device from 192.0.2.1", locked, "transfer.unlocked by operator:sam: ticket 7", locked, locked,
                "transfer.voided by system: 20 wrong passwords", "device A active", "moved to nowhere",
            ]
            #expect(trail == expected)
        }
    }

    @Test("identical events a client repeats share one audit row per hour; another client or another hour gets its own",
          arguments: StoreKind.available)
    func aggregatedEvents(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let acct = try await firstLaunch(store)
            try await setUp(store, account: acct, id: "t1", at: at(0))
            let caller = Caller(accountID: acct, deviceID: a.description, sessionID: "s")
            // A login/logout cycle run 300 times in a minute, then once more in the next hour (t0 is 400 s into its hour).
            for i in 0..<300 { try await store.execute(LogoutCommand(caller: caller, now: at(1 + Int64(i) / 10))).get() }
            try await store.execute(LogoutCommand(caller: caller, now: at(3300))).get()
            for client in ["192.0.2.1", "192.0.2.1", "198.51.100.7", "192.0.2.1"] {
                _ = try await store.execute(FailedClaimCommand(transferID: "t1", now: at(40), policy: .standard, clientAddress: client))
            }
            let rows = try await store.history(accountID: acct).filter { $0.kind.aggregates }
            #expect(rows.map { "\($0.kind.rawValue) ×\($0.repeats)\($0.clientAddress.map { " from \($0)" } ?? "")" } == [
                "session.logout ×300", "session.logout ×1", "transfer.claim_failed ×3 from 192.0.2.1", "transfer.claim_failed ×1 from 198.51.100.7",
            ])
            #expect(rows.first?.at == at(1) && rows.first?.lastAt == at(30), "the first and the last of the hour")
        }
    }

    @Test("support issues a transfer for a lost phone, a new phone claims it, support revokes the old one too late", arguments: StoreKind.available)
    func supportIssue(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let acct = try await firstLaunch(store)
            try await setUp(store, account: acct, id: "t1", at: at(1))
            try await setUp(store, account: acct, id: "t2", at: at(2), by: .support(operator: "sam"), reason: "ticket 9: invoice")
            #expect(try await store.pendingTransfer(emailKey: "mia@example.com")?.id == "t2")
            _ = try await claim(store, transfer: "t2", account: acct, device: b, at: at(3))
            #expect(try await store.execute(RevokeDeviceCommand(deviceID: a.value, now: at(4), by: .support(operator: "sam"), reason: "stolen")).get() == [])
            #expect(try await store.execute(RevokeDeviceCommand(deviceID: b.value, now: at(5), by: .support(operator: "sam"), reason: "ticket 10: stolen")).get() == [acct])
            #expect(try await login(store, b, at: at(6), id: "2") == .failure(.deviceRevoked))
            #expect(try await store.execute(CancelTransferCommand(accountID: acct, now: at(7), by: .device, reason: nil)).get() == false)
            #expect(try await transcript(store, account: acct) == [
                "account.created by device on A from 203.0.113.9",
                "transfer.set_up by device",
                "transfer.issued by operator:sam: ticket 9: invoice",
                "device.moved by device on A: moved to device B from 198.51.100.4",
                "transfer.claimed by device on B from 198.51.100.4",
                "device.revoked by operator:sam on B: ticket 10: stolen",
                "device A moved: moved to device B",
                "device B revoked: ticket 10: stolen",
                "moved to B",
            ])
        }
    }
}
