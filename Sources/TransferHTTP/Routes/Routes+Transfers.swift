import Hummingbird
import TransferCore

// Transfers: set-up and cancel on A, the claim on B (with the claim limit both claims count against).
extension API {
    static var transferRoutes: [Route] {
        [
            Route(.put, "/v1/me/transfer", .device) { $0.setUpTransfer },
            Route(.delete, "/v1/me/transfer", .device) { $0.cancelTransfer },
            Route(.post, "/v1/transfers/claim") { $0.claim },
        ]
    }

    func setUpTransfer(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try context.caller
        let body = try await JSONBody.read(request, context: context)
        let email = try FieldRules.email(try body.string("email"))
        let password = try FieldRules.temporaryPassword(try body.string("temporaryPassword"), email: email)
        let result = try await service.setUpTransfer(
            accountID: caller.accountID, email: email, password: password,
            clientAddress: clientAddress(request, context))
        return try Self.json(TransferBody(email: result.email, expiresAt: result.expiresAt.rfc3339), status: .created)
    }

    func cancelTransfer(_ request: Request, _ context: Context) async throws -> Response {
        _ = try await service.cancelTransfer(accountID: try context.caller.accountID)
        return Response(status: .noContent)
    }

    func claim(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context)
        let emailText = try body.string("email")
        let password = try body.string("temporaryPassword")
        let target = try ClaimTarget(body)
        let email = try FieldRules.email(emailText)
        let temporaryPassword = try FieldRules.claimPassword(password)
        let address = try countClaim(request, context)
        let grant = try await service.claim(
            ClaimRequest(
                email: email, temporaryPassword: temporaryPassword, deviceID: target.deviceID,
                deviceSecret: target.secret, replaceExistingAccount: target.replace, addAccount: target.add),
            clientAddress: address)
        context.log.accountID = grant.account.accountID
        return try await session(grant, status: .ok)
    }

    /// Counts a claim attempt against `--claim-limit`; returns the client address, or throws `429`.
    func countClaim(_ request: Request, _ context: Context) throws -> String {
        let address = clientAddress(request, context)
        if let retry = claimLimiter?.hit(address, now: service.clock.now()) {
            throw APIError.rateLimited(retryAfter: retry)
        }
        return address
    }
}

/// The device a claim (with a password or with Apple) binds, and its options.
struct ClaimTarget {
    let deviceID: DeviceID
    let secret: String
    let replace: Bool
    let add: Bool

    init(_ body: JSONBody) throws {
        deviceID = try FieldRules.deviceID(try body.string("deviceId"))
        secret = try FieldRules.deviceSecret(try body.string("deviceSecret"))
        replace = try body.bool("replaceExistingAccount", default: false)
        add = try body.bool("addAccount", default: false)
        if replace && add { throw APIError.invalidRequest("replaceExistingAccount and addAccount cannot both be true.") }
    }
}

struct TransferBody: Encodable {
    var email: String
    var expiresAt: String
}
