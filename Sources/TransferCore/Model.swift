/// The state of one device UUID's binding to an account.
public enum DeviceState: String, Sendable, Codable {
    /// Logs in to its account.
    case active
    /// Retired by a claim on another device: auto-login answers `410 device_transferred`.
    case moved
    /// Retired by support (stolen phone): auto-login answers `403 device_revoked`.
    case revoked
    /// Taken over by another account through `replaceExistingAccount`; kept for support.
    case replaced
}

public enum TransferState: String, Sendable, Codable {
    case pending, claimed, cancelled, replaced, expired, voided
}

/// A device's binding as a store reads it inside a transaction.
public struct DeviceBinding: Sendable, Equatable {
    public var deviceID: String
    public var accountID: String
    public var secretHash: SecretHash
    public var state: DeviceState
    public var boundAt: Timestamp
    public var lastLoginAt: Timestamp?
    public var endedAt: Timestamp?
    public var endedReason: String?

    public init(
        deviceID: String, accountID: String, secretHash: SecretHash, state: DeviceState, boundAt: Timestamp,
        lastLoginAt: Timestamp? = nil, endedAt: Timestamp? = nil, endedReason: String? = nil
    ) {
        self.deviceID = deviceID
        self.accountID = accountID
        self.secretHash = secretHash
        self.state = state
        self.boundAt = boundAt
        self.lastLoginAt = lastLoginAt
        self.endedAt = endedAt
        self.endedReason = endedReason
    }
}

/// A transfer as a store reads it.
public struct TransferRecord: Sendable, Equatable {
    public var id: String
    public var accountID: String
    public var email: String
    public var emailKey: String
    public var passwordHash: String
    public var state: TransferState
    public var createdAt: Timestamp
    public var expiresAt: Timestamp
    public var failedConsecutive: Int
    public var failedTotal: Int
    public var lockedUntil: Timestamp?

    public init(
        id: String, accountID: String, email: String, emailKey: String, passwordHash: String, state: TransferState,
        createdAt: Timestamp, expiresAt: Timestamp, failedConsecutive: Int = 0, failedTotal: Int = 0,
        lockedUntil: Timestamp? = nil
    ) {
        self.id = id
        self.accountID = accountID
        self.email = email
        self.emailKey = emailKey
        self.passwordHash = passwordHash
        self.state = state
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.failedConsecutive = failedConsecutive
        self.failedTotal = failedTotal
        self.lockedUntil = lockedUntil
    }

    /// Pending and not yet expired at `now`.
    public func isOpen(at now: Timestamp) -> Bool { state == .pending && now < expiresAt }
    public func isLocked(at now: Timestamp) -> Bool { lockedUntil.map { now < $0 } ?? false }
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
        public var email: String
        public var createdAt: Timestamp
        public var expiresAt: Timestamp
        public init(email: String, createdAt: Timestamp, expiresAt: Timestamp) {
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

    /// Raised exactly while a transfer is pending (set up, not expired, cancelled, claimed or voided).
    public var migrationFlag: Bool { transfer != nil }

    public init(
        accountID: String, userName: String, createdAt: Timestamp, movedToDeviceID: String?,
        transfer: PendingTransfer?, activeDevices: [Device]
    ) {
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
        case deviceMoved = "device.moved"
        case deviceReplaced = "device.replaced"
        case deviceRevoked = "device.revoked"
        case logout = "session.logout"
        case refreshReuse = "session.refresh_reuse"
        case transferSetUp = "transfer.set_up"
        case transferCancelled = "transfer.cancelled"
        case transferClaimed = "transfer.claimed"
        case claimFailed = "transfer.claim_failed"
        case transferLocked = "transfer.locked"
        case transferVoided = "transfer.voided"
        case transferUnlocked = "transfer.unlocked"
        case transferIssued = "transfer.issued"
    }

    public var at: Timestamp
    public var kind: Kind
    public var accountID: String?
    public var deviceID: String?
    public var transferID: String?
    public var actor: Initiator
    public var reason: String?
    public var clientAddress: String?

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
