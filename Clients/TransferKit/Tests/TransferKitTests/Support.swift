import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit

/// A client on a fresh phone, launched once.
struct Launched {
    let server: FakeServer
    let keychain: MemoryCredentialStore
    let appFiles: MemoryCredentialStore
    let clock: TestClock
    let client: TransferClient
    let events: EventLog
    let accountId: String

    init(_ server: FakeServer = FakeServer()) async throws {
        self.server = server
        keychain = MemoryCredentialStore()
        appFiles = MemoryCredentialStore()
        clock = TestClock()
        client = server.client(keychain: keychain, appFiles: appFiles, clock: clock)
        events = EventLog(client)
        guard case .signedIn(let id, true) = try await client.launch() else {
            throw TransferError(code: "test", message: "first launch did not create an account")
        }
        accountId = id
    }

    /// The tokens stored in the phone's Keychain, by account.
    var storedSessions: [String: StoredSession] { keychain.storedSessions }

    var storedIdentity: DeviceIdentity? {
        keychain.items[StoreKey.identity].flatMap { try? Wire.decoder().decode(DeviceIdentity.self, from: $0) }
    }
}

extension Launched {
    /// Makes the tokens due for renewal and holds the next refresh at the service until the
    /// returned gate opens.
    func holdNextRefresh() -> Gate {
        let gate = Gate()
        server.refreshGate = gate
        clock.advance(by: 890)
        return gate
    }
}

extension TransferError {
    static func kind(of error: any Error) -> Kind? { (error as? TransferError)?.kind }
}

extension MemoryCredentialStore {
    /// The tokens stored, by account (one item per account).
    var storedSessions: [String: StoredSession] {
        let prefix = StoreKey.session("")
        return items.reduce(into: [:]) { sessions, item in
            guard item.key.hasPrefix(prefix),
                let session = try? Wire.decoder().decode(StoredSession.self, from: item.value)
            else { return }
            sessions[String(item.key.dropFirst(prefix.count))] = session
        }
    }
}

extension EventLog {
    /// The events without ``TransferEvent/stateChanged(_:)``, which comes beside the others.
    var meaningful: [TransferEvent] {
        all.filter { if case .stateChanged = $0 { false } else { true } }
    }
}

extension StorageError {
    /// What a locked ``MemoryCredentialStore`` throws.
    static let memoryLocked = StorageError(.locked, reason: "locked")
}
