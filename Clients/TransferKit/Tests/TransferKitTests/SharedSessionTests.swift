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

    @Test("a long-lived extension follows the current account the app picks: a switch, a new account, a start over")
    func extensionFollowsCurrentAccount() async throws {
        let (_, app, ext) = try await appAndExtension(shared: true)
        let first = try #require(app.currentAccountId)
        _ = try await ext.accessToken()
        #expect(ext.currentAccountId == first)

        let second = try await app.addAccount()  // the app's new account is now the current one
        _ = try await ext.accessToken()
        #expect(ext.currentAccountId == second.id, "the extension still uses the account it read once (\(first))")
        try await app.switchAccount(to: first)
        _ = try await ext.withAccessToken { $0 }
        #expect(ext.currentAccountId == first, "the extension missed the app's switch back")

        try await app.startOver()
        await #expect("the extension still signs in to an account the app started over from") {
            try await ext.accessToken()
        } throws: { ($0 as? TransferError)?.code == .notSignedIn }
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

@Suite("A sibling app and its extension on one shared session")
struct SharedSiblingSessionTests {
    @Test("the widget takes the app's renewal instead of presenting the rotated refresh token; neither ends the other's session")
    func widgetTakesTheAppsRenewal() async throws {
        let sibling = try await SiblingOnPhone()
        let shared = sibling.keychain  // the sibling app's Keychain group, shared with its widget
        let server = sibling.phone.server, clock = sibling.phone.clock
        let widget = server.sibling(clientId: sibling.request.clientId, keychain: shared, clock: clock, sharesSession: true)
        let app = server.sibling(clientId: sibling.request.clientId, keychain: shared, clock: clock, sharesSession: true)
        let first = try await widget.accessToken()  // the widget holds the tokens
        #expect(try await app.accessToken() == first)
        clock.advance(by: 890)

        let renewed = try await app.accessToken()  // the app refreshes: the refresh token rotates
        let widgetToken = try await widget.withAccessToken { $0 }
        #expect(widgetToken == renewed, "the widget renewed again instead of taking the app's renewal")
        #expect(server.count("POST /v1/tokens/refresh") == 1, "the widget presented the rotated refresh token")
        #expect(sibling.stored != nil, "the widget's end() deleted the shared session the app still uses")
        #expect(try await app.account()?.id == sibling.account.id)
        clock.advance(by: 890)
        _ = try await app.accessToken()
        #expect(server.count("POST /v1/tokens/refresh") == 2, "the app's session survived")
    }

    @Test("a refused refresh does not delete a shared session another process replaced meanwhile")
    func refusedRefreshKeepsReplacedItem() async throws {
        let sibling = try await SiblingOnPhone()
        let server = sibling.phone.server, clock = sibling.phone.clock
        let widget = server.sibling(clientId: sibling.request.clientId, keychain: sibling.keychain, clock: clock)
        _ = try await widget.accessToken()  // read once: not shared, the old behaviour's worst case
        clock.advance(by: 890)
        // The app is handed the session again meanwhile (its old session ends).
        let again = HandoffRequest.make(clientId: sibling.request.clientId)
        let code = try await sibling.phone.client.createHandoffCode(forClient: again.clientId, codeChallenge: again.codeChallenge)
        let app = server.sibling(clientId: again.clientId, keychain: sibling.keychain, clock: clock)
        _ = try await app.redeemHandoff(code: code.code, request: again)
        let replaced = try #require(sibling.stored)

        let token = try await widget.accessToken()
        #expect(token == replaced.tokens.accessToken, "the widget should take the new hand-off's session")
        #expect(sibling.stored == replaced, "the widget deleted or overwrote the session the app was handed")
    }

    /// A view model of the sibling app: main-actor state, a result that is not `Sendable`.
    @MainActor final class FeedModel {
        final class Page { var bearer = "" }
        var requests = 0
        func load(_ session: SiblingSession) async throws -> Page {
            try await session.withAccessToken { token in
                requests += 1  // the body runs on the main actor
                let page = Page()
                page.bearer = token
                return page
            }
        }
    }

    @Test("a main-actor view model calls withAccessToken with a body that touches its state and returns a non-Sendable value")
    @MainActor
    func mainActorCaller() async throws {
        let sibling = try await SiblingOnPhone()
        let model = FeedModel()
        let page = try await model.load(sibling.sibling)
        #expect(model.requests == 1 && page.bearer == sibling.stored?.tokens.accessToken)
    }
}
