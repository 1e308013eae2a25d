import Hummingbird
import TransferCore

// Push: the device's token and preferences, and the service API app backends call with their key.
extension API {
    static var pushRoutes: [Route] {
        [
            Route(.put, "/v1/devices/push-token", .device) { $0.registerPushToken },
            Route(.delete, "/v1/devices/push-token", .device) { $0.removePushToken },
            Route(.put, "/v1/devices/push-preferences", .device) { $0.setPushPreferences },
            Route(.put, "/v1/me/push", .device) { $0.setAccountPush },
            Route(.post, "/v1/service/push-targets", .serviceKey) { $0.pushTargets },
            Route(.post, "/v1/service/push-feedback", .serviceKey) { $0.pushFeedback },
        ]
    }

    func registerPushToken(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try context.caller
        let body = try await JSONBody.read(request, context: context)
        let provider: PushProvider = try body.choice("provider")
        let token = try FieldRules.pushToken(try body.string("token"), provider: provider)
        let environment: PushEnvironment? = try body.optionalString("environment").map { try JSONBody.choice($0, name: "environment") }
        if provider == .fcm, environment != nil { throw APIError.invalidRequest("environment is for apns tokens only.") }
        try await service.registerPushToken(caller, provider: provider, token: token, environment: environment)
        return Response(status: .noContent)
    }

    func removePushToken(_ request: Request, _ context: Context) async throws -> Response {
        try await Self.readNoBody(request, context)
        let caller = try context.caller
        guard let name = request.uri.queryParameters.get("provider") else { throw APIError.invalidRequest("provider is required.") }
        let provider: PushProvider = try JSONBody.choice(name, name: "provider")
        try await service.removePushToken(caller, provider: provider)
        return Response(status: .noContent)
    }

    func setPushPreferences(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try context.caller
        let body = try await JSONBody.read(request, context: context)
        try await service.setPushMode(caller, try body.choice("mode"))
        return Response(status: .noContent)
    }

    func setAccountPush(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try context.caller
        let body = try await JSONBody.read(request, context: context)
        try await service.setAccountPush(caller, enabled: try body.bool("enabled"))
        return Response(status: .noContent)
    }

    func pushTargets(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context, limit: JSONBody.serviceMaxBytes)
        let texts = try body.strings("accountIds")
        guard (1...FieldRules.maxPushTargetAccounts).contains(texts.count) else {
            throw APIError.invalidRequest("accountIds must hold 1 to \(FieldRules.maxPushTargetAccounts) ids.")
        }
        var seen = Set<String>()
        let ids = try texts.enumerated().compactMap { i, text in
            let id = try Self.accountID(text, field: "accountIds[\(i)]")
            return seen.insert(id).inserted ? id : nil
        }
        let targets = try await service.pushTargets(accountIDs: ids)
        return try Self.json(PushTargetsBody(targets: targets.map(PushTargetsBody.Target.init)), status: .ok)
    }

    func pushFeedback(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context, limit: JSONBody.serviceMaxBytes)
        let provider: PushProvider = try body.choice("provider")
        let token = try FieldRules.pushToken(try body.string("token"), provider: provider)
        let _: PushFeedbackReason = try body.choice("reason")  // checked; either reason means the token is dead
        guard let at = Timestamp(rfc3339: try body.string("at")) else {
            throw APIError.invalidRequest("at must be an RFC 3339 date-time, such as 2026-11-22T10:00:00Z.")
        }
        try await service.pushFeedback(provider: provider, token: token, reportedAt: at)
        return Response(status: .noContent)
    }
}

/// Why an app backend reports a token: either way it is dead.
enum PushFeedbackReason: String, CaseIterable {
    case unregistered
    case badToken = "bad_token"
}

/// `POST /v1/service/push-targets`.
struct PushTargetsBody: Encodable {
    struct Target: Encodable {
        var provider: String
        var token: String
        /// `null` for fcm: every target has the contract's five fields.
        @Nullable var environment: String?
        var deviceId: String
        var accountIds: [String]

        init(_ t: PushTarget) {
            provider = t.provider.rawValue
            token = t.token
            environment = t.environment?.rawValue
            deviceId = t.deviceID
            accountIds = t.accountIDs
        }
    }
    var targets: [Target]
}
