import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit

/// An app and its extension (a widget, a notification service) on the same stores, each with its
/// own client: what one does must not strand the other.
@Suite("Sessions shared by an app and its extension")
struct SharedSessionTests {
    /// The app, launched, and its extension's client on the same Keychain and files.
    func appAndExtension(shared: Bool) async throws -> (phone: Launched, app: TransferClient, ext: TransferClient) {
        let phone = try await Launched()
        func client() -> TransferClient {
            phone.server.client(keychain: phone.keychain, appFiles: phone.appFiles, clock: phone.clock, sharesSessions: shared)
        }
        let app = client(), ext = client()
        _ = try await app.launch()
        return (phone, app, ext)
    }

    @Test("a renewal reads the stored tokens first: the extension takes the app's renewal instead of refreshing a rotated token")
    func rereadBeforeRenewing() async throws {
        let (phone, app, ext) = try await appAndExtension(shared: false)
        let first = try await ext.withAccessToken { $0 }  // the extension holds the tokens in memory
        phone.clock.advance(by: 890)

        let renewed = try await app.withAccessToken { $0 }  // the app refreshes (rotates)
        #expect(renewed != first)
        #expect(try await ext.withAccessToken { $0 } == renewed)
        #expect(phone.server.count("POST /v1/tokens/refresh") == 1)
        #expect(phone.server.count("POST /v1/devices/login") == 2)  // the two launches only
    }

    @Test("shared sessions renew by login, which never rotates: neither process revokes the other's refresh token")
    func sharedRenewByLogin() async throws {
        let (phone, app, ext) = try await appAndExtension(shared: true)
        let stored = try #require(phone.storedSessions[phone.accountId])
        phone.clock.advance(by: 890)

        _ = try await app.withAccessToken { $0 }
        #expect(phone.server.count("POST /v1/tokens/refresh") == 0)
        #expect(phone.storedSessions[phone.accountId]?.refreshToken == stored.refreshToken)
        // The extension renews on its own (it read nothing fresh: the clock moves on).
        phone.clock.advance(by: 890)
        _ = try await ext.withAccessToken { $0 }
        #expect(phone.server.count("POST /v1/tokens/refresh") == 0)
        #expect(phone.server.hasOpenSession(phone.accountId))
        #expect(phone.server.violations.isEmpty)
    }

    @Test("each process writes only the account it changed: a sign-out in one is not undone by a renewal in the other")
    func writeOnlyTheChangedEntry() async throws {
        let (phone, app, ext) = try await appAndExtension(shared: true)
        let second = try await app.addAccount()
        try await app.switchAccount(to: phone.accountId)
        _ = try await ext.withAccessToken(of: second.id) { $0 }  // the extension holds both accounts' tokens
        _ = try await ext.withAccessToken(of: phone.accountId) { $0 }

        try await app.signOut(of: second.id)
        phone.clock.advance(by: 890)
        _ = try await ext.withAccessToken(of: phone.accountId) { $0 }  // renews and stores the first account
        #expect(phone.storedSessions[second.id] == nil)
        #expect(phone.storedSessions[phone.accountId] != nil)
    }
}
