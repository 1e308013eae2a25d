import Crypto
import Testing
import TransferCore
@testable import TransferTestSupport

/// The use cases' decisions as pure functions: facts in, result and effects out, no database.
@Suite("Plans without a database")
struct PlanTests {
    let t0 = Timestamp(milliseconds: 1_795_000_000_000)
    let device = DeviceID("3f1c7a52-9a43-4e1b-8f0e-2a9c3d4b5e6f")!
    let secret = SecretHash(of: "secret")
    let fresh = FreshSession(sessionID: "s1", key: SessionKey(bytes: Array(repeating: 7, count: 32)), expiresAt: Timestamp(milliseconds: 1_795_000_060_000))

    /// A device with these accounts (oldest first); the first is current unless said.
    func record(_ accounts: [(String, PairState)], current: String? = nil, id: String? = nil) -> DeviceRecord {
        let retired = !accounts.contains { $0.1 == .active }
        return DeviceRecord(
            id: id ?? device.value, secretHash: secret, createdAt: t0, currentAccountID: current ?? accounts.first?.0,
            retiredAt: retired ? t0 : nil,
            accounts: accounts.map {
                PairRecord(
                    account: AccountSummary(accountID: $0.0, userName: "u-\($0.0)", migrationFlag: false), state: $0.1, addedAt: t0,
                    endedAt: $0.1 == .active ? nil : t0)
            })
    }

    func transfer(failedConsecutive: Int = 0, failedTotal: Int = 0, lockedUntil: Timestamp? = nil, expiresIn: Duration = .seconds(3600)) -> TransferRecord {
        TransferRecord(
            id: "t1", accountID: "acct", email: "a@example.com", emailKey: "a@example.com", passwordHash: "$argon2id$x",
            state: .pending, createdAt: t0, expiresAt: t0 + expiresIn, failedConsecutive: failedConsecutive,
            failedTotal: failedTotal, lockedUntil: lockedUntil)
    }

    func facts(_ transfer: TransferRecord?) -> Facts {
        Facts((.transfer(id: "t1"), transfer), (.transfer(id: "no-transfer"), TransferRecord?.none))
    }

    func failure(_ t: TransferRecord?, at now: Timestamp? = nil) -> Plan<CountedFailure> {
        planned(FailedClaimCommand(transferID: "t1", now: now ?? t0, policy: .standard, clientAddress: nil), facts(t))
    }

    @Test("the 4th wrong password in a row is counted; the 5th locks for 15 minutes and restarts the count")
    func lockAtFive() {
        let fourth = failure(transfer(failedConsecutive: 3, failedTotal: 3))
        #expect(fourth.result == .success(.counted))
        #expect(fourth.effects.contains(.countFailures(transferID: "t1", consecutive: 4, total: 4, lockedUntil: nil)))
        let fifth = failure(transfer(failedConsecutive: 4, failedTotal: 4))
        #expect(fifth.result == .success(.locked(until: t0 + .seconds(900))))
        #expect(fifth.effects.contains(.countFailures(transferID: "t1", consecutive: 0, total: 5, lockedUntil: t0 + .seconds(900))))
        #expect(fifth.effects.compactMap(\.auditKind) == [.claimFailed, .transferLocked], "the trail reads: a failure, then the lock")
        #expect(fifth.effects.compactMap(\.webhookType) == ["transfer.locked"], "the app backend hears of the lock")
    }

    @Test("a wrong password during the lock is not counted; one the moment it ends is")
    func duringLock() {
        let locked = transfer(failedTotal: 5, lockedUntil: t0 + .seconds(900))
        let during = failure(locked, at: t0 + .seconds(899))
        #expect(during.result == .failure(.tooManyAttempts(retryAfterSeconds: 1)))
        #expect(during.effects.isEmpty)
        #expect(failure(locked, at: t0 + .seconds(900)).result == .success(.counted))
    }

    @Test("the 19th wrong password in total is counted; the 20th voids the transfer")
    func voidAtTwenty() {
        #expect(failure(transfer(failedConsecutive: 1, failedTotal: 18)).result == .success(.counted))
        let twentieth = failure(transfer(failedConsecutive: 4, failedTotal: 19))
        #expect(twentieth.result == .success(.voided))
        #expect(twentieth.effects.contains(.endTransfer(id: "t1", state: .voided, at: t0)))
        #expect(twentieth.effects.compactMap(\.auditKind) == [.claimFailed, .transferVoided], "the trail reads: a failure, then the void")
        #expect(twentieth.effects.compactMap(\.webhookType) == ["transfer.voided"], "the app backend hears of the void")
    }

    @Test("an Apple ID is never linked to an account deleted while its token was being checked; the nonce is used up")
    func noLinkToDeleted() {
        let facts = Facts(
            (.account(.id("acct")), AccountRecord?.some(AccountRecord(
                summary: AccountSummary(accountID: "acct", userName: "u", migrationFlag: false), createdAt: t0, deletedAt: t0))),
            (.appleNonce(SecretHash(of: "n")), Timestamp?.some(t0 + .seconds(60))))
        let plan = planned(LinkAppleCommand(accountID: "acct", identity: AppleIdentity(sub: "s"), nonceHash: SecretHash(of: "n"), now: t0), facts)
        #expect(plan.result == .failure(.invalidToken))
        #expect(plan.effects == [.consumeAppleNonce(hash: SecretHash(of: "n"))])
    }

    @Test("a transfer is open until the millisecond it expires")
    func expiryEdge() {
        let t = transfer(expiresIn: .seconds(60))
        #expect(t.isOpen(at: t0 + .milliseconds(59_999)))
        #expect(!t.isOpen(at: t0 + .seconds(60)))
        #expect(failure(t, at: t0 + .seconds(60)).result == .failure(.invalidTransferCredentials))
        #expect(failure(nil).result == .failure(.invalidTransferCredentials))
    }

    // MARK: Claim

    /// `replacing`: the accounts whose ways back the claim read, and whether each has one (an
    /// unused recovery code); by default every active account of the device, each with one.
    func claim(
        _ t: TransferRecord?, device d: DeviceRecord? = nil, secret: String = "secret", replace: Bool = false, add: Bool = false,
        abandon: Bool = false, replacing: [String: Bool]? = nil, old: DeviceRecord? = nil, at now: Timestamp? = nil
    ) -> Plan<ClaimOutcome> {
        var f = facts(t)
        f.record(.account(.id("acct")), AccountRecord?.some(AccountRecord(
            summary: AccountSummary(accountID: "acct", userName: "first-device", migrationFlag: true), createdAt: t0)))
        f.record(.accountDevices(.id("acct")), [old ?? record([("acct", .active)], id: "old-device")])
        f.record(.device(device.value), d)
        let read = replacing ?? Dictionary(uniqueKeysWithValues: (replace ? d?.active ?? [] : []).map { ($0.account.accountID, true) })
        for (id, wayBack) in read {
            f.record(.pendingTransfers(.of(id)), [TransferRecord]())
            f.record(.appleLink(.id(id)), AppleLink?.none)
            f.record(.recoveryCode(.id(id)), wayBack ? RecoveryCodeRecord(accountID: id, codeHash: SecretHash(of: id), createdAt: t0) : nil)
            f.record(.backupKeys(.id(id)), [BackupKeyRecord]())
        }
        return planned(
            ClaimCommand(
                PasswordProof(transferID: "t1", accountID: "acct"),
                target: ClaimTarget(
                    deviceID: device, deviceSecret: secret, replaceExistingAccount: replace, addAccount: add, abandonExisting: abandon),
                now: now ?? t0, fresh: fresh, clientAddress: nil, replacing: read.keys.sorted()), f)
    }

    @Test("claim order: the transfer first (gone, expired, locked), then the device (retired, secret, same account, other account, limit)")
    func claimOrder() {
        let other = record([("other", .active)])
        #expect(claim(nil, device: other).result == .failure(.invalidTransferCredentials))
        #expect(claim(transfer(expiresIn: .seconds(1)), device: other, at: t0 + .seconds(1)).result == .failure(.invalidTransferCredentials))
        #expect(claim(transfer(lockedUntil: t0 + .seconds(10)), device: other).result == .failure(.tooManyAttempts(retryAfterSeconds: 10)))
        // A retired device is refused before its secret is compared.
        #expect(claim(transfer(), device: record([("other", .moved)]), secret: "wrong").result == .failure(.deviceRetired))
        #expect(claim(transfer(), device: record([("other", .revoked)])).result == .failure(.deviceRetired))
        #expect(claim(transfer(), device: other, secret: "wrong").result == .failure(.invalidDeviceCredentials))
        #expect(claim(transfer(), device: record([("acct", .active)])).result == .failure(.deviceAlreadyBound))
        #expect(claim(transfer(), device: other).result == .failure(.deviceHasAccount))
        #expect(claim(transfer(), device: other).effects.isEmpty)
        let full = record((1...5).map { ("a\($0)", .active) })
        #expect(claim(transfer(), device: full, add: true).result == .failure(.deviceAccountLimit(5)))
        #expect(claim(transfer(), device: record((1...4).map { ("a\($0)", .active) }), add: true).result.grant != nil)
    }

    @Test("a repeat: the claim finds the proof won by the device, whenever; the winner's device holding the account by that claim repeats it (audited, nothing else); a pair added later, another secret, or the account gone from the device is the claim's 401")
    func repeatPlan() {
        var won = transfer()
        won.state = .claimed
        won.endedAt = t0
        won.claimedBy = device.value
        let holding = record([("acct", .active)])  // added at t0, by the claim
        let repeated = claim(won, device: holding, at: t0 + .seconds(400 * 86_400))
        #expect(repeated.result == .success(.repeated(accountID: "acct", method: .transfer(id: "t1"), wonAt: t0)), "no time limit: \(repeated.result)")
        #expect(repeated.effects.isEmpty, "the claim's transaction changes nothing")
        func check(_ d: DeviceRecord?, secret: String = "secret") -> Plan<Void> {
            planned(
                RepeatClaimCommand(
                    target: ClaimTarget(deviceID: device, deviceSecret: secret), accountID: "acct", method: .transfer(id: "t1"), wonAt: t0,
                    now: t0 + .seconds(400 * 86_400), clientAddress: nil),
                Facts((.device(device.value), d)))
        }
        #expect(check(holding).result.refusal == nil)
        #expect(check(holding).effects.compactMap(\.auditKind) == [.claimRepeated], "a repeat changes nothing but the audit trail")
        var cameBack = holding
        cameBack.accounts[0].addedAt = t0 + .seconds(1)
        #expect(check(cameBack).result.refusal == .invalidTransferCredentials, "on the device by a later move")
        #expect(check(holding, secret: "wrong").result.refusal == .invalidTransferCredentials)
        let gone = check(record([("acct", .removed), ("other", .active)]))
        #expect(gone.result.refusal == .invalidTransferCredentials, "the account left the device")
        #expect(gone.effects.compactMap(\.auditKind) == [.claimFailed], "a refused repeat is a failed claim")
        #expect(check(nil).result.refusal == .invalidTransferCredentials, "no such device")
    }

    @Test("replaceExistingAccount: the device's accounts lose it, then the claim proceeds as on a new device")
    func replaceVersusFail() {
        let plain = claim(transfer())
        let replaced = claim(transfer(), device: record([("other", .active)]), replace: true)
        #expect(plain.result.grant?.account == AccountSummary(accountID: "acct", userName: "first-device", migrationFlag: false))
        #expect(plain.result.grant?.accounts == [ListedAccount(accountID: "acct", userName: "first-device", current: true)])
        #expect(replaced.result == plain.result)
        let endOther = Effect.endPair(
            deviceID: device.value, accountID: "other", state: .replaced, reason: "taken over by account acct (replaceExistingAccount)", at: t0)
        let replacedAudit = Effect.audit(AuditEvent(
            at: t0, kind: .deviceReplaced, accountID: "other", deviceID: device.value, transferID: "t1",
            reason: "claimed account acct with replaceExistingAccount"))
        let createDevice = Effect.createDevice(id: device.value, secretHash: secret, at: t0)
        #expect(plain.effects.contains(createDevice))
        #expect(replaced.effects.contains(endOther) && replaced.effects.contains(replacedAudit))
        #expect(replaced.effects.compactMap(\.webhookType).contains("account.removed_from_device"))
        // The other account leaves the device before the claimed one arrives: that order is the contract.
        #expect(replaced.effects.firstIndex(of: endOther)! < replaced.effects.firstIndex { if case .addAccount = $0 { true } else { false } }!)
        // Apart from the replacement, the same claim as on a new device (which also creates the device).
        let replacing: (Effect) -> Bool = { $0 == endOther || $0 == replacedAudit || $0.webhookType == "account.removed_from_device" }
        #expect(sameEffects(replaced.effects.filter { !replacing($0) }, plain.effects.filter { $0 != createDevice }))
        #expect(plain.effects.map(\.auditKind).compactMap { $0 } == [.deviceMoved, .transferClaimed])
        #expect(plain.effects.contains(.endTransfer(id: "t1", state: .claimed, at: t0, claimedBy: device.value)))
        #expect(plain.effects.contains(.setMovedTo(accountID: "acct", deviceID: device.value)))
        #expect(plain.effects.contains(.retireDevice(id: "old-device", at: t0)), "the old device held nothing else")
    }

    /// Contract v1.3: "`replaceExistingAccount` never strands an account".
    @Test("replaceExistingAccount: an account pushed off with no way back refuses the claim unless it is abandoned")
    func replaceStrandsNothing() {
        let two = record([("kept", .active), ("bare", .active)])
        let refused = claim(transfer(), device: two, replace: true, replacing: ["kept": true, "bare": false])
        #expect(refused.result == .failure(.accountWouldBeLost))
        #expect(refused.effects.isEmpty, "nothing changes: no pair ends, the transfer is not claimed, no failure is counted")
        #expect(claim(transfer(), device: two, replace: true, replacing: ["kept": true, "bare": true]).result.grant != nil)
        // An account that came onto the device after the service looked: its ways back were not read.
        #expect(claim(transfer(), device: two, replace: true, replacing: ["kept": true]).result == .failure(.accountWouldBeLost))
        // The device's checks come first, as ever.
        #expect(claim(transfer(), device: two, secret: "wrong", replace: true, replacing: ["kept": true]).result == .failure(.invalidDeviceCredentials))

        let abandoned = claim(transfer(), device: two, replace: true, abandon: true, replacing: ["kept": true, "bare": false])
        #expect(abandoned.result.grant?.accounts.map(\.accountID) == ["acct"])
        #expect(abandoned.effects.contains(.endPair(
            deviceID: device.value, accountID: "bare", state: .replaced, reason: "taken over by account acct (replaceExistingAccount, abandoned)", at: t0)))
        #expect(abandoned.effects.contains(.endPair(
            deviceID: device.value, accountID: "kept", state: .replaced, reason: "taken over by account acct (replaceExistingAccount)", at: t0)))
        #expect(abandoned.effects.contains(.audit(AuditEvent(
            at: t0, kind: .deviceReplaced, accountID: "bare", deviceID: device.value, transferID: "t1",
            reason: "claimed account acct with replaceExistingAccount; abandoned with no way back (abandonExisting=true)"))))
    }

    @Test("a claim takes the account off its old device only; addAccount puts it beside the new device's accounts")
    func claimBeside() {
        let plan = claim(
            transfer(), device: record([("kid", .active)]), add: true, old: record([("acct", .active), ("work", .active)], id: "old-device"))
        #expect(!plan.effects.contains(.retireDevice(id: "old-device", at: t0)), "the old device keeps its other account")
        #expect(plan.effects.contains(.endPair(deviceID: "old-device", accountID: "acct", state: .moved, reason: "moved to device \(device.value)", at: t0)))
        #expect(!plan.effects.contains { if case .endPair(_, "kid", _, _, _) = $0 { true } else { false } })
        #expect(plan.result.grant?.accounts == [
            ListedAccount(accountID: "kid", userName: "u-kid", current: false),
            ListedAccount(accountID: "acct", userName: "first-device", current: true),
        ])
    }

    // MARK: Set-up and login

    @Test("set-up: an expired transfer frees its email; another account's open one holds it; the account's own is replaced")
    func setUp() {
        func plan(_ pending: [TransferRecord], at now: Timestamp) -> Plan<Void> {
            let new = NewTransfer(
                id: "t2", accountID: "acct", email: Email(display: "a@example.com", key: "a@example.com"), passwordHash: "$argon2id$y",
                createdAt: now, expiresAt: now + .seconds(60), issuedBy: .device)
            let f = Facts(
                (.pendingTransfers(PendingTransferQuery(emailKey: "a@example.com", accountID: "acct")), pending),
                (.account(.id("acct")), AccountRecord?.none))
            return planned(SetUpCommand(transfer: new), f)
        }
        var theirs = transfer(expiresIn: .seconds(60))
        theirs.accountID = "other"
        #expect(plan([theirs], at: t0 + .milliseconds(59_999)).result.refusal == .emailInUse)
        let afterExpiry = plan([theirs], at: t0 + .seconds(90))
        #expect(afterExpiry.result.refusal == nil)
        #expect(afterExpiry.effects.first == .endTransfer(id: "t1", state: .expired, at: t0 + .seconds(60)), "ended when it expired, as the pruner marks it")
        let own = plan([transfer()], at: t0)
        #expect(own.effects.first == .endTransfer(id: "t1", state: .replaced, at: t0))
        #expect(own.effects.map(\.auditKind).compactMap { $0 } == [.transferSetUp])
    }

    /// `created`: when the accounts created on the device in the last day were created.
    func login(
        _ device: DeviceRecord?, secret: String = "secret", _ target: LoginTarget = .current, slot: RateSlot? = nil, created: [Timestamp] = []
    ) -> Plan<SessionGrant> {
        let f = Facts(
            (.device(self.device.value), device), (.accountsCreated(onDevice: self.device.value, since: t0 - .seconds(86_400)), created))
        return planned(
            LoginCommand(
                deviceID: self.device, deviceSecret: secret, target: target, now: t0, newAccountID: "new", creationSlot: slot, fresh: fresh,
                clientAddress: nil), f)
    }

    @Test("login: a wrong secret tells nothing about the device's state; a creation takes its limit's slot in its transaction, last")
    func loginStates() {
        for state in [PairState.active, .moved, .revoked] {
            #expect(login(record([("acct", state)]), secret: "wrong").result == .failure(.invalidDeviceCredentials))
        }
        #expect(login(record([("acct", .moved)])).result == .failure(.deviceTransferred(at: t0)))
        #expect(login(record([("acct", .revoked)])).result == .failure(.deviceRevoked))
        #expect(login(record([("acct", .removed)])).result == .failure(.accountNotOnDevice))
        let slot = RateSlot(kind: .accountCreation, key: "203.0.113.7", limit: RateLimit(count: 3, period: .seconds(60)), at: t0)
        #expect(login(nil, slot: slot).effects.last == .takeSlot(slot),
                "the slot is the creation's last statement, so the client's window row is held only until the commit")
        #expect(!login(nil, slot: slot).effects.dropLast().contains { if case .takeSlot = $0 { true } else { false } })
        #expect(login(nil).effects.map(\.auditKind).compactMap { $0 } == [.accountCreated])
        #expect(login(nil, .account("acct")).result == .failure(.accountNotOnDevice))
    }

    /// Contract v1.3: one attestation must not mint accounts without end (`newAccount`, then removal).
    @Test("newAccount: a device that created 10 accounts in the last 24 hours is refused until the oldest of them is a day old")
    func deviceCreationCap() {
        let device = record([("first", .active)])
        let nine = (1...9).map { t0 - .seconds(3600 - Int64($0)) }  // the oldest 3599 s ago
        #expect(login(device, .newAccount, created: nine).result.grant?.created == true, "9 in the day: the 10th is allowed")
        let refused = login(device, .newAccount, created: nine + [t0 - .seconds(5)])
        #expect(refused.result == .failure(.rateLimited(retryAfterSeconds: 86_400 - 3599)), "until the oldest is a day old")
        #expect(refused.effects.isEmpty, "nothing is written")
        #expect(login(device, .current, created: nine + [t0]).result.grant != nil, "logins of its accounts go on")
        let created = login(device, .newAccount).effects.first { if case .createAccount = $0 { true } else { false } }
        #expect(created == .createAccount(id: "new", userName: "new", device: self.device.value, at: t0), "a creation names its device")
    }

    @Test("a login of an open session writes one row and hands back the session's current refresh token")
    func loginRenews() throws {
        var device = record([("acct", .active)])
        let (session, token) = PairSession.open(sessionID: "s0", key: .random(), deviceSecret: "secret", at: t0, expiresAt: t0 + .seconds(30))
        device.accounts[0].session = session
        let plan = login(device)
        #expect(plan.effects == [.renewSession(deviceID: self.device.value, accountID: "acct", expiresAt: fresh.expiresAt, at: t0, clientAddress: nil)])
        #expect(plan.result.grant?.refreshToken == token)
        #expect(plan.result.grant?.sessionID == "s0")
        // Without a session (or after logout) the login opens one: still one row, and no audit event.
        let opened = login(record([("acct", .active)]))
        #expect(opened.effects.count == 1)
        #expect(opened.result.grant?.sessionID == "s1")
    }

    @Test("a login of an open session within the activity resolution plans nothing and answers the same; past it, or with no activity recorded, it renews")
    func loginWithinResolution() throws {
        var device = record([("acct", .active)])
        let (session, token) = PairSession.open(sessionID: "s0", key: .random(), deviceSecret: "secret", at: t0, expiresAt: fresh.expiresAt)
        device.accounts[0].session = session
        device.accounts[0].lastLoginAt = t0 - .seconds(3599)
        let quiet = login(device)
        #expect(quiet.effects.isEmpty)
        #expect(quiet.result.grant?.refreshToken == token && quiet.result.grant?.sessionID == "s0" && quiet.result.grant?.created == false)
        #expect(quiet.result.grant?.wrote == false)
        device.accounts[0].lastLoginAt = t0 - .seconds(3600)
        let due = login(device)
        #expect(due.effects == [.renewSession(deviceID: self.device.value, accountID: "acct", expiresAt: fresh.expiresAt, at: t0, clientAddress: nil)])
        #expect(due.result.grant?.refreshToken == token && due.result.grant?.wrote == true)
        // A creation and a new session write as before.
        #expect(!login(nil).effects.isEmpty)
        #expect(!login(record([("acct", .active)])).effects.isEmpty)
    }

    @Test("several accounts: accountId picks one without changing the current; newAccount adds one up to the limit")
    func severalAccounts() {
        let slot = RateSlot(kind: .accountCreation, key: "203.0.113.7", limit: RateLimit(count: 3, period: .seconds(60)), at: t0)
        let two = record([("home", .active), ("work", .active)])
        #expect(login(two, .account("work")).result.grant?.account.accountID == "work")
        #expect(login(two, .account("work")).result.grant?.accounts.map(\.current) == [true, false])
        #expect(login(two, .account("nobody")).result == .failure(.accountNotOnDevice))
        let added = login(two, .newAccount)
        #expect(added.result.grant?.created == true)
        #expect(added.result.grant?.accounts.map(\.accountID) == ["home", "work", "new"])
        #expect(added.result.grant?.accounts.map(\.current) == [false, false, true])
        #expect(added.effects.contains(.setCurrentAccount(deviceID: device.value, accountID: "new")))
        #expect(!added.effects.contains { if case .createDevice = $0 { true } else { false } })
        #expect(login(record((1...5).map { ("a\($0)", .active) }), .newAccount).result == .failure(.deviceAccountLimit(5)))
        #expect(login(two, .newAccount, slot: slot).effects.last == .takeSlot(slot))
        #expect(!login(two, slot: slot).effects.contains(.takeSlot(slot)), "a login of an existing account is not limited")
        // The current account moved away: the plain login says so and lists the accounts left.
        let moved = record([("home", .moved), ("work", .active)], current: "home")
        #expect(login(moved).result == .failure(.deviceTransferred(at: t0, accounts: [ListedAccount(accountID: "work", userName: "u-work", current: false)])))
        #expect(login(moved, .account("work")).result.grant != nil)
    }

    @Test("removing an account: refused when it would strand the account; the most recent other becomes current; the last retires the device")
    func removal() {
        func remove(_ d: DeviceRecord, _ account: String, abandon: Bool = false, pending: [TransferRecord] = []) -> Plan<Void> {
            let f = Facts(
                (.device(device.value), DeviceRecord?.some(d)), (.pendingTransfers(.of(account)), pending),
                (.appleLink(.id(account)), AppleLink?.none), (.recoveryCode(.id(account)), RecoveryCodeRecord?.none),
                (.backupKeys(.id(account)), [BackupKeyRecord]()))
            return planned(RemoveAccountCommand(deviceID: device.value, accountID: account, abandon: abandon, now: t0), f)
        }
        var three = record([("a", .active), ("b", .active), ("c", .active)])
        three.accounts[1].lastLoginAt = t0 + .seconds(5)
        #expect(remove(three, "a").result.refusal == .accountWouldBeLost)
        #expect(remove(three, "a").effects.isEmpty)
        #expect(remove(three, "x", abandon: true).result.refusal == .accountNotOnDevice)
        let removed = remove(three, "a", abandon: true)
        #expect(removed.result.refusal == nil)
        #expect(removed.effects.contains(.setCurrentAccount(deviceID: device.value, accountID: "b")), "b was used most recently")
        #expect(!remove(three, "c", abandon: true).effects.contains { if case .setCurrentAccount = $0 { true } else { false } })
        var pending = transfer()
        pending.accountID = "a"
        #expect(remove(record([("a", .active)]), "a", pending: [transfer(expiresIn: .seconds(0))].map { var t = $0; t.accountID = "a"; return t }).result.refusal
                == .accountWouldBeLost, "an expired transfer is no way back")
        let last = remove(record([("a", .active)]), "a", pending: [pending])
        #expect(last.result.refusal == nil, "a pending transfer can still bring the account to a device")
        #expect(last.effects.contains(.retireDevice(id: device.value, at: t0)))
        #expect(last.effects.contains(.endPair(deviceID: device.value, accountID: "a", state: .removed, reason: "removed by the app", at: t0)))
    }

    @Test("who acted is stored as device, system or operator:NAME, and an unknown value is refused")
    func initiator() throws {
        for who in [Initiator.device, .system, .support(operator: "mia")] {
            #expect(try Initiator(stored: who.description) == who)
        }
        #expect(throws: UnknownStoredValue.self) { try Initiator(stored: "robot") }
        #expect(throws: UnknownStoredValue.self) { let _: PairState = try UnknownStoredValue.decode("lost", column: "state") }
    }
}

extension Effect {
    var auditKind: AuditEvent.Kind? {
        if case .audit(let e) = self { return e.kind }
        return nil
    }

    /// The type of the webhook event the effect writes to the outbox.
    var webhookType: String? {
        if case .enqueue(let e) = self, e.kind == .webhook { return e.type }
        return nil
    }
}

/// The refresh token a login hands back, derived and never stored.
@Suite("Session keys")
struct SessionKeyTests {
    let now = Timestamp(milliseconds: 1_795_000_000_000)

    @Test("the device secret recovers the current token; a wrong one recovers nothing; a refresh moves it on")
    func roundTrip() throws {
        let secret = RandomToken.make(byteCount: 32)
        let (session, token) = PairSession.open(sessionID: "s1", key: .random(), deviceSecret: secret, at: now, expiresAt: now + .seconds(60))
        #expect(session.currentToken(deviceSecret: secret) == token)
        #expect(session.currentToken(deviceSecret: RandomToken.make(byteCount: 32)) == nil)
        let (next, nextToken) = session.rotated(by: token, fallbackKey: .random(), expiresAt: now + .seconds(120))
        #expect(nextToken != token)
        #expect(next.generation == 1)
        #expect(next.currentToken(deviceSecret: secret) == nextToken, "a login after a refresh hands out the refreshed token")
        #expect(next.keyByDevice == session.keyByDevice)
    }

    @Test("what the database stores does not unwrap the key, also for a 128-character device secret")
    func dumpRecoversNothing() throws {
        let secret = String(repeating: "a1B2c3D4", count: 16)  // 128 characters: longer than an HMAC-SHA256 block
        let key = SessionKey.random()
        let wrapped = key.wrapped(by: secret, sessionID: "s1")
        let stored = SecretHash(of: secret).bytes  // devices.secret_hash
        // HMAC keyed by a secret over 64 bytes is HMAC keyed by its SHA-256: a pad keyed by
        // the secret would be computable from the stored hash. Ours is not.
        for message in ["session-key:s1", "s1\u{0}\(secret)"] {
            let guess = HMAC<SHA256>.authenticationCode(for: Array(message.utf8), using: SymmetricKey(data: stored))
            #expect(zip(wrapped, guess).map { $0 ^ $1 } != key.bytes)
        }
        #expect(SessionKey.unwrap(wrapped, by: secret, sessionID: "s1") == key)
    }

    @Test("a stored session's wrapped key and refresh token are what they were when it was stored (known answers, from Python's hmac)")
    func storedFormatIsStable() {
        let key = SessionKey(bytes: Array(0..<32))
        let wrapped = key.wrapped(by: "device-secret", sessionID: "s1")
        #expect(wrapped.map { String(format: "%02x", $0) }.joined() == "44d51aabdcba99658e579105ba67a7510d40742c7a93430eaee905577c07b31e",
                "the pad changed: every stored session would stop unwrapping")
        #expect(key.refreshToken(sessionID: "s1", generation: 3) == "uJTsYJAZYS_PvdNfgKxMeRap0w_eRTQUFJT_BF8tOkk",
                "the refresh token's derivation changed: every open session's token would change")
    }
}

/// The same effects, in any order (each as often).
extension Facts {
    /// Facts given by hand, as a store would have read them.
    init(_ values: (FactKey, any Sendable)...) {
        self.init()
        for (key, value) in values { record(key, value) }
    }
}

/// An operation's plan in a test. A fact the test did not give stops the test where it is read
/// (`Facts.value` asserts), so a throw here means the same.
func planned<Operation: StoreOperation>(_ operation: Operation, _ facts: Facts) -> Plan<Operation.Success> {
    do { return try operation.plan(facts) } catch { fatalError("\(error)") }
}

func sameEffects(_ a: [Effect], _ b: [Effect]) -> Bool {
    guard a.count == b.count else { return false }
    var rest = b
    for effect in a {
        guard let i = rest.firstIndex(of: effect) else { return false }
        rest.remove(at: i)
    }
    return true
}
