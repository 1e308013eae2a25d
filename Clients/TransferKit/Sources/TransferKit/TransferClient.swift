import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client of the device-transfer service: this phone's identity, its accounts and their
/// sessions, transfers between phones, and push routing.
///
/// Create one per app (``TransferClient/standard(baseURL:keychain:appGroup:urlSession:headers:logger:migratingFrom:attestation:backupKeys:)`` on Apple
/// platforms), subscribe to ``events``, then call ``launch()`` at every start:
///
/// ```swift
/// let transfer = TransferClient.standard(baseURL: URL(string: "https://transfer.example.com")!)
/// switch try await transfer.launch() {
/// case .signedIn(let accountId, _): showHome(accountId)
/// case .restoredOntoNewPhone: offerTransfer()
/// case .currentAccountMoved(_, _, let remaining): offerSwitch(to: remaining)
/// case .storageUnavailable(let failure): handle(failure)  // .locked: launch again after unlock
/// }
/// ```
///
/// Every authorised call goes through one place, ``withAccessToken(of:isolation:_:)``: it hands out a valid
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
    /// Attests this device for a login that creates an account; nil: never attest.
    let attestationProvider: (any AttestationProvider)?
    /// Where backup keys are kept (iCloud Keychain's synchronizable items on iOS); nil: nowhere.
    let backupShelf: BackupShelf?
    /// Whether this phone keeps a backup key for each of its accounts (the app's switch).
    var backupKeysEnabled: Bool

    var identity: DeviceIdentity?
    /// The accounts on this phone, as last heard from the service.
    var accountList: [Account] = []
    /// Tokens by account id, as last read or written; each mirrored in `credentials` under
    /// ``StoreKey/session(_:)``.
    var sessions: [String: StoredSession] = [:]
    /// Whether the identity and the list were read from the stores (by ``launch()`` or any call).
    var restored = false
    /// Whether other processes (app extensions) use the same sessions through shared stores:
    /// renewals then log in instead of refreshing (only refreshes rotate the refresh token).
    let sharesSessions: Bool
    /// The account and time of the last `410 device_transferred`, for ``launch()``'s result.
    var lastMove: (accountId: String?, transferredAt: Date?)?
    /// The last run of ``keepBackupKeys(deleteEverywhere:)``: the next one waits for it.
    var backupKeysRun: Task<Void, Never>?
    /// How many claims this process is sending now: a launch meanwhile does not repeat the one
    /// recorded in flight (it is this process's own, still waiting for its answer).
    var claimsInProgress = 0
    /// The APNs or FCM token the app registered last, and the device id it was uploaded for
    /// (nil: not yet, e.g. registered before any account, or its upload failed).
    var pushToken: PushTokenRequest?
    var pushTokenDevice: String?
    /// The renewals under way, by account id; dropped when the account is signed out, moved,
    /// removed or deleted, so that a renewal under way then drops its result.
    var renewals = Renewals()
    /// Whether the stored marker ``StoreKey/claimPending`` (an identity made for a claim that has
    /// not brought a session yet, read by ``startingPoint()``) may exist: true until this process
    /// saw a session and removed it.
    var claimPending = true

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
    ///   - sharesSessions: true when other processes (an app extension, a widget) use the same
    ///     stores at the same time. Renewals then log in with the device secret instead of
    ///     refreshing: a login never rotates the refresh token (the contract's rule), so one
    ///     process's renewal never revokes the tokens another holds.
    ///   - transport: how requests reach the service (``Transport/urlSession(_:headers:)`` by
    ///     default; your own for tests, previews, or an HTTP stack of your choice).
    ///   - clock: the time TransferKit plans token renewals with (tests move it by hand).
    ///   - attestation: attests this device when a login would create an account, for a service
    ///     that checks it (`--attestation monitor` or `enforce`): ``AppAttestProvider`` on iOS, or
    ///     your own. Nil (the default) never attests; a service that enforces attestation then
    ///     refuses new accounts with ``TransferError/Code/attestationRequired``.
    ///   - synchronizedStore: where each account's backup key is kept, a store that follows the
    ///     user to their next phone (on iOS ``KeychainCredentialStore/synchronized(location:)``,
    ///     iCloud Keychain); nil keeps none.
    ///   - backupKeys: false turns backup keys off: the next launch deletes the ones this phone
    ///     made (``setBackupKeys(enabled:)`` changes it later). Not stored by TransferKit: pass
    ///     the app's saved switch at every start.
    public init(
        baseURL: URL, credentials: any CredentialStore, accountList: (any CredentialStore)? = nil,
        sharesSessions: Bool = false, transport: Transport = .urlSession(.shared),
        clock: @escaping @Sendable () -> Date = { Date() }, attestation: (any AttestationProvider)? = nil,
        synchronizedStore: (any SynchronizedStore)? = nil, backupKeys: Bool = true
    ) {
        self.init(
            baseURL: baseURL, credentials: credentials, accountList: accountList,
            transport: transport as any HTTPTransport, now: clock, sharesSessions: sharesSessions,
            attestation: attestation, synchronizedStore: synchronizedStore, backupKeys: backupKeys)
    }

    /// A client whose requests go through `urlSession` (TransferKit 1's initialiser).
    public init(
        baseURL: URL, credentials: any CredentialStore, accountList: (any CredentialStore)? = nil,
        urlSession: URLSession
    ) {
        self.init(baseURL: baseURL, credentials: credentials, accountList: accountList, transport: .urlSession(urlSession))
    }

    init(
        baseURL: URL, credentials: any CredentialStore, accountList: (any CredentialStore)?,
        transport: any HTTPTransport, now: @escaping @Sendable () -> Date = { Date() }, sharesSessions: Bool = false,
        attestation: (any AttestationProvider)? = nil, synchronizedStore: (any SynchronizedStore)? = nil,
        backupKeys: Bool = true
    ) {
        self.backupShelf = synchronizedStore.map(BackupShelf.init(store:))
        self.backupKeysEnabled = backupKeys
        self.attestationProvider = attestation
        self.sharesSessions = sharesSessions
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

    /// What TransferKit knows about this phone, now and at every change: the stream starts with
    /// the current state (as supabase's `authStateChanges` starts with `initialSession`), then
    /// yields each new one (a slow reader gets the latest). For SwiftUI, ``TransferModel`` wraps it.
    public nonisolated var stateChanges: AsyncStream<DeviceState> { hub.subscribeState() }

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
    /// store could not be read (``LaunchResult/storageUnavailable(_:)``), nor when the account list
    /// came from another phone's backup (``LaunchResult/restoredOntoNewPhone(previousAccounts:)``);
    /// both also arrive as events. A token cache or account list that no longer decodes is
    /// dropped (``TransferEvent/unreadableDataDiscarded(_:)``); an identity that does not decode
    /// is never replaced (``StorageError/Kind/undecodable``).
    ///
    /// When the current account moved to another phone and others remain here, the launch
    /// returns ``LaunchResult/currentAccountMoved(accountId:transferredAt:remainingAccounts:)``:
    /// pick one with ``switchAccount(to:)``. Every other account that left the phone since the
    /// last launch gets its event too (``TransferEvent/accountMoved(accountId:transferredAt:remainingAccounts:)``,
    /// ``TransferEvent/accountDeleted(accountId:)`` or ``TransferEvent/accountRemoved(accountId:)``).
    ///
    /// An account list from another device id means a backup restored onto this phone, unless
    /// this phone's own identity already holds those accounts: a claim that won while its answer
    /// was lost (the app killed, the network gone). The launch asks first, with a login naming
    /// each account (which never creates one), and signs in when one answers.
    ///
    /// Calling it at the very first start creates an account: on a phone that may be a new one,
    /// ask the user first (``startingPoint()``), and claim without launching.
    ///
    /// With an ``AttestationProvider`` (``init(baseURL:credentials:accountList:sharesSessions:transport:clock:attestation:)``),
    /// a launch that creates the account attests the device first (see ``AttestationProvider``).
    ///
    /// - Throws: ``TransferError``: ``TransferError/Code/deviceTransferred`` (the current account
    ///   moved to another phone and no account is left: ``startOver()``), ``TransferError/Code/deviceRevoked``,
    ///   ``TransferError/Code/accountDeleted``, ``TransferError/Code/accountNotOnDevice``, network errors;
    ///   when the service checks attestation, ``TransferError/Code/attestationRequired``,
    ///   ``TransferError/Code/invalidAttestation``, ``TransferError/Code/attestationFailed``.
    public func launch() async throws -> LaunchResult {
        // A claim whose answer never came (the app was killed): repeated first, so that this
        // launch lands in the account it won, however long ago.
        try await resumeClaimInFlight()
        let stored: StoredState
        do {
            stored = try readStores()
        } catch {
            let failure = StorageError(error)
            hub.emit(.storageUnavailable(failure))
            return .storageUnavailable(failure)
        }
        // A list of accounts that belongs to another device id: the app's data was restored from
        // another phone's backup (the Keychain identity never travels). But when this phone has
        // an identity of its own, a claim may have won with it while its answer was lost (the
        // list is rewritten only when the answer arrives): a login naming the list's accounts,
        // which never creates one, tells. Otherwise offer the transfer.
        var resolved: StoredState?
        if let list = stored.list, !list.accounts.isEmpty, list.deviceId != stored.identity?.deviceId {
            if let identity = stored.identity, try await holdsAny(of: list.accounts, identity: identity) {
                resolved = StoredState(identity: identity, list: nil)
            } else {
                adopt(stored)
                hub.emit(.restoredOntoNewPhone(previousAccounts: list.accounts))
                return .restoredOntoNewPhone(previousAccounts: list.accounts)
            }
        }
        let identity: DeviceIdentity
        if let known = stored.identity {
            identity = known
        } else {
            do {
                identity = try mintIdentity()
            } catch {
                let failure = StorageError(error)
                return .storageUnavailable(failure)
            }
        }
        adopt(resolved ?? StoredState(identity: identity, list: stored.list))
        let before = accountList

        let session: SessionBody
        do {
            // A device id made a moment ago is unknown to the service: this login creates an
            // account, so it is attested up front. A known identity's login creates one only when
            // the service lost the device (it then says `attestation_required`, and is answered).
            session = try await creatingLogin(
                LoginRequest(deviceId: identity.deviceId, deviceSecret: identity.deviceSecret), for: current,
                attestUpFront: stored.identity == nil)
        } catch let error as TransferError where error.code == .deviceTransferred && !accountList.isEmpty {
            // The current account moved away; others remain (the event named them): the app picks one.
            await noticeDepartures(from: before.filter { $0.id != lastMove?.accountId })
            return .currentAccountMoved(
                accountId: lastMove?.accountId, transferredAt: lastMove?.transferredAt, remainingAccounts: accountList)
        } catch let error as TransferError where error.code == .accountDeleted {
            // The service erased the account (the user elsewhere, support, or as inactive): its
            // backup key died with it. With no account left the identity is of no more use (the
            // device is retired): TransferKit starts over now, so that this launch is the only one
            // that throws, and the next start is a fresh one (``startingPoint()`` says which).
            if let gone = before.first(where: \.isCurrent)?.id { try? backupShelf?.remove(gone) }
            if accountList.isEmpty { try? startOver() }
            throw error
        }
        claimSettled()
        apply(session)
        await noticeDepartures(from: before)
        hub.emit(.signedIn(accountId: session.accountId, created: session.created))
        // Another current account than the one the phone knew (e.g. a claim whose answer was lost).
        if let known = before.first(where: \.isCurrent)?.id, known != session.accountId {
            hub.emit(.switched(accountId: session.accountId))
        }
        await uploadPendingPushToken()
        await keepBackupKeys()
        return .signedIn(accountId: session.accountId, created: session.created)
    }

    /// Where this phone stands before anything is sent: read from the stores only, so that the
    /// app can ask the user "new here, or bringing your account from another phone?" before a
    /// first ``launch()`` creates an account the user may never use.
    ///
    /// ```swift
    /// if await transfer.startingPoint() == .firstStart, await askUser("Bring your account from another phone?") {
    ///     showClaimScreen()    // claimTransfer(code:) works before any launch()
    /// } else {
    ///     try await transfer.launch()
    /// }
    /// ```
    public func startingPoint() -> StartingPoint {
        let stored: StoredState
        do {
            stored = try readStores()
        } catch {
            return .storageUnavailable(StorageError(error))
        }
        // A claim the user confirmed, whose answer never came: launch() repeats it.
        if hasClaimInFlight() { return .returning }
        let restoredList = stored.list.flatMap { list in
            !list.accounts.isEmpty && list.deviceId != stored.identity?.deviceId ? list.accounts : nil
        }
        // An identity minted for a claim whose answer never came, and nothing since: no account
        // is known on this phone, so the user has not chosen yet.
        let claimOnly = stored.identity != nil && (stored.list?.accounts.isEmpty ?? true)
            && ((try? credentials.read(StoreKey.claimPending)) ?? nil) != nil
        if stored.identity == nil || restoredList != nil || claimOnly {
            // Nothing of its own: the user's accounts from their other or earlier phones come first.
            do {
                let backups = try offeredBackups()
                if !backups.isEmpty { return .backupsFound(backups) }
            } catch {
                return .storageUnavailable(StorageError(error))
            }
        }
        if let restoredList { return .restoredFromBackup(previousAccounts: restoredList) }
        guard stored.identity != nil, !claimOnly else { return .firstStart }
        return .returning
    }

    /// Whether this phone's device (`identity`) holds one of `accounts`: a login naming each
    /// (one that never creates an account) until one answers with a session. `401`, `403` and
    /// `410` say no (the device is unknown, or the account is not on it); network errors and
    /// other answers (`429`, `503`) are thrown: whether a restore happened cannot be told
    /// without the service.
    private func holdsAny(of accounts: [Account], identity: DeviceIdentity) async throws -> Bool {
        for account in accounts {
            let response = try await send(
                .login,
                body: Wire.encode(LoginRequest(deviceId: identity.deviceId, deviceSecret: identity.deviceSecret, accountId: account.id)))
            if response.isSuccess { return true }
            guard [401, 403, 410].contains(response.status) else { throw TransferError(response: response) }
        }
        return false
    }

    /// For each of `before` that is no longer on the phone: tells why, with the event of its
    /// case (``TransferEvent/accountMoved(accountId:transferredAt:remainingAccounts:)`` for a
    /// claim elsewhere, ``TransferEvent/accountDeleted(accountId:)``, else
    /// ``TransferEvent/accountRemoved(accountId:)``), and forgets its tokens. Asks the service
    /// with a login naming the account, which never creates one.
    func noticeDepartures(from before: [Account]) async {
        guard let identity else { return }
        let here = Set(accountList.map(\.id))
        for account in before where !here.contains(account.id) {
            forget(account.id)
            let response = try? await send(
                .login,
                body: Wire.encode(LoginRequest(deviceId: identity.deviceId, deviceSecret: identity.deviceSecret, accountId: account.id)))
            let error = response.map(TransferError.init(response:))
            switch error?.code {
            case .deviceTransferred?:
                let body = response.flatMap { try? Wire.decoder().decode(ErrorBody.self, from: $0.body) }
                hub.emit(.accountMoved(accountId: account.id, transferredAt: body?.transferredAt, remainingAccounts: accountList))
            case .accountDeleted?:
                // Its backup key was erased with it: its item is not one to offer.
                try? backupShelf?.remove(account.id)
                hub.emit(.accountDeleted(accountId: account.id))
            default:
                hub.emit(.accountRemoved(accountId: account.id))
            }
        }
    }

    /// Forgets this phone's identity, tokens and account list, so that the next ``launch()``
    /// generates a new device id and creates a new account. Emits ``TransferEvent/startedOver``.
    ///
    /// For when the old identity is of no more use: every account moved away
    /// (``TransferError/Code/deviceTransferred`` with no account left), the device was revoked or
    /// retired, or the user declined to bring accounts over after a restore. Nothing is sent.
    public func startOver() throws {
        renewals.dropAll()
        do {
            // Before launch() nothing is in memory: the stored list names the accounts whose
            // tokens are stored (whichever device id it belongs to).
            var listed = Set(accountList.map(\.id)).union(sessions.keys)
            if let stored = try? accountListStore.read(StoredAccountList.self, StoreKey.accountList) {
                listed.formUnion(stored.accounts.map(\.id))
            }
            for id in listed {
                try credentials.remove(StoreKey.session(id))
            }
            try credentials.remove(StoreKey.legacySessions)
            try credentials.remove(StoreKey.claimPending)
            try credentials.remove(StoreKey.claimInFlight)
            try credentials.remove(StoreKey.identity)
            try accountListStore.remove(StoreKey.accountList)
        } catch {
            throw storageUnavailable(error)
        }
        identity = nil
        sessions = [:]
        accountList = []
        restored = true
        publish()
        hub.emit(.startedOver)
    }

    // MARK: Stores

    /// What the stores hold.
    struct StoredState {
        var identity: DeviceIdentity?
        var list: StoredAccountList?
    }

    /// Reads the identity and the account list, and moves TransferKit 1's token dictionary to one
    /// item per account. Throws a ``StorageError`` when a store cannot be read, or when the
    /// identity does not decode (it is never replaced behind the app's back). An account list or
    /// tokens that do not decode are caches: they are dropped, with an event.
    func readStores() throws -> StoredState {
        let identity = try credentials.read(DeviceIdentity.self, StoreKey.identity)
        var list: StoredAccountList?
        do {
            list = try accountListStore.read(StoredAccountList.self, StoreKey.accountList)
        } catch let error as StorageError where error.kind == .undecodable {
            try accountListStore.remove(StoreKey.accountList)
            hub.emit(.unreadableDataDiscarded(.accountList))
        }
        do {
            if let legacy = try credentials.read([String: StoredSession].self, StoreKey.legacySessions) {
                for (id, session) in legacy { try credentials.write(Wire.encode(session), for: StoreKey.session(id)) }
                try credentials.remove(StoreKey.legacySessions)
            }
        } catch let error as StorageError where error.kind == .undecodable {
            try credentials.remove(StoreKey.legacySessions)
            hub.emit(.unreadableDataDiscarded(.sessions))
        }
        return StoredState(identity: identity, list: list)
    }

    /// Takes what the stores hold as the state: the list only when it is this identity's.
    private func adopt(_ stored: StoredState) {
        identity = stored.identity
        if let list = stored.list, list.deviceId == stored.identity?.deviceId, stored.identity != nil {
            accountList = list.accounts
        } else {
            accountList = []
        }
        restored = true
        publish()
    }

    /// Reads the stores once before a call acts on the phone's state, so that no call made
    /// before ``launch()`` mistakes an empty memory for an empty phone.
    func restoreIfNeeded() throws {
        guard !restored else { return }
        do {
            adopt(try readStores())
        } catch {
            throw storageUnavailable(error)
        }
    }

    /// With shared stores (``sharesSessions``), takes what another process changed since this
    /// one read them: the app switched, added or removed accounts, or started over, while this
    /// long-lived extension kept running. A store that cannot be read now changes nothing.
    func followOtherProcesses() {
        guard sharesSessions, restored, let stored = try? readStores() else { return }
        if stored.identity != identity {
            sessions = [:]
            adopt(stored)
        } else if let list = stored.list, list.deviceId == identity?.deviceId, list.accounts != accountList {
            accountList = list.accounts
            publish()
        }
    }

    // MARK: Identity

    /// The identity for a claim: the stored one, or a new one when the store says there is none.
    /// A new one is marked as made for a claim until a session arrives (``startingPoint()``).
    func identityForClaim() throws -> DeviceIdentity {
        try restoreIfNeeded()
        if let identity { return identity }
        do {
            identity = try mintIdentity()
            try credentials.write(Data("1".utf8), for: StoreKey.claimPending)
            claimPending = true
        } catch {
            throw TransferError(storage: error)
        }
        publish()
        return identity!
    }

    /// A session arrived for this identity: it is no longer only a claim's.
    func claimSettled() {
        guard claimPending else { return }
        claimPending = false
        try? credentials.remove(StoreKey.claimPending)
    }

    /// The stored identity; never generates one.
    func requireIdentity() throws -> DeviceIdentity {
        try restoreIfNeeded()
        guard let identity else {
            throw TransferError(.notSignedIn, "This phone has no device identity yet: call launch() first.")
        }
        return identity
    }

    /// A new identity, stored before it is used; throws (and emits ``TransferEvent/storageUnavailable(_:)``)
    /// when it cannot be stored, so that no account is ever created with a secret the phone does not keep.
    ///
    /// The identity is added, never written over: when another process sharing the store (an
    /// extension starting at the same moment) stored one first, that one is adopted, so that
    /// both work with one device and neither's account is stranded.
    func mintIdentity() throws -> DeviceIdentity {
        let minted = DeviceIdentity.generate()
        do {
            guard let existing = try credentials.add(Wire.encode(minted), for: StoreKey.identity) else { return minted }
            return try Wire.decoder().decode(DeviceIdentity.self, from: existing)
        } catch {
            let failure = StorageError(error)
            hub.emit(.storageUnavailable(failure))
            throw failure
        }
    }

    /// ``TransferError/Code/storageUnavailable`` for what a store threw, with its event.
    func storageUnavailable(_ error: any Error) -> TransferError {
        let error = TransferError(storage: error)
        hub.emit(.storageUnavailable(error.storage!))
        return error
    }

    // MARK: Local state

    var current: String? { accountList.first(where: \.isCurrent)?.id }

    /// The account `accountId` names, or the current one.
    func resolve(_ accountId: String?) throws -> String {
        try restoreIfNeeded()
        if let accountId { return accountId.lowercased() }
        followOtherProcesses()
        guard let current else {
            throw TransferError(.notSignedIn, "There is no current account: launch, claim, or pick one with switchAccount(to:).")
        }
        return current
    }

    /// An account whose token device-wide endpoints accept: the current one, else any on the phone.
    func anyAccountOnDevice() throws -> String {
        try restoreIfNeeded()
        followOtherProcesses()
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

    /// Publishes the state; a change is also an event (``TransferEvent/stateChanged(_:)``).
    func publish() {
        let state = DeviceState(deviceId: identity?.deviceId, accounts: accountList)
        if hub.setState(state) { hub.emit(.stateChanged(state)) }
    }
}

/// The keys TransferKit stores under.
enum StoreKey {
    static let identity = "transferkit.identity"
    /// TransferKit 1 kept every account's tokens in one item; moved to ``session(_:)`` on first read.
    static let legacySessions = "transferkit.sessions"
    /// One account's tokens: one item per account, so that a process that changes one account's
    /// tokens never writes back another's (an app and its extensions share the items).
    static func session(_ accountId: String) -> String { "transferkit.session." + accountId.lowercased() }
    static let accountList = "transferkit.accounts"
    /// Present while the identity was made for a claim whose answer has not arrived.
    static let claimPending = "transferkit.claim-pending"
    /// A claim sent whose answer has not arrived (``ClaimInFlight``), repeated by the next launch.
    static let claimInFlight = "transferkit.claim-in-flight"
    /// The name the app gave an account, kept with its backup key ("Continue as …?").
    static func displayName(_ accountId: String) -> String { "transferkit.display-name." + accountId.lowercased() }
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
