#if canImport(Observation)
import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit

@Suite("TransferModel follows every change of the client")
@MainActor
struct ModelTests {
    /// Lets the model's event loop run until `condition` holds (it only yields).
    func settle(_ condition: () -> Bool) async {
        for _ in 0..<10_000 where !condition() { await Task.yield() }
    }

    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @Test("the only account moving away, found by a renewal, leaves the model on currentAccountMoved, not signedIn without an account")
    func onlyAccountMovedByRenewal() async throws {
        let server = FakeServer()
        let clock = TestClock(FakeServer.startOfTime)
        let client = server.client(clock: clock)
        let model = TransferModel(client: client)
        await model.launch()
        guard case .signedIn(let accountId, true) = model.launchResult else { Issue.record("not signed in"); return }
        let offer = try await client.setUpTransferCode()
        _ = try await server.client().claimTransfer(code: offer.code)  // the account moves to a new phone

        clock.advance(by: 890)
        await #expect(throws: TransferError.self) { try await client.accessToken() }  // the renewal finds the move
        await settle { model.launchResult != .signedIn(accountId: accountId, created: true) }
        guard case .currentAccountMoved(accountId?, _, let remaining) = model.launchResult else {
            Issue.record("launchResult should be currentAccountMoved(\(accountId), …, []), not \(String(describing: model.launchResult)) with currentAccount \(String(describing: model.currentAccount))")
            return
        }
        #expect(remaining.isEmpty && model.currentAccount == nil)
    }

    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @Test("after restoredOntoNewPhone, a claim made on the client signs the model in")
    func claimOnClientAfterRestore() async throws {
        let server = FakeServer()
        let old = server.client(keychain: MemoryCredentialStore(), appFiles: MemoryCredentialStore())
        _ = try await old.launch()
        let oldFiles = MemoryCredentialStore()
        let phone = server.client(keychain: MemoryCredentialStore(), appFiles: oldFiles)
        _ = try await phone.launch()
        // A new phone with the old phone's app files (a restored backup), not its Keychain.
        let restored = server.client(keychain: MemoryCredentialStore(), appFiles: MemoryCredentialStore(oldFiles.items))
        let model = TransferModel(client: restored)
        await model.launch()
        guard case .restoredOntoNewPhone = model.launchResult else { Issue.record("\(String(describing: model.launchResult))"); return }

        let offer = try await phone.setUpTransferCode()
        let account = try await restored.claimTransfer(code: offer.code)  // straight through the client
        await settle { model.launchResult == .signedIn(accountId: account.id, created: false) }
        #expect(
            model.launchResult == .signedIn(accountId: account.id, created: false),
            "the model stayed on \(String(describing: model.launchResult)) after a claim on the client")
        #expect(model.currentAccount?.id == account.id && model.startingPoint == .returning)
    }

    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @Test("the model offers the claims the client offers: by email and temporary password")
    func claimByPassword() async throws {
        let server = FakeServer()
        let old = server.client()
        guard case .signedIn(let accountId, _) = try await old.launch() else { return }
        try await old.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        let model = TransferModel(client: server.client(keychain: MemoryCredentialStore(), appFiles: MemoryCredentialStore()))
        let account = try await model.claimTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        #expect(account.id == accountId && model.launchResult == .signedIn(accountId: accountId, created: false))
    }
}
#endif
