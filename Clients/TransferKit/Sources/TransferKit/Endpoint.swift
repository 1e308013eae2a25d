import Foundation

/// An operation of the service that TransferKit calls.
///
/// ``Endpoint/all`` is the single list of them. The package's tests check every entry against
/// the service's `openapi.yaml`: the path and method exist, the request fields are properties of
/// the request schema, the query parameters are declared, and `needsToken` matches the
/// operation's bearer security.
struct Endpoint: Sendable, Equatable, CustomStringConvertible {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    let method: String
    /// The path template as in openapi.yaml, e.g. `/v1/devices/accounts/{accountId}`.
    let path: String
    /// The JSON body fields TransferKit may send.
    let bodyFields: [String]
    /// The query parameters TransferKit may send.
    let queryFields: [String]
    /// Whether the request carries `Authorization: Bearer <accessToken>`.
    let needsToken: Bool
    /// Whether it also carries the device's secret in `X-Device-Secret`: the operations that
    /// change the account's ways back or delete it, which a stolen access token alone must not do.
    let needsDeviceProof: Bool

    init(_ method: String, _ path: String, body: [String] = [], query: [String] = [], token: Bool, deviceProof: Bool = false) {
        self.method = method
        self.path = path
        self.bodyFields = body
        self.queryFields = query
        self.needsToken = token
        self.needsDeviceProof = deviceProof
    }

    var description: String { "\(method) \(path)" }

    static let login = Endpoint(
        "POST", "/v1/devices/login", body: ["deviceId", "deviceSecret", "accountId", "newAccount", "attestation"], token: false)
    static let refresh = Endpoint("POST", "/v1/tokens/refresh", body: ["refreshToken"], token: false)
    static let logout = Endpoint("POST", "/v1/logout", token: true)
    static let me = Endpoint("GET", "/v1/me", token: true)
    static let deleteAccount = Endpoint("DELETE", "/v1/me", token: true, deviceProof: true)
    static let deviceAccounts = Endpoint("GET", "/v1/devices/accounts", token: true)
    static let setCurrentAccount = Endpoint("PUT", "/v1/devices/current-account", body: ["accountId"], token: true)
    static let removeAccount = Endpoint(
        "DELETE", "/v1/devices/accounts/{accountId}", query: ["abandon"], token: true)
    static let setUpTransfer = Endpoint(
        "PUT", "/v1/me/transfer", body: ["method", "email", "temporaryPassword"], token: true, deviceProof: true)
    static let cancelTransfer = Endpoint("DELETE", "/v1/me/transfer", token: true, deviceProof: true)
    static let claimTransfer = Endpoint(
        "POST", "/v1/transfers/claim",
        body: [
            "email", "temporaryPassword", "transferCode", "recoveryCode", "backupKey", "deviceId", "deviceSecret",
            "replaceExistingAccount", "addAccount", "abandonExisting",
        ],
        token: false)
    static let makeRecoveryCode = Endpoint("PUT", "/v1/me/recovery-code", token: true, deviceProof: true)
    static let deleteRecoveryCode = Endpoint("DELETE", "/v1/me/recovery-code", token: true, deviceProof: true)
    static let makeBackupKey = Endpoint("PUT", "/v1/me/backup-key", body: ["store"], token: true, deviceProof: true)
    static let deleteBackupKey = Endpoint("DELETE", "/v1/me/backup-key", query: ["store"], token: true, deviceProof: true)
    static let registerPushToken = Endpoint(
        "PUT", "/v1/devices/push-token", body: ["provider", "token", "environment"], token: true)
    static let removePushToken = Endpoint("DELETE", "/v1/devices/push-token", query: ["provider"], token: true)
    static let setPushPreferences = Endpoint("PUT", "/v1/devices/push-preferences", body: ["mode"], token: true)
    static let setAccountPush = Endpoint("PUT", "/v1/me/push", body: ["enabled"], token: true)
    static let createHandoffCode = Endpoint(
        "POST", "/v1/handoff/codes", body: ["clientId", "codeChallenge", "codeChallengeMethod"], token: true)
    static let redeemHandoff = Endpoint(
        "POST", "/v1/handoff/token", body: ["code", "codeVerifier", "clientId"], token: false)
    static let appleNonce = Endpoint("POST", "/v1/apple/nonce", token: false)
    static let attestationChallenge = Endpoint("POST", "/v1/attestation/challenge", token: false)
    static let linkApple = Endpoint(
        "PUT", "/v1/me/apple", body: ["identityToken", "nonce", "authorizationCode"], token: true, deviceProof: true)
    static let unlinkApple = Endpoint("DELETE", "/v1/me/apple", token: true, deviceProof: true)
    static let claimWithApple = Endpoint(
        "POST", "/v1/transfers/apple",
        body: ["identityToken", "nonce", "deviceId", "deviceSecret", "replaceExistingAccount", "addAccount", "abandonExisting"],
        token: false)

    /// Every operation TransferKit calls.
    static let all: [Endpoint] = [
        login, refresh, logout, me, deleteAccount, deviceAccounts, setCurrentAccount, removeAccount,
        setUpTransfer, cancelTransfer, claimTransfer, makeRecoveryCode, deleteRecoveryCode, makeBackupKey, deleteBackupKey,
        registerPushToken, removePushToken, setPushPreferences, setAccountPush,
        createHandoffCode, redeemHandoff,
        appleNonce, linkApple, unlinkApple, claimWithApple, attestationChallenge,
    ]

    /// The URL of this endpoint under `baseURL`, with `{name}` path parameters filled in.
    func url(baseURL: URL, path parameters: [String: String] = [:], query: [String: String] = [:]) -> URL {
        var path = self.path
        let segment = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))
        for (name, value) in parameters {
            let encoded = value.addingPercentEncoding(withAllowedCharacters: segment) ?? value
            path = path.replacingOccurrences(of: "{\(name)}", with: encoded)
        }
        guard var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false) else {
            preconditionFailure("TransferKit: invalid base URL \(baseURL)")
        }
        var basePath = components.percentEncodedPath
        while basePath.hasSuffix("/") { basePath.removeLast() }
        components.percentEncodedPath = basePath + path
        components.queryItems = query.isEmpty ? nil : query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        guard let url = components.url else { preconditionFailure("TransferKit: cannot build a URL for \(self)") }
        return url
    }
}
