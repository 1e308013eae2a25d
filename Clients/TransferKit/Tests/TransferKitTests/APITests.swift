import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Observation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit

/// What app code touches: tokens for interceptors, observable state, errors, transport.
@Suite("The API apps use")
struct APITests {
    @Test("accessToken(of:) hands out the current token; renewAccessToken(rejected:) renews once for many 401s")
    func interceptorTokens() async throws {
        let phone = try await Launched()
        let token = try await phone.client.accessToken()
        #expect(token == phone.storedSessions[phone.accountId]?.accessToken)
        #expect(try await phone.client.accessToken(of: phone.accountId.uppercased()) == token)

        // Three requests were refused with the same token: one renewal, one new token for all.
        let client = phone.client
        let renewed = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<3 { group.addTask { try await client.renewAccessToken(rejected: token) } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(renewed.count == 1 && !renewed.contains(token))
        #expect(phone.server.count("POST /v1/tokens/refresh") == 1)

        // Forced: renews whatever the token.
        let forced = try await phone.client.renewAccessToken()
        #expect(forced != renewed.first)
        #expect(phone.server.count("POST /v1/tokens/refresh") == 2)
    }

    @MainActor
    final class ViewModel {
        var calls: [String] = []  // main-actor state, not Sendable
    }

    @Test("withAccessToken runs its body on the caller's actor: main-actor state without Sendable")
    @MainActor
    func mainActorBody() async throws {
        let phone = try await Launched()
        let model = ViewModel()
        let attempts = try await phone.client.withAccessToken { token in
            model.calls.append(token)
            if model.calls.count == 1 { throw TransferError.accessTokenRejected }
            return model.calls
        }
        #expect(attempts.count == 2 && attempts[0] != attempts[1])
    }

    @Test("stateChanges starts with the current state and yields each change")
    func stateChanges() async throws {
        let phone = try await Launched()
        var states = phone.client.stateChanges.makeAsyncIterator()
        #expect(await states.next() == phone.client.state)
        let second = try await phone.client.addAccount()
        let next = await states.next()
        #expect(next?.currentAccountId == second.id)
    }

    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @Test("TransferModel follows the client: launch result, accounts, current account, a move")
    @MainActor
    func observableModel() async throws {
        let server = FakeServer()
        let client = server.client()
        let model = TransferModel(client: client)
        #expect(model.launchResult == nil && model.accounts.isEmpty)

        await model.launch()
        guard case .signedIn(let first, true) = model.launchResult else { Issue.record("\(String(describing: model.launchResult))"); return }
        #expect(model.currentAccount?.id == first)

        let second = try await client.addAccount()  // straight through the client
        try await until { model.currentAccount?.id == second.id }
        #expect(model.accounts.map(\.id) == [first, second.id])

        let changed = Counter()
        withObservationTracking { _ = model.state } onChange: { _ = changed.next() }
        try await model.switchAccount(to: first)
        #expect(changed.value == 1 && model.currentAccount?.id == first)

        await #expect(throws: TransferError.self) { try await model.switchAccount(to: UUID().uuidString.lowercased()) }
        #expect(model.lastError is TransferError)
    }

    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @Test("TransferModel.start() stops at a first start (nothing created); a claim through the model signs in")
    @MainActor
    func modelNewPhone() async throws {
        let server = FakeServer()
        let old = server.client()
        guard case .signedIn(let accountId, _) = try await old.launch() else { return }
        let offer = try await old.setUpTransferCode()

        let model = TransferModel(client: server.client())
        await model.start()
        #expect(model.startingPoint == .firstStart && model.launchResult == nil)
        #expect(server.count("POST /v1/devices/login") == 1)  // the old phone's only
        try await model.claimTransfer(code: offer.code)
        #expect(model.launchResult == .signedIn(accountId: accountId, created: false))
        #expect(model.currentAccount?.id == accountId && model.startingPoint == .returning)

        let returning = TransferModel(client: server.client(keychain: MemoryCredentialStore(), appFiles: MemoryCredentialStore()))
        await returning.launch()  // "new here": an account of its own
        guard case .signedIn(_, true) = returning.launchResult else { Issue.record("no account"); return }
    }

    /// Waits until `condition` holds, letting the model's event loop run (no wall-clock sleep
    /// matters: it only yields).
    @MainActor
    func until(_ condition: () -> Bool) async throws {
        for _ in 0..<10_000 where !condition() { await Task.yield() }
        #expect(condition())
    }

    @Test("TransferError is a LocalizedError; its code is an open set a switch handles with default")
    func errors() {
        let error = TransferError(code: "brand_new_code", message: "Something new.", status: 400)
        #expect(error.localizedDescription == "Something new.")
        let handled: String = switch error.code {
        case .deviceHasAccount: "ask"
        case .rateLimited: "wait"
        default: "other: \(error.code)"
        }
        #expect(handled == "other: brand_new_code")
        #expect(TransferError.accessTokenRejected.code == .invalidToken)
    }

    @Test("a Transport over URLRequest: the request as TransferKit sends it, the answer as the app's stack returns it")
    func injectableTransport() async throws {
        let seen = Recorder()
        let transport = Transport { request in
            seen.append(request)
            let body = #"{"nonce":"n-1","expiresIn":300}"#
            let response = HTTPURLResponse(url: request.url!, statusCode: 201, httpVersion: "HTTP/1.1", headerFields: nil)!
            return (Data(body.utf8), response)
        }
        let logged = Recorder()
        let client = TransferClient(
            baseURL: URL(string: "https://transfer.test/api")!, credentials: MemoryCredentialStore(),
            transport: transport.logging { logged.append(line: $0) })
        let nonce = try await client.appleNonce()
        #expect(nonce.value == "n-1" && nonce.expiresIn == 300)
        #expect(seen.requests.map(\.url?.absoluteString) == ["https://transfer.test/api/v1/apple/nonce"])
        #expect(seen.requests.first?.httpMethod == "POST")
        #expect(logged.lines.count == 1 && logged.lines[0].hasPrefix("TransferKit: POST /api/v1/apple/nonce → 201"))
    }

    @Test("public initialisers of the value types, for previews and app tests")
    func publicInitialisers() {
        let transfer = PendingTransfer(email: "ann@example.com", expiresAt: Date(timeIntervalSince1970: 0))
        let link = AppleIDLink(email: "x@privaterelay.appleid.com", isPrivateEmail: true)
        let profile = AccountProfile(
            id: "a", userName: "u", createdAt: Date(timeIntervalSince1970: 0), transfer: transfer,
            devices: [AccountProfile.Device(id: "d", boundAt: Date(timeIntervalSince1970: 0), isCurrent: true)], appleID: link)
        #expect(profile.migrationFlag && profile.transfer == transfer && profile.appleID == link)
        #expect(HandoffCode(code: "c", expiresIn: 60).expiresIn == 60)
        #expect(AppleNonce(value: "v", expiresIn: 300).sha256.count == 64)
    }
}

final class Recorder: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [URLRequest] = []
    private var logged: [String] = []
    func append(_ request: URLRequest) { lock.lock(); recorded.append(request); lock.unlock() }
    func append(line: String) { lock.lock(); logged.append(line); lock.unlock() }
    var requests: [URLRequest] { lock.lock(); defer { lock.unlock() }; return recorded }
    var lines: [String] { lock.lock(); defer { lock.unlock() }; return logged }
}

@Suite("Hand-off links and Apple credentials")
struct LinkTests {
    @Test("the sibling's link to the host carries client id and challenge, never the verifier; the host reads them back")
    func handoffLinks() throws {
        let request = HandoffRequest.make(clientId: "com.example.news")
        let toHost = request.url(host: URL(string: "https://host.example.com/handoff?from=app")!)
        #expect(!toHost.absoluteString.contains(request.codeVerifier))
        let asking = try #require(HandoffChallenge(url: toHost))
        #expect(asking == HandoffChallenge(clientId: "com.example.news", codeChallenge: request.codeChallenge))
        #expect(toHost.query?.contains("from=app") == true)

        let handoff = HandoffCode(code: "abcDEF123_-abcDEF123_-abcDEF123_-abcDEF1234", expiresIn: 60)
        let toSibling = handoff.url(sibling: URL(string: "https://news.example.com/handoff")!)
        #expect(HandoffRequest.code(in: toSibling) == handoff.code)

        #expect(HandoffChallenge(url: URL(string: "https://host.example.com/handoff?client_id=a&code_challenge=short")!) == nil)
        #expect(HandoffChallenge(url: URL(string: "https://host.example.com/handoff?code_challenge=\(request.codeChallenge)")!) == nil)
        #expect(HandoffRequest.code(in: URL(string: "https://news.example.com/handoff?code=a&code=b")!) == nil)
        #expect(HandoffRequest.code(in: URL(string: "https://news.example.com/handoff")!) == nil)
    }

    @Test("a credential's identity token and code are read as UTF-8; without a token nothing is sent")
    func appleCredentialFields() throws {
        #expect(try AppleCredentialTokens.identityToken(Data("eyJ.a.b".utf8)) == "eyJ.a.b")
        #expect(AppleCredentialTokens.authorizationCode(Data("c0de".utf8)) == "c0de")
        #expect(AppleCredentialTokens.authorizationCode(nil) == nil)
        #expect { try AppleCredentialTokens.identityToken(nil) } throws: { TransferError.kind(of: $0) == .invalidIdentityToken }
        #expect { try AppleCredentialTokens.identityToken(Data()) } throws: { TransferError.kind(of: $0) == .invalidIdentityToken }
    }
}
