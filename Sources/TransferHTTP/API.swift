import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TransferArgon2
import TransferCore

/// The HTTP contract: parses and validates requests, calls the service, shapes answers.
struct API<Context: AppRequestContext>: Sendable {
    let service: TransferService
    let tokenBox: TokenBox
    let configuration: ServerConfiguration
    let metrics: ServiceMetrics
    let hasher: Argon2Hasher?
    let creationLimiter: RateLimiter?
    let claimLimiter: RateLimiter?
    /// nil while Sign in with Apple is off: its routes answer `501 not_configured`.
    let apple: AppleSignIn?
    let openAPI: [UInt8]

    typealias Handler = @Sendable (Request, Context) async throws -> Response

    /// Every route, once: what `register` adds to the router, and what answers 405 with `Allow`.
    static var routes: [(method: HTTPRequest.Method, path: String, handler: (API) -> Handler)] {
        [
            (.post, "/v1/devices/login", { $0.login }),
            (.post, "/v1/tokens/refresh", { $0.refresh }),
            (.post, "/v1/logout", { $0.logout }),
            (.get, "/v1/me", { $0.me }),
            (.delete, "/v1/me", { $0.deleteAccount }),
            (.put, "/v1/me/transfer", { $0.setUpTransfer }),
            (.delete, "/v1/me/transfer", { $0.cancelTransfer }),
            (.post, "/v1/transfers/claim", { $0.claim }),
            (.get, "/v1/devices/accounts", { $0.deviceAccounts }),
            (.put, "/v1/devices/current-account", { $0.setCurrentAccount }),
            (.delete, "/v1/devices/accounts/:accountId", { $0.removeAccount }),
            (.put, "/v1/devices/push-token", { $0.registerPushToken }),
            (.delete, "/v1/devices/push-token", { $0.removePushToken }),
            (.put, "/v1/devices/push-preferences", { $0.setPushPreferences }),
            (.put, "/v1/me/push", { $0.setAccountPush }),
            (.post, "/v1/service/push-targets", { $0.pushTargets }),
            (.post, "/v1/service/push-feedback", { $0.pushFeedback }),
            (.post, "/v1/apple/nonce", { $0.appleNonce }),
            (.put, "/v1/me/apple", { $0.linkApple }),
            (.delete, "/v1/me/apple", { $0.unlinkApple }),
            (.post, "/v1/transfers/apple", { $0.moveWithApple }),
            (.post, "/v1/apple/notifications", { $0.appleNotification }),
            (.post, "/v1/handoff/codes", { $0.createHandoffCode }),
            (.post, "/v1/handoff/token", { $0.redeemHandoffCode }),
            (.get, "/.well-known/jwks.json", { $0.jwks }),
            (.get, "/healthz", { _ in { _, _ in raw(Array(#"{"status":"ok"}"#.utf8), type: "application/json") } }),
            (.get, "/readyz", { api in { _, _ in try await api.ready() } }),
            (.get, "/metrics", { api in { _, _ in
                raw(api.metrics.exposition(hasher: api.hasher), type: "text/plain; version=0.0.4; charset=utf-8")
            } }),
            (.get, "/openapi.yaml", { api in { _, _ in raw(api.openAPI, type: "application/yaml") } }),
        ]
    }

    /// The methods of each path.
    static var allowedMethods: [String: [HTTPRequest.Method]] {
        routes.reduce(into: [:]) { $0[$1.path, default: []].append($1.method) }
    }

    func register(on router: Router<Context>) {
        for route in Self.routes {
            router.on(RouterPath(route.path), method: route.method, use: route.handler(self))
        }
    }

    // MARK: Endpoints

    func login(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context)
        let deviceID = try FieldRules.deviceID(try body.string("deviceId"))
        let secret = try FieldRules.deviceSecret(try body.string("deviceSecret"))
        let account = try body.optionalString("accountId").map { try Self.accountID($0, field: "accountId") }
        let newAccount = try body.bool("newAccount", default: false)
        if account != nil && newAccount { throw APIError.invalidRequest("accountId and newAccount cannot be sent together.") }
        let target: LoginTarget = newAccount ? .newAccount : account.map { .account($0) } ?? .current
        let address = clientAddress(request, context)
        let now = service.clock.now()
        let retryAfter = creationLimiter?.exhausted(address, now: now)
        let grant = try await service.login(
            deviceID: deviceID, deviceSecret: secret, target: target, clientAddress: address, creationRetryAfter: retryAfter)
        if grant.created { creationLimiter?.hit(address, now: now) }
        context.log.accountID = grant.account.accountID
        return try await session(grant, status: grant.created ? .created : .ok)
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
        let caller = try await authenticate(request, context, siblings: true)
        try await service.logout(caller)
        return Response(status: .noContent)
    }

    func me(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context, siblings: true)
        let profile = try await service.profile(caller)
        return try Self.json(MeBody(profile, current: caller.deviceID), status: .ok)
    }

    /// `DELETE /v1/me`: the account is erased (App Store guideline 5.1.1(v)).
    func deleteAccount(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context)
        try await service.deleteAccount(caller)
        return Response(status: .noContent)
    }

    func setUpTransfer(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context)
        let body = try await JSONBody.read(request, context: context)
        let email = try FieldRules.email(try body.string("email"))
        let password = try FieldRules.temporaryPassword(try body.string("temporaryPassword"), email: email)
        let result = try await service.setUpTransfer(
            accountID: caller.accountID, email: email, password: password,
            clientAddress: clientAddress(request, context))
        return try Self.json(TransferBody(email: result.email, expiresAt: result.expiresAt.rfc3339), status: .created)
    }

    func cancelTransfer(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context)
        _ = try await service.cancelTransfer(accountID: caller.accountID)
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

    func deviceAccounts(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context)
        let device = try await service.deviceAccounts(caller)
        return try Self.json(DeviceAccountsBody(device), status: .ok)
    }

    func setCurrentAccount(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context)
        let body = try await JSONBody.read(request, context: context)
        let account = try Self.accountID(try body.string("accountId"), field: "accountId")
        try await service.setCurrentAccount(caller, accountID: account)
        return Response(status: .noContent)
    }

    func removeAccount(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context)
        let account = try Self.accountID(context.parameters.get("accountId") ?? "", field: "accountId")
        let abandon: Bool
        switch request.uri.queryParameters.get("abandon") {
        case nil, "false": abandon = false
        case "true": abandon = true
        default: throw APIError.invalidRequest("abandon must be true or false.")
        }
        try await service.removeAccount(caller, accountID: account, abandon: abandon)
        return Response(status: .noContent)
    }

    // MARK: Push routing

    func registerPushToken(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context)
        let body = try await JSONBody.read(request, context: context)
        let provider: PushProvider = try body.choice("provider")
        let token = try FieldRules.pushToken(try body.string("token"), provider: provider)
        let environment: PushEnvironment? = try body.optionalString("environment").map { try JSONBody.choice($0, name: "environment") }
        if provider == .fcm, environment != nil { throw APIError.invalidRequest("environment is for apns tokens only.") }
        try await service.registerPushToken(caller, provider: provider, token: token, environment: environment)
        return Response(status: .noContent)
    }

    func removePushToken(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context)
        guard let name = request.uri.queryParameters.get("provider") else { throw APIError.invalidRequest("provider is required.") }
        let provider: PushProvider = try JSONBody.choice(name, name: "provider")
        try await service.removePushToken(caller, provider: provider)
        return Response(status: .noContent)
    }

    func setPushPreferences(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context)
        let body = try await JSONBody.read(request, context: context)
        try await service.setPushMode(caller, try body.choice("mode"))
        return Response(status: .noContent)
    }

    func setAccountPush(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try await authenticate(request, context)
        let body = try await JSONBody.read(request, context: context)
        try await service.setAccountPush(caller, enabled: try body.bool("enabled"))
        return Response(status: .noContent)
    }

    func pushTargets(_ request: Request, _ context: Context) async throws -> Response {
        _ = try await authenticateService(request)
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
        _ = try await authenticateService(request)
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

    // MARK: Sign in with Apple

    /// The Apple sign-in of this deployment, or `501 not_configured`.
    func appleSignIn() throws -> AppleSignIn {
        guard let apple else { throw TransferError.notConfigured("Sign in with Apple") }
        return apple
    }

    func appleNonce(_ request: Request, _ context: Context) async throws -> Response {
        _ = try appleSignIn()
        // No body, or an empty object.
        if request.headers[.contentLength].map({ $0 != "0" }) ?? (request.headers[.transferEncoding] != nil) {
            _ = try await JSONBody.read(request, context: context)
        }
        let issued = try await service.issueAppleNonce()
        return try Self.json(AppleNonceBody(nonce: issued.nonce, expiresIn: Int(issued.expiresIn.components.seconds)), status: .created)
    }

    func linkApple(_ request: Request, _ context: Context) async throws -> Response {
        let apple = try appleSignIn()
        let caller = try await authenticate(request, context)
        let body = try await JSONBody.read(request, context: context)
        let token = try body.string("identityToken")
        let nonce = try body.string("nonce")
        let code = try body.optionalString("authorizationCode")
        let identity = try await apple.verify(token, nonce: nonce, now: service.clock.now())
        // With the code exchange configured, Apple's refresh token comes before the transaction
        // (no outgoing HTTP inside one); a refused link revokes it again.
        let grant = try await apple.grant(code: code, identity: identity, now: service.clock.now())
        let linked = try await service.linkApple(caller, identity: identity, nonce: nonce, grant: grant)
        return try Self.json(AppleLinkBody(linked.link), status: linked.created ? .created : .ok)
    }

    func unlinkApple(_ request: Request, _ context: Context) async throws -> Response {
        _ = try appleSignIn()
        let caller = try await authenticate(request, context)
        _ = try await service.unlinkApple(caller)
        return Response(status: .noContent)
    }

    /// `POST /v1/transfers/apple`: a claim whose way back is the Apple ID. Counted by `--claim-limit`.
    func moveWithApple(_ request: Request, _ context: Context) async throws -> Response {
        let apple = try appleSignIn()
        let body = try await JSONBody.read(request, context: context)
        let token = try body.string("identityToken")
        let nonce = try body.string("nonce")
        let target = try ClaimTarget(body)
        let address = try countClaim(request, context)
        let identity = try await apple.verify(token, nonce: nonce, now: service.clock.now())
        let grant = try await service.moveWithApple(
            AppleMoveRequest(
                identity: identity, nonce: nonce, deviceID: target.deviceID, deviceSecret: target.secret,
                replaceExistingAccount: target.replace, addAccount: target.add),
            clientAddress: address)
        context.log.accountID = grant.account.accountID
        return try await session(grant, status: .ok)
    }

    /// Apple's server-to-server notifications: `200` once verified, also for a `jti` seen before.
    func appleNotification(_ request: Request, _ context: Context) async throws -> Response {
        let apple = try appleSignIn()
        let body = try await JSONBody.read(request, context: context)
        let event = try await apple.notification(try body.string("payload"), now: service.clock.now())
        _ = try await service.handleAppleNotification(event)
        return Response(status: .ok)
    }

    // MARK: Sibling apps

    /// `POST /v1/handoff/codes`: the host app asks for a one-time code for a sibling app.
    func createHandoffCode(_ request: Request, _ context: Context) async throws -> Response {
        _ = try service.handoffPolicy()
        let caller = try await authenticate(request, context)
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
        _ = try service.handoffPolicy()
        let body = try await JSONBody.read(request, context: context)
        let code = try body.string("code")
        let verifier = try body.string("codeVerifier")
        let client = try body.string("clientId")
        let grant = try await service.redeemHandoffCode(
            code: code, verifier: verifier, clientID: client, clientAddress: clientAddress(request, context))
        context.log.accountID = grant.account.accountID
        return try await session(grant, status: .ok)
    }

    func jwks(_ request: Request, _ context: Context) async throws -> Response {
        Self.raw(try tokenBox.tokens.jwksJSON, type: "application/json", cache: "public, max-age=300")
    }

    func ready() async throws -> Response {
        do {
            try await service.store.ping()
            return Self.raw(Array(#"{"status":"ready"}"#.utf8), type: "application/json")
        } catch {
            throw APIError(.serviceUnavailable, "not_ready", "The database does not answer.", headers: [.retryAfter: "5"])
        }
    }

    // MARK: Pieces

    /// An account id (a UUID, any case), lower-case.
    static func accountID(_ text: String, field: String) throws -> String {
        guard let id = DeviceID(text) else { throw APIError.invalidRequest("\(field) must be a UUID.") }
        return id.value
    }

    /// The caller behind the Bearer token. A sibling app's token is accepted only where
    /// `siblings` says so (`GET /v1/me`, logout); elsewhere it gets `403 insufficient_scope`:
    /// those endpoints act on the host app's device or are the host app's decision.
    func authenticate(_ request: Request, _ context: Context, siblings: Bool = false) async throws -> Caller {
        guard let token = Self.bearer(request),
            let claims = await (try tokenBox.tokens).verify(token, now: service.clock.now())
        else { throw TransferError.invalidToken }
        let caller = try await service.authenticate(
            accountID: claims.sub.value, deviceID: claims.did, sessionID: claims.sid, clientID: claims.azp)
        context.log.accountID = caller.accountID
        if caller.clientID != nil && !siblings { throw TransferError.insufficientScope }
        return caller
    }

    /// The app backend calling a service endpoint: `Authorization: Bearer <service key>`.
    func authenticateService(_ request: Request) async throws -> ServiceCaller {
        guard let key = Self.bearer(request) else { throw TransferError.invalidServiceKey }
        return try await service.authenticateService(key: key)
    }

    /// The credential of `Authorization: Bearer …` (the scheme in any case), if the header is one.
    static func bearer(_ request: Request) -> String? {
        guard let header = request.headers[.authorization], header.count < 4096, header.lowercased().hasPrefix("bearer ") else {
            return nil
        }
        return header.dropFirst("bearer ".count).trimmingCharacters(in: .whitespaces)
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

    /// Counts a claim attempt against `--claim-limit`; returns the client address, or throws `429`.
    func countClaim(_ request: Request, _ context: Context) throws -> String {
        let address = clientAddress(request, context)
        if let retry = claimLimiter?.hit(address, now: service.clock.now()) {
            throw APIError.rateLimited(retryAfter: retry)
        }
        return address
    }

    /// The socket peer, or with `--trusted-proxy` the last `X-Forwarded-For` hop.
    func clientAddress(_ request: Request, _ context: Context) -> String {
        if configuration.trustedProxy, let forwarded = request.headers[.xForwardedFor],
            let last = forwarded.split(separator: ",").last?.trimmingCharacters(in: .whitespaces), !last.isEmpty
        {
            return last
        }
        return context.peerAddress ?? "unknown"
    }

    func session(_ grant: SessionGrant, status: HTTPResponse.Status) async throws -> Response {
        let now = service.clock.now()
        let tokens = try tokenBox.tokens
        let access = try tokens.accessToken(for: grant, now: now)
        return try Self.json(
            SessionBody(
                accountId: grant.account.accountID, userName: grant.account.userName, deviceId: grant.deviceID,
                created: grant.created, migrationFlag: grant.account.migrationFlag, accessToken: access,
                tokenType: "Bearer", expiresIn: Int(tokens.accessTTL.components.seconds),
                refreshToken: grant.refreshToken, accounts: grant.accounts.map(AccountJSON.init)),
            status: status)
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        return Response(
            status: status,
            headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func raw(_ bytes: [UInt8], type: String, cache: String = "no-store") -> Response {
        Response(
            status: .ok, headers: [.contentType: type, .cacheControl: cache],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}

/// An optional field written as `null` when absent, where the contract wants every field
/// present (the synthesized `Encodable` leaves a nil optional out).
@propertyWrapper
struct Nullable<Value: Encodable>: Encodable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        if let wrappedValue { try c.encode(wrappedValue) } else { try c.encodeNil() }
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
    var accounts: [AccountJSON]
}

struct AccountJSON: Encodable {
    var accountId: String
    var userName: String
    var current: Bool
    init(_ a: DeviceAccountSummary) {
        accountId = a.accountID
        userName = a.userName
        current = a.current
    }
}

/// `GET /v1/devices/accounts`.
struct DeviceAccountsBody: Encodable {
    struct Account: Encodable {
        var accountId: String
        var userName: String
        var current: Bool
        var addedAt: String
        @Nullable var lastLoginAt: String?
        var pushEnabled: Bool
    }
    var deviceId: String
    var accounts: [Account]

    init(_ device: DeviceRecord) {
        deviceId = device.id
        accounts = device.active.map {
            Account(
                accountId: $0.account.accountID, userName: $0.account.userName, current: $0.account.accountID == device.currentAccountID,
                addedAt: $0.addedAt.rfc3339, lastLoginAt: $0.lastLoginAt?.rfc3339, pushEnabled: $0.pushEnabled)
        }
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

struct HandoffCodeBody: Encodable {
    var code: String
    var expiresIn: Int
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

struct TransferBody: Encodable {
    var email: String
    var expiresAt: String
}

/// `/v1/me`; `transferId` and `transfer` are written as `null` when absent.
struct MeBody: Encodable {
    struct Transfer: Encodable { var email: String; var createdAt: String; var expiresAt: String }
    struct Device: Encodable { var deviceId: String; var boundAt: String; var lastLoginAt: String?; var current: Bool }

    var accountId: String
    var userName: String
    var createdAt: String
    var migrationFlag: Bool
    @Nullable var transferId: String?
    @Nullable var transfer: Transfer?
    var devices: [Device]
    @Nullable var apple: AppleLinkBody?

    init(_ profile: AccountProfile, current: String) {
        accountId = profile.accountID
        userName = profile.userName
        createdAt = profile.createdAt.rfc3339
        migrationFlag = profile.migrationFlag
        transferId = profile.movedToDeviceID
        transfer = profile.transfer.map { Transfer(email: $0.email, createdAt: $0.createdAt.rfc3339, expiresAt: $0.expiresAt.rfc3339) }
        devices = profile.activeDevices.map {
            Device(deviceId: $0.deviceID, boundAt: $0.boundAt.rfc3339, lastLoginAt: $0.lastLoginAt?.rfc3339, current: $0.deviceID == current)
        }
        apple = profile.apple.map { AppleLinkBody($0, withLinkedAt: true) }
    }
}
