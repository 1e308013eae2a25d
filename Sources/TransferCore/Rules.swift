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

/// The decisions of the contract, as pure functions. Stores call them inside their
/// transactions with what they read, so every store applies the same rules.
public enum Rules {
    public enum LoginDecision: Equatable, Sendable {
        case create
        case login(accountID: String)
        case reject(TransferError)
    }

    /// `binding` is the device's current binding (not a `replaced` one).
    public static func login(binding: DeviceBinding?, secretHash: SecretHash) -> LoginDecision {
        guard let binding else { return .create }
        // The secret is checked first, so nobody learns a device's state without its secret.
        guard binding.secretHash.matches(secretHash) else { return .reject(.invalidDeviceCredentials) }
        switch binding.state {
        case .active: return .login(accountID: binding.accountID)
        case .moved: return .reject(.deviceTransferred(at: binding.endedAt ?? binding.boundAt))
        case .revoked: return .reject(.deviceRevoked)
        case .replaced: return .create  // never passed in: replaced bindings are history
        }
    }

    public enum RefreshDecision: Equatable, Sendable {
        case rotate
        /// A rotated token came back: the whole session family is revoked.
        case revokeFamily
        case reject
    }

    public static func refresh(_ token: RefreshTokenState?, now: Timestamp) -> RefreshDecision {
        guard let token, !token.sessionRevoked else { return .reject }
        if token.used { return .revokeFamily }
        guard now < token.expiresAt, token.deviceActive else { return .reject }
        return .rotate
    }

    public enum ClaimDecision: Equatable, Sendable {
        /// Bind the device; `takeOverFrom` names the account that loses it (`replaceExistingAccount`).
        case proceed(takeOverFrom: String?)
        case reject(TransferError)
    }

    /// Decides a claim whose password has verified against `transfer`.
    public static func claim(
        transfer: TransferRecord?, expectedTransferID: String, device: DeviceBinding?, secretHash: SecretHash,
        replaceExistingAccount: Bool, now: Timestamp
    ) -> ClaimDecision {
        // The transfer may have been claimed, cancelled, replaced or voided since the password was checked.
        guard let transfer, transfer.id == expectedTransferID, transfer.isOpen(at: now) else {
            return .reject(.invalidTransferCredentials)
        }
        if let until = transfer.lockedUntil, now < until {
            return .reject(.tooManyAttempts(retryAfterSeconds: now.secondsUntil(until)))
        }
        guard let device else { return .proceed(takeOverFrom: nil) }
        switch device.state {
        case .moved, .revoked: return .reject(.deviceRetired)
        case .active, .replaced: break
        }
        guard device.secretHash.matches(secretHash) else { return .reject(.invalidDeviceCredentials) }
        if device.accountID == transfer.accountID { return .reject(.deviceAlreadyBound) }
        guard replaceExistingAccount else { return .reject(.deviceHasAccount) }
        return .proceed(takeOverFrom: device.accountID)
    }

    public enum FailureDecision: Equatable, Sendable {
        case count(consecutive: Int, total: Int, lockedUntil: Timestamp?, voided: Bool)
        case notCounted(TransferError)
    }

    /// Counts one wrong password. Attempts during a lock, or on a transfer no longer open, are not counted.
    /// The lock restarts the consecutive count, so after it ends the user has another full series.
    public static func failure(transfer: TransferRecord?, now: Timestamp, policy: LockPolicy) -> FailureDecision {
        guard let transfer, transfer.isOpen(at: now) else { return .notCounted(.invalidTransferCredentials) }
        if let until = transfer.lockedUntil, now < until {
            return .notCounted(.tooManyAttempts(retryAfterSeconds: now.secondsUntil(until)))
        }
        let total = transfer.failedTotal + 1
        var consecutive = transfer.failedConsecutive + 1
        if total >= policy.totalFailures {
            return .count(consecutive: consecutive, total: total, lockedUntil: nil, voided: true)
        }
        var lockedUntil: Timestamp? = nil
        if consecutive >= policy.consecutiveFailures {
            lockedUntil = now + policy.lockDuration
            consecutive = 0
        }
        return .count(consecutive: consecutive, total: total, lockedUntil: lockedUntil, voided: false)
    }
}
