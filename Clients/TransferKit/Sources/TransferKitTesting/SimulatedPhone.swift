import Foundation
@_spi(TransferKitTesting) import TransferKit

/// A phone for scenario tests against a staging server: its own Keychain, its own app files
/// (both in memory) and its own ``TransferClient``. Every event the client emits is recorded.
///
/// ```swift
/// let server = URL(string: "http://127.0.0.1:8080")!
/// let a = SimulatedPhone("A", baseURL: server)
/// let b = SimulatedPhone("B", baseURL: server)
/// _ = try await a.launch()
/// try await a.setUpTransfer(email: "ann@example.com", password: "blue-harbor-42")
/// try await b.claim(email: "ann@example.com", password: "blue-harbor-42")
/// await #expect(throws: TransferError.self) { try await a.launch() }  // 410 device_transferred
/// #expect(a.saw(.accountMoved))
/// ```
public final class SimulatedPhone: @unchecked Sendable {
    /// Makes the phone's client from its Keychain and its app files.
    public typealias ClientFactory = @Sendable (_ keychain: MemoryCredentialStore, _ appFiles: MemoryCredentialStore) -> TransferClient
    /// Makes the phone's client from its Keychain, its app files, and its Apple account's iCloud
    /// Keychain (nil: not signed in, or Keychain sync off).
    public typealias SyncingClientFactory = @Sendable (
        _ keychain: MemoryCredentialStore, _ appFiles: MemoryCredentialStore, _ iCloudKeychain: MemorySynchronizedStore?
    ) -> TransferClient

    /// A name for messages.
    public let name: String
    /// The phone's Keychain: the device identity and tokens. Not in backups.
    public let keychain: MemoryCredentialStore
    /// The phone's app files: the account list. In backups (see ``restoredFromBackup(as:)``).
    public let appFiles: MemoryCredentialStore
    /// The phone's client, for anything the shortcuts below leave out.
    public let client: TransferClient
    /// The phone's network: ``LossyNetwork/loseAnswers(to:count:)`` simulates an answer lost on
    /// its way back (the app killed, or the connection dropped). Phones made with
    /// ``init(_:baseURL:keychain:appFiles:clock:)`` use it; with your own factory, wrap your
    /// transport with ``LossyNetwork/wrap(_:baseURL:)`` of the network you pass.
    public let network: LossyNetwork
    /// The synchronizable items of the phone's Apple account (iCloud Keychain with sync on), shared
    /// with every other phone of that account (``secondPhone(as:)``, ``restoredFromBackup(as:)``):
    /// where TransferKit keeps backup keys. Nil: no Apple account, or Keychain sync off.
    public let iCloudKeychain: MemorySynchronizedStore?

    private let makeClient: SyncingClientFactory
    private let lock = NSLock()
    private var log: [TransferEvent] = []

    /// A phone talking to the service at `baseURL`; its client plans renewals with `clock`
    /// (a ``ManualClock`` lets a scenario reach a token's expiry without waiting for it).
    ///
    /// With `iCloudKeychain` (an Apple account with Keychain sync on) the client keeps a backup
    /// key of each account there, unless `backupKeys` is false; ``secondPhone(as:)`` is another
    /// phone of the same Apple account.
    public convenience init(
        _ name: String, baseURL: URL,
        keychain: MemoryCredentialStore = MemoryCredentialStore(), appFiles: MemoryCredentialStore = MemoryCredentialStore(),
        clock: ManualClock? = nil, iCloudKeychain: MemorySynchronizedStore? = nil, backupKeys: Bool = true
    ) {
        let now: @Sendable () -> Date
        if let clock { now = { clock.now } } else { now = { Date() } }
        let network = LossyNetwork()
        self.init(
            name, keychain: keychain, appFiles: appFiles, iCloudKeychain: iCloudKeychain, network: network
        ) { keychain, appFiles, iCloud in
            TransferClient(
                baseURL: baseURL, credentials: keychain, accountList: appFiles,
                transport: network.wrap(.urlSession(.shared), baseURL: baseURL), clock: now,
                synchronizedStore: iCloud, backupKeys: backupKeys)
        }
    }

    /// A phone whose client `makeClient` builds (e.g. with its own `URLSession`).
    public convenience init(
        _ name: String,
        keychain: MemoryCredentialStore = MemoryCredentialStore(), appFiles: MemoryCredentialStore = MemoryCredentialStore(),
        network: LossyNetwork = LossyNetwork(), makeClient: @escaping ClientFactory
    ) {
        self.init(name, keychain: keychain, appFiles: appFiles, iCloudKeychain: nil, network: network) { keychain, appFiles, _ in
            makeClient(keychain, appFiles)
        }
    }

    /// A phone of an Apple account whose iCloud Keychain is `iCloudKeychain`, with a client
    /// `makeClient` builds (pass the store on as the client's `synchronizedStore`).
    public init(
        _ name: String,
        keychain: MemoryCredentialStore = MemoryCredentialStore(), appFiles: MemoryCredentialStore = MemoryCredentialStore(),
        iCloudKeychain: MemorySynchronizedStore?, network: LossyNetwork = LossyNetwork(),
        makeClient: @escaping SyncingClientFactory
    ) {
        self.name = name
        self.network = network
        self.keychain = keychain
        self.appFiles = appFiles
        self.iCloudKeychain = iCloudKeychain
        self.makeClient = makeClient
        self.client = makeClient(keychain, appFiles, iCloudKeychain)
        client.observeEvents { [weak self] event in self?.record(event) }
    }

    // MARK: The app's flows

    /// On a new phone: brings the account of a backup found by ``startingPoint()``
    /// (``StartingPoint/backupsFound(_:)``), after the user confirmed.
    @discardableResult
    public func claim(backup: AccountBackup, choice: ClaimChoice = .fail) async throws -> Account {
        try await client.claim(backup: backup, existingAccounts: choice)
    }

    /// The name the app gives the account (the current one when nil), shown by a new phone.
    public func setDisplayName(_ name: String?, of accountId: String? = nil) async throws {
        try await client.setDisplayName(name, of: accountId)
    }

    /// The backups the phone's Apple account holds in its iCloud Keychain, as a new phone would
    /// find them (whatever this phone holds); empty without an Apple account.
    public var backupsInICloudKeychain: [AccountBackup] {
        guard let iCloudKeychain, let found = try? BackupShelfView.backups(in: iCloudKeychain) else { return [] }
        return found
    }

    /// Starts the app (``TransferClient/launch()``).
    @discardableResult
    public func launch() async throws -> LaunchResult {
        try await client.launch()
    }

    /// The accounts on the phone, from the service.
    public func accounts() async throws -> [Account] {
        try await client.accounts()
    }

    /// The phone's current account, as last heard.
    public var currentAccountId: String? { client.currentAccountId }

    /// The phone's device id, once it has one.
    public var deviceId: String? { client.state.deviceId }

    /// On this (old) phone: sets up a transfer of the current account.
    @discardableResult
    public func setUpTransfer(email: String, password: String) async throws -> PendingTransfer {
        try await client.setUpTransfer(email: email, temporaryPassword: password)
    }

    /// On this (old) phone: sets up a transfer of the current account by code (show its
    /// ``TransferCode/grouped`` form, or a QR code of ``TransferCode/url(base:)``).
    @discardableResult
    public func setUpTransferCode() async throws -> CodeTransfer {
        try await client.setUpTransferCode()
    }

    /// On this (new) phone: claims a transfer by code (what the user typed: parse it with
    /// ``TransferCode/init(_:)``).
    @discardableResult
    public func claim(code: TransferCode, choice: ClaimChoice = .fail) async throws -> Account {
        try await client.claimTransfer(code: code, existingAccounts: choice)
    }

    /// Makes the current account's recovery code.
    @discardableResult
    public func makeRecoveryCode() async throws -> IssuedRecoveryCode {
        try await client.makeRecoveryCode()
    }

    /// On this (new) phone: brings an account over with its recovery code.
    @discardableResult
    public func claim(recoveryCode: RecoveryCode, choice: ClaimChoice = .fail) async throws -> Account {
        try await client.claim(recoveryCode: recoveryCode, existingAccounts: choice)
    }

    /// Whether the current account has no way back yet and has been on the phone for `usedFor` seconds.
    public func needsWayBack(usedFor: TimeInterval = 3 * 86_400) async throws -> Bool {
        try await client.needsWayBack(usedFor: usedFor)
    }

    /// Where the phone stands before its first call (``TransferClient/startingPoint()``).
    public func startingPoint() async -> StartingPoint {
        await client.startingPoint()
    }

    /// On this (old) phone: cancels the current account's transfer.
    public func cancelTransfer() async throws {
        try await client.cancelTransfer()
    }

    /// On this (new) phone: claims a transfer.
    @discardableResult
    public func claim(email: String, password: String, choice: ClaimChoice = .fail) async throws -> Account {
        try await client.claimTransfer(email: email, temporaryPassword: password, existingAccounts: choice)
    }

    /// Creates one more account on the phone.
    @discardableResult
    public func addAccount() async throws -> Account {
        try await client.addAccount()
    }

    /// Makes the account the phone's current one.
    public func switchAccount(to accountId: String) async throws {
        try await client.switchAccount(to: accountId)
    }

    /// Takes the account off the phone.
    public func removeAccount(_ accountId: String, abandon: Bool = false) async throws {
        try await client.removeAccount(accountId, abandon: abandon)
    }

    /// Deletes the account (the current one when nil) for good.
    public func deleteAccount(_ accountId: String? = nil) async throws {
        try await client.deleteAccount(accountId)
    }

    /// The account's profile (the current one when nil), from the service (`GET /v1/me`).
    public func profile(of accountId: String? = nil) async throws -> AccountProfile {
        try await client.profile(of: accountId)
    }

    /// Ends the account's session (the current one when nil) and forgets its tokens.
    public func signOut(of accountId: String? = nil) async throws {
        try await client.signOut(of: accountId)
    }

    /// A valid access token of the account (the current one when nil).
    public func accessToken(of accountId: String? = nil) async throws -> String {
        try await client.withAccessToken(of: accountId) { $0 }
    }

    // MARK: Push

    /// Registers an APNs token for the phone (e.g. 32 bytes of your choice on a staging server).
    public func registerPushToken(apns deviceToken: Data, environment: APNsEnvironment? = nil) async throws {
        try await client.registerPushToken(apns: deviceToken, environment: environment)
    }

    /// Registers an FCM registration token for the phone.
    public func registerPushToken(fcm token: String) async throws {
        try await client.registerPushToken(fcm: token)
    }

    // MARK: Sign in with Apple

    /// A nonce for one Sign in with Apple: an identity token for the scenario carries its
    /// ``AppleNonce/sha256`` as its `nonce` claim.
    public func appleNonce() async throws -> AppleNonce {
        try await client.appleNonce()
    }

    /// Links the current account to the Apple ID of an identity token made with `nonce`.
    @discardableResult
    public func linkAppleID(identityToken: String, nonce: AppleNonce, authorizationCode: String? = nil) async throws
        -> AppleIDLink
    {
        try await client.linkAppleID(identityToken: identityToken, nonce: nonce, authorizationCode: authorizationCode)
    }

    /// Unlinks the current account from its Apple ID.
    public func unlinkAppleID() async throws {
        try await client.unlinkAppleID()
    }

    /// On this (new) phone: brings over the account linked to the Apple ID of an identity token.
    @discardableResult
    public func claimWithAppleID(identityToken: String, nonce: AppleNonce, choice: ClaimChoice = .fail) async throws
        -> Account
    {
        try await client.claimWithAppleID(identityToken: identityToken, nonce: nonce, existingAccounts: choice)
    }

    /// Forgets the identity so the next launch starts over with a new device id.
    public func startOver() async throws {
        try await client.startOver()
    }

    // MARK: The phone's life

    /// The app killed and started again: the same Keychain and files, a new client (call ``launch()``).
    public func relaunched() -> SimulatedPhone {
        SimulatedPhone(
            name, keychain: keychain, appFiles: appFiles, iCloudKeychain: iCloudKeychain, network: network,
            makeClient: makeClient)
    }

    /// The app deleted and installed again: iOS keeps its Keychain items (the identity and
    /// tokens), the app files are gone. A new client (call ``launch()``).
    public func reinstalled() -> SimulatedPhone {
        SimulatedPhone(
            name, keychain: keychain, appFiles: MemoryCredentialStore(), iCloudKeychain: iCloudKeychain, network: network,
            makeClient: makeClient)
    }

    /// A new phone set up from this one's backup: the app files come along, the Keychain's
    /// this-device-only items do not, the Apple account's synchronized items do (the same
    /// ``iCloudKeychain``). Its ``launch()`` reports
    /// ``LaunchResult/restoredOntoNewPhone(previousAccounts:)`` whether or not backup keys are
    /// there: backups are offered by ``TransferClient/startingPoint()`` (`.backupsFound`), before
    /// any launch.
    public func restoredFromBackup(as name: String) -> SimulatedPhone {
        SimulatedPhone(
            name, keychain: MemoryCredentialStore(), appFiles: MemoryCredentialStore(appFiles.items),
            iCloudKeychain: iCloudKeychain, network: network, makeClient: makeClient)
    }

    /// Another phone signed in to the same Apple account, set up fresh (not from a backup): its
    /// own Keychain and app files, the same iCloud Keychain (``iCloudKeychain``). What a user
    /// who lost this phone, with nothing set up but Keychain sync on, starts the app on.
    public func secondPhone(as name: String) -> SimulatedPhone {
        SimulatedPhone(
            name, keychain: MemoryCredentialStore(), appFiles: MemoryCredentialStore(), iCloudKeychain: iCloudKeychain,
            network: network, makeClient: makeClient)
    }

    /// True: the phone rebooted and is not unlocked yet (the Keychain and files cannot be read).
    public func setLockedBeforeFirstUnlock(_ locked: Bool) {
        keychain.isAvailable = !locked
        appFiles.isAvailable = !locked
    }

    // MARK: Events

    /// Every event the phone's client emitted so far, oldest first.
    public var events: [TransferEvent] {
        lock.lock()
        defer { lock.unlock() }
        return log
    }

    /// Whether the phone's client emitted an event of this kind.
    public func saw(_ kind: TransferEvent.Kind) -> Bool {
        events.contains { $0.kind == kind }
    }

    /// Forgets the events recorded so far.
    public func clearEvents() {
        lock.lock()
        log.removeAll()
        lock.unlock()
    }

    private func record(_ event: TransferEvent) {
        lock.lock()
        log.append(event)
        lock.unlock()
    }
}

extension TransferEvent {
    /// An event's case without its values, for assertions.
    /// Each case is named after the ``TransferEvent`` case it stands for.
    public enum Kind: String, Sendable, CaseIterable {
        /// ``TransferEvent/initialState(_:)``
        case initialState
        /// ``TransferEvent/signedIn(accountId:created:)``
        case signedIn
        /// ``TransferEvent/switched(accountId:)``
        case switched
        /// ``TransferEvent/tokenRefreshed(accountId:)``
        case tokenRefreshed
        /// ``TransferEvent/signedOut(accountId:)``
        case signedOut
        /// ``TransferEvent/accountRemoved(accountId:)``
        case accountRemoved
        /// ``TransferEvent/accountMoved(accountId:transferredAt:remainingAccounts:)``
        case accountMoved
        /// ``TransferEvent/deviceRevoked``
        case deviceRevoked
        /// ``TransferEvent/accountDeleted(accountId:)``
        case accountDeleted
        /// ``TransferEvent/restoredOntoNewPhone(previousAccounts:)``
        case restoredOntoNewPhone
        /// ``TransferEvent/storageUnavailable(_:)``
        case storageUnavailable
        /// ``TransferEvent/unreadableDataDiscarded(_:)``
        case unreadableDataDiscarded
        /// ``TransferEvent/startedOver``
        case startedOver
        /// ``TransferEvent/accountNotDeleted(accountId:reason:)``
        case accountNotDeleted
        /// ``TransferEvent/stateChanged(_:)``
        case stateChanged
    }

    /// The event's case without its values.
    public var kind: Kind {
        switch self {
        case .initialState: .initialState
        case .signedIn: .signedIn
        case .switched: .switched
        case .tokenRefreshed: .tokenRefreshed
        case .signedOut: .signedOut
        case .accountRemoved: .accountRemoved
        case .accountMoved: .accountMoved
        case .deviceRevoked: .deviceRevoked
        case .accountDeleted: .accountDeleted
        case .restoredOntoNewPhone: .restoredOntoNewPhone
        case .storageUnavailable: .storageUnavailable
        case .unreadableDataDiscarded: .unreadableDataDiscarded
        case .startedOver: .startedOver
        case .accountNotDeleted: .accountNotDeleted
        case .stateChanged: .stateChanged
        }
    }
}

/// A clock a test moves by hand: give its ``now`` to a ``TransferClient`` (`clock:`) and
/// ``advance(by:)`` it to reach a token's renewal without sleeping.
public final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date

    /// A clock showing `start`.
    public init(_ start: Date = Date()) {
        current = start
    }

    /// The time it shows.
    public var now: Date {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    /// Moves the clock forward.
    public func advance(by seconds: TimeInterval) {
        lock.lock()
        current += seconds
        lock.unlock()
    }
}
