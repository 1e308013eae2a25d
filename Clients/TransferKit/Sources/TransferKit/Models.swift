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
    /// The app's data came from a backup of another phone, and this phone does not hold those
    /// accounts: offer to bring them over (``TransferClient/claimTransfer(code:existingAccounts:)``,
    /// ``TransferClient/claimTransfer(email:temporaryPassword:existingAccounts:)``,
    /// ``TransferClient/claimWithAppleID(identityToken:nonce:existingAccounts:)``,
    /// ``TransferClient/claim(recoveryCode:existingAccounts:)``), or start a new account with
    /// ``TransferClient/startOver()`` then ``TransferClient/launch()``.
    /// Nothing was created.
    case restoredOntoNewPhone(previousAccounts: [Account])
    /// The current account moved to another phone (a claim there), and other accounts remain
    /// on this one: tell the user, and pick one of `remainingAccounts` with
    /// ``TransferClient/switchAccount(to:)`` (until then every launch answers this).
    case currentAccountMoved(accountId: String?, transferredAt: Date?, remainingAccounts: [Account])
    /// The credential store cannot be used now; ``StorageError/kind`` says why:
    /// ``StorageError/Kind/locked`` (the phone is locked before its first unlock: launch again
    /// later, e.g. on `protectedDataDidBecomeAvailable`), ``StorageError/Kind/missingEntitlement``
    /// (a build without the Keychain access group it names: a bug), ``StorageError/Kind/undecodable``
    /// (the identity item does not decode: it is never replaced behind your back; ``TransferClient/startOver()``
    /// if the user agrees). Nothing was created.
    case storageUnavailable(StorageError)
}

/// Where the phone stands before its first call (``TransferClient/startingPoint()``): read from
/// the stores only, nothing sent.
public enum StartingPoint: Sendable, Equatable {
    /// Nothing is stored: the app's first start on this phone (or a claim's answer never came
    /// and no account is known here). Ask "new here, or bringing your account from another
    /// phone?" before ``TransferClient/launch()``, which would create an account: a claim
    /// (``TransferClient/claimTransfer(code:existingAccounts:)``, …) needs no launch.
    case firstStart
    /// This phone has its identity and accounts: ``TransferClient/launch()``.
    case returning
    /// The app's files came from another phone's backup. ``TransferClient/launch()`` tells
    /// whether this phone already holds those accounts (a claim whose answer was lost) or
    /// reports ``LaunchResult/restoredOntoNewPhone(previousAccounts:)``.
    case restoredFromBackup(previousAccounts: [Account])
    /// The phone has no account of its own, and the user's synchronized store (iCloud Keychain)
    /// holds backup keys of accounts from their other or earlier phones, newest first. Ask
    /// ("Continue as Mia?", with each ``AccountBackup/displayName``), then
    /// ``TransferClient/claim(backup:existingAccounts:)``; or, when the user declines,
    /// ``TransferClient/launch()`` for a new account. Nothing was sent.
    case backupsFound([AccountBackup])
    /// The stores cannot be read now (see ``StorageError/kind``).
    case storageUnavailable(StorageError)
}

/// What a claim (by email or Apple ID) does when this phone already holds accounts.
public enum ClaimChoice: String, Sendable, CaseIterable {
    /// Fail with ``TransferError/Code/deviceHasAccount`` (nothing changes), so the app can ask the user.
    case fail
    /// The phone's accounts leave it (kept by the service, reachable by support); sends
    /// `replaceExistingAccount: true`. Fails with ``TransferError/Code/accountWouldBeLost``
    /// (nothing changes) when one of them has no way back (no pending transfer, linked Apple ID
    /// or unused recovery code): this phone is its only one. Ask the user, then claim again with
    /// ``abandonExisting``, or set up a way back for that account first.
    case replace
    /// As ``replace``, and an account that leaves the phone with no way back is abandoned: kept
    /// by the service for support only, out of the user's reach. Sends
    /// `replaceExistingAccount: true` and `abandonExisting: true`. Ask the user first.
    case abandonExisting
    /// The claimed account is added beside them; sends `addAccount: true`.
    case add
    /// The claimed account is added beside them (`addAccount: true`), then the accounts the phone
    /// held before are deleted for good (`DELETE /v1/me`), each with
    /// ``TransferEvent/accountDeleted(accountId:)``. For the account a new phone created by itself
    /// at its first launch, before the user said they were bringing one: ask the user first
    /// (it erases whatever is in it). Nothing is deleted when the claim fails; an account whose
    /// deletion fails (no network) stays beside the claimed one, with
    /// ``TransferEvent/accountNotDeleted(accountId:reason:)`` (delete it later with
    /// ``TransferClient/deleteAccount(_:)``).
    case deleteExisting

    /// The claim's `replaceExistingAccount`: sent only when true.
    var replaceExistingAccount: Bool? { self == .replace || self == .abandonExisting ? true : nil }
    /// The claim's `abandonExisting`: sent only when true.
    var abandonExisting: Bool? { self == .abandonExisting ? true : nil }
    /// The claim's `addAccount`: sent only when true.
    var addAccount: Bool? { self == .add || self == .deleteExisting ? true : nil }
}

/// A transfer waiting on the old phone for the new one to claim it.
public struct PendingTransfer: Sendable, Equatable {
    /// The email the user will type on the new phone; nil for a transfer by code
    /// (``TransferMethod/code``), which has none.
    public let email: String?
    /// When the transfer expires (24 hours by default).
    public let expiresAt: Date
    /// When the transfer was set up (known from ``TransferClient/profile(of:)``).
    public var createdAt: Date?
    /// How the new phone claims it: an email and temporary password, or a transfer code.
    public let method: TransferMethod

    /// A pending transfer (for previews and tests); `method` defaults to ``TransferMethod/password``
    /// with an email, ``TransferMethod/code`` without.
    public init(email: String?, expiresAt: Date, createdAt: Date? = nil, method: TransferMethod? = nil) {
        self.email = email
        self.expiresAt = expiresAt
        self.createdAt = createdAt
        self.method = method ?? (email == nil ? .code : .password)
    }
}

/// How a transfer is claimed. An open set, like ``TransferError/Code``.
public struct TransferMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// An email and temporary password (``TransferClient/setUpTransfer(email:temporaryPassword:of:)``).
    public static let password = TransferMethod(rawValue: "password")
    /// A transfer code (``TransferClient/setUpTransferCode(of:)``).
    public static let code = TransferMethod(rawValue: "code")
}

/// A transfer by code just set up on the old phone (``TransferClient/setUpTransferCode(of:)``).
/// Show ``code`` (its ``TransferCode/grouped`` form, and a QR code of ``TransferCode/url(base:)``)
/// until ``expiresAt``; it is never shown again, not even by ``TransferClient/profile(of:)``.
public struct CodeTransfer: Sendable, Equatable {
    /// The code to type or scan on the new phone (prints `<redacted>`).
    public let code: TransferCode
    /// When the transfer expires (24 hours by default).
    public let expiresAt: Date

    /// A transfer by code (for previews and tests).
    public init(code: TransferCode, expiresAt: Date) {
        self.code = code
        self.expiresAt = expiresAt
    }
}

/// A recovery code just made (``TransferClient/makeRecoveryCode(of:)``): show ``code`` once and
/// ask the user to keep it; the service keeps only its hash.
public struct IssuedRecoveryCode: Sendable, Equatable {
    /// The code (prints `<redacted>`; show its ``RecoveryCode/grouped`` form).
    public let code: RecoveryCode
    /// When it was made.
    public let createdAt: Date

    /// A recovery code (for previews and tests).
    public init(code: RecoveryCode, createdAt: Date) {
        self.code = code
        self.createdAt = createdAt
    }
}

/// A way an account can come back onto a new phone if its phone is lost (`GET /v1/me`'s
/// `waysBack`). An open set, like ``TransferError/Code``.
public struct WayBack: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// A pending transfer (until it expires).
    public static let transfer = WayBack(rawValue: "transfer")
    /// A linked Apple ID (``TransferClient/linkAppleID(identityToken:nonce:authorizationCode:of:)``).
    public static let apple = WayBack(rawValue: "apple")
    /// A recovery code (``TransferClient/makeRecoveryCode(of:)``).
    public static let recoveryCode = WayBack(rawValue: "recoveryCode")
    /// A backup key in the user's synchronized store (contract v1.3; TransferKit keeps one for
    /// each account unless the app turns them off).
    public static let backupKey = WayBack(rawValue: "backupKey")
}

/// An account as the service describes it to one of its sessions (`GET /v1/me`:
/// ``TransferClient/profile(of:)``, ``SiblingSession/profile()``).
public struct AccountProfile: Sendable, Equatable, Identifiable {
    /// The account's id (a lower-case UUID).
    public let id: String
    /// The account's user name (see ``Account/userName``).
    public let userName: String
    /// When the service created the account.
    public let createdAt: Date
    /// True exactly while the account has a pending ``transfer``.
    public let migrationFlag: Bool
    /// The device id the account was last moved to by a claim; nil if it never moved.
    public let transferId: String?
    /// The account's pending transfer (not claimed, cancelled nor expired); nil when there is none.
    public let transfer: PendingTransfer?
    /// The devices the account is active on (an account is on at most one).
    public let devices: [Device]
    /// The Apple ID the account is linked to, its way back onto a new phone; nil when none is.
    public let appleID: AppleIDLink?
    /// How the account could come back onto a new phone if this one were lost: empty when it
    /// would be lost with its phone (offer ``TransferClient/makeRecoveryCode(of:)`` or Sign in
    /// with Apple). Nil when the service does not say (before contract v1.2).
    public let waysBack: Set<WayBack>?
    /// When each platform store's unused backup key was made, by store (`"icloud-keychain"`,
    /// `"block-store"`); never a key. Nil when the service does not say (before contract v1.3).
    public let backupKeys: [String: Date]?

    /// A device the account is active on.
    public struct Device: Sendable, Equatable, Identifiable {
        /// The device id (a lower-case UUID).
        public let id: String
        /// When the account came onto the device.
        public let boundAt: Date
        /// The account's last login on the device.
        public let lastLoginAt: Date?
        /// Whether this is the device of the session that asked.
        public let isCurrent: Bool

        /// A device (for previews and tests).
        public init(id: String, boundAt: Date, lastLoginAt: Date? = nil, isCurrent: Bool) {
            self.id = id
            self.boundAt = boundAt
            self.lastLoginAt = lastLoginAt
            self.isCurrent = isCurrent
        }
    }

    /// A profile (for previews and tests); ``migrationFlag`` is true exactly when `transfer` is given.
    public init(
        id: String, userName: String, createdAt: Date, transferId: String? = nil, transfer: PendingTransfer? = nil,
        devices: [Device] = [], appleID: AppleIDLink? = nil, waysBack: Set<WayBack>? = nil,
        backupKeys: [String: Date]? = nil
    ) {
        self.id = id
        self.userName = userName
        self.createdAt = createdAt
        self.migrationFlag = transfer != nil
        self.transferId = transferId
        self.transfer = transfer
        self.devices = devices
        self.appleID = appleID
        self.waysBack = waysBack
        self.backupKeys = backupKeys
    }

    init(_ wire: MeBody) {
        id = wire.accountId
        userName = wire.userName
        createdAt = wire.createdAt
        migrationFlag = wire.migrationFlag
        transferId = wire.transferId
        transfer = wire.transfer.map {
            PendingTransfer(
                email: $0.email, expiresAt: $0.expiresAt, createdAt: $0.createdAt,
                method: $0.method.map(TransferMethod.init(rawValue:)))
        }
        devices = wire.devices.map {
            Device(id: $0.deviceId, boundAt: $0.boundAt, lastLoginAt: $0.lastLoginAt, isCurrent: $0.current)
        }
        appleID = wire.apple.map(AppleIDLink.init)
        waysBack = wire.waysBack.map { Set($0.map(WayBack.init(rawValue:))) }
        backupKeys = wire.backupKeys.map { Dictionary($0.map { ($0.store, $0.createdAt) }, uniquingKeysWith: max) }
    }
}

/// The Apple ID an account is linked to with Sign in with Apple.
public struct AppleIDLink: Sendable, Equatable {
    /// The email Apple sent, possibly a private relay address; nil when Apple never sent one.
    /// Apple sends it at the first sign-in only: the service keeps it when a later one leaves it out.
    public let email: String?
    /// Whether ``email`` is a private relay address; nil when Apple never said.
    public let isPrivateEmail: Bool?
    /// When the account was linked to this Apple ID (known from ``TransferClient/profile(of:)``).
    public var linkedAt: Date?

    init(_ wire: AppleLinkBody) {
        self.init(email: wire.email, isPrivateEmail: wire.isPrivateEmail, linkedAt: wire.linkedAt)
    }

    /// A link (for previews and tests).
    public init(email: String?, isPrivateEmail: Bool?, linkedAt: Date? = nil) {
        self.email = email
        self.isPrivateEmail = isPrivateEmail
        self.linkedAt = linkedAt
    }
}

/// A nonce for one Sign in with Apple (``TransferClient/appleNonce()``): single use, good for
/// ``expiresIn`` seconds.
///
/// Set ``sha256`` as the `nonce` of the `ASAuthorizationAppleIDRequest`: Apple signs it into the
/// identity token. Then pass this nonce with that identity token to
/// ``TransferClient/linkAppleID(identityToken:nonce:authorizationCode:of:)`` or
/// ``TransferClient/claimWithAppleID(identityToken:nonce:existingAccounts:)``.
public struct AppleNonce: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The nonce: 43 characters of base64url. It goes back to the service only, never to Apple.
    public let value: String
    /// Seconds until the nonce expires (300).
    public let expiresIn: Int

    /// A nonce (for previews and tests; the service's come from ``TransferClient/appleNonce()``).
    public init(value: String, expiresIn: Int) {
        self.value = value
        self.expiresIn = expiresIn
    }

    /// The lower-case hex SHA-256 of ``value``: the `nonce` of Apple's request.
    public var sha256: String { Hex.encode(SHA256.hash(value.utf8)) }

    /// Leaves the nonce out, so that a log line never carries it.
    public var description: String { "AppleNonce(value: \(Redacted.text), expiresIn: \(expiresIn))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["value": Redacted.text, "expiresIn": expiresIn]) }
}

/// A one-time code the host app made for a sibling app
/// (``TransferClient/createHandoffCode(forClient:codeChallenge:of:)``).
public struct HandoffCode: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The code: 43 characters of base64url, single use. Pass it only in the sibling's universal link.
    public let code: String
    /// Seconds until the code expires (60 by default): open the sibling's link right away.
    public let expiresIn: Int

    /// A code (for previews and tests).
    public init(code: String, expiresIn: Int) {
        self.code = code
        self.expiresIn = expiresIn
    }

    /// Leaves the code out, so that a log line never carries it.
    public var description: String { "HandoffCode(code: \(Redacted.text), expiresIn: \(expiresIn))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["code": Redacted.text, "expiresIn": expiresIn]) }
}

/// What a secret (a code, token, nonce or verifier) prints as: `description`, `debugDescription`
/// and the mirror (`dump`) of a type that holds one show this in its place.
enum Redacted {
    static let text = "<redacted>"
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

    /// The gateway of this build: ``sandbox`` when compiled for debugging (`DEBUG`), else ``production``.
    public static var forThisBuild: APNsEnvironment { forBuild(debug: isDebugBuild) }

    /// The gateway a build gets: ``sandbox`` for a debug build.
    static func forBuild(debug: Bool) -> APNsEnvironment { debug ? .sandbox : .production }

    static var isDebugBuild: Bool {
        #if DEBUG
        true
        #else
        false
        #endif
    }
}

/// Which of the phone's accounts its push tokens reach.
public enum PushMode: String, Sendable {
    /// Every account on the phone whose pushes are on (the default).
    case all
    /// Only the current account.
    case current
}
