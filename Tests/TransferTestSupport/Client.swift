import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing
import TransferCore

/// A device as the app keeps it in the Keychain.
struct Device {
    let id: String
    let secret: String
    init() {
        self.init(id: UUID().uuidString.lowercased(), secret: RandomToken.make(byteCount: 32))
    }
    init(id: String, secret: String) {
        self.id = id
        self.secret = secret
        // The phone that made the device keeps its secret; a test that presents the id with
        // another secret (an attacker's guess) does not change it.
        Keychain.secrets.withLock { $0[id] = $0[id] ?? secret }
    }
    var loginBody: [String: Any] { ["deviceId": id, "deviceSecret": secret] }
}

/// Every test device's secret by its id, as each phone's Keychain holds its own: `Client` sends
/// the secret of the device a token was issued to, as TransferKit does, unless a test says not to.
enum Keychain {
    static let secrets = Mutex<[String: String]>([:])

    /// The secret of the device an access token names (its `did` claim), if a test made that device.
    static func secret(forToken token: String) -> String? {
        let parts = token.split(separator: ".")
        guard parts.count == 3, let payload = Base64URL.decode(parts[1]),
            let claims = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any], let device = claims["did"] as? String
        else { return nil }
        return secrets.withLock { $0[device] }
    }
}

/// What a call sends in `X-Device-Secret` beside its access token.
enum DeviceProof {
    /// The secret of the token's device, as the app keeps it.
    case fromKeychain
    /// No header: a stolen token alone.
    case none
    case secret(String)
}

/// One answer of the server.
///
/// `json`, `accessToken`, `refreshToken` and `string(_:)` throw when the answer lacks what they
/// read, with the status and the body in the error, so a failed call stops the test at the call.
/// `reply["key"]` and `error` read a field that may be absent (nil); a body that is not a JSON
/// object is recorded as an issue there, never read as empty.
struct Reply {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let body: ByteBuffer

    var text: String { String(buffer: body) }

    /// The body as a JSON object.
    var json: [String: Any] {
        get throws {
            let parsed: Any
            do {
                parsed = try JSONSerialization.jsonObject(with: Data(body.readableBytesView), options: [.fragmentsAllowed])
            } catch {
                throw failure("the body is not JSON")
            }
            guard let object = parsed as? [String: Any] else { throw failure("the body is not a JSON object") }
            return object
        }
    }

    /// A string field the answer must carry.
    func string(_ key: String) throws -> String {
        guard let value = try json[key] as? String else { throw failure("no string \"\(key)\" in the body") }
        return value
    }

    var accessToken: String { get throws { try string("accessToken") } }
    var accountID: String { get throws { try string("accountId") } }
    /// The `accounts` list of a session body or error: (accountId, current) in order.
    var accounts: [(id: String, current: Bool)] {
        get throws {
            guard let list = try json["accounts"] as? [[String: Any]] else { throw failure("no \"accounts\" list in the body") }
            return try list.map {
                guard let id = $0["accountId"] as? String, let current = $0["current"] as? Bool else { throw failure("an account without accountId or current") }
                return (id, current)
            }
        }
    }
    /// The account ids of `accounts`, and the current one.
    var accountIDs: [String] { get throws { try accounts.map(\.id) } }
    var currentAccount: String? { get throws { try accounts.first { $0.current }?.id } }
    var refreshToken: String { get throws { try string("refreshToken") } }

    /// A field of the body, nil when the body has none.
    subscript(_ key: String, sourceLocation: SourceLocation = #_sourceLocation) -> Any? {
        do {
            return try json[key]
        } catch {
            Issue.record("\(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    /// The contract's error code, nil when the body has none.
    var error: String? { self["error"] as? String }

    func failure(_ problem: String) -> TestFailure {
        let shown = text.count > 2000 ? String(text.prefix(2000)) + "… (\(body.readableBytes) bytes)" : text
        return TestFailure("\(problem): HTTP \(status.code) \(status.reasonPhrase), body: \(shown)")
    }
}

/// A client for the contract's calls, as the app would make them.
struct Client {
    let client: any TestClientProtocol

    func call(
        _ method: HTTPRequest.Method, _ path: String, json: [String: Any]? = nil, raw: String? = nil,
        token: String? = nil, headers extra: HTTPFields = [:], proof: DeviceProof = .fromKeychain
    ) async throws -> Reply {
        var headers = extra
        if let token {
            headers[.authorization] = "Bearer \(token)"
            let secret: String? =
                switch proof {
                case .fromKeychain: Keychain.secret(forToken: token)
                case .none: nil
                case .secret(let secret): secret
                }
            if let secret, headers[.xDeviceSecret] == nil { headers[.xDeviceSecret] = secret }
        }
        var body: ByteBuffer?
        if let json {
            body = ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json))
        } else if let raw {
            body = ByteBuffer(string: raw)
        }
        if body != nil, headers[.contentType] == nil { headers[.contentType] = "application/json" }
        // Without a body, say so as clients do: on a socket (a harness that trusts proxies) NIO
        // would send a POST's or PUT's missing body as an empty chunked one.
        if body == nil, method == .post || method == .put, headers[.contentLength] == nil { headers[.contentLength] = "0" }
        return try await client.execute(uri: path, method: method, headers: headers, body: body) { response in
            Reply(status: response.status, headers: response.headers, body: response.body)
        }
    }

    func login(_ device: Device) async throws -> Reply {
        try await call(.post, "/v1/devices/login", json: device.loginBody)
    }

    /// A login for one account of the device, or one that adds an account.
    func login(_ device: Device, account: String? = nil, newAccount: Bool = false) async throws -> Reply {
        var body = device.loginBody
        if let account { body["accountId"] = account }
        if newAccount { body["newAccount"] = true }
        return try await call(.post, "/v1/devices/login", json: body)
    }

    func accounts(_ token: String) async throws -> Reply { try await call(.get, "/v1/devices/accounts", token: token) }

    func setCurrent(_ token: String, account: String) async throws -> Reply {
        try await call(.put, "/v1/devices/current-account", json: ["accountId": account], token: token)
    }

    func remove(_ token: String, account: String, abandon: Bool = false) async throws -> Reply {
        try await call(.delete, "/v1/devices/accounts/\(account)" + (abandon ? "?abandon=true" : ""), token: token)
    }

    func setUp(token: String, email: String, password: String) async throws -> Reply {
        try await call(.put, "/v1/me/transfer", json: ["email": email, "temporaryPassword": password], token: token)
    }

    func claim(
        email: String, password: String, device: Device, replace: Bool? = nil, add: Bool? = nil, abandon: Bool? = nil
    ) async throws -> Reply {
        var body: [String: Any] = ["email": email, "temporaryPassword": password, "deviceId": device.id, "deviceSecret": device.secret]
        if let replace { body["replaceExistingAccount"] = replace }
        if let add { body["addAccount"] = add }
        if let abandon { body["abandonExisting"] = abandon }
        return try await call(.post, "/v1/transfers/claim", json: body)
    }

    func me(_ token: String) async throws -> Reply { try await call(.get, "/v1/me", token: token) }
}

extension HTTPField.Name {
    static let xDeviceSecret = Self("X-Device-Secret")!
}
