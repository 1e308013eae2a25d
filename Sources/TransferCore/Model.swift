/// How an account is on a device: active, or how it left it.
public enum PairState: String, Sendable, Codable {
    /// The device logs in to the account.
    case active
    /// A claim moved the account to another device: its login here answers `410 device_transferred`.
    case moved
    /// Support revoked the device (stolen phone): `403 device_revoked`.
    case revoked
    /// Another account took the device over through `replaceExistingAccount`; kept for support.
    case replaced
    /// The app removed the account from the device (`DELETE /v1/devices/accounts/{id}`).
    case removed
}

/// A device (one app install) as a store reads it inside a transaction, with every account
/// it holds or held.
public struct DeviceRecord: Sendable, Equatable {
    public var id: String
    public var secretHash: SecretHash
    public var createdAt: Timestamp
    /// The account the app shows. It may name an account that was moved away: the plain
    /// login keeps saying so until the app picks another.
    public var currentAccountID: String?
    /// Set when the last account left: the deviceId is never bound again.
    public var retiredAt: Timestamp?
    /// Oldest first, whatever their state.
    public var accounts: [PairRecord]
    /// Which of its accounts the device's push tokens reach.
    public var pushMode: PushMode
    /// The attestation it recorded when it created an account while attestation was on.
    public var attestation: DeviceAttestation?

    public init(
        id: String, secretHash: SecretHash, createdAt: Timestamp, currentAccountID: String?, retiredAt: Timestamp? = nil,
        accounts: [PairRecord], pushMode: PushMode = .all, attestation: DeviceAttestation? = nil
    ) {
        self.attestation = attestation
        self.id = id
        self.secretHash = secretHash
        self.createdAt = createdAt
        self.currentAccountID = currentAccountID
        self.retiredAt = retiredAt
        self.accounts = accounts
        self.pushMode = pushMode
    }

    /// True while `accountID` is on the device: the check of every call a device makes for one of its accounts.
    public func holds(_ accountID: String) -> Bool { account(accountID)?.state == .active }

    /// The accounts on the device now, oldest first.
    public var active: [PairRecord] { accounts.filter { $0.state == .active } }

    public func account(_ id: String) -> PairRecord? { accounts.first { $0.account.accountID == id } }

    /// What the session body lists: every account on the device, and which is current.
    public var summaries: [ListedAccount] {
        active.map {
            ListedAccount(accountID: $0.account.accountID, userName: $0.account.userName, current: $0.account.accountID == currentAccountID)
        }
    }

    /// The account that becomes current when `leaving` leaves: the most recently used of the others.
    public func successor(leaving: String) -> String? {
        active.filter { $0.account.accountID != leaving }
            .max { ($0.lastLoginAt ?? $0.addedAt, $0.account.accountID) < ($1.lastLoginAt ?? $1.addedAt, $1.account.accountID) }?
            .account.accountID
    }

    /// `accountID` leaves the device: its pair ends as `state`; if it was current, the most
    /// recently used of the others becomes current; a device left with none is retired (the
    /// account stays its current one, so the device's login says what happened to it).
    public func leave(_ accountID: String, state: PairState, reason: String, at now: Timestamp) -> [Effect] {
        var effects: [Effect] = [.endPair(deviceID: id, accountID: accountID, state: state, reason: reason, at: now)]
        if let next = successor(leaving: accountID) {
            if currentAccountID == accountID { effects.append(.setCurrentAccount(deviceID: id, accountID: next)) }
        } else {
            effects.append(.retireDevice(id: id, at: now))
        }
        return effects
    }
}

/// A pair: one account on one device (a `device_accounts` row), with its app session.
public struct PairRecord: Sendable, Equatable {
    public var account: AccountSummary
    public var state: PairState
    public var addedAt: Timestamp
    /// The pair's last activity (a login, a refresh of its session or of a sibling app's on
    /// it, a hand-off), recorded to the activity resolution (`ActivityResolution`).
    public var lastLoginAt: Timestamp?
    public var endedAt: Timestamp?
    public var endedReason: String?
    /// The pair's app session, if one is open (it may have expired).
    public var session: PairSession?
    /// The account's pushes on this device (`PUT /v1/me/push`).
    public var pushEnabled: Bool
    /// The account was deleted (it left the device then).
    public var accountDeleted: Bool

    public init(
        account: AccountSummary, state: PairState, addedAt: Timestamp, lastLoginAt: Timestamp? = nil, endedAt: Timestamp? = nil,
        endedReason: String? = nil, session: PairSession? = nil, pushEnabled: Bool = true, accountDeleted: Bool = false
    ) {
        self.pushEnabled = pushEnabled
        self.accountDeleted = accountDeleted
        self.account = account
        self.state = state
        self.addedAt = addedAt
        self.lastLoginAt = lastLoginAt
        self.endedAt = endedAt
        self.endedReason = endedReason
        self.session = session
    }
}

/// One of a device's accounts as the session body lists it (`accounts[]`); encoded with the
/// body's keys, it is that JSON object, and `transfer account --json`'s `otherAccounts[]`.
public struct ListedAccount: Sendable, Equatable, Codable {
    public var accountID: String
    public var userName: String
    public var current: Bool
    public init(accountID: String, userName: String, current: Bool) {
        self.accountID = accountID
        self.userName = userName
        self.current = current
    }

    enum CodingKeys: String, CodingKey {
        case accountID = "accountId"
        case userName, current
    }
}

public enum TransferState: String, Sendable, Codable {
    case pending, claimed, cancelled, replaced, expired, voided
}

/// How the new phone proves it may claim a transfer.
public enum TransferMethod: String, Sendable, Codable, CaseIterable {
    /// An email and a temporary password the user chose (or support generated).
    case password
    /// A transfer code the old phone showed (or support issued).
    case code
}

/// The proof a transfer is claimed with, as stored: never the password or the code itself.
public enum TransferProof: Sendable, Equatable {
    /// The email as typed (trimmed), its key (NFC, lower-case), the argon2id hash of the password.
    case password(email: String, emailKey: String, hash: String)
    /// The SHA-256 of the transfer code's canonical form.
    case code(SecretHash)

    public var method: TransferMethod {
        switch self {
        case .password: .password
        case .code: .code
        }
    }

    /// The email of a password transfer.
    public var email: String? {
        if case .password(let email, _, _) = self { return email }
        return nil
    }

    public var emailKey: String? {
        if case .password(_, let key, _) = self { return key }
        return nil
    }

    /// A password transfer's proof: the email as typed and its key, the password's hash.
    public static func password(_ email: Email, hash: String) -> TransferProof {
        .password(email: email.display, emailKey: email.key, hash: hash)
    }
}

/// A transfer as a store reads it.
public struct TransferRecord: Sendable, Equatable {
    public var id: String
    public var accountID: String
    public var proof: TransferProof
    public var state: TransferState
    public var createdAt: Timestamp
    public var expiresAt: Timestamp
    public var failedConsecutive: Int
    public var failedTotal: Int
    public var lockedUntil: Timestamp?
    /// Set up by the app on the old phone, or issued by support.
    public var issuedBy: Initiator
    /// When it stopped being pending.
    public var endedAt: Timestamp?
    /// The device that claimed it.
    public var claimedBy: String?

    public init(
        id: String, accountID: String, proof: TransferProof, state: TransferState,
        createdAt: Timestamp, expiresAt: Timestamp, failedConsecutive: Int = 0, failedTotal: Int = 0,
        lockedUntil: Timestamp? = nil, issuedBy: Initiator = .device, endedAt: Timestamp? = nil, claimedBy: String? = nil
    ) {
        self.endedAt = endedAt
        self.claimedBy = claimedBy
        self.issuedBy = issuedBy
        self.id = id
        self.accountID = accountID
        self.proof = proof
        self.state = state
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.failedConsecutive = failedConsecutive
        self.failedTotal = failedTotal
        self.lockedUntil = lockedUntil
    }

    /// A password transfer, as v1 knew them.
    public init(
        id: String, accountID: String, email: String, emailKey: String, passwordHash: String, state: TransferState,
        createdAt: Timestamp, expiresAt: Timestamp, failedConsecutive: Int = 0, failedTotal: Int = 0,
        lockedUntil: Timestamp? = nil, issuedBy: Initiator = .device
    ) {
        self.init(
            id: id, accountID: accountID, proof: .password(email: email, emailKey: emailKey, hash: passwordHash), state: state,
            createdAt: createdAt, expiresAt: expiresAt, failedConsecutive: failedConsecutive, failedTotal: failedTotal,
            lockedUntil: lockedUntil, issuedBy: issuedBy)
    }

    public var method: TransferMethod { proof.method }
    /// The email of a password transfer.
    public var email: String? { proof.email }
    public var emailKey: String? { proof.emailKey }

    /// Pending and not yet expired at `now`.
    public func isOpen(at now: Timestamp) -> Bool { state == .pending && now < expiresAt }
    /// Locked after wrong passwords in a row, until the returned time; nil when not locked at `now`.
    public func lock(at now: Timestamp) -> Timestamp? { lockedUntil.flatMap { now < $0 ? $0 : nil } }
    public func isLocked(at now: Timestamp) -> Bool { lock(at: now) != nil }

    /// A pending transfer found past its expiry is marked expired as of when it expired, as the
    /// pruner marks it (`ended_at = expires_at`), whoever finds it first.
    public var markedExpired: Effect { .endTransfer(id: id, state: .expired, at: expiresAt) }

    /// Claimed by `device`: the device may repeat its claim (a lost answer) while the account
    /// is on it by this claim (`ClaimRepeat`).
    public func wasClaimed(by device: DeviceID) -> Bool {
        state == .claimed && claimedBy == device.value
    }
}

/// A claim's answer can be lost: the device that won may repeat the claim, with the same
/// credentials (the same Apple ID with a fresh nonce), and gets a session again, for as long
/// as the account is on that device by that very move (contract v1.3: no time limit). The
/// proof says when its move was won (`ProofCheck.repeated`); the claim checks that the pair's
/// `addedAt` is that time, so a later move onto the same device (the account left and came
/// back another way) is not this proof's to repeat. Nothing changes but the audit trail
/// (`transfer.claim_repeated`).
public enum ClaimRepeat {
    /// Whether the device's pair of the account is the one a move won at `wonAt` made.
    public static func holds(_ pair: PairRecord?, wonAt: Timestamp?) -> Bool {
        guard let pair, pair.state == .active, let wonAt else { return false }
        return pair.addedAt == wonAt
    }
}

/// An account's recovery code, as stored: its hash, and once used, when and by which device.
public struct RecoveryCodeRecord: Sendable, Equatable, SingleUseSecret {
    public var accountID: String
    public var codeHash: SecretHash
    public var createdAt: Timestamp
    public var usedAt: Timestamp?
    public var usedByDevice: String?
    public init(accountID: String, codeHash: SecretHash, createdAt: Timestamp, usedAt: Timestamp? = nil, usedByDevice: String? = nil) {
        self.accountID = accountID
        self.codeHash = codeHash
        self.createdAt = createdAt
        self.usedAt = usedAt
        self.usedByDevice = usedByDevice
    }

    /// Not used yet: a way back.
    public var isUsable: Bool { usedAt == nil }

    /// 20 characters, 100 bits.
    public static let length = 20
}

/// Where the app keeps a backup key: the platform's end-to-end-encrypted store that follows
/// the user to a new phone.
public enum BackupKeyStore: String, Sendable, Codable, CaseIterable {
    /// iCloud Keychain, as a synchronizable item.
    case icloudKeychain = "icloud-keychain"
    /// Android's Block Store.
    case blockStore = "block-store"
}

/// A backup key as stored: its hash, its store, and once used, when and by which device.
public struct BackupKeyRecord: Sendable, Equatable, SingleUseSecret {
    public var accountID: String
    public var store: BackupKeyStore
    public var keyHash: SecretHash
    public var createdAt: Timestamp
    public var usedAt: Timestamp?
    public var usedByDevice: String?
    public init(
        accountID: String, store: BackupKeyStore, keyHash: SecretHash, createdAt: Timestamp, usedAt: Timestamp? = nil,
        usedByDevice: String? = nil
    ) {
        self.accountID = accountID
        self.store = store
        self.keyHash = keyHash
        self.createdAt = createdAt
        self.usedAt = usedAt
        self.usedByDevice = usedByDevice
    }

    /// Not used yet: a way back.
    public var isUsable: Bool { usedAt == nil }
}

/// A backup key as the app receives it once: 256 random bits, 43 base64url characters.
public struct BackupKey: Sendable, CustomStringConvertible {
    /// The key as sent to the app.
    public let value: String

    /// 32 random bytes from the system CSPRNG.
    public static func make() -> BackupKey { BackupKey(value: RandomToken.make(byteCount: 32)) }

    private init(value: String) { self.value = value }

    /// What is stored and looked up.
    public var hash: SecretHash { SecretHash(of: value) }

    /// The hash a claim looks up for what it was sent: a text that is no key (not 43
    /// base64url characters) gets a hash no key has, and so the same answer as an unknown key.
    public static func lookupHash(of sent: String) -> SecretHash {
        guard sent.utf8.count == length, Base64URL.decode(sent)?.count == 32 else { return SecretHash(bytes: []) }
        return SecretHash(of: sent)
    }

    public static let length = 43

    /// Never the key itself.
    public var description: String { "<backup key>" }
}

/// The ways an account can come back to a new phone if its phone is lost, as `GET /v1/me` lists them.
public enum WayBack: String, Sendable, Codable, CaseIterable {
    case transfer
    case apple
    case recoveryCode
    case backupKey
}

/// What `/v1/me` shows.
public struct AccountProfile: Sendable, Equatable {
    public struct Device: Sendable, Equatable {
        public var deviceID: String
        public var boundAt: Timestamp
        public var lastLoginAt: Timestamp?
        public init(deviceID: String, boundAt: Timestamp, lastLoginAt: Timestamp?) {
            self.deviceID = deviceID
            self.boundAt = boundAt
            self.lastLoginAt = lastLoginAt
        }
    }
    public struct PendingTransfer: Sendable, Equatable {
        public var method: TransferMethod
        /// The email of a password transfer; a code is never shown again.
        public var email: String?
        public var createdAt: Timestamp
        public var expiresAt: Timestamp
        public init(method: TransferMethod = .password, email: String?, createdAt: Timestamp, expiresAt: Timestamp) {
            self.method = method
            self.email = email
            self.createdAt = createdAt
            self.expiresAt = expiresAt
        }
    }
    public var accountID: String
    public var userName: String
    public var createdAt: Timestamp
    /// The device the account was last moved to (the contract's `transferId`).
    public var movedToDeviceID: String?
    public var transfer: PendingTransfer?
    public var activeDevices: [Device]
    /// The account's Apple ID link, if any.
    public var apple: AppleLink?
    /// When its recovery code was made, while it has an unused one.
    public var recoveryCodeCreatedAt: Timestamp?
    /// Its unused backup keys (never the keys), by store.
    public var backupKeys: [BackupKeyRecord]

    /// What would bring the account back if its phone were lost.
    public var waysBack: [WayBack] {
        (transfer != nil ? [.transfer] : []) + (apple != nil ? [.apple] : []) + (recoveryCodeCreatedAt != nil ? [.recoveryCode] : [])
            + (backupKeys.isEmpty ? [] : [.backupKey])
    }

    /// Raised exactly while a transfer is pending (set up, not expired, cancelled, claimed or voided).
    public var migrationFlag: Bool { transfer != nil }

    public init(
        accountID: String, userName: String, createdAt: Timestamp, movedToDeviceID: String?,
        transfer: PendingTransfer?, activeDevices: [Device], apple: AppleLink? = nil, recoveryCodeCreatedAt: Timestamp? = nil,
        backupKeys: [BackupKeyRecord] = []
    ) {
        self.backupKeys = backupKeys
        self.recoveryCodeCreatedAt = recoveryCodeCreatedAt
        self.apple = apple
        self.accountID = accountID
        self.userName = userName
        self.createdAt = createdAt
        self.movedToDeviceID = movedToDeviceID
        self.transfer = transfer
        self.activeDevices = activeDevices
    }
}

/// One line of the audit trail.
public struct AuditEvent: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable, Codable {
        case accountCreated = "account.created"
        case login = "device.login"
        case loginFailed = "device.login_failed"
        case deviceBound = "device.bound"
        case accountRemoved = "account.removed_from_device"
        case deviceMoved = "device.moved"
        case deviceReplaced = "device.replaced"
        case deviceRevoked = "device.revoked"
        case logout = "session.logout"
        case refreshReuse = "session.refresh_reuse"
        case handoff = "session.handoff"
        case handoffReuse = "session.handoff_reuse"
        case transferSetUp = "transfer.set_up"
        case transferCancelled = "transfer.cancelled"
        case transferClaimed = "transfer.claimed"
        case recoveryCodeSet = "recovery_code.set"
        case recoveryCodeDeleted = "recovery_code.deleted"
        case recoveryCodeUsed = "recovery_code.used"
        case backupKeySet = "backup_key.set"
        case backupKeyDeleted = "backup_key.deleted"
        case backupKeyUsed = "backup_key.used"
        /// The device that won a claim repeated it (its answer was lost): a session again, nothing else changed.
        case claimRepeated = "transfer.claim_repeated"
        case claimFailed = "transfer.claim_failed"
        case transferLocked = "transfer.locked"
        case transferVoided = "transfer.voided"
        case transferUnlocked = "transfer.unlocked"
        case transferIssued = "transfer.issued"
        case serviceKeyCreated = "service_key.created"
        case serviceKeyRevoked = "service_key.revoked"
        case appleLinked = "apple.linked"
        case appleUnlinked = "apple.unlinked"
        case appleMoved = "apple.moved"
        case appleEmailChanged = "apple.email_changed"
        case accountDeleted = "account.deleted"
        case outboxRetried = "outbox.retried"
        case signingKeyRotated = "signing_key.rotated"
        /// A push token registered on one device while another held it: recorded for the
        /// accounts of both devices.
        case pushTokenMoved = "push.token_moved"
        /// Signing keys sealed under a key-encryption key (at start, by a rotation, or `transfer keys rotate-kek`).
        case signingKeysEncrypted = "signing_key.encrypted"
    }

    public var at: Timestamp
    public var kind: Kind
    public var accountID: String?
    public var deviceID: String?
    public var transferID: String?
    public var actor: Initiator
    public var reason: String?
    public var clientAddress: String?
    /// How many identical events this row stands for (see ``aggregateKey``), and the latest's time.
    public var repeats = 1
    public var lastAt: Timestamp?

    public init(
        at: Timestamp, kind: Kind, accountID: String?, deviceID: String? = nil, transferID: String? = nil,
        actor: Initiator = .device, reason: String? = nil, clientAddress: String? = nil
    ) {
        self.at = at
        self.kind = kind
        self.accountID = accountID
        self.deviceID = deviceID
        self.transferID = transferID
        self.actor = actor
        self.reason = reason
        self.clientAddress = clientAddress
    }
}

extension AuditEvent.Kind {
    /// The kinds a client can repeat at will, one row each otherwise: a logout after each
    /// login, a failed login or claim guess, a winner repeating its claim.
    public var aggregates: Bool {
        switch self {
        case .logout, .loginFailed, .claimFailed, .claimRepeated: true
        default: false
        }
    }
}

extension AuditEvent {
    /// Identical events of an aggregating kind within one hour (UTC) share one row: the same
    /// kind, account, device, transfer, actor, reason and client. nil for the other kinds.
    public var aggregateKey: SecretHash? {
        guard kind.aggregates else { return nil }
        let fields = [
            kind.rawValue, accountID ?? "", deviceID ?? "", transferID ?? "", actor.description, reason ?? "", clientAddress ?? "",
            String(at.milliseconds / 3_600_000),
        ]
        return SecretHash(of: fields.joined(separator: "\u{1F}"))
    }
}
