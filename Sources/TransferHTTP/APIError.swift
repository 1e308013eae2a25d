import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TransferCore
import TransferStorage

/// An error answer of the contract: `{"error": code, "message": sentence}` with its status
/// and headers. Every failure reaches the client as one of these.
public struct APIError: HTTPResponseError {
    public var status: HTTPResponse.Status
    public var code: String
    public var message: String
    public var headers: HTTPFields

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    public static func invalidRequest(_ message: String) -> APIError { APIError(.badRequest, "invalid_request", message) }

    public static func rateLimited(retryAfter: Int) -> APIError {
        // Not "from this address": --setup-limit and --handoff-limit count per account, and
        // another network does not help there.
        APIError(.tooManyRequests, "rate_limited", "Too many requests; try again in \(retryAfter) s.",
                 headers: [.retryAfter: String(retryAfter)])
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let (head, body) = parts
        return Response(status: head.status, headers: head.headerFields, body: .init(byteBuffer: body))
    }

    /// The answer's head (status and headers, JSON) and body; the connection guard writes
    /// these itself for a request the router never saw.
    var parts: (head: HTTPResponse, body: ByteBuffer) {
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        var extra: [String: Any] = [:]
        if let transferredAt { extra["transferredAt"] = transferredAt }
        if let accounts {
            extra["accounts"] = accounts.map { ["accountId": $0.accountID, "userName": $0.userName, "current": $0.current] as [String: Any] }
        }
        let body = JSONBody.encode(["error": code, "message": message], extra: extra)
        return (HTTPResponse(status: status, headerFields: headers), ByteBuffer(bytes: body))
    }

    /// Fields `device_transferred` adds to the body.
    var transferredAt: String?
    var accounts: [ListedAccount]?
}

extension APIError {
    /// The contract's mapping of each domain error to a status, code and headers.
    public init(_ error: TransferError) {
        switch error {
        case .invalidDeviceID:
            self.init(.badRequest, error.code, "deviceId must be an RFC 4122 UUID string.")
        case .invalidDeviceSecret:
            self.init(.badRequest, error.code, "deviceSecret must be 32 to 128 characters of A-Z, a-z, 0-9, _ and -.")
        case .invalidEmail(let why):
            self.init(.badRequest, error.code, why.prefix(1).uppercased() + why.dropFirst() + ".")
        case .weakPassword(let why):
            self.init(.badRequest, error.code, why.prefix(1).uppercased() + why.dropFirst() + ".")
        case .invalidDeviceCredentials:
            self.init(.unauthorized, error.code, "The device secret does not match this device.")
        case .deviceTransferred(let at, let accounts):
            self.init(
                .gone, error.code,
                accounts.isEmpty
                    ? "This device's account was moved to another device; generate a new deviceId to start over."
                    : "This account was moved to another device; pick another account on this device.")
            transferredAt = at.rfc3339
            self.accounts = accounts
        case .deviceRevoked:
            self.init(.forbidden, error.code, "This device was revoked by support.")
        case .invalidRefreshToken:
            self.init(.unauthorized, error.code, "The refresh token is not valid; log in again.")
        case .invalidToken:
            self.init(.unauthorized, error.code, "The access token is missing, malformed, expired or revoked.",
                      headers: [.wwwAuthenticate: "Bearer"])
        case .insufficientScope:
            self.init(.forbidden, error.code, "A sibling app's token cannot call this endpoint; it is the host app's.",
                      headers: [.wwwAuthenticate: #"Bearer error="insufficient_scope""#])
        case .deviceProofRequired:
            self.init(.unauthorized, error.code, "This change needs the device's secret in the X-Device-Secret header, beside the access token.")
        case .invalidGrant:
            self.init(.badRequest, error.code, "The hand-off code is invalid, expired or used.")
        case .unknownClient:
            self.init(.forbidden, error.code, "clientId is not one of this service's sibling apps.")
        case .emailInUse:
            self.init(.conflict, error.code, "Another account has a pending transfer with this email.")
        case .invalidTransferCredentials:
            self.init(.unauthorized, error.code, "The email or temporary password is not valid.")
        case .tooManyAttempts(let retryAfter):
            self.init(.tooManyRequests, error.code, "Too many wrong passwords for this transfer; try again later.",
                      headers: [.retryAfter: String(retryAfter)])
        case .deviceHasAccount:
            self.init(.conflict, error.code, "This device already has an account; set replaceExistingAccount to move it.")
        case .deviceAlreadyBound:
            self.init(.conflict, error.code, "This device is already bound to this account.")
        case .deviceRetired:
            self.init(.conflict, error.code, "This deviceId was moved away or revoked; generate a new deviceId.")
        case .accountNotOnDevice:
            self.init(.forbidden, error.code, "This account is not on this device.")
        case .deviceAccountLimit(let limit):
            self.init(.conflict, error.code, "This device already holds \(limit) accounts, the most it may hold.")
        case .accountWouldBeLost:
            self.init(
                .conflict, error.code,
                "This is the account's only device and it has no way back (a pending transfer, a linked Apple ID, a recovery code or a backup key); set one up first, or abandon it (abandon=true to remove it, abandonExisting: true in a claim).")
        case .accountDeleted:
            self.init(.gone, error.code, "This account was deleted.")
        case .invalidPushToken(let why):
            self.init(.badRequest, error.code, why.prefix(1).uppercased() + why.dropFirst() + ".")
        case .invalidServiceKey:
            self.init(.unauthorized, error.code, "The service key is missing, unknown or revoked.",
                      headers: [.wwwAuthenticate: "Bearer"])
        case .invalidIdentityToken(let why):
            self.init(.unauthorized, error.code, why.prefix(1).uppercased() + why.dropFirst() + ".")
        case .appleIDInUse:
            self.init(.conflict, error.code, "This Apple ID is linked to another account.")
        case .accountNotFound:
            self.init(.notFound, error.code, "No account has this accountId.")
        case .appleIDNotLinked:
            self.init(.notFound, error.code, "No account is linked to this Apple ID.")
        case .invalidAuthorizationCode(let why):
            self.init(.badRequest, error.code, "The authorizationCode was not accepted: \(why). Sign in with Apple again.")
        case .attestationRequired:
            self.init(
                .forbidden, error.code,
                "A new account needs a device attestation: get a challenge from POST /v1/attestation/challenge and send the attestation with this login.")
        case .invalidAttestation(let check, let message):
            self.init(.unauthorized, error.code, "The device attestation failed its \(check) check: \(message).")
        case .notConfigured(let what):
            self.init(.notImplemented, error.code, "\(what) is not configured on this service.")
        case .rateLimited(let retryAfter):
            self = .rateLimited(retryAfter: retryAfter)
        case .unavailable(let outcomeUnknown):
            self.init(
                .serviceUnavailable, error.code,
                outcomeUnknown
                    ? "The database connection was lost while the change was being saved, so whether it was saved is unknown; try again shortly, which is safe."
                    : "The database cannot be reached; nothing was changed. Try again shortly.",
                headers: [.retryAfter: "5"])
        case .overloaded(let retryAfter):
            self.init(.serviceUnavailable, error.code, "The service is busy; try again shortly.",
                      headers: [.retryAfter: String(retryAfter)])
        }
    }
}

/// Turns every error into the contract's JSON shape: domain errors by the mapping above,
/// Hummingbird's own (404, 413, …) by status, anything else into a 500 that says nothing
/// about its cause (the cause is logged without request data).
struct ErrorMiddleware<Context: AppRequestContext>: RouterMiddleware {
    let allowedMethods: [String: [HTTPRequest.Method]]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response: Response
        do {
            response = try await next(request, context)
        } catch let verdict as ConnectionVerdict {
            // The connection guard stopped the request while its body was being read (timeout,
            // broken framing, client gone) and has answered what could be answered.
            return verdict.response
        } catch let error as APIError {
            response = try error.response(from: request, context: context)
        } catch let error as TransferError {
            response = try APIError(error).response(from: request, context: context)
        } catch let error as HTTPError {
            response = try Self.map(error, request: request, allowed: Self.methods(of: request.uri.path, in: allowedMethods))
                .response(from: request, context: context)
        } catch {
            if context.clientWentAway { return ConnectionVerdict.clientGone(requestCutShort: false).response }
            context.logger.error("internal error", metadata: ["error.type": "\(Storage.kind(of: error))"])
            response = try APIError(.internalServerError, "internal_error", "Something went wrong on our side.")
                .response(from: request, context: context)
        }
        // Nobody reads an answer once its client has gone: 499 in the log and metrics.
        if context.clientWentAway { return ConnectionVerdict.clientGone(requestCutShort: false).response }
        return response
    }

    /// The methods of the route `path` matches; a `:name` segment of a route matches any segment.
    static func methods(of path: String, in routes: [String: [HTTPRequest.Method]]) -> [HTTPRequest.Method]? {
        if let exact = routes[path] { return exact }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return routes.first { route, _ in
            let pattern = route.split(separator: "/", omittingEmptySubsequences: false)
            return pattern.count == segments.count && zip(pattern, segments).allSatisfy { $0.hasPrefix(":") ? !$1.isEmpty : $0 == $1 }
        }?.value
    }

    static func map(_ error: HTTPError, request: Request, allowed: [HTTPRequest.Method]?) -> APIError {
        switch error.status {
        case .notFound:
            if let allowed, !allowed.contains(request.method) {
                return APIError(.methodNotAllowed, "method_not_allowed", "\(request.method) is not allowed here.",
                                headers: [.allow: allowed.map(\.rawValue).joined(separator: ", ")])
            }
            return APIError(.notFound, "not_found", "There is nothing at this path.")
        case .contentTooLarge:
            return APIError(.contentTooLarge, "payload_too_large", "The request body is larger than 16 KiB.")
        case .badRequest:
            return .invalidRequest("The request is malformed.")
        default:
            return APIError(error.status, "http_\(error.status.code)", error.status.reasonPhrase + ".")
        }
    }
}
