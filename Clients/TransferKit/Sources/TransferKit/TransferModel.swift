#if canImport(Observation)
import Foundation
import Observation

/// A ``TransferClient`` for SwiftUI: its state as `@Observable` properties on the main actor.
///
/// ```swift
/// @main struct NotesApp: App {
///     @State private var transfer = TransferModel(client: .standard(baseURL: serviceURL))
///     var body: some Scene {
///         WindowGroup {
///             RootView().environment(transfer).task { await transfer.start() }
///         }
///     }
/// }
///
/// struct RootView: View {
///     @Environment(TransferModel.self) private var transfer
///     var body: some View {
///         switch transfer.launchResult {
///         case nil where transfer.startingPoint == .firstStart:
///             WelcomeView()  // "New here" → transfer.launch(); "Bring my account" → transfer.claimTransfer(code:)
///         case nil where transfer.foundBackups != nil:
///             ContinueAsView(transfer.foundBackups!)  // "Continue as Mia?" → transfer.claim(backup:); "No" → transfer.launch()
///         case nil: ProgressView()
///         case .signedIn: HomeView(account: transfer.currentAccount)
///         case .restoredOntoNewPhone(let previous): TransferPromptView(previous: previous)
///         case .currentAccountMoved(_, _, let remaining): PickAccountView(accounts: remaining)
///         case .storageUnavailable: LockedView()  // launch again on protectedDataDidBecomeAvailable
///         }
///     }
/// }
/// ```
///
/// Everything else goes through ``client``; the model follows every state change and event of
/// the client, so a change made there (a claim, a switch) or by TransferKit itself (a move found
/// by a renewal, a deletion, a revocation) shows up here, in ``launchResult`` too.
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
@MainActor @Observable
public final class TransferModel {
    /// The client this model follows.
    @ObservationIgnored public let client: TransferClient
    /// What TransferKit knows about the phone: device id, accounts, current account.
    public private(set) var state: DeviceState
    /// Where the app stands, as ``TransferClient/launch()`` would answer now: the last launch's
    /// answer, kept up to date with the client's events wherever the call was made.
    ///
    /// - `.signedIn` after a launch, a claim (``TransferEvent/signedIn(accountId:created:)``) or a
    ///   switch (``TransferEvent/switched(accountId:)``);
    /// - `.restoredOntoNewPhone` when a launch found another phone's backup;
    /// - `.currentAccountMoved` when the current account moved to another phone, at a launch or
    ///   found later by a renewal (``TransferEvent/accountMoved(accountId:transferredAt:remainingAccounts:)``);
    ///   an empty `remainingAccounts` means no account is left on this phone: offer a claim, or
    ///   ``TransferClient/startOver()`` then ``launch()``;
    /// - nil before the first launch, after ``TransferClient/startOver()``, and when the current
    ///   account left the phone otherwise (deleted, removed, the device revoked: ``lastEvent``
    ///   says which), so that no view shows a signed-in screen without an account.
    public private(set) var launchResult: LaunchResult?
    /// Where the phone stood when ``start()`` looked (``TransferClient/startingPoint()``); nil before.
    public private(set) var startingPoint: StartingPoint?

    /// The backups ``start()`` found (``StartingPoint/backupsFound(_:)``); nil otherwise.
    public var foundBackups: [AccountBackup]? {
        if case .backupsFound(let backups) = startingPoint { return backups }
        return nil
    }
    /// Whether ``launch()`` is running.
    public private(set) var isLaunching = false
    /// The error of the last call made through the model, if it failed.
    public private(set) var lastError: (any Error)?
    /// The last event the client emitted.
    public private(set) var lastEvent: TransferEvent?

    @ObservationIgnored private let subscription = Subscription()

    /// A model of `client`, following its events from now on.
    public init(client: TransferClient) {
        self.client = client
        self.state = client.state
        let events = client.events
        subscription.task = Task { [weak self] in
            for await event in events {
                guard let self else { return }
                self.apply(event)
            }
        }
    }

    deinit {
        subscription.cancel()
    }

    /// The accounts on this phone, oldest first.
    public var accounts: [Account] { state.accounts }

    /// The current account, if there is one.
    public var currentAccount: Account? { state.accounts.first(where: \.isCurrent) }

    /// Launches the client (``TransferClient/launch()``) and keeps its answer in ``launchResult``;
    /// an error goes to ``lastError``.
    public func launch() async {
        isLaunching = true
        defer { isLaunching = false }
        do {
            launchResult = try await client.launch()
            lastError = nil
        } catch {
            lastError = error
        }
        state = client.state
    }

    /// Starts the app as a phone that may be new needs it: reads ``startingPoint`` (nothing sent);
    /// on a first start it stops there, so that the app asks "new here, or bringing your account
    /// from another phone?" before an account is created: then ``launch()``, or a claim
    /// (``claimTransfer(code:existingAccounts:)``). It stops too when backups were found
    /// (``StartingPoint/backupsFound(_:)``): ask "Continue as …?", then ``claim(backup:existingAccounts:)``
    /// or ``launch()``. Otherwise it launches (a claim in flight is repeated first).
    public func start() async {
        let point = await client.startingPoint()
        startingPoint = point
        switch point {
        case .firstStart, .backupsFound: return
        default: await launch()
        }
    }

    /// Brings the account of a backup key found in iCloud Keychain
    /// (``TransferClient/claim(backup:existingAccounts:)``); ``launchResult`` then says the phone is
    /// signed in to it. A key that no longer works was removed: read ``startingPoint`` again
    /// (``start()``) for what is left to offer.
    @discardableResult
    public func claim(backup: AccountBackup, existingAccounts: ClaimChoice = .fail) async throws -> Account {
        try await claimed { try await $0.claim(backup: backup, existingAccounts: existingAccounts) }
    }

    /// Brings an account over with a transfer code (``TransferClient/claimTransfer(code:existingAccounts:)``);
    /// ``launchResult`` then says the phone is signed in to it.
    @discardableResult
    public func claimTransfer(code: TransferCode, existingAccounts: ClaimChoice = .fail) async throws -> Account {
        try await claimed { try await $0.claimTransfer(code: code, existingAccounts: existingAccounts) }
    }

    /// Brings an account over with the email and temporary password set up on the old phone
    /// (``TransferClient/claimTransfer(email:temporaryPassword:existingAccounts:)``); ``launchResult``
    /// then says the phone is signed in to it.
    @discardableResult
    public func claimTransfer(
        email: String, temporaryPassword: String, existingAccounts: ClaimChoice = .fail
    ) async throws -> Account {
        try await claimed {
            try await $0.claimTransfer(email: email, temporaryPassword: temporaryPassword, existingAccounts: existingAccounts)
        }
    }

    /// Brings an account over with its recovery code (``TransferClient/claim(recoveryCode:existingAccounts:)``);
    /// ``launchResult`` then says the phone is signed in to it.
    @discardableResult
    public func claim(recoveryCode: RecoveryCode, existingAccounts: ClaimChoice = .fail) async throws -> Account {
        try await claimed { try await $0.claim(recoveryCode: recoveryCode, existingAccounts: existingAccounts) }
    }

    /// Brings the account linked to an Apple ID over
    /// (``TransferClient/claimWithAppleID(identityToken:nonce:existingAccounts:)``); ``launchResult``
    /// then says the phone is signed in to it.
    @discardableResult
    public func claimWithAppleID(
        identityToken: String, nonce: AppleNonce, existingAccounts: ClaimChoice = .fail
    ) async throws -> Account {
        try await claimed {
            try await $0.claimWithAppleID(identityToken: identityToken, nonce: nonce, existingAccounts: existingAccounts)
        }
    }

    /// Runs a claim; on success the model is signed in to the claimed account.
    private func claimed(_ call: (TransferClient) async throws -> Account) async throws -> Account {
        var claimed: Account?
        try await run { claimed = try await call($0) }
        return signedIn(claimed!)
    }

    private func signedIn(_ account: Account) -> Account {
        launchResult = .signedIn(accountId: account.id, created: false)
        startingPoint = .returning
        return account
    }

    /// Makes `accountId` the current account (``TransferClient/switchAccount(to:)``).
    public func switchAccount(to accountId: String) async throws {
        try await run { try await $0.switchAccount(to: accountId) }
        if case .currentAccountMoved = launchResult, let current = state.currentAccountId {
            launchResult = .signedIn(accountId: current, created: false)
        }
    }

    /// Signs the account out (``TransferClient/signOut(of:)``); the current one when nil.
    public func signOut(of accountId: String? = nil) async throws {
        try await run { try await $0.signOut(of: accountId) }
    }

    private func run(_ call: (TransferClient) async throws -> Void) async throws {
        do {
            try await call(client)
            lastError = nil
            state = client.state
        } catch {
            lastError = error
            state = client.state
            throw error
        }
    }

    private func apply(_ event: TransferEvent) {
        lastEvent = event
        switch event {
        case .initialState(let now), .stateChanged(let now):
            state = now
        case .accountDeleted, .accountRemoved:
            // The signed-in account left the phone without a move; no other is current.
            if case .signedIn = launchResult, state.currentAccountId == nil { launchResult = nil }
        case .deviceRevoked:
            launchResult = nil
        case .signedIn(let accountId, let created):
            launchResult = .signedIn(accountId: accountId, created: created)
            startingPoint = .returning
        case .switched(let accountId):
            launchResult = .signedIn(accountId: accountId, created: false)
        case .restoredOntoNewPhone(let previous):
            launchResult = .restoredOntoNewPhone(previousAccounts: previous)
        case .accountMoved(let accountId, let transferredAt, let remaining):
            // The current account (or the one the phone last signed in to) moved away.
            let wasCurrent: Bool
            switch launchResult {
            case .signedIn(let signedIn, _)?: wasCurrent = accountId == nil || accountId == signedIn
            case .currentAccountMoved?: wasCurrent = true
            default: wasCurrent = false
            }
            if wasCurrent && !remaining.contains(where: \.isCurrent) {
                launchResult = .currentAccountMoved(accountId: accountId, transferredAt: transferredAt, remainingAccounts: remaining)
            }
        case .startedOver:
            launchResult = nil
        default:
            break
        }
    }

    /// Ends the event loop when the model goes away.
    private final class Subscription: @unchecked Sendable {
        private let lock = NSLock()
        private var running: Task<Void, Never>?

        var task: Task<Void, Never>? {
            get { lock.lock(); defer { lock.unlock() }; return running }
            set { lock.lock(); running = newValue; lock.unlock() }
        }

        func cancel() { task?.cancel() }
    }
}
#endif
