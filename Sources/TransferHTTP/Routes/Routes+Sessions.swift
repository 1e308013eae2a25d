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
        return try Self.json(
            SessionBody(
                accountId: grant.account.accountID, userName: grant.account.userName, deviceId: grant.deviceID,
                created: grant.created, migrationFlag: grant.account.migrationFlag, accessToken: access.token,
                tokenType: "Bearer", expiresIn: Int(access.expiresAt - now.seconds),
                refreshToken: grant.refreshToken, accounts: grant.accounts),
            status: status)
    }
}

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
