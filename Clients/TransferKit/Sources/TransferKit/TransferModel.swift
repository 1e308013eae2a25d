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
///             RootView().environment(transfer).task { await transfer.launch() }
///         }
///     }
/// }
///
/// struct RootView: View {
///     @Environment(TransferModel.self) private var transfer
///     var body: some View {
///         switch transfer.launchResult {
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
/// Everything else goes through ``client``; the model follows the client's events, so a change
/// made there (or by TransferKit itself: a move found by a renewal, a sign-out) shows up here.
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
@MainActor @Observable
public final class TransferModel {
    /// The client this model follows.
    @ObservationIgnored public let client: TransferClient
    /// What TransferKit knows about the phone: device id, accounts, current account.
    public private(set) var state: DeviceState
    /// The answer of the last ``launch()``; nil before the first one answered.
    public private(set) var launchResult: LaunchResult?
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
