import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@_spi(TransferKitTesting) @testable import TransferKit
import TransferKitTesting

@Suite("Smaller promises an adopting app relies on")
struct LowerDefectTests {
    @Test("a network error keeps what the transport threw, so that the app can tell offline from a timeout")
    func networkErrorKeepsItsCause() async throws {
        let phone = try await Launched()
        phone.server.loseAnswers(to: "GET /v1/devices/accounts")
        do {
            _ = try await phone.client.accounts()
            Issue.record("the lost answer did not throw")
        } catch let error as TransferError {
            #expect(error.code == .network)
            let cause = error.underlyingError as? URLError
            #expect(cause?.code == .networkConnectionLost, "the network error lost its cause: \(String(describing: error.underlyingError))")
        }
    }

    @Test("a push on a phone restored from another phone's backup names none of that phone's accounts, even at a cold start")
    func notificationOnRestoredPhone() async throws {
        let old = try await Launched()
        let restored = old.server.client(keychain: MemoryCredentialStore(), appFiles: MemoryCredentialStore(old.appFiles.items))
        let named = restored.account(forNotification: ["accountId": old.accountId])
        #expect(named == nil, "the restored phone claims the old phone's account \(old.accountId) for a push")
        #expect(old.server.client(keychain: old.keychain, appFiles: old.appFiles).account(forNotification: ["accountId": old.accountId])?.id == old.accountId)
    }

    @Test("startOver() before launch() removes every stored token, not only those in memory")
    func startOverBeforeLaunch() async throws {
        let phone = try await Launched()
        _ = try await phone.client.addAccount()
        #expect(phone.storedSessions.count == 2)
        let fresh = phone.server.client(keychain: phone.keychain, appFiles: phone.appFiles)  // the app restarted
        try await fresh.startOver()
        #expect(phone.keychain.items.isEmpty, "startOver() left \(phone.keychain.items.keys.sorted())")
    }

    @Test("a claim with deleteExisting whose deletion fails says so with accountNotDeleted; the account stays")
    func deleteExistingFailureIsTold() async throws {
        let old = try await Launched()
        let offer = try await old.client.setUpTransferCode()
        let phone = try await Launched(old.server)  // the new phone made an account of its own at its first launch
        old.server.scriptError("DELETE /v1/me", status: 503, "unavailable")
        let claimed = try await phone.client.claimTransfer(code: offer.code, existingAccounts: .deleteExisting)
        #expect(claimed.id == old.accountId)
        let told = phone.events.all.contains {
            if case .accountNotDeleted(phone.accountId, let reason) = $0 { reason.code == .unavailable } else { false }
        }
        #expect(told, "the failed deletion of \(phone.accountId) was not told: \(phone.events.meaningful)")
        #expect(phone.client.state.accounts.contains { $0.id == phone.accountId })
    }

    @Test("an App Group without a shared Keychain location, or without its container, is refused with what to fix")
    func appGroupNeedsSharedKeychain() {
        let shared = KeychainLocation.shared(accessGroup: "TEAM.com.example.shared", service: "com.example.transfer")
        let ownOnly = StandardLayout.misconfiguration(
            keychain: .app(bundleIdentifier: "com.example.app"), appGroup: "group.com.example", appGroupContainerFound: true)
        #expect(ownOnly?.contains("keychain: .shared(accessGroup:service:)") == true, "appGroup without a shared Keychain was accepted")
        let noContainer = StandardLayout.misconfiguration(keychain: shared, appGroup: "group.com.example", appGroupContainerFound: false)
        #expect(noContainer?.contains("App Groups capability") == true)
        #expect(StandardLayout.misconfiguration(keychain: shared, appGroup: "group.com.example", appGroupContainerFound: true) == nil)
        #expect(StandardLayout.misconfiguration(keychain: .app(bundleIdentifier: "a"), appGroup: nil, appGroupContainerFound: false) == nil)
    }

    @Test("the LossyNetwork example, as documented (the fake service's transport for URLSession): the answer told to be lost is lost")
    func lossyNetworkExample() async throws {
        let server = FakeServer()
        let serviceURL = FakeServer.baseURL
        let network = LossyNetwork()
        let client = TransferClient(
            baseURL: serviceURL, credentials: MemoryCredentialStore(),
            transport: network.wrap(server.transport, baseURL: serviceURL))
        network.loseAnswers(to: "POST /v1/devices/login", count: 1)
        await #expect { try await client.launch() } throws: { ($0 as? TransferError)?.code == .network }
        #expect(server.count("POST /v1/devices/login") == 1)  // it reached the service
    }
}
