import Hummingbird
import TransferCore

// Sessions: auto-login, refresh, logout, and the session answer every grant shares.
extension API {
    static var sessionRoutes: [Route] {
        [
            Route(.post, "/v1/devices/login") { $0.login },
            Route(.post, "/v1/tokens/refresh") { $0.refresh },
            Route(.post, "/v1/logout", .deviceOrSibling) { $0.logout },
        ]
    }

    func login(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context)
        let deviceID = try FieldRules.deviceID(try body.string("deviceId"))
        let secret = try FieldRules.deviceSecret(try body.string("deviceSecret"))
        let account = try body.optionalString("accountId").map { try Self.accountID($0, field: "accountId") }
        let newAccount = try body.bool("newAccount", default: false)
        if account != nil && newAccount { throw APIError.invalidRequest("accountId and newAccount cannot be sent together.") }
        let target: LoginTarget = newAccount ? .newAccount : account.map { .account($0) } ?? .current
        let attestation = try Self.attestationProof(body)
        let grant = try await service.login(
            deviceID: deviceID, deviceSecret: secret, target: target, attestation: attestation,
            clientAddress: clientAddress(request, context))
        context.log.accountID = grant.account.accountID
        return try await session(grant, status: grant.created ? .created : .ok, reuseAccessToken: true)
    }

    func refresh(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context)
        let token = try body.string("refreshToken")
        guard !token.isEmpty, token.utf8.count <= 512 else { throw TransferError.invalidRefreshToken }
        let grant = try await service.refresh(refreshToken: token)
        context.log.accountID = grant.account.accountID
        return try await session(grant, status: .ok)
    }

    func logout(_ request: Request, _ context: Context) async throws -> Response {
        try await Self.readNoBody(request, context)
        try await service.logout(try context.caller)
        return Response(status: .noContent)
    }

    /// The answer of every call that opens a session: login, refresh, claims, hand-off. A
    /// login may hand out the session's recent access token again (`reuseAccessToken`);
    /// `expiresIn` is then what is left of its lifetime.
    func session(_ grant: SessionGrant, status: HTTPResponse.Status, reuseAccessToken: Bool = false) async throws -> Response {
        let now = service.clock.now()
        let tokens = try tokenBox.tokens
        let access = try tokens.accessToken(for: grant, now: now, reuse: reuseAccessToken)
        let body = SessionBody(
            accountId: grant.account.accountID, userName: grant.account.userName, deviceId: grant.deviceID,
            created: grant.created, migrationFlag: grant.account.migrationFlag, accessToken: access.token,
            tokenType: "Bearer", expiresIn: Int(access.expiresAt - now.seconds),
            refreshToken: grant.refreshToken, accounts: grant.accounts)
        return Self.json(bytes: body.json(), status: status)
    }
}

/// The answer of every call that opens a session. Every app launch gets one, so it is written
/// by hand (`json()`): Foundation's `JSONEncoder` was 8 % of a login's CPU, three quarters of
/// the handler's own work. `Encodable` stays for the test that holds the two byte for byte.
struct SessionBody: Encodable {
    var accountId: String
    var userName: String
    var deviceId: String
    var created: Bool
    var migrationFlag: Bool
    var accessToken: String
    var tokenType: String
    var expiresIn: Int
    var refreshToken: String
    var accounts: [ListedAccount]
}

extension SessionBody {
    /// What `API.json` writes for this body (keys sorted, slashes not escaped), written directly.
    func json() -> [UInt8] {
        var out = JSONOut()
        out.raw("{")
        out.member("accessToken", accessToken, first: true)
        out.member("accountId", accountId)
        out.key("accounts")
        out.array(accounts) { out, account in
            out.member("accountId", account.accountID, first: true)
            out.member("current", account.current)
            out.member("userName", account.userName)
        }
        out.member("created", created)
        out.member("deviceId", deviceId)
        out.member("expiresIn", expiresIn)
        out.member("migrationFlag", migrationFlag)
        out.member("refreshToken", refreshToken)
        out.member("tokenType", tokenType)
        out.member("userName", userName)
        out.raw("}")
        return out.bytes
    }
}

/// JSON written directly into bytes, escaped as `JSONEncoder` escapes (with
/// `.withoutEscapingSlashes`): `"` and `\`, the control characters as `\b \f \n \r \t` or `\u00XX`.
struct JSONOut {
    private(set) var bytes: [UInt8] = []
    private static let hex = Array("0123456789abcdef".utf8)

    init() { bytes.reserveCapacity(1024) }

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// `"name":`, after a comma unless it is the object's first key.
    mutating func key(_ name: StaticString, first: Bool = false) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        raw(name)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// `"name":value`, after a comma unless it is the object's first member.
    mutating func member(_ name: StaticString, _ value: String, first: Bool = false) {
        key(name, first: first)
        string(value)
    }

    mutating func member(_ name: StaticString, _ value: Bool, first: Bool = false) {
        key(name, first: first)
        bool(value)
    }

    mutating func member(_ name: StaticString, _ value: Int, first: Bool = false) {
        key(name, first: first)
        integer(value)
    }

    /// `null`, or the value as `write` writes it.
    mutating func nullable<Value>(_ value: Value?, _ write: (inout JSONOut, Value) -> Void) {
        if let value { write(&self, value) } else { raw("null") }
    }

    /// `[{…},{…}]`: an object for each element, its members written by `members`.
    mutating func array<Element>(_ elements: [Element], _ members: (inout JSONOut, Element) -> Void) {
        raw("[")
        for (index, element) in elements.enumerated() {
            if index > 0 { raw(",") }
            raw("{")
            members(&self, element)
            raw("}")
        }
        raw("]")
    }

    mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    mutating func integer(_ value: Int) {
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func string(_ value: String) {
        var value = value
        bytes.append(UInt8(ascii: "\""))
        // Over the string's contiguous bytes: the runs between escapes (most strings, tokens,
        // ids and times, are one run) are copied whole.
        value.withUTF8 { utf8 in
            var run = 0
            for index in utf8.indices {
                let byte = utf8[index]
                let escaped: UInt8? =
                    switch byte {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"): byte
                    case 0x08: UInt8(ascii: "b")
                    case 0x0C: UInt8(ascii: "f")
                    case 0x0A: UInt8(ascii: "n")
                    case 0x0D: UInt8(ascii: "r")
                    case 0x09: UInt8(ascii: "t")
                    case 0..<0x20: UInt8(ascii: "u")
                    default: nil
                    }
                guard let escaped else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<index]))
                run = index + 1
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(escaped)
                if escaped == UInt8(ascii: "u") {
                    raw("00")
                    bytes.append(Self.hex[Int(byte >> 4)])
                    bytes.append(Self.hex[Int(byte & 0xF)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
