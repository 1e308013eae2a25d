import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@_spi(TransferKitTesting) @testable import TransferKit

/// The edge paths that lost or stranded accounts: calls before `launch()`, caches
/// that no longer decode, push tokens that arrive early, cancellation, silent state changes,
/// and the service's codes.
@Suite("Edge paths")
struct EdgePathTests {
    /// The phone's app killed and started again: a new client on the same stores, not launched.
    func relaunched(_ phone: Launched) -> (TransferClient, EventLog) {
        let client = phone.server.client(keychain: phone.keychain, appFiles: phone.appFiles, clock: phone.clock)
        return (client, EventLog(client))
    }

    // MARK: 1. Before launch, the stores are read

    @Test("removing an account before launch keeps the identity the other account is bound to")
    func removeBeforeLaunch() async throws {
        let phone = try await Launched()
        let second = try await phone.client.addAccount()
        let identity = try #require(phone.storedIdentity)
        let (client, events) = relaunched(phone)

        try await client.removeAccount(second.id, abandon: true)
        #expect(phone.storedIdentity == identity)
        #expect(client.state.accounts.map(\.id) == [phone.accountId])
        #expect(!events.all.contains(.startedOver))
        #expect(try await client.launch() == .signedIn(accountId: phone.accountId, created: false))
        #expect(phone.server.violations.isEmpty)
    }

    @Test("deleting an account before launch keeps the identity the other account is bound to")
    func deleteBeforeLaunch() async throws {
        let phone = try await Launched()
        let second = try await phone.client.addAccount()
        let identity = try #require(phone.storedIdentity)
        let (client, _) = relaunched(phone)

        try await client.deleteAccount(second.id)
        #expect(phone.storedIdentity == identity)
        #expect(try await client.launch() == .signedIn(accountId: phone.accountId, created: false))
    }

    @Test("removing the last account before launch still retires the identity")
    func removeLastBeforeLaunch() async throws {
        let phone = try await Launched()
        let (client, events) = relaunched(phone)
        try await client.removeAccount(phone.accountId, abandon: true)
        #expect(phone.storedIdentity == nil)
        #expect(events.all.contains(.startedOver))
    }

    // MARK: 2. Caches that do not decode are dropped; the identity is never replaced

    @Test("an account list and tokens that no longer decode are dropped with an event; the launch signs in")
    func undecodableCaches() async throws {
        let phone = try await Launched()
        try phone.appFiles.write(Data("not json".utf8), for: StoreKey.accountList)
        try phone.keychain.write(Data("{\"broken\":".utf8), for: StoreKey.legacySessions)
        try phone.keychain.write(Data("[]".utf8), for: StoreKey.session(phone.accountId))
        let (client, events) = relaunched(phone)

        // Before launch: the account's tokens are read, dropped, and the call logs in again.
        let token = try await client.withAccessToken(of: phone.accountId) { $0 }
        #expect(token == phone.storedSessions[phone.accountId]?.accessToken)
        #expect(events.all.contains(.unreadableDataDiscarded(.sessions)))
        #expect(events.all.contains(.unreadableDataDiscarded(.accountList)))
        #expect(phone.keychain.items[StoreKey.legacySessions] == nil)

        #expect(try await client.launch() == .signedIn(accountId: phone.accountId, created: false))
        #expect(phone.server.count("POST /v1/devices/login") == 3)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("a sibling session that no longer decodes is dropped: the sibling asks the host again instead of failing forever")
    func undecodableSiblingSession() async throws {
        let keychain = MemoryCredentialStore()
        let key = StoreKey.siblingSession(clientId: "com.example.news")
        try keychain.write(Data("{}".utf8), for: key)
        let sibling = FakeServer().sibling(keychain: keychain)
        #expect(try await sibling.account() == nil)
        #expect(keychain.items[key] == nil)
        await #expect { try await sibling.profile() } throws: { TransferError.kind(of: $0) == .handoffRequired }
    }

    @Test("an identity that does not decode is kept, and the launch says why it cannot go on")
    func undecodableIdentity() async throws {
        let phone = try await Launched()
        let garbage = Data("not an identity".utf8)
        try phone.keychain.write(garbage, for: StoreKey.identity)
        let (client, _) = relaunched(phone)

        guard case .storageUnavailable(let failure) = try await client.launch() else {
            Issue.record("the launch went on without the identity")
            return
        }
        #expect(failure.kind == .undecodable)
        #expect(phone.keychain.items[StoreKey.identity] == garbage)
        #expect(phone.server.count("POST /v1/devices/login") == 1)
    }

    @Test("TransferKit 1's token dictionary moves to one item per account")
    func legacySessions() async throws {
        let phone = try await Launched()
        let session = try #require(phone.storedSessions[phone.accountId])
        try phone.keychain.remove(StoreKey.session(phone.accountId))
        try phone.keychain.write(Wire.encode([phone.accountId: session]), for: StoreKey.legacySessions)
        let (client, _) = relaunched(phone)

        #expect(try await client.withAccessToken { $0 } == session.accessToken)
        #expect(phone.keychain.items[StoreKey.legacySessions] == nil)
        #expect(phone.storedSessions[phone.accountId] == session)
        #expect(phone.server.count("POST /v1/devices/login") == 1)
    }

    // MARK: 6. Storage errors say what they are

    @Test("storage failures keep their kind: a locked store is locked, a file error keeps its errno")
    func storageErrorKinds() async throws {
        let keychain = MemoryCredentialStore()
        keychain.isAvailable = false
        let client = FakeServer().client(keychain: keychain)
        guard case .storageUnavailable(let failure) = try await client.launch() else { Issue.record("launched"); return }
        #expect(failure.kind == .locked)
        await #expect { try await client.accounts() } throws: { ($0 as? TransferError)?.storage?.kind == .locked }

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("transferkit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("transferkit.identity"), withIntermediateDirectories: true)
        #expect { try FileCredentialStore(directory: directory).read("transferkit.identity") } throws: { error in
            let error = error as? StorageError
            return error?.kind == .io && error?.status == EISDIR
        }
    }

    // MARK: 7. A push tapped at cold start

    @Test("account(forNotification:) finds the account before launch")
    func notificationAtColdStart() async throws {
        let phone = try await Launched()
        let (client, _) = relaunched(phone)
        #expect(client.account(forNotification: ["accountId": phone.accountId.uppercased()])?.id == phone.accountId)
        #expect(client.account(forNotification: ["accountId": UUID().uuidString]) == nil)
    }

    // MARK: 8. A push token registered during the first launch

    @Test("a push token registered before there is an account is kept and uploaded after the sign-in")
    func pushTokenBeforeFirstLaunch() async throws {
        let server = FakeServer()
        let client = server.client()
        try await client.registerPushToken(apns: Data(repeating: 0xAB, count: 32))
        #expect(server.log.isEmpty)

        _ = try await client.launch()
        let upload = try #require(server.requests("PUT /v1/devices/push-token").last)
        #expect(upload.body["token"] as? String == String(repeating: "ab", count: 32))
        #expect(upload.body["environment"] as? String == APNsEnvironment.forThisBuild.rawValue)
        #expect(server.count("PUT /v1/devices/push-token") == 1)
        _ = try await client.launch()
        #expect(server.count("PUT /v1/devices/push-token") == 1)  // uploaded once
        #expect(server.violations.isEmpty)
    }

    @Test("a failed upload keeps the token for the next sign-in; the environment follows the build")
    func pushTokenUploadFails() async throws {
        let phone = try await Launched()
        phone.server.scriptError("PUT /v1/devices/push-token", status: 503, "unavailable")
        await #expect { try await phone.client.registerPushToken(fcm: "fcm-token-1") } throws: {
            TransferError.kind(of: $0) == .unavailable
        }
        _ = try await phone.client.launch()
        #expect(phone.server.requests("PUT /v1/devices/push-token").map { $0.body["token"] as? String } == ["fcm-token-1", "fcm-token-1"])
        #expect(APNsEnvironment.forBuild(debug: true) == .sandbox && APNsEnvironment.forBuild(debug: false) == .production)
    }

    @Test("a claim that brings a new device id uploads the registered token for it")
    func pushTokenAfterClaimOnNewIdentity() async throws {
        let phone = try await Launched()
        try await phone.client.registerPushToken(fcm: "fcm-token-2")
        let first = try #require(phone.client.state.deviceId)
        // The phone's only account leaves it (the identity is retired), then it claims another.
        try await phone.client.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        try await phone.client.removeAccount(phone.accountId)
        let other = try await Launched(phone.server)
        try await other.client.setUpTransfer(email: "ben@example.com", temporaryPassword: "blue-harbor-42")
        _ = try await phone.client.claimTransfer(email: "ben@example.com", temporaryPassword: "blue-harbor-42")

        #expect(phone.client.state.deviceId != first)
        let uploads = phone.server.requests("PUT /v1/devices/push-token")
        #expect(uploads.map { $0.body["token"] as? String } == ["fcm-token-2", "fcm-token-2"])
        #expect(uploads.last?.bearer == phone.storedSessions[other.accountId]?.accessToken)
    }

    // MARK: 9. Sign-out before launch

    @Test("signOut before launch ends the stored session and forgets its tokens")
    func signOutBeforeLaunch() async throws {
        let phone = try await Launched()
        let token = try #require(phone.storedSessions[phone.accountId]).accessToken
        let (client, events) = relaunched(phone)

        try await client.signOut()
        #expect(phone.storedSessions.isEmpty)
        #expect(phone.server.requests("POST /v1/logout").map(\.bearer) == [token])
        #expect(events.all.contains(.signedOut(accountId: phone.accountId)))
        #expect(!phone.server.hasOpenSession(phone.accountId))
    }

    @Test("signOut with no account says so instead of doing nothing")
    func signOutWithoutAccount() async throws {
        let client = FakeServer().client()
        await #expect { try await client.signOut() } throws: { TransferError.kind(of: $0) == .notSignedIn }
    }

    // MARK: 11. Cancellation

    @Test("URLError.cancelled from the transport is a CancellationError, not a network error")
    func cancelledRequest() async throws {
        let phone = try await Launched()
        let client = TransferClient(
            baseURL: FakeServer.baseURL, credentials: phone.keychain, accountList: phone.appFiles,
            transport: FailingTransport(error: URLError(.cancelled)), now: { phone.clock.now })
        await #expect(throws: CancellationError.self) { try await client.accounts() }
        await #expect { try await client.launch() } throws: { $0 is CancellationError }

        let offline = TransferClient(
            baseURL: FakeServer.baseURL, credentials: phone.keychain, accountList: phone.appFiles,
            transport: FailingTransport(error: URLError(.notConnectedToInternet)), now: { phone.clock.now })
        await #expect { try await offline.accounts() } throws: { TransferError.kind(of: $0) == .network }
    }

    // MARK: 12. Every state change is an event

    @Test("startOver, accounts() and the start-over after the last account left emit events")
    func stateChangesAreEvents() async throws {
        let phone = try await Launched()
        let before = phone.events.all.count
        let accounts = try await phone.client.accounts()  // brings addedAt and pushEnabled
        #expect(phone.events.all.dropFirst(before).contains(.stateChanged(DeviceState(deviceId: phone.client.state.deviceId, accounts: accounts))))

        try await phone.client.startOver()
        #expect(phone.events.all.suffix(2) == [.stateChanged(DeviceState(deviceId: nil, accounts: [])), .startedOver])

        let other = try await Launched()
        try await other.client.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        try await other.client.removeAccount(other.accountId)
        #expect(other.events.all.suffix(2) == [.stateChanged(DeviceState(deviceId: nil, accounts: [])), .startedOver])
    }

    // MARK: 13. The service's codes

    @Test("every code of the contract that apps may meet has a name", arguments: [
        "insufficient_scope", "invalid_request", "invalid_device_id", "invalid_device_secret",
        "payload_too_large", "unsupported_media_type", "internal_error",
    ])
    func namedCodes(_ code: String) throws {
        let body = try JSONSerialization.data(withJSONObject: ["error": code, "message": "m"])
        let error = TransferError(response: HTTPResponse(status: 400, body: body))
        #expect(TransferError.Code.known.contains(error.code))
        #expect(error.code.rawValue == code)
        // An unknown code is still a code: a new server code never breaks a switch.
        #expect(TransferError(response: HTTPResponse(status: 400, body: Data(#"{"error":"new_code","message":"m"}"#.utf8))).code == "new_code")
        #expect(error.localizedDescription == "m")
    }

    @Test("a launch whose current account moved while others remain offers them instead of throwing")
    func currentAccountMovedOnLaunch() async throws {
        let phone = try await Launched()
        let work = try await phone.client.addAccount()  // current
        try await phone.client.setUpTransfer(email: "work@example.com", temporaryPassword: "blue-harbor-42")
        let b = phone.server.client()
        _ = try await b.claimTransfer(email: "work@example.com", temporaryPassword: "blue-harbor-42")

        let (client, events) = relaunched(phone)
        let result = try await client.launch()
        guard case .currentAccountMoved(let moved, let at, let remaining) = result else { Issue.record("got \(result)"); return }
        #expect(moved == work.id && at == Wire.parseDate("2026-11-21T13:00:00Z"))
        #expect(remaining.map(\.id) == [phone.accountId])
        #expect(events.all.contains { if case .accountMoved = $0 { true } else { false } })
        try await client.switchAccount(to: phone.accountId)
        #expect(try await client.launch() == .signedIn(accountId: phone.accountId, created: false))
    }

    @Test("a claim answered device_retired starts over with a new identity and claims once more")
    func claimOnRetiredDevice() async throws {
        let old = try await Launched()
        try await old.client.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        let keychain = MemoryCredentialStore()
        let client = old.server.client(keychain: keychain)
        let events = EventLog(client)
        old.server.scriptError("POST /v1/transfers/claim", status: 409, "device_retired")

        let account = try await client.claimTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        #expect(account.id == old.accountId)
        let claims = old.server.requests("POST /v1/transfers/claim")
        #expect(claims.count == 2)
        #expect(claims[0].body["deviceId"] as? String != claims[1].body["deviceId"] as? String)
        #expect(client.state.deviceId == claims[1].body["deviceId"] as? String)
        #expect(events.all.contains(.startedOver))

        // Once only: a second device_retired is the app's to handle.
        try await client.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        old.server.scriptError("POST /v1/transfers/claim", status: 409, "device_retired")
        old.server.scriptError("POST /v1/transfers/claim", status: 409, "device_retired")
        let fresh = old.server.client()
        await #expect { try await fresh.claimTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42") } throws: {
            TransferError.kind(of: $0) == .deviceRetired
        }
    }
}

@Suite("The fake service follows the contract where TransferKit meets it")
struct FakeContractTests {
    func refresh(_ server: FakeServer, _ token: String) async throws -> HTTPResponse {
        try await server.transport.send(.refresh, baseURL: FakeServer.baseURL, body: Wire.encode(RefreshRequest(refreshToken: token)))
    }

    @Test("a rotated refresh token presented again revokes the session: the new refresh token and the access token stop working")
    func rotatedRefreshTokenRevokes() async throws {
        let phone = try await Launched()
        let first = try #require(phone.storedSessions[phone.accountId]).refreshToken
        let renewed = try Wire.decode(SessionBody.self, from: try await refresh(phone.server, first).succeeded())
        #expect(try await refresh(phone.server, first).status == 401)
        let after = try await refresh(phone.server, renewed.refreshToken)
        #expect(after.status == 401, "the session survived a rotated refresh token presented again (\(after.status))")
        let me = try await phone.server.transport.send(.me, baseURL: FakeServer.baseURL, token: renewed.accessToken)
        #expect(me.status == 401, "the session's access token still works (\(me.status))")
    }

    @Test("a claim onto a device every account left is device_retired; a fresh process's claim then starts over and claims once more")
    func retiredDeviceClaimsInFreshProcess() async throws {
        let a = try await Launched()
        let code = try await a.client.setUpTransferCode().code
        let b = a.server.client(keychain: MemoryCredentialStore(), appFiles: MemoryCredentialStore())
        _ = try await b.claimTransfer(code: code)  // a's only account leaves: a's device is retired

        // The user brings the account back to phone a: the app's process was restarted, and
        // claims before any launch; the stores still list the account that left.
        let back = try await b.setUpTransferCode().code
        let fresh = a.server.client(keychain: a.keychain, appFiles: a.appFiles, clock: a.clock)
        let events = EventLog(fresh)
        let retired = try #require(a.storedIdentity).deviceId
        let account = try await fresh.claimTransfer(code: back)
        #expect(account.id == a.accountId)
        let claims = a.server.requests("POST /v1/transfers/claim").suffix(2).map { $0.body["deviceId"] as? String }
        #expect(claims.first == retired, "the first claim was sent from the retired device")
        #expect(fresh.state.deviceId != retired && claims.last == fresh.state.deviceId, "the claim was not sent again from a new device")
        #expect(events.all.contains(.startedOver))
        #expect(events.all.contains { if case .accountMoved(a.accountId?, _, _) = $0 { true } else { false } })
    }
}

/// A transport whose every request fails with `error`.
struct FailingTransport: HTTPTransport {
    let error: any Error & Sendable
    func send(_ request: HTTPRequest) async throws -> HTTPResponse { throw error }
}
