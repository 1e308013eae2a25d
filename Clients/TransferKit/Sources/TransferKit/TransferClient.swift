import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client of the device-transfer service: this phone's identity, its accounts and their
/// sessions, transfers between phones, and push routing.
///
/// Create one per app (``TransferClient/standard(baseURL:keychainService:accessGroup:)`` on Apple
/// platforms), subscribe to ``events``, then call ``launch()`` at every start:
///
/// ```swift
/// let transfer = TransferClient.standard(baseURL: URL(string: "https://transfer.example.com")!)
/// switch try await transfer.launch() {
/// case .signedIn(let accountId, _): showHome(accountId)
/// case .restoredOntoNewPhone: offerTransfer()
/// case .storageUnavailable: break  // locked before first unlock: launch again later
/// }
/// ```
///
/// Every authorised call goes through one place, ``withAccessToken(of:_:)``: it hands out a valid
/// access token of the current or a named account, renews it a little before it expires (one
/// renewal per account however many callers wait), and when the token is refused renews once
/// and tries once more.
public actor TransferClient {
    let baseURL: URL
    let transport: any HTTPTransport
    /// The device identity and session tokens: the Keychain (this device only).
    let credentials: any CredentialStore
    /// The account list with the device id it belongs to: a store included in backups.
    let accountListStore: any CredentialStore
    let now: @Sendable () -> Date
    let hub = EventHub()

    var identity: DeviceIdentity?
    /// The accounts on this phone, as last heard from the service.
    var accountList: [Account] = []
    /// Tokens by account id; mirrored in `credentials` under ``StoreKey/sessions``.
    var sessions: [String: StoredSession] = [:]
    var sessionsLoaded = false
    /// The renewals under way, by account id; dropped when the account is signed out, moved,
    /// removed or deleted, so that a renewal under way then drops its result.
    var renewals = Renewals()

    /// A client of the service at `baseURL`.
    ///
    /// - Parameters:
    ///   - credentials: where the device identity and tokens are kept; on iOS a
    ///     ``KeychainCredentialStore`` (not in backups, not on other phones).
    ///   - accountList: where the list of the phone's accounts is kept; on iOS a
    ///     ``FileCredentialStore`` in Application Support (in backups). When a backup is restored
    ///     onto a new phone, the list arrives without the identity, and ``launch()`` reports
    ///     ``LaunchResult/restoredOntoNewPhone(previousAccounts:)`` instead of creating an account.
    ///     Nil keeps the list in `credentials` (such a restore then looks like a first launch).
    ///   - urlSession: the session requests go through.
    public init(
        baseURL: URL, credentials: any CredentialStore, accountList: (any CredentialStore)? = nil,
        urlSession: URLSession = .shared
    ) {
        self.init(
            baseURL: baseURL, credentials: credentials, accountList: accountList,
            transport: URLSessionTransport(session: urlSession))
    }

    init(
        baseURL: URL, credentials: any CredentialStore, accountList: (any CredentialStore)?,
        transport: any HTTPTransport, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.baseURL = baseURL
        self.credentials = credentials
        self.accountListStore = accountList ?? credentials
        self.transport = transport
        self.now = now
    }

    // MARK: State and events

    /// Events about this phone's accounts. Each subscription starts with
    /// ``TransferEvent/initialState(_:)``; subscribe as early as you like, from anywhere.
    public nonisolated var events: AsyncStream<TransferEvent> { hub.subscribe() }

    /// What TransferKit knows about this phone now.
    public nonisolated var state: DeviceState { hub.state }

    /// The current account's id, if there is one.
    public nonisolated var currentAccountId: String? { hub.state.currentAccountId }

    /// Calls `observer` synchronously with every event (for ``TransferKitTesting``'s event log).
    @_spi(TransferKitTesting)
    public nonisolated func observeEvents(_ observer: @escaping @Sendable (TransferEvent) -> Void) {
        hub.addObserver(observer)
    }

    // MARK: Launch

    /// Logs in to this phone's current account: call it at every start.
    ///
    /// On the very first launch it generates the device identity (a UUID and 256 random bits),
    /// stores it, and the service creates the account. It never generates an identity when the
    /// store could not be read (``LaunchResult/storageUnavailable``), nor when the account list
    /// came from another phone's backup (``LaunchResult/restoredOntoNewPhone(previousAccounts:)``);
    /// both also arrive as events.
    ///
    /// - Throws: ``TransferError``: ``TransferError/Kind/deviceTransferred`` (the current account
    ///   moved to another phone; ``TransferEvent/accountMoved(accountId:transferredAt:remainingAccounts:)``
    ///   names the accounts left), ``TransferError/Kind/deviceRevoked``, ``TransferError/Kind/accountDeleted``,
    ///   ``TransferError/Kind/accountNotOnDevice`` (no account left: ``startOver()``), network errors.
    public func launch() async throws -> LaunchResult {
        let storedIdentity: DeviceIdentity?
        let storedList: StoredAccountList?
        do {
            storedIdentity = try identity ?? credentials.read(DeviceIdentity.self, StoreKey.identity)
            storedList = try accountListStore.read(StoredAccountList.self, StoreKey.accountList)
            try loadSessionsIfNeeded()
        } catch {
            hub.emit(.storageUnavailable)
            return .storageUnavailable
        }
        // A list of accounts that belongs to another device id: the app's data was restored from
        // another phone's backup (the Keychain identity never travels). Offer the transfer.
        if let list = storedList, !list.accounts.isEmpty, list.deviceId != storedIdentity?.deviceId {
            identity = storedIdentity
            publish()
            hub.emit(.restoredOntoNewPhone(previousAccounts: list.accounts))
            return .restoredOntoNewPhone(previousAccounts: list.accounts)
        }
        guard let identity = storedIdentity ?? mintIdentity() else { return .storageUnavailable }
        self.identity = identity
        if let list = storedList { accountList = list.accounts }
        publish()

        let session = try await login(
            LoginRequest(deviceId: identity.deviceId, deviceSecret: identity.deviceSecret), for: current)
        apply(session)
        hub.emit(.signedIn(accountId: session.accountId, created: session.created))
        return .signedIn(accountId: session.accountId, created: session.created)
    }

    /// Forgets this phone's identity, tokens and account list, so that the next ``launch()``
    /// generates a new device id and creates a new account.
    ///
    /// For when the old identity is of no more use: every account moved away
    /// (``TransferError/Kind/deviceTransferred`` with no account left), the device was revoked or
    /// retired, or the user declined to bring accounts over after a restore. Nothing is sent.
    public func startOver() throws {
        renewals.dropAll()
        do {
            try credentials.remove(StoreKey.sessions)
            try credentials.remove(StoreKey.identity)
            try accountListStore.remove(StoreKey.accountList)
        } catch {
            hub.emit(.storageUnavailable)
            throw TransferError(.storageUnavailable, "The credential store cannot be changed now: \(error)")
        }
        identity = nil
        sessions = [:]
        sessionsLoaded = true
        accountList = []
        publish()
    }

    // MARK: Identity

    /// The identity for a claim: the stored one, or a new one when the store says there is none.
    func identityForClaim() throws -> DeviceIdentity {
        if let identity { return identity }
        guard let identity = try readIdentity() ?? mintIdentity() else {
            throw TransferError(.storageUnavailable, "The device identity cannot be stored now.")
        }
        self.identity = identity
        publish()
        return identity
    }

    /// The stored identity; never generates one.
    func requireIdentity() throws -> DeviceIdentity {
        if let identity { return identity }
        guard let stored = try readIdentity() else {
            throw TransferError(.notSignedIn, "This phone has no device identity yet: call launch() first.")
        }
        identity = stored
        return stored
    }

    /// The identity in the credential store; nil when there is none, `storageUnavailable` when it cannot be read.
    private func readIdentity() throws -> DeviceIdentity? {
        do {
            return try credentials.read(DeviceIdentity.self, StoreKey.identity)
        } catch {
            throw storageUnavailable(error)
        }
    }

    /// A new identity, stored before it is used; nil (and an event) when it cannot be stored,
    /// so that no account is ever created with a secret the phone does not keep.
    func mintIdentity() -> DeviceIdentity? {
        let minted = DeviceIdentity.generate()
        do {
            try credentials.write(Wire.encode(minted), for: StoreKey.identity)
            return minted
        } catch {
            hub.emit(.storageUnavailable)
            return nil
        }
    }

    func storageUnavailable(_ error: any Error) -> TransferError {
        hub.emit(.storageUnavailable)
        return TransferError(.storageUnavailable, "The credential store cannot be read now: \(error)")
    }

    // MARK: Local state

    var current: String? { accountList.first(where: \.isCurrent)?.id }

    /// The account `accountId` names, or the current one.
    func resolve(_ accountId: String?) throws -> String {
        if let accountId { return accountId.lowercased() }
        guard let current else {
            throw TransferError(.notSignedIn, "There is no current account: launch, claim, or pick one with switchAccount(to:).")
        }
        return current
    }

    /// An account whose token device-wide endpoints accept: the current one, else any on the phone.
    func anyAccountOnDevice() throws -> String {
        guard let id = current ?? accountList.first?.id else {
            throw TransferError(.notSignedIn, "There is no account on this phone: call launch() first.")
        }
        return id
    }

    /// Replaces the account list, stores it with this phone's device id, and publishes it.
    func setAccounts(_ accounts: [Account]) {
        accountList = accounts
        // A failed write only loses the restore detection for this list; the service has the truth.
        try? accountListStore.write(
            Wire.encode(StoredAccountList(deviceId: identity?.deviceId, accounts: accounts)), for: StoreKey.accountList)
        publish()
    }

    func publish() {
        hub.setState(DeviceState(deviceId: identity?.deviceId, accounts: accountList))
    }
}

/// The keys TransferKit stores under.
enum StoreKey {
    static let identity = "transferkit.identity"
    static let sessions = "transferkit.sessions"
    static let accountList = "transferkit.accounts"
    /// A ``SiblingSession``'s account and tokens, one key per sibling client id: sibling apps
    /// sharing a Keychain access group keep their sessions apart. The client id is hashed so that
    /// any id the contract allows makes a short key of `[A-Za-z0-9._-]` (what
    /// ``FileCredentialStore`` takes). TransferKit has not shipped with the earlier single key,
    /// so nothing is migrated from it.
    static func siblingSession(clientId: String) -> String {
        "transferkit.sibling-session." + Base64URL.encode(SHA256.hash(clientId.utf8))
    }
}

/// An account's tokens on this phone.
struct StoredSession: Codable, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    var accessToken: String
    var refreshToken: String
    /// A little before the access token expires (`expiresIn` less a tenth, at most a minute).
    var refreshAt: Date

    /// Leaves the secrets out, so that a log line never carries them.
    var description: String {
        "StoredSession(accessToken: \(Redacted.text), refreshToken: \(Redacted.text), refreshAt: \(refreshAt))"
    }
    var debugDescription: String { description }
    var customMirror: Mirror {
        Mirror(self, children: ["accessToken": Redacted.text, "refreshToken": Redacted.text, "refreshAt": refreshAt])
    }
}

extension StoredSession {
    /// The tokens of a session body the service sent at `receivedAt`.
    init(_ session: SessionBody, receivedAt: Date) {
        let lifetime = Double(session.expiresIn)
        self.init(
            accessToken: session.accessToken, refreshToken: session.refreshToken,
            refreshAt: receivedAt.addingTimeInterval(lifetime - min(60, lifetime / 10)))
    }
}

/// The account list and the device id it belongs to.
struct StoredAccountList: Codable, Sendable {
    var deviceId: String?
    var accounts: [Account]
}
