import Hummingbird
import TransferCore

// Sign in with Apple: nonce, link, unlink, the move to a new device, and Apple's notifications.
extension API {
    static var appleRoutes: [Route] {
        [
            Route(.post, "/v1/apple/nonce") { try $0.withApple().nonce },
            Route(.put, "/v1/me/apple", .deviceWithProof) { try $0.withApple().link },
            Route(.delete, "/v1/me/apple", .deviceWithProof) { try $0.withApple().unlink },
            Route(.post, "/v1/transfers/apple") { try $0.withApple().move },
            Route(.post, "/v1/apple/notifications") { try $0.withApple().notification },
        ]
    }

    /// The Apple handlers of this deployment, or `501 not_configured` while Sign in with Apple is off.
    func withApple() throws -> AppleRoutes<Context> {
        guard let apple else { throw TransferError.notConfigured("Sign in with Apple") }
        return AppleRoutes(api: self, apple: apple)
    }
}

/// The handlers of Sign in with Apple, made only while it is configured.
struct AppleRoutes<Context: AppRequestContext>: Sendable {
    let api: API<Context>
    let apple: AppleSignIn

    var service: TransferService { api.service }

    func nonce(_ request: Request, _ context: Context) async throws -> Response {
        try await API<Context>.readNoBody(request, context)
        let issued = try await service.issueNonce(.appleSignIn, clientAddress: api.clientAddress(request, context))
        return try API<Context>.json(AppleNonceBody(nonce: issued.value, expiresIn: Int(issued.expiresIn.components.seconds)), status: .created)
    }

    func link(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try context.caller
        let body = try await JSONBody.read(request, context: context)
        let token = try body.string("identityToken")
        let nonce = try body.string("nonce")
        let code = try body.optionalString("authorizationCode")
        let identity = try await apple.verify(token, nonce: nonce, now: service.clock.now())
        // With the code exchange configured, Apple's refresh token comes before the transaction
        // (no outgoing HTTP inside one); a refused link revokes it again.
        let grant = try await apple.grant(code: code, identity: identity, now: service.clock.now())
        let linked = try await service.linkApple(caller, identity: identity, nonce: nonce, grant: grant)
        return try API<Context>.json(AppleLinkBody(linked.link), status: linked.created ? .created : .ok)
    }

    func unlink(_ request: Request, _ context: Context) async throws -> Response {
        try await API<Context>.readNoBody(request, context)
        _ = try await service.unlinkApple(try context.caller)
        return Response(status: .noContent)
    }

    /// `POST /v1/transfers/apple`: a claim whose way back is the Apple ID. Counted by `--claim-limit`.
    func move(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context)
        let token = try body.string("identityToken")
        let nonce = try body.string("nonce")
        let target = try ClaimTarget(body)
        let address = api.clientAddress(request, context)
        let grant = try await service.withClaimSlot(client: address) {
            let identity = try await apple.verify(token, nonce: nonce, now: service.clock.now())
            return try await service.claim(ClaimRequest(proof: .apple(identity, nonce: nonce), target: target), clientAddress: address)
        }
        context.log.accountID = grant.account.accountID
        return try await api.session(grant, status: .ok)
    }

    /// Apple's server-to-server notifications: `200` once verified, also for a `jti` seen before.
    func notification(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context)
        let event = try await apple.notification(try body.string("payload"), now: service.clock.now())
        _ = try await service.handleAppleNotification(event)
        return Response(status: .ok)
    }
}

struct AppleNonceBody: Encodable {
    var nonce: String
    var expiresIn: Int
}

/// The link as `PUT /v1/me/apple` and `GET /v1/me` show it; `email` and `isPrivateEmail` are
/// `null` when Apple never sent them.
struct AppleLinkBody: Encodable {
    /// Only in `/v1/me`.
    var linkedAt: String?
    @Nullable var email: String?
    @Nullable var isPrivateEmail: Bool?

    init(_ link: AppleLink, withLinkedAt: Bool = false) {
        linkedAt = withLinkedAt ? link.linkedAt.rfc3339 : nil
        email = link.email
        isPrivateEmail = link.isPrivateEmail
    }
}
