/// One change to the stored state. Each store maps each case to its SQL, in one place.
public enum Effect: Sendable, Equatable {
    /// A new account, created on `device` (which its creation counts against: `RateLimit.deviceCreations`).
    case createAccount(id: String, userName: String, device: String, at: Timestamp)
    case createDevice(id: String, secretHash: SecretHash, at: Timestamp)
    /// Puts the account on the device (again, if it was there before), active.
    case addAccount(deviceID: String, accountID: String, at: Timestamp)
    case setCurrentAccount(deviceID: String, accountID: String)
    /// The account leaves the device as `state` (moved, revoked, replaced or removed); its
    /// session there ends, and with it the sibling apps' sessions on the pair.
    case endPair(deviceID: String, accountID: String, state: PairState, reason: String?, at: Timestamp)
    /// The device's last account left: its deviceId is never bound again.
    case retireDevice(id: String, at: Timestamp)
    /// The device the account was last moved to (the contract's `transferId`).
    case setMovedTo(accountID: String, deviceID: String)
    /// Opens the pair's session (replacing any earlier one) and records a login.
    case openSession(deviceID: String, accountID: String, PairSession, at: Timestamp, clientAddress: String?)
    /// A login of the pair's open session: extends it and records the login. The one row a launch writes.
    case renewSession(deviceID: String, accountID: String, expiresAt: Timestamp, at: Timestamp, clientAddress: String?)
    /// A use of the pair's sessions that is not a login (a refresh, a sibling app's refresh, a
    /// hand-off), recorded as its `lastLoginAt` when the last one is older than the activity resolution.
    case recordActivity(deviceID: String, accountID: String, at: Timestamp)
    /// A refresh: the session moves to its next generation; `used` is remembered until it expires.
    case rotateSession(deviceID: String, accountID: String, next: PairSession, used: SecretHash, usedExpiresAt: Timestamp)
    /// Ends the pair's session (logout, reuse of a rotated token), and the sibling apps' sessions on the pair.
    case closeSession(deviceID: String, accountID: String)
    case createTransfer(NewTransfer)
    /// Ends a pending transfer as `state`; `claimedBy` is the device of a claim.
    case endTransfer(id: String, state: TransferState, at: Timestamp, claimedBy: String? = nil)
    case countFailures(transferID: String, consecutive: Int, total: Int, lockedUntil: Timestamp?)
    /// Clears the lock and the consecutive count; the total stays.
    case unlockTransfer(id: String)
    case addSigningKey(SigningKeyRecord)
    /// The key stops signing (a newer one was added in the same transaction).
    case retireSigningKey(kid: String, at: Timestamp)
    /// The key's private key as it is now stored (sealed under a key-encryption key).
    case setSigningKeyPrivateKey(kid: String, privateKey: String)
    case audit(AuditEvent)

    // Push routing. Which accounts reach a token follows from the pairs, so an account that
    // leaves a device (`endPair`) stops reaching its tokens in the same transaction; a device
    // that retires (`retireDevice`) loses its tokens.
    /// Registers the device's token for its provider, replacing its earlier one; taken off any other device that held it.
    case setPushToken(PushToken)
    case removePushToken(deviceID: String, provider: PushProvider)
    /// The provider said the token is dead: dropped unless registered again after `reportedAt`.
    case dropPushToken(provider: PushProvider, tokenHash: SecretHash, reportedAt: Timestamp)
    case setPushMode(deviceID: String, PushMode)
    case setAccountPush(deviceID: String, accountID: String, enabled: Bool)

    // Service keys of app backends.
    case createServiceKey(name: String, keyHash: SecretHash, at: Timestamp, by: Initiator)
    case revokeServiceKey(name: String, at: Timestamp, by: Initiator)
    /// Records a use at `at` unless one after `olderThan` is recorded: a write on every call
    /// would cost more than the call, so uses are kept to the minute.
    case touchServiceKey(name: String, at: Timestamp, olderThan: Timestamp)

    // Sign in with Apple.
    /// Issues a nonce (and forgets the nonces that expired before `now`).
    case addAppleNonce(hash: SecretHash, expiresAt: Timestamp, now: Timestamp)
    /// A nonce is used once.
    case consumeAppleNonce(hash: SecretHash)
    /// Links the account (replacing a link it had).
    case linkApple(AppleLink)
    /// What Apple said about the email this time; a nil field keeps the stored value.
    case updateAppleEmail(accountID: String, email: String?, isPrivateEmail: Bool?)
    case unlinkApple(accountID: String)
    /// The account arrived on a device by Sign in with Apple with this Apple ID at `at` (the move an Apple repeat must be).
    case recordAppleMove(sub: String, at: Timestamp)
    case setAppleEmailEnabled(accountID: String, Bool)
    /// Apple's notification `jti` was handled.
    case recordAppleNotification(jti: String, at: Timestamp)

    // Sibling-app hand-off.
    case addHandoffCode(HandoffCodeRecord)
    /// The code is used; it is kept until it expires, so that a second redemption is recognised.
    case redeemHandoffCode(hash: SecretHash, at: Timestamp, siblingSessionID: String)
    /// Opens the sibling's session on the pair, replacing the one it had for this client id.
    case openSiblingSession(SiblingSession)
    /// A sibling's refresh: the next generation; `used` is remembered until it expires.
    case rotateSiblingSession(next: SiblingSession, used: SecretHash, usedExpiresAt: Timestamp)
    case closeSiblingSession(sessionID: String)

    // Deletion.
    /// Erases what the account leaves behind (run after it left its device): it is marked
    /// deleted; its transfers (emails, password hashes), rotated tokens, hand-off codes, Apple link, recovery code and backup keys go; the
    /// addresses its pairs recorded are cleared; its audit events are deleted.
    case eraseAccount(id: String, at: Timestamp)

    // Inactive accounts.
    /// The app backend protects the account since `since` (nil: no longer): never erased as inactive.
    case setProtection(accountID: String, since: Timestamp?)

    // Recovery codes.
    /// Sets the account's recovery code, replacing the one it had (used or not).
    case setRecoveryCode(accountID: String, hash: SecretHash, at: Timestamp)
    case deleteRecoveryCode(accountID: String)
    /// The code is used up; the row keeps when and by which device.
    case useRecoveryCode(accountID: String, deviceID: String, at: Timestamp)

    // Backup keys.
    /// Sets the account's backup key for `store`, replacing the one it had there (used or not).
    case setBackupKey(accountID: String, store: BackupKeyStore, hash: SecretHash, at: Timestamp)
    case deleteBackupKey(accountID: String, store: BackupKeyStore)
    /// The key is used up; the row keeps when and by which device (its winner may repeat the claim).
    case useBackupKey(accountID: String, store: BackupKeyStore, deviceID: String, at: Timestamp)

    // Device attestation (see Attestation.swift).
    case addAttestationChallenge(hash: SecretHash, expiresAt: Timestamp)
    /// A challenge is used once, good or bad.
    case consumeAttestationChallenge(hash: SecretHash)
    /// What the device records of its attestation (replacing what it had).
    case recordDeviceAttestation(deviceID: String, DeviceAttestation)

    // Limits (see Limits.swift).
    /// Counts one event in the slot's budget. The store reads the window's count back and,
    /// when it is over the limit, throws `rateLimited`: the transaction, and with it the
    /// count, is rolled back, so a refused request changes nothing.
    case takeSlot(RateSlot)
    /// Takes back one event counted in the window that was open when the slot was taken.
    case giveBackSlot(RateSlot)
    /// Asks the store whether the account has an open transfer now, after the transaction's
    /// locks were taken (a set-up that committed while this transaction waited is seen); one
    /// there throws `TransferSetUpMeanwhile`, and the transaction rolls back.
    case requireNoOpenTransfer(accountID: String, at: Timestamp)

    // The outbox (see Outbox.swift).
    /// A message to deliver after the commit; the store gives it its id.
    case enqueue(OutboxEntry)
    case leaseOutbox(id: String, leaseID: String, until: Timestamp)
    /// Delivered: the message goes.
    case deleteOutbox(id: String)
    case rescheduleOutbox(id: String, attempts: Int, next: Timestamp, error: String)
    case failOutbox(id: String, attempts: Int, error: String, at: Timestamp)
    /// A failed message is pending again, due now, retried from the first wait until `giveUpAt`.
    case retryOutbox(id: String, at: Timestamp, giveUpAt: Timestamp)
}

/// A transfer to create, pending.
public struct NewTransfer: Sendable, Equatable {
    public var id: String
    public var accountID: String
    /// How it will be claimed, as it is stored.
    public var proof: TransferProof
    public var createdAt: Timestamp
    public var expiresAt: Timestamp
    public var issuedBy: Initiator
    public init(id: String, accountID: String, proof: TransferProof, createdAt: Timestamp, expiresAt: Timestamp, issuedBy: Initiator) {
        self.id = id
        self.accountID = accountID
        self.proof = proof
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.issuedBy = issuedBy
    }

    public init(
        id: String, accountID: String, email: Email, passwordHash: String, createdAt: Timestamp, expiresAt: Timestamp,
        issuedBy: Initiator
    ) {
        self.init(
            id: id, accountID: accountID, proof: .password(email, hash: passwordHash), createdAt: createdAt, expiresAt: expiresAt,
            issuedBy: issuedBy)
    }

    public var method: TransferMethod { proof.method }
}

/// Who caused a change, as the audit trail records it.
public enum Initiator: Sendable, Hashable, CustomStringConvertible {
    /// The app on a device, through the API.
    case device
    /// The service itself (a lock or a void after wrong passwords).
    case system
    /// Support staff, through the `transfer` command line.
    case support(operator: String)

    /// As stored and printed: `device`, `system`, `operator:NAME`.
    public var description: String {
        switch self {
        case .device: "device"
        case .system: "system"
        case .support(let name): "operator:\(name)"
        }
    }

    public init(stored text: String) throws(UnknownStoredValue) {
        switch text {
        case "device": self = .device
        case "system": self = .system
        case _ where text.hasPrefix("operator:"): self = .support(operator: String(text.dropFirst("operator:".count)))
        default: throw UnknownStoredValue(column: "actor", value: text)
        }
    }
}

/// A stored value this version does not know: reading fails loudly instead of guessing.
public struct UnknownStoredValue: Error, CustomStringConvertible {
    public let column: String
    public let value: String
    public init(column: String, value: String) {
        self.column = column
        self.value = value
    }
    public var description: String { "unknown value '\(value)' in column \(column)" }

    /// Decodes a stored enum value, or throws. `column` is only built for the error (a
    /// `"\(table).\(name)"` made for every row cost 1 % of a 1 000-row query).
    public static func decode<T: RawRepresentable>(_ text: String, column: @autoclosure () -> String) throws(UnknownStoredValue) -> T
    where T.RawValue == String {
        guard let value = T(rawValue: text) else { throw UnknownStoredValue(column: column(), value: text) }
        return value
    }
}
