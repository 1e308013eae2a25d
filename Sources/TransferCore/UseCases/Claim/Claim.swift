// The claim on the new device (`POST /v1/transfers/claim`, `POST /v1/transfers/apple`): the
// user proves they hold the account (a `ClaimProof`, one file each: `Proof+*.swift`), then one
// transaction checks the proof against what it read, moves the account onto the device
// (`MoveToDevice`) and consumes the proof; or changes nothing but what a refusal spends.

/// The device a claim binds, and its options.
public struct ClaimTarget: Sendable {
    public var deviceID: DeviceID
    public var deviceSecret: String
    /// The device's accounts give way to the claimed one (kept, reachable by support).
    public var replaceExistingAccount: Bool
    /// Add the account beside those the device holds (never together with `replaceExistingAccount`).
    public var addAccount: Bool
    /// With `replaceExistingAccount`: an account pushed off with no way back is abandoned (kept
    /// for support) instead of refusing the claim with `accountWouldBeLost`, as a removal's `abandon`.
    public var abandonExisting: Bool
    public init(
        deviceID: DeviceID, deviceSecret: String, replaceExistingAccount: Bool = false, addAccount: Bool = false, abandonExisting: Bool = false
    ) {
        self.deviceID = deviceID
        self.deviceSecret = deviceSecret
        self.replaceExistingAccount = replaceExistingAccount
        self.addAccount = addAccount
        self.abandonExisting = abandonExisting
    }
}

/// What a device sends to claim an account: a proof, and itself.
public struct ClaimRequest: Sendable {
    public enum Proof: Sendable {
        /// An email and temporary password (`temporaryPassword` has passed `FieldRules.claimPassword`).
        case password(Email, String)
        /// A transfer code as the user typed or scanned it (read by `OneTimeCode`'s rules).
        case transferCode(String)
        /// The account's recovery code as the user typed it (the same rules).
        case recoveryCode(String)
        /// One of the account's backup keys, as the app found it in the platform's store.
        case backupKey(String)
        /// A verified Sign in with Apple identity and the nonce its token carried.
        case apple(AppleIdentity, nonce: String)
    }
    public var proof: Proof
    public var target: ClaimTarget
    public init(proof: Proof, target: ClaimTarget) {
        self.proof = proof
        self.target = target
    }
}

/// One way to prove a claim on an account: what it reads in the claim's transaction, how it
/// checks what was read, and what winning consumes and records. Adding a way is one file
/// with one type conforming to this, and one case in `ClaimRequest.Proof`.
public protocol ClaimProof: Sendable {
    /// The account the proof leads to, as the claim's statements name it (a code leads to its
    /// account inside the transaction: no read before it).
    var account: AccountRef { get }
    /// What the proof reads besides what every move reads (the new device, the account and its device).
    var reads: [FactKey] { get }
    /// The refusal when the proof's account is not there (deleted meanwhile).
    var accountGone: TransferError { get }
    /// Checks the proof against what was read.
    func check(_ facts: Facts, target: ClaimTarget, now: Timestamp, clientAddress: String?) throws -> ProofCheck
    /// What winning consumes and records (after the move's own effects), and the webhook's `method`.
    func won(_ facts: Facts, move: MoveToDevice) throws -> (effects: [Effect], method: WebhookEvent.ClaimMethod)
}

extension ClaimProof {
    public var accountGone: TransferError { .invalidTransferCredentials }
}

/// What a proof's check found. `spent` is applied whatever the claim then decides (a used-up
/// Apple nonce, a failed code guess's audit).
public enum ProofCheck: Sendable, Equatable {
    /// The proof holds for this account: the move is decided next.
    case holds(accountID: String, method: MoveMethod, spent: [Effect] = [])
    /// This very proof was won by the device: the winner repeats its claim (its answer may have
    /// been lost). `wonAt` is when its move was won: the claim holds the repeat only while the
    /// device's pair of the account is the one that move made (`ClaimRepeat`), and then answers
    /// with a session.
    case repeated(accountID: String, method: MoveMethod, wonAt: Timestamp?, spent: [Effect] = [])
    case refused(TransferError, spent: [Effect] = [])
}

/// A secret that moves an account once, found by its hash: a recovery code, a backup key.
public protocol SingleUseSecret {
    var accountID: String { get }
    var usedAt: Timestamp? { get }
    var usedByDevice: String? { get }
    var isUsable: Bool { get }
}

extension ProofCheck {
    /// The check of a single-use secret: one that matches nothing, or that another device
    /// used (or that was replaced), is refused as a guess; used by this very device, it is
    /// that device's repeat; else it holds.
    static func singleUse(
        _ secret: (some SingleUseSecret)?, method: MoveMethod, target: ClaimTarget, now: Timestamp, clientAddress: String?
    ) -> ProofCheck {
        let guessed = ProofCheck.refused(.invalidTransferCredentials, spent: [.guessedCode(at: now, clientAddress: clientAddress)])
        guard let secret else { return guessed }
        if secret.usedByDevice == target.deviceID.value {
            return .repeated(accountID: secret.accountID, method: method, wonAt: secret.usedAt)
        }
        guard secret.isUsable else { return guessed }
        return .holds(accountID: secret.accountID, method: method)
    }
}

/// What a claim that was not refused comes to.
public enum ClaimOutcome: Sendable, Equatable {
    case claimed(SessionGrant)
    /// The proof was won by this device before: its answer may have been lost. The service
    /// checks the repeat (`RepeatClaimCommand`) and answers with a session (`ClaimRepeat`).
    case repeated(accountID: String, method: MoveMethod, wonAt: Timestamp?)
}

/// The claim's transaction: checks the proof, puts the account on the new device (beside its
/// accounts, or in place of them), takes it off its old device (which keeps its other
/// accounts, and is retired when none is left), consumes the proof and opens a session.
public struct ClaimCommand<Proof: ClaimProof>: StoreOperation {
    public var proof: Proof
    public var target: ClaimTarget
    public var maxAccounts: Int
    public var now: Timestamp
    public var fresh: FreshSession
    public var clientAddress: String?
    /// A code claim's `--claim-limit` slot, taken as the transaction's last statement whatever
    /// the claim decides (a password claim took its slot before argon2 ran, an Apple move before
    /// its identity token was verified).
    public var slot: RateSlot?
    /// With `replaceExistingAccount`: the accounts the new device held when the service looked
    /// (`MoveToDevice.replacing`), whose ways back the claim reads.
    public var replacing: [String]

    public init(
        _ proof: Proof, target: ClaimTarget, maxAccounts: Int = 5, now: Timestamp, fresh: FreshSession, clientAddress: String?,
        slot: RateSlot? = nil, replacing: [String] = []
    ) {
        self.proof = proof
        self.target = target
        self.maxAccounts = maxAccounts
        self.now = now
        self.fresh = fresh
        self.clientAddress = clientAddress
        self.slot = slot
        self.replacing = replacing
    }

    /// The proof's rows, then what every move locks: the new device, the account's device, the
    /// account; and the ways back of the accounts it may push off the device.
    public var reads: [FactKey] {
        proof.reads + [.device(target.deviceID.value), .accountDevices(proof.account), .account(proof.account)]
            + replacing.flatMap(WayBack.facts(of:))
    }

    public func plan(_ facts: Facts) throws -> Plan<ClaimOutcome> {
        var plan = try decide(facts)
        if let slot { plan.effects.append(.takeSlot(slot)) }
        return plan
    }

    func decide(_ facts: Facts) throws -> Plan<ClaimOutcome> {
        switch try proof.check(facts, target: target, now: now, clientAddress: clientAddress) {
        case .refused(let error, let spent):
            return Plan(refusing: error, spent)
        case .repeated(let accountID, let method, let wonAt, let spent):
            // Checked in a transaction of its own (`RepeatClaimCommand`): this one may have read
            // the device before the winner's transaction, which created it, committed (the proof's
            // row, read after the device, was what it waited for).
            return Plan(.repeated(accountID: accountID, method: method, wonAt: wonAt), spent)
        case .holds(let accountID, let method, let spent):
            guard let account = try facts.account(proof.account), account.id == accountID, account.deletedAt == nil else {
                return Plan(refusing: proof.accountGone, spent)
            }
            let move = MoveToDevice(
                account: proof.account, accountID: accountID, target: target, maxAccounts: maxAccounts, now: now, fresh: fresh,
                clientAddress: clientAddress, method: method, replacing: replacing)
            switch try move.plan(facts, account: account.summary) {
            case .failure(let error):
                return Plan(refusing: error, spent)
            case .success(let (effects, grant)):
                let won = try proof.won(facts, move: move)
                return Plan(.claimed(grant), spent + effects + won.effects + [try move.claimedEvent(facts, method: won.method)])
            }
        }
    }
}

extension TransferService {
    /// The claim. A password is verified first, always exactly once (against a dummy hash
    /// for an unknown email), so only someone who knows it learns anything about the device.
    /// A code is looked up by its hash inside the claim's transaction: no hash worker, no
    /// lockout (80 bits and `--claim-limit` make guessing hopeless). Either way, every failure
    /// is the same `invalid_transfer_credentials`.
    ///
    /// Each claim takes a slot of `--claim-limit` for the client. A password claim takes it in
    /// a statement of its own before argon2 runs (given back when nothing was tried); a code
    /// claim, which costs no hash, takes it as the last statement of its transaction: one
    /// write, not two. An Apple move's route took it before the identity token was verified
    /// (`withClaimSlot`).
    public func claim(_ request: ClaimRequest, clientAddress: String?) async throws -> SessionGrant {
        let slot = policy.limits.slot(.claim, client: clientAddress, now: clock.now())
        switch request.proof {
        case .password(let email, let password):
            return try await withSlot(slot, keepsSlot: Self.wasTried) {
                try await claim(email: email, password: password, request.target, clientAddress: clientAddress)
            }
        case .transferCode(let typed):
            return try await claim(TransferCodeProof(typed: typed), request.target, slot: slot, clientAddress: clientAddress)
        case .recoveryCode(let typed):
            return try await claim(RecoveryCodeProof(typed: typed), request.target, slot: slot, clientAddress: clientAddress)
        case .backupKey(let key):
            return try await claim(BackupKeyProof(key: key), request.target, slot: slot, clientAddress: clientAddress)
        case .apple(let identity, let nonce):
            return try await claim(
                AppleProof(sub: identity.sub, nonceHash: SecretHash(of: nonce)), request.target, slot: nil, clientAddress: clientAddress)
        }
    }

    /// Runs the claim's transaction with `proof`, and answers. A claim that may replace the
    /// device's accounts first looks which they are (a read outside the transaction): the
    /// transaction then reads and locks their ways back in the lock order, before the device.
    func claim(_ proof: some ClaimProof, _ target: ClaimTarget, slot: RateSlot?, clientAddress: String?) async throws -> SessionGrant {
        let now = clock.now()
        var replacing: [String] = []
        if target.replaceExistingAccount, let device = try await store.device(target.deviceID.value, at: now) {
            replacing = device.active.map(\.account.accountID)
        }
        let outcome: ClaimOutcome
        do {
            outcome = try await store.execute(
                ClaimCommand(
                    proof, target: target, maxAccounts: policy.maxAccountsPerDevice, now: now, fresh: freshSession(now: now),
                    clientAddress: clientAddress, slot: slot, replacing: replacing)
            ).get()
        } catch TransferError.invalidTransferCredentials {
            observer.claimFailed()
            throw TransferError.invalidTransferCredentials
        }
        switch outcome {
        case .claimed(let grant):
            observer.claimWon()
            return grant
        case .repeated(let accountID, let method, let wonAt):
            let checked = try await store.execute(
                RepeatClaimCommand(
                    target: target, accountID: accountID, method: method, wonAt: wonAt, now: clock.now(), clientAddress: clientAddress))
            guard case .success = checked else {
                observer.claimFailed()
                throw TransferError.invalidTransferCredentials
            }
            return try await repeatedClaim(of: accountID, target, clientAddress: clientAddress)
        }
    }

    /// The winner's repeated claim (its transaction found the device holding the account by
    /// that move, and wrote `transfer.claim_repeated`) answers as the first did: a session for
    /// the account on the device (a login of the pair), and changes nothing else. An account
    /// that left the device meanwhile is no claim to repeat. Any refusal is the claim's one 401.
    func repeatedClaim(of accountID: String, _ target: ClaimTarget, clientAddress: String?) async throws -> SessionGrant {
        do {
            return try await login(
                deviceID: target.deviceID, deviceSecret: target.deviceSecret, target: .account(accountID), clientAddress: clientAddress)
        } catch is TransferError {
            observer.claimFailed()
            throw TransferError.invalidTransferCredentials
        }
    }
}

/// The winner's repeat of its claim: the device, with its secret, holds the account by that very
/// move (`ClaimRepeat`); anything else is the claim's one 401 (who won is not told to someone
/// who holds used-up credentials and the winner's device id). Writes `transfer.claim_repeated`
/// and nothing else.
public struct RepeatClaimCommand: StoreOperation {
    public var target: ClaimTarget
    public var accountID: String
    public var method: MoveMethod
    public var wonAt: Timestamp?
    public var now: Timestamp
    public var clientAddress: String?
    public init(target: ClaimTarget, accountID: String, method: MoveMethod, wonAt: Timestamp?, now: Timestamp, clientAddress: String?) {
        self.target = target
        self.accountID = accountID
        self.method = method
        self.wonAt = wonAt
        self.now = now
        self.clientAddress = clientAddress
    }

    public var reads: [FactKey] { [.device(target.deviceID.value)] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        guard let device = try facts.device(target.deviceID.value), device.secretHash.matches(SecretHash(of: target.deviceSecret)),
            ClaimRepeat.holds(device.account(accountID), wonAt: wonAt)
        else {
            return Plan(refusing: .invalidTransferCredentials, [.guessedCode(at: now, clientAddress: clientAddress)])
        }
        return Plan((), [
            .audit(AuditEvent(
                at: now, kind: .claimRepeated, accountID: accountID, deviceID: device.id, transferID: method.transferID,
                reason: "the winning device repeated its claim\(method.how)", clientAddress: clientAddress))
        ])
    }
}

// What the two transfer proofs (password, code) share: a pending transfer claimed.
extension TransferRecord {
    /// Checks a transfer found for a claim (nil: none): claimed meanwhile by this very device
    /// (the same claim sent twice, a retry while the first was still queued, is the winner's
    /// repeat, not a wrong code), or open and not locked. It may have been claimed, cancelled,
    /// replaced or voided since the service looked.
    static func claimCheck(_ transfer: TransferRecord?, target: ClaimTarget, now: Timestamp, refusalSpends spent: [Effect]) -> ProofCheck {
        guard let transfer else { return .refused(.invalidTransferCredentials, spent: spent) }
        if transfer.wasClaimed(by: target.deviceID) {
            return .repeated(accountID: transfer.accountID, method: .transfer(id: transfer.id), wonAt: transfer.endedAt)
        }
        guard transfer.isOpen(at: now) else { return .refused(.invalidTransferCredentials, spent: spent) }
        if let until = transfer.lock(at: now) { return .refused(.tooManyAttempts(retryAfterSeconds: now.secondsUntil(until))) }
        return .holds(accountID: transfer.accountID, method: .transfer(id: transfer.id))
    }

    /// The transfer claimed: ended, audited, and the webhook's method (support's, or the user's kind).
    func claimed(by move: MoveToDevice) -> (effects: [Effect], method: WebhookEvent.ClaimMethod) {
        let device = move.target.deviceID.value
        return (
            [
                .endTransfer(id: id, state: .claimed, at: move.now, claimedBy: device),
                .audit(AuditEvent(
                    at: move.now, kind: .transferClaimed, accountID: accountID, deviceID: device, transferID: id,
                    clientAddress: move.clientAddress)),
            ],
            issuedBy != .device ? .support : method == .code ? .code : .password
        )
    }
}

extension Facts {
    /// Cancels the account's pending transfers (`query` is how the claim read them): the user
    /// came back another way.
    func cancelPendingTransfers(_ query: PendingTransferQuery, of accountID: String, at now: Timestamp, because reason: String) throws -> [Effect] {
        try pendingTransfers(query).filter { $0.accountID == accountID }.flatMap { transfer -> [Effect] in
            [
                .endTransfer(id: transfer.id, state: .cancelled, at: now),
                .audit(AuditEvent(at: now, kind: .transferCancelled, accountID: accountID, transferID: transfer.id, actor: .system, reason: reason)),
                .webhook(.transferCancelled, accountID: accountID, at: now, ["transferId": transfer.id]),
            ]
        }
    }
}
