import Foundation

/// Something that happened to this phone's accounts, from ``TransferClient/events``.
public enum TransferEvent: Sendable, Equatable {
    /// The first event of every subscription: what TransferKit knows now.
    case initialState(DeviceState)
    /// A session was opened for the account (launch, new account, claim); `created` when the
    /// service created the account just now.
    case signedIn(accountId: String, created: Bool)
    /// The phone's current account changed.
    case switched(accountId: String)
    /// The account's access token was renewed.
    case tokenRefreshed(accountId: String)
    /// The account's session on this phone was ended with ``TransferClient/signOut(of:)``.
    case signedOut(accountId: String)
    /// The account left this phone (``TransferClient/removeAccount(_:abandon:)``, or another
    /// claim took the phone over).
    case accountRemoved(accountId: String)
    /// A claim on another phone moved the account there (`410 device_transferred`): tell the user
    /// their data moved. `remainingAccounts` are the accounts left on this phone; when there are
    /// none, the app can only ``TransferClient/startOver()``.
    case accountMoved(accountId: String?, transferredAt: Date?, remainingAccounts: [Account])
    /// Support revoked this phone (`403 device_revoked`).
    case deviceRevoked
    /// The account was deleted: with ``TransferClient/deleteAccount(_:)``, or elsewhere
    /// (`410 account_deleted`, e.g. by support).
    case accountDeleted(accountId: String?)
    /// The app's data was restored from another phone's backup, without that phone's device identity:
    /// offer the transfer instead of creating a new account (nothing was created).
    case restoredOntoNewPhone(previousAccounts: [Account])
    /// The credential store cannot be used now (``StorageError/kind`` says why: locked before
    /// the first unlock, a missing entitlement, …). No identity, account or token was created or changed.
    case storageUnavailable(StorageError)
    /// A stored cache (tokens, or the account list) did not decode and was dropped; the service
    /// has the truth, and the next calls log in again. The identity is never dropped this way.
    case unreadableDataDiscarded(StoredItem)
    /// ``TransferClient/startOver()`` forgot the identity, tokens and account list (called by
    /// the app, or by TransferKit when the last account left the phone or a claim found the
    /// device id retired).
    case startedOver
    /// A claim with ``ClaimChoice/deleteExisting`` could not delete `accountId`, one the phone
    /// held before (`reason`: no network, a refusal): it stays on the phone beside the claimed
    /// one. Tell the user, and delete it later with ``TransferClient/deleteAccount(_:)``.
    case accountNotDeleted(accountId: String, reason: TransferError)
    /// What TransferKit knows about the phone changed (device id, accounts, current account).
    /// Comes beside the event that says why, when there is one.
    case stateChanged(DeviceState)
}

/// A stored cache that TransferKit may drop when it no longer decodes.
public enum StoredItem: String, Sendable, Equatable {
    /// The accounts' tokens (Keychain).
    case sessions
    /// The account list (app files).
    case accountList
}

/// Fans events out to subscribers. A lock, not an actor, so that ``TransferClient/events`` can
/// subscribe synchronously and never miss an event.
final class EventHub: @unchecked Sendable {
    private let lock = NSLock()
    private var subscribers: [Int: AsyncStream<TransferEvent>.Continuation] = [:]
    private var stateSubscribers: [Int: AsyncStream<DeviceState>.Continuation] = [:]
    private var observers: [@Sendable (TransferEvent) -> Void] = []
    private var nextID = 0
    private var current = DeviceState(deviceId: nil, accounts: [])
    private var stateSet = false

    var state: DeviceState {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    /// Whether a state was ever set (by reading the stores, or a call).
    var hasState: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stateSet
    }

    /// Sets the state; true when it changed.
    @discardableResult
    func setState(_ state: DeviceState) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        stateSet = true
        guard state != current else { return false }
        current = state
        for continuation in stateSubscribers.values { continuation.yield(state) }
        return true
    }

    /// A stream of the states, starting with the current one.
    func subscribeState() -> AsyncStream<DeviceState> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            lock.lock()
            nextID += 1
            let id = nextID
            stateSubscribers[id] = continuation
            continuation.yield(current)
            lock.unlock()
            continuation.onTermination = { [weak self] _ in self?.unsubscribe(id) }
        }
    }

    func subscribe() -> AsyncStream<TransferEvent> {
        AsyncStream(bufferingPolicy: .bufferingNewest(100)) { continuation in
            lock.lock()
            nextID += 1
            let id = nextID
            subscribers[id] = continuation
            continuation.yield(.initialState(current))
            lock.unlock()
            continuation.onTermination = { [weak self] _ in self?.unsubscribe(id) }
        }
    }

    func addObserver(_ observer: @escaping @Sendable (TransferEvent) -> Void) {
        lock.lock()
        observers.append(observer)
        lock.unlock()
    }

    func emit(_ event: TransferEvent) {
        lock.lock()
        for continuation in subscribers.values { continuation.yield(event) }
        let observers = self.observers
        lock.unlock()
        for observer in observers { observer(event) }
    }

    private func unsubscribe(_ id: Int) {
        lock.lock()
        subscribers[id] = nil
        stateSubscribers[id] = nil
        lock.unlock()
    }
}
