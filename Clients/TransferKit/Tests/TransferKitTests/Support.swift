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
    var storedSessions: [String: StoredSession] {
        guard let data = keychain.items[StoreKey.sessions] else { return [:] }
        return (try? Wire.decoder().decode([String: StoredSession].self, from: data)) ?? [:]
    }

    var storedIdentity: DeviceIdentity? {
        keychain.items[StoreKey.identity].flatMap { try? Wire.decoder().decode(DeviceIdentity.self, from: $0) }
    }
}

extension TransferError {
    static func kind(of error: any Error) -> Kind? { (error as? TransferError)?.kind }
}
