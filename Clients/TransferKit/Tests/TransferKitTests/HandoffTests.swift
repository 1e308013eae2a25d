import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit

/// A launched host app and, on the same phone, a sibling app signed in through a hand-off.
struct SiblingOnPhone {
    let phone: Launched
    /// The sibling app's own Keychain.
    let keychain: MemoryCredentialStore
    let sibling: SiblingSession
    let request: HandoffRequest
    let account: Account

    init(
        host: Launched? = nil, account accountId: String? = nil, clientId: String = "com.example.news",
        keychain: MemoryCredentialStore = MemoryCredentialStore()
    ) async throws {
        let phone: Launched
        if let host { phone = host } else { phone = try await Launched() }
        self.phone = phone
        self.keychain = keychain
        sibling = phone.server.sibling(clientId: clientId, keychain: keychain, clock: phone.clock)
        request = HandoffRequest.make(clientId: clientId)
        let handoff = try await phone.client.createHandoffCode(
            forClient: request.clientId, codeChallenge: request.codeChallenge, of: accountId)
        account = try await sibling.redeemHandoff(code: handoff.code, request: request)
    }

    /// What the sibling keeps in its Keychain.
    var stored: StoredSiblingSession? {
        keychain.items[storeKey].flatMap { try? Wire.decoder().decode(StoredSiblingSession.self, from: $0) }
    }

    var storeKey: String { StoreKey.siblingSession(clientId: request.clientId) }
}

@Suite("Hand-off: host app")
struct HandoffHostTests {
    @Test("the host makes a code with its own bearer token and the S256 challenge")
    func createCode() async throws {
        let phone = try await Launched()
        let request = HandoffRequest.make(clientId: "com.example.news")

        let handoff = try await phone.client.createHandoffCode(forClient: request.clientId, codeChallenge: request.codeChallenge)
        #expect(!handoff.code.isEmpty && handoff.expiresIn == 60)
        let sent = try #require(phone.server.requests("POST /v1/handoff/codes").first)
        #expect(sent.bearer == phone.storedSessions[phone.accountId]?.accessToken)
        #expect(sent.bodyKeys == ["clientId", "codeChallenge", "codeChallengeMethod"])
        #expect(sent.body["clientId"] as? String == "com.example.news")
        #expect(sent.body["codeChallenge"] as? String == request.codeChallenge)
        #expect(sent.body["codeChallengeMethod"] as? String == "S256")
        #expect(!String(decoding: sent.request.body ?? Data(), as: UTF8.self).contains(request.codeVerifier))
        #expect(phone.server.violations.isEmpty)
    }

    @Test("a code for a named account is made with that account's token and hands off that account")
    func namedAccount() async throws {
        let phone = try await Launched()
        let second = try await phone.client.addAccount()  // now the current one
        #expect(phone.client.currentAccountId == second.id)

        let handoff = try await SiblingOnPhone(host: phone, account: phone.accountId)
        #expect(handoff.account.id == phone.accountId)
        let sent = try #require(phone.server.requests("POST /v1/handoff/codes").first)
        #expect(sent.bearer == phone.storedSessions[phone.accountId]?.accessToken)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("refusals are TransferErrors with the service's code")
    func refusals() async throws {
        let phone = try await Launched()
        let request = HandoffRequest.make(clientId: "com.example.unknown")

        await #expect {
            try await phone.client.createHandoffCode(forClient: request.clientId, codeChallenge: request.codeChallenge)
        } throws: { error in
            let error = try #require(error as? TransferError)
            return error.kind == .unknownClient && error.code == "unknown_client" && error.status == 403
        }
        await #expect {
            try await phone.client.createHandoffCode(forClient: "com.example.news", codeChallenge: "too-short")
        } throws: { error in
            let error = try #require(error as? TransferError)
            return error.code == "invalid_request" && error.code == .invalidRequest && error.status == 400
        }
        phone.server.scriptError("POST /v1/handoff/codes", status: 501, "not_configured")
        await #expect {
            try await phone.client.createHandoffCode(forClient: "com.example.news", codeChallenge: request.codeChallenge)
        } throws: { TransferError.kind(of: $0) == .notConfigured }
        #expect(phone.server.violations.isEmpty)
    }
}

@Suite("Hand-off: sibling app")
struct HandoffSiblingTests {
    @Test("the sibling redeems the code with its verifier and holds a session of the host's account")
    func redeem() async throws {
        let handoff = try await SiblingOnPhone()
        let phone = handoff.phone
        #expect(handoff.account == Account(id: phone.accountId, userName: handoff.account.userName, isCurrent: true))
        #expect(try await handoff.sibling.account() == handoff.account)

        let sent = try #require(phone.server.requests("POST /v1/handoff/token").first)
        #expect(sent.bearer == nil)
        #expect(sent.bodyKeys == ["code", "codeVerifier", "clientId"])
        #expect(sent.body["codeVerifier"] as? String == handoff.request.codeVerifier)
        #expect(sent.body["clientId"] as? String == "com.example.news")

        // Its own tokens, under its own key; the host's are untouched and still work.
        let stored = try #require(handoff.stored)
        #expect(Set(handoff.keychain.items.keys) == [handoff.storeKey])
        #expect(stored.accountId == phone.accountId)
        #expect(stored.tokens.accessToken != phone.storedSessions[phone.accountId]?.accessToken)
        #expect(try await handoff.sibling.withAccessToken { $0 } == stored.tokens.accessToken)
        #expect(try await phone.client.accounts().map(\.id) == [phone.accountId])
        #expect(phone.server.count("POST /v1/tokens/refresh") == 0)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("another verifier or client id is invalid_grant and keeps nothing; the code still works with the right one")
    func wrongVerifier() async throws {
        let phone = try await Launched()
        let keychain = MemoryCredentialStore()
        let sibling = phone.server.sibling(keychain: keychain, clock: phone.clock)
        let request = HandoffRequest.make(clientId: "com.example.news")
        let handoff = try await phone.client.createHandoffCode(forClient: request.clientId, codeChallenge: request.codeChallenge)

        // Another verifier; the right verifier from another sibling app.
        let weather = phone.server.sibling(clientId: "com.example.weather", keychain: keychain, clock: phone.clock)
        let impostors = [
            (sibling, HandoffRequest.make(clientId: "com.example.news")),
            (weather, HandoffRequest(clientId: "com.example.weather", codeVerifier: request.codeVerifier)),
        ]
        for (session, impostor) in impostors {
            await #expect { try await session.redeemHandoff(code: handoff.code, request: impostor) } throws: { error in
                let error = try #require(error as? TransferError)
                return error.kind == .invalidGrant && error.status == 400
            }
        }
        #expect(keychain.items.isEmpty)
        let sent = phone.server.log.count
        await #expect { try await sibling.withAccessToken { $0 } } throws: { TransferError.kind(of: $0) == .handoffRequired }
        #expect(phone.server.log.count == sent)  // nothing to refresh: nothing sent

        let account = try await sibling.redeemHandoff(code: handoff.code, request: request)
        #expect(account.id == phone.accountId)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("a request made for another sibling app is refused before anything is sent")
    func requestOfAnotherApp() async throws {
        let phone = try await Launched()
        let keychain = MemoryCredentialStore()
        let news = phone.server.sibling(keychain: keychain, clock: phone.clock)
        let request = HandoffRequest.make(clientId: "com.example.weather")
        let sent = phone.server.log.count
        await #expect { try await news.redeemHandoff(code: "any-code", request: request) } throws: { error in
            let error = try #require(error as? TransferError)
            return error.kind == .invalidGrant && error.status == nil && error.message.contains("com.example.weather")
        }
        #expect(phone.server.log.count == sent, "nothing was sent")
        #expect(keychain.items.isEmpty)
    }

    @Test("50 concurrent withAccessToken calls around an expiry make exactly one refresh")
    func singleFlightRefresh() async throws {
        let handoff = try await SiblingOnPhone()
        let server = handoff.phone.server, sibling = handoff.sibling
        server.refreshDelayNanoseconds = 50_000_000
        let original = try #require(handoff.stored).tokens

        let (before, after) = try await withThrowingTaskGroup(of: (Bool, String).self) { group in
            for _ in 0..<25 { group.addTask { (false, try await sibling.withAccessToken { $0 }) } }
            handoff.phone.clock.advance(by: 850)  // renewal is due 60 s before the 900 s expiry
            for _ in 0..<25 { group.addTask { (true, try await sibling.withAccessToken { $0 }) } }
            var before: [String] = [], after: [String] = []
            for try await (late, token) in group {
                if late { after.append(token) } else { before.append(token) }
            }
            return (before, after)
        }

        let refreshes = server.requests("POST /v1/tokens/refresh")
        #expect(refreshes.count == 1)
        #expect(refreshes.first?.body["refreshToken"] as? String == original.refreshToken)
        let renewed = try #require(handoff.stored).tokens
        #expect(renewed.accessToken != original.accessToken && renewed.refreshToken != original.refreshToken)
        #expect(Set(after) == [renewed.accessToken])
        #expect(Set(before).isSubset(of: [original.accessToken, renewed.accessToken]))
        #expect(server.violations.isEmpty)
    }

    @Test("when the host signs out, the sibling forgets its tokens and is told to ask the host again")
    func hostSignOutEndsSibling() async throws {
        let handoff = try await SiblingOnPhone()
        let phone = handoff.phone
        try await phone.client.signOut()  // the service ends the sibling sessions of the host's session

        // The app's backend refuses the token; the renewal is refused too.
        await #expect {
            try await handoff.sibling.withAccessToken { _ in throw TransferError.accessTokenRejected }
        } throws: { error in
            let error = try #require(error as? TransferError)
            return error.kind == .handoffRequired && error.status == nil && error.message.contains("host app")
        }
        #expect(phone.server.count("POST /v1/tokens/refresh") == 1)
        #expect(handoff.keychain.items.isEmpty)
        #expect(try await handoff.sibling.account() == nil)

        let sent = phone.server.log.count
        await #expect { try await handoff.sibling.withAccessToken { $0 } } throws: { TransferError.kind(of: $0) == .handoffRequired }
        #expect(phone.server.log.count == sent)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("a refused refresh at expiry clears the tokens; a new hand-off signs the sibling in again")
    func refusedRefresh() async throws {
        let handoff = try await SiblingOnPhone()
        let phone = handoff.phone
        phone.server.scriptError("POST /v1/tokens/refresh", status: 401, "invalid_refresh_token")
        phone.clock.advance(by: 890)

        await #expect { try await handoff.sibling.withAccessToken { $0 } } throws: { TransferError.kind(of: $0) == .handoffRequired }
        #expect(handoff.keychain.items.isEmpty)
        #expect(phone.server.count("POST /v1/devices/login") == 1)  // only the host's launch: a sibling has no secret

        let request = HandoffRequest.make(clientId: "com.example.news")
        let code = try await phone.client.createHandoffCode(forClient: request.clientId, codeChallenge: request.codeChallenge)
        try await handoff.sibling.redeemHandoff(code: code.code, request: request)
        #expect(try await handoff.sibling.withAccessToken { $0 } == handoff.stored?.tokens.accessToken)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("the sibling's sign-out ends its own session only")
    func siblingSignOut() async throws {
        let handoff = try await SiblingOnPhone()
        let phone = handoff.phone
        let token = try #require(handoff.stored).tokens.accessToken

        await handoff.sibling.signOut()
        let logout = try #require(phone.server.requests("POST /v1/logout").first)
        #expect(logout.bearer == token)
        #expect(handoff.keychain.items.isEmpty)
        await #expect { try await handoff.sibling.withAccessToken { $0 } } throws: { TransferError.kind(of: $0) == .handoffRequired }
        // The host is still signed in with the same token.
        #expect(try await phone.client.accounts().map(\.id) == [phone.accountId])
        #expect(phone.server.count("POST /v1/tokens/refresh") == 0)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("a sign-out with an expired access token renews it to end the session at the service")
    func signOutExpiredToken() async throws {
        let handoff = try await SiblingOnPhone()
        let server = handoff.phone.server
        let stored = try #require(handoff.stored)
        server.expireAccessTokens()
        handoff.phone.clock.advance(by: 1000)

        await handoff.sibling.signOut()
        #expect(server.requests("POST /v1/logout").map(\.bearer).first == stored.tokens.accessToken)
        #expect(server.count("POST /v1/logout") == 2)
        #expect(server.requests("POST /v1/tokens/refresh").map { $0.body["refreshToken"] as? String } == [stored.tokens.refreshToken])
        #expect(!server.hasOpenSession(handoff.phone.accountId, client: handoff.request.clientId))
        #expect(server.hasOpenSession(handoff.phone.accountId))  // the host's session stays
        #expect(handoff.keychain.items.isEmpty)
        #expect(server.violations.isEmpty)
    }

    @Test("sibling apps sharing a Keychain access group keep their sessions apart")
    func sharedKeychain() async throws {
        let shared = MemoryCredentialStore()
        let news = try await SiblingOnPhone(keychain: shared)
        let weather = try await SiblingOnPhone(host: news.phone, clientId: "com.example.weather", keychain: shared)
        let phone = news.phone
        #expect(Set(shared.items.keys) == [news.storeKey, weather.storeKey] && news.storeKey != weather.storeKey)
        let newsTokens = try #require(news.stored).tokens, weatherTokens = try #require(weather.stored).tokens
        #expect(newsTokens.accessToken != weatherTokens.accessToken)

        // Relaunched, each app reads its own session; one signing out leaves the other's.
        let relaunchedWeather = phone.server.sibling(clientId: "com.example.weather", keychain: shared, clock: phone.clock)
        #expect(try await relaunchedWeather.withAccessToken { $0 } == weatherTokens.accessToken)
        await news.sibling.signOut()
        #expect(Set(shared.items.keys) == [weather.storeKey])
        #expect(try await relaunchedWeather.account()?.id == phone.accountId)
        #expect(phone.server.hasOpenSession(phone.accountId, client: "com.example.weather"))

        // Any client id the contract allows makes a key every store takes.
        let key = StoreKey.siblingSession(clientId: "com.example+news/ß~!")
        #expect(key.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
        #expect(phone.server.violations.isEmpty)
    }

    @Test("the sibling reads the account's profile with its own token")
    func profile() async throws {
        let handoff = try await SiblingOnPhone()
        let phone = handoff.phone
        let profile = try await handoff.sibling.profile()
        #expect(profile.id == phone.accountId && profile.userName == handoff.account.userName)
        #expect(profile.devices.map(\.id) == [try #require(phone.client.state.deviceId)])
        #expect(profile.devices.first?.isCurrent == true)
        #expect(phone.server.requests("GET /v1/me").last?.bearer == handoff.stored?.tokens.accessToken)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("a sign-out during an in-flight refresh leaves no tokens behind")
    func signOutDuringRefresh() async throws {
        let handoff = try await SiblingOnPhone()
        let gate = Gate()
        handoff.phone.server.refreshGate = gate
        handoff.phone.clock.advance(by: 890)
        let sibling = handoff.sibling

        let waiting = Task { try await sibling.withAccessToken { $0 } }
        try await gate.waitForArrival()  // the refresh is at the server
        await sibling.signOut()
        gate.open()  // the refresh answers after the sign-out

        await #expect { try await waiting.value } throws: { TransferError.kind(of: $0) == .signedOut }
        #expect(handoff.keychain.items.isEmpty)
        #expect(try await sibling.account() == nil)
        #expect(handoff.phone.server.violations.isEmpty)
    }

    @Test("the session survives a relaunch; an unreadable store is storageUnavailable, not a missing session")
    func relaunch() async throws {
        let handoff = try await SiblingOnPhone()
        let phone = handoff.phone
        let stored = try #require(handoff.stored)

        let relaunched = phone.server.sibling(keychain: handoff.keychain, clock: phone.clock)
        #expect(try await relaunched.account() == handoff.account)
        #expect(try await relaunched.withAccessToken { $0 } == stored.tokens.accessToken)
        #expect(phone.server.count("POST /v1/tokens/refresh") == 0)

        handoff.keychain.isAvailable = false  // rebooted, not unlocked yet
        let locked = phone.server.sibling(keychain: handoff.keychain, clock: phone.clock)
        await #expect { try await locked.withAccessToken { $0 } } throws: { TransferError.kind(of: $0) == .storageUnavailable }
        await #expect { try await locked.account() } throws: { TransferError.kind(of: $0) == .storageUnavailable }
        handoff.keychain.isAvailable = true
        #expect(handoff.stored == stored)
    }
}
