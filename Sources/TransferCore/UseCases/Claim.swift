// The claim on the new device (`POST /v1/transfers/claim`): one argon2 verification, then
// one transaction that binds the new device, retires the old ones and consumes the transfer.
// Wrong passwords are counted against the transfer: a lock after 5 in a row, void at 20.

/// Brute-force limits on one transfer.
public struct LockPolicy: Sendable, Equatable {
    /// Wrong passwords in a row that lock the transfer.
    public var consecutiveFailures: Int
    public var lockDuration: Duration
    /// Wrong passwords in total that void the transfer.
    public var totalFailures: Int

    public init(consecutiveFailures: Int = 5, lockDuration: Duration = .seconds(15 * 60), totalFailures: Int = 20) {
        self.consecutiveFailures = consecutiveFailures
        self.lockDuration = lockDuration
        self.totalFailures = totalFailures
    }

    public static let standard = LockPolicy()
}

/// What a device sends to claim a transfer: the proof (`temporaryPassword` has passed
/// `FieldRules.claimPassword`), its device and the claim's options.
public struct ClaimRequest: Sendable {
    public enum Proof: Sendable {
        case password(Email, String)
        /// A transfer code as the user typed or scanned it (read by `OneTimeCode`'s rules).
        case transferCode(String)
        /// The account's recovery code as the user typed it (the same rules).
        case recoveryCode(String)
    }
    public var proof: Proof
    public var deviceID: DeviceID
    public var deviceSecret: String
    public var replaceExistingAccount: Bool
    /// Add the account beside those the device holds (never together with `replaceExistingAccount`).
    public var addAccount: Bool
    public init(proof: Proof, deviceID: DeviceID, deviceSecret: String, replaceExistingAccount: Bool, addAccount: Bool = false) {
        self.proof = proof
        self.deviceID = deviceID
        self.deviceSecret = deviceSecret
        self.replaceExistingAccount = replaceExistingAccount
        self.addAccount = addAccount
    }

    public init(
        email: Email, temporaryPassword: String, deviceID: DeviceID, deviceSecret: String,
        replaceExistingAccount: Bool, addAccount: Bool = false
    ) {
        self.init(
            proof: .password(email, temporaryPassword), deviceID: deviceID, deviceSecret: deviceSecret,
            replaceExistingAccount: replaceExistingAccount, addAccount: addAccount)
    }
}

extension TransferService {
    /// The claim. A password is verified first, always exactly once (against a dummy hash
    /// for an unknown email), so only someone who knows it learns anything about the device.
    /// A code is looked up by its hash: no hash worker, no lockout (80 bits and
    /// `--claim-limit` make guessing hopeless). Either way, every failure is the same
    /// `invalid_transfer_credentials`.
    ///
    /// Each claim takes a slot of `--claim-limit` for the client. A password claim takes it in
    /// a statement of its own before argon2 runs (given back when nothing was tried); a code
    /// claim, which costs no hash, takes it as the last statement of its transaction (or as
    /// its only one when no code matched): one write, not two.
    public func claim(_ request: ClaimRequest, clientAddress: String?) async throws -> SessionGrant {
        let slot = policy.limits.slot(.claim, client: clientAddress, now: clock.now())
        if case .password = request.proof {
            return try await withSlot(slot, keepsSlot: Self.wasTried) { try await claim(request, slot: nil, clientAddress: clientAddress) }
        }
        return try await claim(request, slot: slot, clientAddress: clientAddress)
    }

    /// The claim, taking `slot` (if any) in its transaction.
    private func claim(_ request: ClaimRequest, slot: RateSlot?, clientAddress: String?) async throws -> SessionGrant {
        let device = (id: request.deviceID, secret: request.deviceSecret)
        let found: ClaimableProof
        switch request.proof {
        case .password(let email, let password):
            found = try await verifiedTransfer(email: email, password: password, device: request.deviceID, clientAddress: clientAddress)
        case .transferCode(let typed):
            // A code that cannot be one is unknown, as one that is not stored: the same answer.
            var transfer: TransferRecord?
            if let code = OneTimeCode(typed: typed, characters: OneTimeCode.transferCodeLength) {
                transfer = try await store.transfer(codeHash: code.hash)
            }
            let now = clock.now()
            if let transfer, transfer.method == .code, transfer.wasClaimed(by: request.deviceID, repeatableAt: now) {
                found = .repeated(accountID: transfer.accountID)
            } else if let transfer, transfer.method == .code, transfer.isOpen(at: now) {
                found = .claimable(.transfer(transfer.id), accountID: transfer.accountID)
            } else {
                found = .none
            }
        case .recoveryCode(let typed):
            var record: RecoveryCodeRecord?
            if let code = OneTimeCode(typed: typed, characters: RecoveryCodeRecord.length) {
                record = try await store.recoveryCode(hash: code.hash)
            }
            if let record, record.usedByDevice == request.deviceID.value, ClaimRepeat.allows(wonAt: record.usedAt, now: clock.now()) {
                found = .repeated(accountID: record.accountID)
            } else if let record, record.isUsable {
                found = .claimable(.recoveryCode(record.codeHash), accountID: record.accountID)
            } else {
                found = .none
            }
        }
        switch found {
        case .none:
            try await store.execute(UnknownCodeClaimCommand(slot: slot, now: clock.now(), clientAddress: clientAddress))
            observer.claimFailed()
            throw TransferError.invalidTransferCredentials
        case .repeated(let accountID):
            if let slot { try await store.execute(TakeSlotCommand(slot)) }
            return try await repeatedClaim(of: accountID, device, clientAddress: clientAddress)
        case .claimable(let proof, let accountID):
            let now = clock.now()
            let result = try await store.execute(
                ClaimCommand(
                    proof: proof, move: MoveToDevice(
                        accountID: accountID, deviceID: request.deviceID, deviceSecret: request.deviceSecret,
                        replaceExistingAccount: request.replaceExistingAccount, addAccount: request.addAccount,
                        maxAccounts: policy.maxAccountsPerDevice, now: now, fresh: freshSession(now: now), clientAddress: clientAddress,
                        method: proof.method),
                    slot: slot))
            return try await answer(result, device, clientAddress: clientAddress)
        }
    }

    /// What a claim found before its transaction.
    private enum ClaimableProof {
        case none
        case claimable(ClaimCommand.Proof, accountID: String)
        /// The device already won this claim, recently: its answer may have been lost.
        case repeated(accountID: String)
    }

    /// A claim's result as the device's answer.
    func answer(_ result: ClaimResult, _ device: (id: DeviceID, secret: String), clientAddress: String?) async throws -> SessionGrant {
        switch result {
        case .claimed(let grant):
            observer.claimWon()
            return grant
        case .repeated(let accountID):
            return try await repeatedClaim(of: accountID, device, clientAddress: clientAddress)
        case .rejected(let error):
            if error == .invalidTransferCredentials { observer.claimFailed() }
            throw error
        }
    }

    /// The winner's repeated claim answers as the first did: a session for the account on the
    /// device (a login of the pair, which checks the device secret), and changes nothing else.
    /// An account that left the device since is no claim to repeat. Any refusal, a wrong
    /// device secret included, is the claim's one 401: who won a claim is not told to
    /// someone who holds its used-up credentials and the winner's device id.
    func repeatedClaim(of accountID: String, _ device: (id: DeviceID, secret: String), clientAddress: String?) async throws -> SessionGrant {
        do {
            return try await login(deviceID: device.id, deviceSecret: device.secret, target: .account(accountID), clientAddress: clientAddress)
        } catch is TransferError {
            observer.claimFailed()
            throw TransferError.invalidTransferCredentials
        }
    }

    /// The open password transfer of `email` whose password is `password` (a wrong password
    /// is counted against it), or the one `device` claimed within `ClaimRepeat.window`. Always
    /// exactly one verification, whichever it is.
    private func verifiedTransfer(email: Email, password: String, device: DeviceID, clientAddress: String?) async throws -> ClaimableProof {
        let transfer = try await store.pendingTransfer(emailKey: email.key)
        let before = clock.now()
        if let transfer, transfer.isOpen(at: before), let until = transfer.lock(at: before) {
            observer.claimFailed()
            throw TransferError.tooManyAttempts(retryAfterSeconds: before.secondsUntil(until))
        }
        // Unknown, expired, open and recently won transfers all cost one verification.
        var usable = transfer.flatMap { $0.isOpen(at: before) ? $0 : nil }
        var repeated = false
        if usable == nil,
            let won = try await store.claimedTransfer(emailKey: email.key, by: device.value, since: before - ClaimRepeat.window),
            won.wasClaimed(by: device, repeatableAt: before)
        {
            usable = won
            repeated = true
        }
        var hash = dummyHash
        if case .password(_, _, let stored) = usable?.proof { hash = stored }
        let verified = try await hasher.verify(password, against: hash)
        guard let usable, verified else {
            // Every wrong password costs the same work, whatever the email: the failure is
            // written for an open transfer, and the same statements run on no transfer for an
            // unknown email, so the answer's time does not tell which it was.
            observer.claimFailed()
            try await recordFailure(transferID: repeated ? nil : usable?.id, clientAddress: clientAddress)
            throw TransferError.invalidTransferCredentials
        }
        return repeated ? .repeated(accountID: usable.accountID) : .claimable(.transfer(usable.id), accountID: usable.accountID)
    }

    private func recordFailure(transferID: String?, clientAddress: String?) async throws {
        let result = try await store.execute(
            FailedClaimCommand(transferID: transferID, now: clock.now(), policy: policy.lock, clientAddress: clientAddress))
        switch result {
        case .counted, .voided: return
        case .locked: observer.transferLocked()
        // Locked by a concurrent attempt while this one was verifying: refused, not counted.
        case .notCounted(let error): throw error
        }
    }
}

/// Applies a claim whose password verified (or whose code was found): puts the account on
/// the new device (beside its accounts, or in place of them), takes it off its old device
/// (which keeps its other accounts, and is retired when none is left), consumes the transfer
/// or the recovery code and opens a session; or changes nothing.
public struct ClaimCommand: StoreOperation {
    /// What the claim is proven with.
    public enum Proof: Sendable, Equatable {
        /// A pending transfer (password or code).
        case transfer(String)
        /// The account's recovery code, by its hash.
        case recoveryCode(SecretHash)

        var method: MoveMethod {
            switch self {
            case .transfer(let id): .transfer(id: id)
            case .recoveryCode: .recoveryCode
            }
        }
    }
    public var proof: Proof
    /// The account, the new device and the claim's options (the account is the transfer's or
    /// the code's: it never changes; the service read it with them).
    public var move: MoveToDevice
    /// A code claim's `--claim-limit` slot, taken as the transaction's last statement whatever
    /// the claim decides (a password claim took its slot before argon2 ran).
    public var slot: RateSlot?

    public init(proof: Proof, move: MoveToDevice, slot: RateSlot? = nil) {
        self.proof = proof
        self.move = move
        self.slot = slot
    }

    public init(
        transferID: String, accountID: String, deviceID: DeviceID, deviceSecret: String, replaceExistingAccount: Bool = false,
        addAccount: Bool = false, maxAccounts: Int = 5, now: Timestamp, fresh: FreshSession, clientAddress: String?
    ) {
        proof = .transfer(transferID)
        move = MoveToDevice(
            accountID: accountID, deviceID: deviceID, deviceSecret: deviceSecret, replaceExistingAccount: replaceExistingAccount,
            addAccount: addAccount, maxAccounts: maxAccounts, now: now, fresh: fresh, clientAddress: clientAddress,
            method: .transfer(id: transferID))
    }

    public var now: Timestamp { move.now }

    /// The rows a move locks (the same order as the Apple move's), and the proof.
    public var reads: Reads {
        switch proof {
        case .transfer(let id):
            Reads(transfer: id, device: move.deviceID.value, accountDevices: move.accountID, account: move.accountID)
        case .recoveryCode:
            Reads(
                pendingTransfers: PendingTransferQuery(emailKey: nil, accountID: move.accountID), device: move.deviceID.value,
                accountDevices: move.accountID, account: move.accountID, recoveryCode: move.accountID)
        }
    }

    public func plan(_ facts: Facts) -> Plan<ClaimResult> {
        var plan = decide(facts)
        if let slot { plan.effects.append(.takeSlot(slot)) }
        return plan
    }

    func decide(_ facts: Facts) -> Plan<ClaimResult> {
        let accountID = move.accountID
        guard let account = facts.account, facts.accountDeletedAt == nil else { return Plan(.rejected(.invalidTransferCredentials)) }
        switch proof {
        case .transfer:
            // Claimed meanwhile by this very device: the same claim sent twice (a retry while
            // the first was still queued) is the winner's repeat, not a wrong code.
            if let transfer = facts.transfer, transfer.accountID == accountID, transfer.wasClaimed(by: move.deviceID, repeatableAt: now) {
                return Plan(.repeated(accountID: accountID))
            }
            // The transfer may have been claimed, cancelled, replaced or voided since the password was checked.
            guard let transfer = facts.transfer, transfer.accountID == accountID, transfer.isOpen(at: now) else {
                return Plan(.rejected(.invalidTransferCredentials))
            }
            if let until = transfer.lock(at: now) {
                return Plan(.rejected(.tooManyAttempts(retryAfterSeconds: now.secondsUntil(until))))
            }
            switch move.plan(facts, account: account) {
            case .failure(let error): return Plan(.rejected(error))
            case .success(let (effects, grant)):
                return Plan(.claimed(grant), effects + [
                    .endTransfer(id: transfer.id, state: .claimed, at: now, claimedBy: move.deviceID.value),
                    .audit(AuditEvent(
                        at: now, kind: .transferClaimed, accountID: accountID, deviceID: move.deviceID.value, transferID: transfer.id,
                        clientAddress: move.clientAddress)),
                    move.claimedEvent(facts, method: transfer.issuedBy != .device ? .support : transfer.method == .code ? .code : .password),
                ])
            }
        case .recoveryCode(let hash):
            if let code = facts.recoveryCode, code.codeHash.matches(hash), code.usedByDevice == move.deviceID.value,
                ClaimRepeat.allows(wonAt: code.usedAt, now: now)
            {
                return Plan(.repeated(accountID: accountID))
            }
            // Used or replaced since the service looked: as if unknown.
            guard let code = facts.recoveryCode, code.codeHash.matches(hash), code.isUsable else {
                return Plan(.rejected(.invalidTransferCredentials))
            }
            switch move.plan(facts, account: account) {
            case .failure(let error): return Plan(.rejected(error))
            case .success(let (effects, grant)):
                return Plan(.claimed(grant), effects + [
                    .useRecoveryCode(accountID: accountID, deviceID: move.deviceID.value, at: now),
                    .audit(AuditEvent(
                        at: now, kind: .recoveryCodeUsed, accountID: accountID, deviceID: move.deviceID.value,
                        clientAddress: move.clientAddress)),
                ] + facts.cancelPendingTransfers(of: accountID, at: now, because: "the account moved with its recovery code") + [
                    move.claimedEvent(facts, method: .recoveryCode)
                ])
            }
        }
    }
}

/// How an account moves onto a new device: the method as a value.
public enum MoveMethod: Sendable, Equatable {
    /// A claimed transfer (password or code).
    case transfer(id: String)
    case apple
    case recoveryCode

    /// The transfer claimed, for the audit trail (none for the other methods).
    public var transferID: String? {
        if case .transfer(let id) = self { return id }
        return nil
    }

    /// Added to the reason the old device records.
    var how: String {
        switch self {
        case .transfer: ""
        case .apple: " with Sign in with Apple"
        case .recoveryCode: " with its recovery code"
        }
    }
}

extension Facts {
    /// Cancels the account's pending transfers: the user came back another way.
    func cancelPendingTransfers(of accountID: String, at now: Timestamp, because reason: String) -> [Effect] {
        pendingTransfers.filter { $0.accountID == accountID }.flatMap { transfer -> [Effect] in
            [
                .endTransfer(id: transfer.id, state: .cancelled, at: now),
                .audit(AuditEvent(at: now, kind: .transferCancelled, accountID: accountID, transferID: transfer.id, actor: .system, reason: reason)),
                .webhook(.transferCancelled, accountID: accountID, at: now, ["transferId": transfer.id]),
            ]
        }
    }
}

/// What a claim, a move with Sign in with Apple and a claim with a recovery code share: the
/// new device's checks, the account taken off its old device (which keeps its other accounts,
/// and is retired when none is left) and put on the new one as its current account, and a
/// session opened there.
public struct MoveToDevice: Sendable {
    public var accountID: String
    public var deviceID: DeviceID
    public var deviceSecret: String
    public var replaceExistingAccount: Bool
    public var addAccount: Bool
    public var maxAccounts: Int
    public var now: Timestamp
    public var fresh: FreshSession
    public var clientAddress: String?
    public var method: MoveMethod

    public init(
        accountID: String, deviceID: DeviceID, deviceSecret: String, replaceExistingAccount: Bool, addAccount: Bool, maxAccounts: Int,
        now: Timestamp, fresh: FreshSession, clientAddress: String?, method: MoveMethod
    ) {
        self.accountID = accountID
        self.deviceID = deviceID
        self.deviceSecret = deviceSecret
        self.replaceExistingAccount = replaceExistingAccount
        self.addAccount = addAccount
        self.maxAccounts = maxAccounts
        self.now = now
        self.fresh = fresh
        self.clientAddress = clientAddress
        self.method = method
    }

    var transferID: String? { method.transferID }
    var how: String { method.how }

    /// `transfer.claimed` for the app backend: from the device the account was on (none when
    /// it was on no device), to the new one.
    public func claimedEvent(_ facts: Facts, method: WebhookEvent.ClaimMethod) -> Effect {
        let from = facts.accountDevices.first { $0.account(accountID)?.state == .active }?.id
        return .webhook(
            .transferClaimed, accountID: accountID, at: now,
            ["transferId": transferID, "fromDeviceId": from, "toDeviceId": deviceID.value, "method": method.rawValue])
    }

    /// The effects and the session, or the device error a claim answers. `facts` holds the
    /// new device (`device`), the account's device (`accountDevices`).
    public func plan(_ facts: Facts, account: AccountSummary) -> Result<([Effect], SessionGrant), TransferError> {
        let newDevice = deviceID.value
        var effects: [Effect] = []
        var staying: [ListedAccount] = []
        if let device = facts.device {
            guard device.retiredAt == nil else { return .failure(.deviceRetired) }
            guard device.secretHash.matches(SecretHash(of: deviceSecret)) else { return .failure(.invalidDeviceCredentials) }
            if device.account(accountID)?.state == .active { return .failure(.deviceAlreadyBound) }
            if addAccount {
                guard device.active.count < maxAccounts else { return .failure(.deviceAccountLimit(maxAccounts)) }
                staying = device.summaries.map { ListedAccount(accountID: $0.accountID, userName: $0.userName, current: false) }
            } else if !device.active.isEmpty {
                guard replaceExistingAccount else { return .failure(.deviceHasAccount) }
                // The device's accounts lose it (kept, reachable by support).
                for other in device.active.map(\.account.accountID) {
                    effects += [
                        .endPair(
                            deviceID: newDevice, accountID: other, state: .replaced,
                            reason: "taken over by account \(accountID) (replaceExistingAccount)", at: now),
                        .audit(AuditEvent(
                            at: now, kind: .deviceReplaced, accountID: other, deviceID: newDevice, transferID: transferID,
                            reason: (transferID == nil ? "account \(accountID) moved here\(how)" : "claimed account \(accountID)")
                                + " with replaceExistingAccount", clientAddress: clientAddress)),
                        .webhook(.accountRemovedFromDevice, accountID: other, at: now, ["deviceId": newDevice]),
                    ]
                }
            }
        } else {
            effects.append(.createDevice(id: newDevice, secretHash: SecretHash(of: deviceSecret), at: now))
        }
        let moved = "moved to device \(newDevice)\(how)"
        // Read before its row was locked: skip a device the account left meanwhile.
        for old in facts.accountDevices where old.account(accountID)?.state == .active {
            effects += [
                .endPair(deviceID: old.id, accountID: accountID, state: .moved, reason: moved, at: now),
                .audit(AuditEvent(
                    at: now, kind: .deviceMoved, accountID: accountID, deviceID: old.id, transferID: transferID, reason: moved,
                    clientAddress: clientAddress)),
            ]
            // It stays the old device's current account, so that device's plain login says it moved.
            if old.active.allSatisfy({ $0.account.accountID == accountID }) { effects.append(.retireDevice(id: old.id, at: now)) }
        }
        let (session, token) = PairSession.open(
            sessionID: fresh.sessionID, key: fresh.key, deviceSecret: deviceSecret, at: now, expiresAt: fresh.expiresAt)
        effects += [
            .addAccount(deviceID: newDevice, accountID: accountID, at: now),
            .setCurrentAccount(deviceID: newDevice, accountID: accountID),
            .setMovedTo(accountID: accountID, deviceID: newDevice),
            .openSession(deviceID: newDevice, accountID: accountID, session, at: now, clientAddress: clientAddress),
        ]
        let claimed = AccountSummary(accountID: accountID, userName: account.userName, migrationFlag: false)
        let grant = SessionGrant(
            account: claimed, deviceID: newDevice, sessionID: session.sessionID, refreshToken: token, created: false,
            accounts: staying + [ListedAccount(accountID: accountID, userName: account.userName, current: true)])
        return .success((effects, grant))
    }
}

public enum ClaimResult: Sendable, Equatable {
    case claimed(SessionGrant)
    /// The device already holds the account through this move, recently: its answer may have
    /// been lost. The service answers with a session (`ClaimRepeat`).
    case repeated(accountID: String)
    case rejected(TransferError)
}

/// A code claim (transfer or recovery code) whose code matched nothing: audited as a failed
/// claim without an account, as a wrong password for an unknown email is, so that
/// `transfer stats` counts guessed codes too, with the slot of `--claim-limit` (if any) as
/// the transaction's last statement. A spent slot rolls the audit back: a refused attempt
/// leaves nothing.
public struct UnknownCodeClaimCommand: StoreOperation {
    public var slot: RateSlot?
    public var now: Timestamp
    public var clientAddress: String?
    public init(slot: RateSlot?, now: Timestamp, clientAddress: String?) {
        self.slot = slot
        self.now = now
        self.clientAddress = clientAddress
    }

    public var reads: Reads { Reads() }

    public func plan(_ facts: Facts) -> Plan<Void> {
        Plan((), [.audit(AuditEvent(at: now, kind: .claimFailed, accountID: nil, clientAddress: clientAddress))] + (slot.map { [.takeSlot($0)] } ?? []))
    }
}

/// Counts one wrong password against a transfer. Attempts during a lock, or on a transfer no
/// longer open, are not counted. The lock restarts the consecutive count, so after it ends
/// the user has another full series.
public struct FailedClaimCommand: StoreOperation {
    /// nil: the password matched no open transfer (an unknown email). The same statements
    /// then run on `nobody`, a transfer id no transfer has, and the failure is audited without
    /// an account: the same work as a counted failure, so its time tells nothing.
    public var transferID: String?
    public var now: Timestamp
    public var policy: LockPolicy
    public var clientAddress: String?
    public init(transferID: String?, now: Timestamp, policy: LockPolicy, clientAddress: String?) {
        self.transferID = transferID
        self.now = now
        self.policy = policy
        self.clientAddress = clientAddress
    }

    /// Not a UUID: no transfer has it.
    static let nobody = "no-transfer"

    public var reads: Reads { Reads(transfer: transferID ?? Self.nobody) }

    public func plan(_ facts: Facts) -> Plan<FailedClaimResult> {
        guard let transferID, let transfer = facts.transfer else {
            return Plan(.notCounted(.invalidTransferCredentials), [
                .countFailures(transferID: Self.nobody, consecutive: 1, total: 1, lockedUntil: nil),
                .audit(AuditEvent(at: now, kind: .claimFailed, accountID: nil, clientAddress: clientAddress)),
            ])
        }
        guard transfer.isOpen(at: now) else { return Plan(.notCounted(.invalidTransferCredentials)) }
        if let until = transfer.lock(at: now) {
            return Plan(.notCounted(.tooManyAttempts(retryAfterSeconds: now.secondsUntil(until))))
        }
        let account = transfer.accountID
        let total = transfer.failedTotal + 1
        let consecutive = transfer.failedConsecutive + 1
        let failed = Effect.audit(AuditEvent(
            at: now, kind: .claimFailed, accountID: account, transferID: transferID, clientAddress: clientAddress))
        if total >= policy.totalFailures {
            return Plan(.voided, [
                .countFailures(transferID: transferID, consecutive: consecutive, total: total, lockedUntil: nil),
                .endTransfer(id: transferID, state: .voided, at: now),
                failed,
                .audit(AuditEvent(
                    at: now, kind: .transferVoided, accountID: account, transferID: transferID, actor: .system,
                    reason: "\(total) wrong passwords")),
                .webhook(.transferVoided, accountID: account, at: now, ["transferId": transferID]),
            ])
        }
        if consecutive >= policy.consecutiveFailures {
            let until = now + policy.lockDuration
            return Plan(.locked(until: until), [
                .countFailures(transferID: transferID, consecutive: 0, total: total, lockedUntil: until),
                failed,
                .audit(AuditEvent(
                    at: now, kind: .transferLocked, accountID: account, transferID: transferID, actor: .system,
                    reason: "\(policy.consecutiveFailures) wrong passwords in a row")),
                .webhook(.transferLocked, accountID: account, at: now, ["transferId": transferID, "lockedUntil": until.rfc3339]),
            ])
        }
        return Plan(.counted, [
            .countFailures(transferID: transferID, consecutive: consecutive, total: total, lockedUntil: nil), failed,
        ])
    }
}

public enum FailedClaimResult: Sendable, Equatable {
    /// Counted; the transfer stays open.
    case counted
    /// Counted, and this failure locked the transfer until the given time.
    case locked(until: Timestamp)
    /// Counted, and this failure voided the transfer.
    case voided
    /// Not counted: the transfer was locked, or no longer open, by the time it was recorded.
    case notCounted(TransferError)
}
