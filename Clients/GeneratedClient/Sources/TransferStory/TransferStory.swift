import Foundation
import HTTPTypes
import OpenAPIRuntime
import OpenAPIURLSession

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The A→B story with the generated client, against the server at the URL given: a first
/// launch on A, a transfer set up on A, the claim on B, B's next launch in the same account, and
/// A's `410 device_transferred`; once with an email and a temporary password, once with a
/// transfer code. Exits non-zero with the step that went wrong.
@main
struct TransferStory {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count == 2, let server = URL(string: arguments[1]) else {
            FileHandle.standardError.write(Data("usage: TransferStory http://127.0.0.1:PORT\n".utf8))
            exit(2)
        }
        var failed = 0
        for (name, story) in [("password", Story.password), ("transfer code", Story.transferCode)] {
            do {
                try await Story(server: server).run(story)
                print("story by \(name): passed")
            } catch {
                failed += 1
                FileHandle.standardError.write(Data("story by \(name): FAILED: \(error)\n".utf8))
            }
        }
        print("generated client story: \(2 - failed) passed, \(failed) failed")
        exit(failed == 0 ? 0 : 1)
    }
}

struct StoryFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A simulated phone: its UUID and the secret it keeps in the Keychain.
struct Phone {
    let deviceId = UUID().uuidString.lowercased()
    let deviceSecret = (UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "")
}

/// A device's credentials on the operations that need them: the access token (`bearer`) and,
/// where the account's ways back change, the device's secret (`deviceSecret`). The generator
/// leaves security schemes to middleware.
struct Credentials: ClientMiddleware {
    let accessToken: String
    let deviceSecret: String

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = "Bearer \(accessToken)"
        request.headerFields[HTTPField.Name("X-Device-Secret")!] = deviceSecret
        return try await next(request, body, baseURL)
    }
}

struct Story {
    enum Method { case password, transferCode }
    static let password = Method.password
    static let transferCode = Method.transferCode

    let server: URL

    var anonymous: Client { Client(serverURL: server, transport: URLSessionTransport()) }

    func signedIn(_ phone: Phone, _ session: Components.Schemas.Session) -> Client {
        Client(
            serverURL: server, transport: URLSessionTransport(),
            middlewares: [Credentials(accessToken: session.accessToken, deviceSecret: phone.deviceSecret)])
    }

    /// `POST /v1/devices/login`: the app's launch.
    func launch(_ phone: Phone) async throws -> Operations.autoLogin.Output {
        try await anonymous.autoLogin(body: .json(.init(deviceId: phone.deviceId, deviceSecret: phone.deviceSecret)))
    }

    func run(_ method: Method) async throws {
        let a = Phone(), b = Phone()
        // 1. First launch on A: a new account.
        let first: Components.Schemas.Session
        switch try await launch(a) {
        case .created(let created): first = try created.body.json
        case let other: throw StoryFailure("A's first launch: expected 201, got \(other)")
        }
        // 2. A sets up the transfer.
        let email = "story-\(UUID().uuidString.lowercased())@example.com"
        let password = "Kq7-vR2p-Lm9x-\(Int.random(in: 1000...9999))"
        let setUp: Operations.setUpTransfer.Input.Body
        switch method {
        case .password: setUp = .json(.TransferWithPassword(.init(email: email, temporaryPassword: password)))
        case .transferCode: setUp = .json(.TransferWithCode(.init(method: .code)))
        }
        let pending: Operations.setUpTransfer.Output.Created.Body.jsonPayload
        switch try await signedIn(a, first).setUpTransfer(body: setUp) {
        case .created(let created): pending = try created.body.json
        case let other: throw StoryFailure("A's set-up: expected 201, got \(other)")
        }
        // 3. B claims it.
        let claim: Operations.claimTransfer.Input.Body
        switch (method, pending) {
        case (.password, .Transfer(let transfer)):
            guard transfer.email == email else { throw StoryFailure("A's set-up answered email \(transfer.email), not \(email)") }
            claim = .json(.ClaimWithPassword(.init(email: email, temporaryPassword: password, deviceId: b.deviceId, deviceSecret: b.deviceSecret)))
        case (.transferCode, .TransferCode(let code)):
            claim = .json(.ClaimWithTransferCode(.init(transferCode: code.transferCode, deviceId: b.deviceId, deviceSecret: b.deviceSecret)))
        default: throw StoryFailure("A's set-up answered \(pending) for a \(method) transfer")
        }
        let claimed: Components.Schemas.Session
        switch try await anonymous.claimTransfer(body: claim) {
        case .ok(let ok): claimed = try ok.body.json
        case let other: throw StoryFailure("B's claim: expected 200, got \(other)")
        }
        guard claimed.accountId == first.accountId, claimed.deviceId == b.deviceId else {
            throw StoryFailure("B's claim opened account \(claimed.accountId) on \(claimed.deviceId), not \(first.accountId) on \(b.deviceId)")
        }
        // 4. B's next launch: the same account, no new one.
        switch try await launch(b) {
        case .ok(let ok):
            let again = try ok.body.json
            guard again.accountId == first.accountId, !again.created else {
                throw StoryFailure("B's relaunch: account \(again.accountId) (created: \(again.created)), not \(first.accountId)")
            }
        case let other: throw StoryFailure("B's relaunch: expected 200, got \(other)")
        }
        // 5. A hears that its account moved.
        switch try await launch(a) {
        case .gone(let gone):
            let body = try gone.body.json
            guard let error = body.value1?.value1.error ?? body.value2?.error, error == .device_transferred else {
                throw StoryFailure("A's relaunch: 410 without device_transferred: \(body)")
            }
        case let other: throw StoryFailure("A's relaunch: expected 410 device_transferred, got \(other)")
        }
    }
}
