import Testing
import TransferCore

/// The use cases' decisions as pure functions: facts in, result and effects out, no database.
@Suite("Plans without a database")
struct PlanTests {
    let t0 = Timestamp(milliseconds: 1_795_000_000_000)
    let device = DeviceID("3f1c7a52-9a43-4e1b-8f0e-2a9c3d4b5e6f")!
    let secret = SecretHash(of: "secret")

    func transfer(failedConsecutive: Int = 0, failedTotal: Int = 0, lockedUntil: Timestamp? = nil, expiresIn: Duration = .seconds(3600)) -> TransferRecord {
        TransferRecord(
            id: "t1", accountID: "acct", email: "a@example.com", emailKey: "a@example.com", passwordHash: "$argon2id$x",
            state: .pending, createdAt: t0, expiresAt: t0 + expiresIn, failedConsecutive: failedConsecutive,
            failedTotal: failedTotal, lockedUntil: lockedUntil)
    }

    func facts(_ transfer: TransferRecord?) -> Facts {
        var f = Facts()
        f.transfer = transfer
        return f
    }

    func failure(_ t: TransferRecord?, at now: Timestamp? = nil) -> Plan<FailedClaimResult> {
        FailedClaimCommand(transferID: "t1", now: now ?? t0, policy: .standard, clientAddress: nil).plan(facts(t))
    }

    @Test("the 4th wrong password in a row is counted; the 5th locks for 15 minutes and restarts the count")
    func lockAtFive() {
        let fourth = failure(transfer(failedConsecutive: 3, failedTotal: 3))
        #expect(fourth.result == .counted)
        #expect(fourth.effects.first == .countFailures(transferID: "t1", consecutive: 4, total: 4, lockedUntil: nil))
        let fifth = failure(transfer(failedConsecutive: 4, failedTotal: 4))
        #expect(fifth.result == .locked(until: t0 + .seconds(900)))
        #expect(fifth.effects.first == .countFailures(transferID: "t1", consecutive: 0, total: 5, lockedUntil: t0 + .seconds(900)))
        #expect(fifth.effects.map(\.auditKind) == [nil, .claimFailed, .transferLocked])
    }

    @Test("a wrong password during the lock is not counted; one the moment it ends is")
    func duringLock() {
        let locked = transfer(failedTotal: 5, lockedUntil: t0 + .seconds(900))
        let during = failure(locked, at: t0 + .seconds(899))
        #expect(during.result == .notCounted(.tooManyAttempts(retryAfterSeconds: 1)))
        #expect(during.effects.isEmpty)
        #expect(failure(locked, at: t0 + .seconds(900)).result == .counted)
    }

    @Test("the 19th wrong password in total is counted; the 20th voids the transfer")
    func voidAtTwenty() {
        #expect(failure(transfer(failedConsecutive: 1, failedTotal: 18)).result == .counted)
        let twentieth = failure(transfer(failedConsecutive: 4, failedTotal: 19))
        #expect(twentieth.result == .voided)
        #expect(twentieth.effects.contains(.endTransfer(id: "t1", state: .voided, at: t0)))
        #expect(twentieth.effects.map(\.auditKind) == [nil, nil, .claimFailed, .transferVoided])
    }

    @Test("a transfer is open until the millisecond it expires")
    func expiryEdge() {
        let t = transfer(expiresIn: .seconds(60))
        #expect(t.isOpen(at: t0 + .milliseconds(59_999)))
        #expect(!t.isOpen(at: t0 + .seconds(60)))
        #expect(failure(t, at: t0 + .seconds(60)).result == .notCounted(.invalidTransferCredentials))
        #expect(failure(nil).result == .notCounted(.invalidTransferCredentials))
    }

    // MARK: Claim

    func claim(_ t: TransferRecord?, device binding: DeviceBinding? = nil, secret: SecretHash? = nil, replace: Bool = false, at now: Timestamp? = nil) -> Plan<ClaimResult> {
        var f = facts(t)
        f.account = SessionAccount(accountID: "acct", userName: "first-device", migrationFlag: true)
        f.accountDevices = ["old-device"]
        if let binding { f.device = (binding, SessionAccount(accountID: binding.accountID, userName: "x", migrationFlag: false)) }
        let session = NewSession(sessionID: "s1", refreshTokenHash: SecretHash(of: "r"), refreshExpiresAt: t0 + .seconds(60))
        return ClaimCommand(
            transferID: "t1", accountID: "acct", deviceID: device, secretHash: secret ?? self.secret, replaceExistingAccount: replace,
            now: now ?? t0, session: session, clientAddress: nil
        ).plan(f)
    }

    func binding(account: String, state: DeviceState) -> DeviceBinding {
        DeviceBinding(deviceID: device.value, accountID: account, secretHash: secret, state: state, boundAt: t0, endedAt: state == .active ? nil : t0)
    }

    @Test("claim order: the transfer first (gone, expired, locked), then the device (retired, secret, same account, other account)")
    func claimOrder() {
        let other = binding(account: "other", state: .active)
        #expect(claim(nil, device: other).result == .rejected(.invalidTransferCredentials))
        #expect(claim(transfer(expiresIn: .seconds(1)), device: other, at: t0 + .seconds(1)).result == .rejected(.invalidTransferCredentials))
        #expect(claim(transfer(lockedUntil: t0 + .seconds(10)), device: other).result == .rejected(.tooManyAttempts(retryAfterSeconds: 10)))
        // A retired device is refused before its secret is compared.
        #expect(claim(transfer(), device: binding(account: "other", state: .moved), secret: SecretHash(of: "wrong")).result == .rejected(.deviceRetired))
        #expect(claim(transfer(), device: binding(account: "other", state: .revoked)).result == .rejected(.deviceRetired))
        #expect(claim(transfer(), device: other, secret: SecretHash(of: "wrong")).result == .rejected(.invalidDeviceCredentials))
        #expect(claim(transfer(), device: binding(account: "acct", state: .active)).result == .rejected(.deviceAlreadyBound))
        #expect(claim(transfer(), device: other).result == .rejected(.deviceHasAccount))
        #expect(claim(transfer(), device: other).effects.isEmpty)
    }

    @Test("replaceExistingAccount: the other account loses the device, then the claim proceeds as on a new device")
    func replaceVersusFail() {
        let plain = claim(transfer())
        let replaced = claim(transfer(), device: binding(account: "other", state: .active), replace: true)
        #expect(plain.result == .claimed(SessionAccount(accountID: "acct", userName: "first-device", migrationFlag: false)))
        #expect(replaced.result == plain.result)
        #expect(replaced.effects.prefix(3) == [
            .endBinding(deviceID: device.value, accountID: "other", state: .replaced, reason: "taken over by account acct (replaceExistingAccount)", at: t0),
            .revokeSessions(accountID: "other", deviceID: device.value, at: t0),
            .audit(AuditEvent(at: t0, kind: .deviceReplaced, accountID: "other", deviceID: device.value, transferID: "t1", reason: "claimed account acct with replaceExistingAccount")),
        ])
        #expect(Array(replaced.effects.dropFirst(3)) == plain.effects)
        #expect(plain.effects.map(\.auditKind).compactMap { $0 } == [.deviceMoved, .transferClaimed])
        #expect(plain.effects.contains(.endTransfer(id: "t1", state: .claimed, at: t0, claimedBy: device.value)))
        #expect(plain.effects.contains(.setMovedTo(accountID: "acct", deviceID: device.value)))
    }

    // MARK: Set-up and login

    @Test("set-up: an expired transfer frees its email; another account's open one holds it; the account's own is replaced")
    func setUp() {
        func plan(_ pending: [TransferRecord], at now: Timestamp) -> Plan<SetUpResult> {
            var f = Facts()
            f.pendingTransfers = pending
            let new = NewTransfer(
                id: "t2", accountID: "acct", email: Email(display: "a@example.com", key: "a@example.com"), passwordHash: "$argon2id$y",
                createdAt: now, expiresAt: now + .seconds(60), issuedBy: .device)
            return SetUpCommand(transfer: new).plan(f)
        }
        var theirs = transfer(expiresIn: .seconds(60))
        theirs.accountID = "other"
        #expect(plan([theirs], at: t0 + .milliseconds(59_999)).result == .emailInUse)
        let afterExpiry = plan([theirs], at: t0 + .seconds(60))
        #expect(afterExpiry.result == .created)
        #expect(afterExpiry.effects.first == .endTransfer(id: "t1", state: .expired, at: t0 + .seconds(60)))
        let own = plan([transfer()], at: t0)
        #expect(own.effects.first == .endTransfer(id: "t1", state: .replaced, at: t0))
        #expect(own.effects.map(\.auditKind).compactMap { $0 } == [.transferSetUp])
    }

    @Test("login: a wrong secret tells nothing about the device's state; creation can be refused without a write")
    func login() {
        func plan(_ state: DeviceState?, secret: SecretHash, allowCreate: Bool = true) -> Plan<LoginResult> {
            var f = Facts()
            if let state { f.device = (binding(account: "acct", state: state), SessionAccount(accountID: "acct", userName: "u", migrationFlag: false)) }
            let session = NewSession(sessionID: "s1", refreshTokenHash: SecretHash(of: "r"), refreshExpiresAt: t0 + .seconds(60))
            return LoginCommand(deviceID: device, secretHash: secret, now: t0, newAccountID: "new", allowCreate: allowCreate, session: session, clientAddress: nil).plan(f)
        }
        for state in [DeviceState.active, .moved, .revoked] {
            #expect(plan(state, secret: SecretHash(of: "wrong")).result == .rejected(.invalidDeviceCredentials))
        }
        #expect(plan(.moved, secret: secret).result == .rejected(.deviceTransferred(at: t0)))
        #expect(plan(.revoked, secret: secret).result == .rejected(.deviceRevoked))
        #expect(plan(.active, secret: secret).effects.map(\.auditKind).compactMap { $0 } == [.login])
        let refused = plan(nil, secret: secret, allowCreate: false)
        #expect(refused.result == .creationRefused)
        #expect(refused.effects.isEmpty)
        #expect(plan(nil, secret: secret).effects.map(\.auditKind).compactMap { $0 } == [.accountCreated])
    }

    @Test("who acted is stored as device, system or operator:NAME, and an unknown value is refused")
    func initiator() throws {
        for who in [Initiator.device, .system, .support(operator: "mia")] {
            #expect(try Initiator(stored: who.description) == who)
        }
        #expect(throws: UnknownStoredValue.self) { try Initiator(stored: "robot") }
        #expect(throws: UnknownStoredValue.self) { let _: DeviceState = try UnknownStoredValue.decode("lost", column: "state") }
    }
}

extension Effect {
    var auditKind: AuditEvent.Kind? {
        if case .audit(let e) = self { return e.kind }
        return nil
    }
}
