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
    public func claim(_ request: ClaimRequest, clientAddress: String?) async throws -> SessionGrant {
        let usable: TransferRecord
        switch request.proof {
        case .password(let email, let password):
            usable = try await verifiedTransfer(email: email, password: password, clientAddress: clientAddress)
        case .transferCode(let typed):
            // A code that cannot be one is unknown, as one that is not stored: the same answer.
            let code = OneTimeCode(typed: typed, characters: OneTimeCode.transferCodeLength)
            var transfer: TransferRecord?
            if let code { transfer = try await store.transfer(codeHash: code.hash) }
            guard let transfer, transfer.method == .code, transfer.isOpen(at: clock.now()) else {
                observer.claimFailed()
                throw TransferError.invalidTransferCredentials
            }
            usable = transfer
        }
        let now = clock.now()
        let result = try await store.execute(
            ClaimCommand(
                transferID: usable.id, accountID: usable.accountID, deviceID: request.deviceID,
                deviceSecret: request.deviceSecret, replaceExistingAccount: request.replaceExistingAccount,
                addAccount: request.addAccount, maxAccounts: policy.maxAccountsPerDevice, now: now,
                fresh: freshSession(now: now), clientAddress: clientAddress))
        switch result {
        case .claimed(let grant):
            observer.claimWon()
            return grant
        case .rejected(let error):
            if error == .invalidTransferCredentials { observer.claimFailed() }
            throw error
        }
    }

    /// The open password transfer of `email` whose password is `password`; a wrong password
    /// is counted against it.
    private func verifiedTransfer(email: Email, password: String, clientAddress: String?) async throws -> TransferRecord {
        let transfer = try await store.pendingTransfer(emailKey: email.key)
        let before = clock.now()
        if let transfer, transfer.isOpen(at: before), let until = transfer.lock(at: before) {
            observer.claimFailed()
            throw TransferError.tooManyAttempts(retryAfterSeconds: before.secondsUntil(until))
        }
        // Unknown, expired and open transfers all cost one verification.
        let usable = transfer.flatMap { $0.isOpen(at: before) ? $0 : nil }
        var hash = dummyHash
        if case .password(_, _, let stored) = usable?.proof { hash = stored }
        let verified = try await hasher.verify(password, against: hash)
        guard let usable, verified else {
            observer.claimFailed()
            if let usable {
                try await recordFailure(transferID: usable.id, clientAddress: clientAddress)
            }
            throw TransferError.invalidTransferCredentials
        }
        return usable
    }

    private func recordFailure(transferID: String, clientAddress: String?) async throws {
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

/// Applies a claim whose password verified (or whose code was found): puts the account on the new device (beside its
/// accounts, or in place of them), takes it off its old device (which keeps its other
/// accounts, and is retired when none is left), consumes the transfer and opens a session;
/// or changes nothing.
public struct ClaimCommand: StoreOperation {
    public var transferID: String
    /// The account, the new device and the claim's options (the account is the transfer's: it
    /// never changes; the service read it with the transfer).
    public var move: MoveToDevice
    public init(
        transferID: String, accountID: String, deviceID: DeviceID, deviceSecret: String, replaceExistingAccount: Bool = false,
        addAccount: Bool = false, maxAccounts: Int = 5, now: Timestamp, fresh: FreshSession, clientAddress: String?
    ) {
        self.transferID = transferID
        move = MoveToDevice(
            accountID: accountID, deviceID: deviceID, deviceSecret: deviceSecret, replaceExistingAccount: replaceExistingAccount,
            addAccount: addAccount, maxAccounts: maxAccounts, now: now, fresh: fresh, clientAddress: clientAddress,
            transferID: transferID, how: "")
    }

    public var now: Timestamp { move.now }

    public var reads: Reads {
        Reads(transfer: transferID, device: move.deviceID.value, accountDevices: move.accountID, account: move.accountID)
    }

    public func plan(_ facts: Facts) -> Plan<ClaimResult> {
        let accountID = move.accountID
        // The transfer may have been claimed, cancelled, replaced or voided since the password was checked.
        guard let transfer = facts.transfer, transfer.accountID == accountID, transfer.isOpen(at: now),
            let account = facts.account, facts.accountDeletedAt == nil
        else { return Plan(.rejected(.invalidTransferCredentials)) }
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
    }
}

/// What a claim and a move with Sign in with Apple share: the new device's checks, the
/// account taken off its old device (which keeps its other accounts, and is retired when none
/// is left) and put on the new one as its current account, and a session opened there.
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
    /// The transfer claimed, for the audit trail (none for a move with Apple).
    public var transferID: String?
    /// Added to the reason the old device records (" with Sign in with Apple").
    public var how: String

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
    public func plan(_ facts: Facts, account: SessionAccount) -> Result<([Effect], SessionGrant), TransferError> {
        let newDevice = deviceID.value
        var effects: [Effect] = []
        var staying: [DeviceAccountSummary] = []
        if let device = facts.device {
            guard device.retiredAt == nil else { return .failure(.deviceRetired) }
            guard device.secretHash.matches(SecretHash(of: deviceSecret)) else { return .failure(.invalidDeviceCredentials) }
            if device.account(accountID)?.state == .active { return .failure(.deviceAlreadyBound) }
            if addAccount {
                guard device.active.count < maxAccounts else { return .failure(.deviceAccountLimit(maxAccounts)) }
                staying = device.summaries.map { DeviceAccountSummary(accountID: $0.accountID, userName: $0.userName, current: false) }
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
        let claimed = SessionAccount(accountID: accountID, userName: account.userName, migrationFlag: false)
        let grant = SessionGrant(
            account: claimed, deviceID: newDevice, sessionID: session.sessionID, refreshToken: token, created: false,
            accounts: staying + [DeviceAccountSummary(accountID: accountID, userName: account.userName, current: true)])
        return .success((effects, grant))
    }
}

public enum ClaimResult: Sendable, Equatable {
    case claimed(SessionGrant)
    case rejected(TransferError)
}

/// Counts one wrong password against a transfer. Attempts during a lock, or on a transfer no
/// longer open, are not counted. The lock restarts the consecutive count, so after it ends
/// the user has another full series.
public struct FailedClaimCommand: StoreOperation {
    public var transferID: String
    public var now: Timestamp
    public var policy: LockPolicy
    public var clientAddress: String?
    public init(transferID: String, now: Timestamp, policy: LockPolicy, clientAddress: String?) {
        self.transferID = transferID
        self.now = now
        self.policy = policy
        self.clientAddress = clientAddress
    }

    public var reads: Reads { Reads(transfer: transferID) }

    public func plan(_ facts: Facts) -> Plan<FailedClaimResult> {
        guard let transfer = facts.transfer, transfer.isOpen(at: now) else {
            return Plan(.notCounted(.invalidTransferCredentials))
        }
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
