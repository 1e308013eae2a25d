import Foundation
import HTTPTypes
import Hummingbird
import TransferCore

/// Who may call a route; each row of the route table says.
enum Access: Sendable {
    /// Anyone: no credentials are looked at.
    case anyone
    /// The host app on a device, with its access token. A sibling app's token gets
    /// `403 insufficient_scope`: these routes act on the host app's device or are its decision.
    case device
    /// The host app on a device, with its access token and the device's secret in
    /// `X-Device-Secret`: the routes that change the account's ways back or delete it.
    case deviceWithProof
    /// The host app or a sibling app, with its access token (logout).
    case deviceOrSibling
    /// As `deviceOrSibling`, but the handler's read checks the session, before it reads its
    /// answer (`GET /v1/me`: one read for the request). The handler gets the token's
    /// session from `context.unchecked`; `context.caller` refuses it.
    case deviceOrSiblingInOneRead
    /// An app backend: `Authorization: Bearer <service key>`.
    case serviceKey
}

/// The caller a route's `Authenticator` let in.
public enum Identity: Sendable {
    /// A device session: the host app's, or a sibling app's (its `clientID` set).
    case session(Caller)
    /// An app backend's service key.
    case service(ServiceCaller)
    /// A verified access token whose session the handler's read still checks
    /// (`Access.deviceOrSiblingInOneRead`).
    case unchecked(UncheckedSession)
}

/// What a verified access token names, before its session is known to be open: not a
/// `Caller`, so that no service call that trusts a caller can be handed it.
public struct UncheckedSession: Sendable {
    public var accountID: String
    public var deviceID: String
    public var sessionID: String
    public var clientID: String?
}

extension AppRequestContext {
    /// The device session of a `.device` or `.deviceOrSibling` route. A route that lets anyone
    /// in has none: `401 invalid_token`.
    var caller: Caller {
        get throws {
            guard case .session(let caller) = identity else { throw TransferError.invalidToken }
            return caller
        }
    }

    /// The verified access token of a `.deviceOrSiblingInOneRead` route, its session not checked
    /// yet: only for a service call that checks it in its own read.
    var unchecked: UncheckedSession {
        get throws {
            guard case .unchecked(let session) = identity else { throw TransferError.invalidToken }
            return session
        }
    }
}

/// Checks a route's credentials before its handler runs and puts the caller into
/// `context.identity`, as hummingbird-auth's authenticators do. A missing or bad credential
/// answers `401` with `WWW-Authenticate`, a sibling app's token on a host-app route `403`;
/// the handler (and its body checks) never runs.
struct Authenticator<Context: AppRequestContext>: RouterMiddleware {
    let access: Access
    let service: TransferService
    let tokenBox: TokenBox

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        switch access {
        case .anyone: break
        case .device, .deviceOrSibling: context.identity = .session(try await session(request, context))
        case .deviceOrSiblingInOneRead: context.identity = .unchecked(try await verifiedToken(request))
        case .deviceWithProof:
            let caller = try await session(request, context)
            try await service.proveDevice(caller, secret: request.headers[.xDeviceSecret])
            context.identity = .session(caller)
        case .serviceKey: context.identity = .service(try await serviceKey(request))
        }
        return try await next(request, context)
    }

    /// The session behind the Bearer access token. The request log learns its account also
    /// when a sibling app's token is then refused.
    func session(_ request: Request, _ context: Context) async throws -> Caller {
        let claims = try await verifiedToken(request)
        let caller = try await service.authenticate(
            accountID: claims.accountID, deviceID: claims.deviceID, sessionID: claims.sessionID, clientID: claims.clientID)
        context.log.accountID = caller.accountID
        switch access {
        case .deviceOrSibling, .deviceOrSiblingInOneRead: break
        case .anyone, .device, .deviceWithProof, .serviceKey:
            if caller.clientID != nil { throw TransferError.insufficientScope }
        }
        return caller
    }

    /// What the Bearer access token says, its signature and lifetime verified; its session not checked.
    func verifiedToken(_ request: Request) async throws -> UncheckedSession {
        guard let token = Self.bearer(request),
            let claims = await (try tokenBox.tokens).verify(token, now: service.clock.now())
        else { throw TransferError.invalidToken }
        return UncheckedSession(accountID: claims.sub.value, deviceID: claims.did, sessionID: claims.sid, clientID: claims.azp)
    }

    /// The app backend behind `Authorization: Bearer <service key>`.
    func serviceKey(_ request: Request) async throws -> ServiceCaller {
        guard let key = Self.bearer(request) else { throw TransferError.invalidServiceKey }
        return try await service.authenticateService(key: key)
    }

    /// The credential of `Authorization: Bearer …` (the scheme in any case), if the header is one.
    static func bearer(_ request: Request) -> String? {
        guard let header = request.headers[.authorization], header.utf8.count < 4096, header.hasPrefix(ignoringASCIICase: "bearer ") else {
            return nil
        }
        let credential = header.dropFirst("bearer ".count)
        // A token starts and ends with a printable ASCII character, which no trimming removes:
        // Foundation's trimming (through NSString) was a tenth of an authenticated read's CPU.
        if let first = credential.utf8.first, let last = credential.utf8.last, (0x21...0x7E).contains(first), (0x21...0x7E).contains(last) {
            return String(credential)
        }
        return credential.trimmingCharacters(in: .whitespaces)
    }
}

extension HTTPField.Name {
    /// The device's secret, beside the access token, on the routes that change ways back.
    static let xDeviceSecret = Self("X-Device-Secret")!
}
