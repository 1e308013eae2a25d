import Hummingbird
import TransferCore

// Hand-off: the host app asks for a one-time code; the sibling app redeems it for its own session.
extension API {
    static var handoffRoutes: [Route] {
        [
            Route(.post, "/v1/handoff/codes", .device) { try $0.withHandoff().createHandoffCode },
            Route(.post, "/v1/handoff/token") { try $0.withHandoff().redeemHandoffCode },
        ]
    }

    /// This API while sibling-app hand-off is configured, or `501 not_configured`.
    func withHandoff() throws -> Self {
        _ = try service.handoffPolicy()
        return self
    }

    /// `POST /v1/handoff/codes`: the host app asks for a one-time code for a sibling app.
    func createHandoffCode(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try context.caller
        let body = try await JSONBody.read(request, context: context)
        let client = try body.string("clientId")
        let challenge = try body.string("codeChallenge")
        let method = try body.string("codeChallengeMethod")
        guard method == "S256" else { throw APIError.invalidRequest("codeChallengeMethod must be S256 (plain is not accepted).") }
        guard PKCE.isChallenge(challenge) else {
            throw APIError.invalidRequest("codeChallenge must be 43 base64url characters: base64url(SHA-256(codeVerifier)) without padding.")
        }
        let issued = try await service.createHandoffCode(caller, clientID: client, challenge: challenge)
        return try Self.json(HandoffCodeBody(code: issued.code, expiresIn: Int(issued.expiresIn.components.seconds)), status: .created)
    }

    /// `POST /v1/handoff/token`: the sibling app redeems the code with its verifier.
    func redeemHandoffCode(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context)
        let code = try body.string("code")
        let verifier = try body.string("codeVerifier")
        let client = try body.string("clientId")
        let grant = try await service.redeemHandoffCode(
            code: code, verifier: verifier, clientID: client, clientAddress: clientAddress(request, context))
        context.log.accountID = grant.account.accountID
        return try await session(grant, status: .ok)
    }
}

struct HandoffCodeBody: Encodable {
    var code: String
    var expiresIn: Int
}
