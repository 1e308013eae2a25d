import Foundation

/// An account on this phone.
public struct Account: Codable, Sendable, Equatable, Identifiable {
    /// The account's id (a lower-case UUID).
    public let id: String
    /// The account's user name: the device id that created it, or for an account added with
    /// ``TransferClient/addAccount()``, its own id.
    public let userName: String
    /// Whether this is the phone's current account, the one the app shows.
    public var isCurrent: Bool
    /// When the account came onto this phone (known after ``TransferClient/accounts()``).
    public var addedAt: Date?
    /// The account's last login on this phone (known after ``TransferClient/accounts()``).
    public var lastLoginAt: Date?
    /// The account's own switch for its pushes on this phone (known after ``TransferClient/accounts()``).
    public var pushEnabled: Bool?

    /// An account as the app knows it.
    public init(
        id: String, userName: String, isCurrent: Bool,
        addedAt: Date? = nil, lastLoginAt: Date? = nil, pushEnabled: Bool? = nil
    ) {
        self.id = id
        self.userName = userName
        self.isCurrent = isCurrent
        self.addedAt = addedAt
        self.lastLoginAt = lastLoginAt
        self.pushEnabled = pushEnabled
    }

    init(_ wire: AccountOnDevice) {
        self.init(id: wire.accountId, userName: wire.userName, isCurrent: wire.current)
    }

    init(_ wire: DeviceAccountBody) {
        self.init(
            id: wire.accountId, userName: wire.userName, isCurrent: wire.current,
            addedAt: wire.addedAt, lastLoginAt: wire.lastLoginAt, pushEnabled: wire.pushEnabled)
    }
}

/// What TransferKit knows about this phone now.
public struct DeviceState: Sendable, Equatable {
    /// This phone's device id, once it has one.
    public var deviceId: String?
    /// The accounts on this phone, oldest first, as last heard from the service.
    public var accounts: [Account]
    /// The current account's id, if there is one.
    public var currentAccountId: String? { accounts.first(where: \.isCurrent)?.id }

    /// A state with this device id and these accounts.
    public init(deviceId: String?, accounts: [Account]) {
        self.deviceId = deviceId
        self.accounts = accounts
    }
}

/// The outcome of ``TransferClient/launch()``.
public enum LaunchResult: Sendable, Equatable {
    /// Logged in to the phone's current account; `created` on the very first launch.
    case signedIn(accountId: String, created: Bool)
    /// The app's data came from a backup of another phone, but this phone has no device identity:
    /// offer to bring the accounts over with ``TransferClient/claimTransfer(email:temporaryPassword:existingAccounts:)``,
    /// or start a new account with ``TransferClient/startOver()`` then ``TransferClient/launch()``.
    /// Nothing was created.
    case restoredOntoNewPhone(previousAccounts: [Account])
    /// The credential store cannot be read now (the phone is locked before its first unlock).
    /// Nothing was created; launch again later (e.g. on `protectedDataDidBecomeAvailable`).
    case storageUnavailable
}

/// What a claim does when this phone already holds accounts.
public enum ClaimChoice: String, Sendable, CaseIterable {
    /// Fail with ``TransferError/Kind/deviceHasAccount`` (nothing changes), so the app can ask the user.
    case fail
    /// The phone's accounts leave it (kept by the service, reachable by support); sends `replaceExistingAccount: true`.
    case replace
    /// The claimed account is added beside them; sends `addAccount: true`.
    case add
}

/// A transfer waiting on the old phone for the new one to claim it.
public struct PendingTransfer: Sendable, Equatable {
    /// The email the user will type on the new phone.
    public let email: String
    /// When the transfer expires (24 hours by default).
    public let expiresAt: Date
}

/// A one-time code the host app made for a sibling app
/// (``TransferClient/createHandoffCode(forClient:codeChallenge:account:)``).
public struct HandoffCode: Sendable, Equatable {
    /// The code: 43 characters of base64url, single use. Pass it only in the sibling's universal link.
    public let code: String
    /// Seconds until the code expires (60 by default): open the sibling's link right away.
    public let expiresIn: Int
}

/// A push provider.
public enum PushProvider: String, Sendable {
    /// Apple Push Notification service.
    case apns
    /// Firebase Cloud Messaging.
    case fcm
}

/// The APNs gateway a token is for.
public enum APNsEnvironment: String, Sendable {
    /// The production gateway (App Store, TestFlight, ad hoc builds).
    case production
    /// The sandbox gateway (development builds).
    case sandbox
}

/// Which of the phone's accounts its push tokens reach.
public enum PushMode: String, Sendable {
    /// Every account on the phone whose pushes are on (the default).
    case all
    /// Only the current account.
    case current
}
