import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_spi(TransferKitTesting) import TransferKit

/// An in-memory stand-in for the device-transfer service, for unit tests and SwiftUI previews of
/// an app without a server: enough of the contract for every flow of ``TransferClient`` and
/// ``SiblingSession`` (devices, several accounts, transfers by password and by code, recovery
/// codes, backup keys and `waysBack`, Sign in with Apple, hand-off, deletion, claims repeated by
/// the device that won them for as long as the account is on it), a log of every request, scripted answers, lost answers
/// (``loseAnswers(to:count:)``), and a check of every request against the operations TransferKit calls.
///
/// ```swift
/// let service = FakeTransferService()
/// let transfer = service.client()          // a TransferClient on in-memory stores
/// _ = try await transfer.launch()           // .signedIn(accountId: …, created: true)
/// service.scriptError("POST /v1/transfers/claim", status: 429, "rate_limited")
/// let offer = try await transfer.setUpTransferCode()
/// service.loseAnswers(to: "POST /v1/transfers/claim")      // the claim wins, its answer is lost
/// try await service.client().claimTransfer(code: offer.code)  // resent: the winner's repeat answers
/// ```
///
/// Its Sign in with Apple accepts identity tokens made by ``identityToken(sub:nonce:)``.
public final class FakeTransferService: @unchecked Sendable {
    /// A request as the service received it.
    public struct Request: Sendable {
        /// `GET`, `POST`, `PUT` or `DELETE`.
        public let method: String
        /// The full URL.
        public let url: URL
        /// The headers, by name as sent.
        public let headers: [String: String]
        /// The body, if any.
        public let body: Data?
    }

    /// A request and the operation it is.
    public struct Recorded: Sendable {
        /// `"POST /v1/devices/login"`: the method and path template.
        public let route: String
        /// The request.
        public let request: Request
        /// The JSON body as an object.
        public var body: [String: Any] {
            guard let body = request.body, let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any]
            else { return [:] }
            return object
        }
        /// The body's field names.
        public var bodyKeys: Set<String> { Set(body.keys) }
        /// The bearer token, if any.
        public var bearer: String? {
            request.headers["Authorization"].map { String($0.dropFirst("Bearer ".count)) }
        }
        /// The query items.
        public var query: [String: String] {
            let items = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            return Dictionary(uniqueKeysWithValues: items.map { ($0.name, $0.value ?? "") })
        }
    }

    private struct Device {
        var secret: String
        var accounts: [String]
        var current: String?
    }

    /// A session's (device, account) pair; a sibling app's session also names its client id.
    private struct Pair: Hashable {
        let device: String
        let account: String
        var client: String? = nil

        var host: Pair { Pair(device: device, account: account) }
    }

    /// A pending transfer: by email and password, or by code (kept as read, as the service keeps its hash).
    private struct PendingTransfer {
        let account: String
        var email: String?
        var password: String?
        var code: String?
        let createdAt: Date
        let expiresAt: Date
    }

    /// A claim that won: the same device repeating the same credentials gets the session again
    /// for as long as the account is on it by that very move (contract v1.3: no time limit).
    private struct Win {
        let device: String
        let secret: String
        let credentials: String
        let account: String
        let at: Date
    }

    private struct HandoffGrant {
        let host: Pair
        let client: String
        let challenge: String
        var used = false
    }

    /// The base URL the fake answers under (any host: requests never leave the process).
    public static let baseURL = URL(string: "https://transfer.test/api")!

    private let lock = NSLock()
    private var devices: [String: Device] = [:]
    private var userNames: [String: String] = [:]
    private var refreshTokens: [String: Pair] = [:]
    private var accessTokens: [String: Pair] = [:]
    /// Pending transfers by account.
    private var transfers: [String: PendingTransfer] = [:]
    /// The transfers not expired yet, by account.
    private var live: [String: PendingTransfer] { transfers.filter { clock.now < $0.value.expiresAt } }
    /// Recovery codes (as read) by account.
    private var recoveryCodes: [String: String] = [:]
    /// Backup keys by account and store (`icloud-keychain`, `block-store`), with when each was made.
    private var backupKeys: [String: [String: (key: String, createdAt: Date)]] = [:]
    private var wins: [Win] = []
    /// Each account's transfer set-ups, for `--setup-limit` (10 an hour).
    private var setUps: [String: [Date]] = [:]
    /// When each account came onto its device, by pair (the fake clock's time).
    private var boundAt: [Pair: Date] = [:]
    private var lostAnswers: [String: Int] = [:]
    private var handoffCodes: [String: HandoffGrant] = [:]
    /// Apple's `sub` → the account linked to it, and the email Apple sent.
    private var appleLinks: [String: (account: String, email: String)] = [:]
    private var appleNonces: Set<String> = []
    private var deleted: Set<String> = []
    /// (device, account) pairs a claim moved away.
    private var moved: Set<Pair> = []
    /// Refresh tokens a refresh replaced, and their session: presented again, they end it (the contract).
    private var rotated: [String: Pair] = [:]
    /// Devices with no account left: never bound again (`409 device_retired`).
    private var retired: Set<String> = []
    /// Attestation challenges issued and not used yet; devices whose attestation passed; each
    /// created-for device's outcome (`verified`, `missing`, `failed: <check>`).
    private var attestationChallenges: Set<String> = []
    private var attestedDevices: Set<String> = []
    private var attestationOutcomes: [String: String] = [:]
    private var mode: AttestationMode = .off
    private var check: @Sendable (_ attestation: [String: String]) -> String? = { _ in nil }
    private var scripted: [String: [Response]] = [:]
    private var recorded: [Recorded] = []
    private var problems: [String] = []
    private var counter = 0

    /// `expiresIn` of every session.
    public let expiresIn = 900
    /// The sibling apps' client ids (`--handoff-clients`).
    public let handoffClients: Set<String>
    private let hooks = Hooks()

    /// The service's time: transfers expire 24 hours after it, accounts are bound to devices at
    /// it (a repeated claim is answered while the account is bound by the winning move). Move it with
    /// ``ManualClock/advance(by:)``. It starts at ``startOfTime`` unless you give one.
    public let clock: ManualClock

    /// When a fake service's clock starts by default: 2026-11-21T12:00:00Z.
    public static let startOfTime = Date(timeIntervalSince1970: 1_795_262_400)

    /// A service whose sibling apps are `handoffClients`.
    public init(handoffClients: Set<String> = ["com.example.news", "com.example.weather"], clock: ManualClock = ManualClock(FakeTransferService.startOfTime)) {
        self.handoffClients = handoffClients
        self.clock = clock
    }

    /// How long a refresh takes.
    public var refreshDelayNanoseconds: UInt64 {
        get { hooks.get { $0.refreshDelay } }
        set { hooks.set { $0.refreshDelay = newValue } }
    }

    /// Runs before each refresh is answered (e.g. to hold it until a test lets it go).
    public var beforeRefresh: (@Sendable () async -> Void)? {
        get { hooks.get { $0.beforeRefresh } }
        set { hooks.set { $0.beforeRefresh = newValue } }
    }

    // MARK: Device attestation (contract v1.2)

    /// The service's `--attestation`: `off` ignores attestations, `monitor` checks and records
    /// them but creates the account whatever the result, `enforce` refuses a creating login
    /// without one (`403 attestation_required`) or with a failing one (`401 invalid_attestation`).
    public enum AttestationMode: Sendable { case off, monitor, enforce }

    /// How the fake treats attestations; `off` by default.
    public var attestationMode: AttestationMode {
        get { locked { mode } }
        set { locked { mode = newValue } }
    }

    /// The fake's stand-in for verifying App Attest and Play Integrity: given the attestation's
    /// fields (`platform`, `challenge`, `keyId`, `attestationObject` or `integrityToken`), nil
    /// when it passes, else the check that failed (the `401`'s message). Before it, the fake
    /// itself checks that the challenge is one it issued and has not been used (every challenge
    /// is used up by its first login, good or bad) and that the platform's fields are there.
    /// Every attestation passes by default.
    public var attestationCheck: @Sendable (_ attestation: [String: String]) -> String? {
        get { locked { check } }
        set { locked { check = newValue } }
    }

    /// What the service recorded of the device's attestation when it created an account for it
    /// (`verified`, `missing`, `failed: <check>`); nil when nothing was created with attestation on.
    public func attestationOutcome(of deviceId: String) -> String? {
        locked { attestationOutcomes[deviceId.lowercased()] }
    }

    // MARK: Looking at what happened

    /// Every request so far, oldest first.
    public var log: [Recorded] { locked { recorded } }
    /// The requests to `route` (`"POST /v1/devices/login"`).
    public func requests(_ route: String) -> [Recorded] { log.filter { $0.route == route } }
    /// How many requests went to `route`.
    public func count(_ route: String) -> Int { requests(route).count }
    /// Requests that TransferKit should not have sent: an operation it does not call, undeclared
    /// body fields or query, a bearer token where none belongs (or none where one does).
    public var violations: [String] { locked { problems } }

    /// The next answer to `route` is this one, before any behaviour.
    public func script(_ route: String, status: Int, _ body: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: body)
        locked { scripted[route, default: []].append(Response(status: status, body: data)) }
    }

    /// The next answer to `route` is the error `code` with `status`.
    public func scriptError(_ route: String, status: Int, _ code: String) {
        script(route, status: status, ["error": code, "message": "Scripted \(code)."])
    }

    /// Whether the account's session on its device (or the sibling app `client`'s) is open: its
    /// refresh token works.
    public func hasOpenSession(_ accountId: String, client: String? = nil) -> Bool {
        locked { refreshTokens.values.contains { $0.account == accountId && $0.client == client } }
    }

    /// The next `count` answers to `route` are lost: each request is handled as usual (a claim
    /// wins, an account is created), then the transport throws `URLError(.networkConnectionLost)`
    /// as if the app had been killed or the network dropped before the answer arrived.
    public func loseAnswers(to route: String, count: Int = 1) {
        locked { lostAnswers[route, default: 0] += count }
    }

    /// Every access token issued so far expires (`401 invalid_token`); refresh tokens still work.
    public func expireAccessTokens() { locked { accessTokens.removeAll() } }

    /// An identity token of the Apple ID `sub` for a Sign in with Apple made with `nonce`
    /// (this fake's format: Apple's are JWTs whose `nonce` claim is the nonce's hex SHA-256).
    public static func identityToken(sub: String, nonce: AppleNonce) -> String { "apple:\(sub):\(nonce.sha256)" }

    /// A client of this service on the given stores, its renewals planned with `clock` (the
    /// service's own ``clock`` when nil), its requests through `network` when given (a
    /// ``SimulatedPhone``'s ``SimulatedPhone/network``, to lose one phone's answers only), its
    /// new accounts attested by `attestation` when given, its backup keys kept in `iCloudKeychain`
    /// (an Apple account's synchronizable items: give the same store to a second phone) unless
    /// `backupKeys` is false.
    public func client(
        keychain: any CredentialStore = MemoryCredentialStore(), appFiles: any CredentialStore = MemoryCredentialStore(),
        clock: ManualClock? = nil, sharesSessions: Bool = false, network: LossyNetwork? = nil,
        attestation: (any AttestationProvider)? = nil, iCloudKeychain: (any SynchronizedStore)? = nil,
        backupKeys: Bool = true
    ) -> TransferClient {
        let clock = clock ?? self.clock
        return TransferClient(
            baseURL: Self.baseURL, credentials: keychain, accountList: appFiles, sharesSessions: sharesSessions,
            transport: network?.wrap(transport, baseURL: Self.baseURL) ?? transport, clock: { clock.now },
            attestation: attestation, synchronizedStore: iCloudKeychain, backupKeys: backupKeys)
    }

    /// A sibling app's session with this service; `sharesSession` when the sibling app's
    /// extensions use the same `keychain`.
    public func sibling(
        clientId: String = "com.example.news", keychain: any CredentialStore = MemoryCredentialStore(),
        clock: ManualClock = ManualClock(), sharesSession: Bool = false
    ) -> SiblingSession {
        SiblingSession(
            baseURL: Self.baseURL, clientId: clientId, credentials: keychain, transport: transport, clock: { clock.now },
            sharesSession: sharesSession)
    }

    // MARK: Transport

    /// The transport to give a ``TransferClient`` or ``SiblingSession`` of `baseURL`.
    public var transport: Transport {
        Transport { [self] urlRequest in
            let request = Request(
                method: urlRequest.httpMethod ?? "GET", url: urlRequest.url!,
                headers: urlRequest.allHTTPHeaderFields ?? [:], body: urlRequest.httpBody)
            let response = try await self.send(request)
            if self.takeLostAnswer(self.check(route: request)) { throw URLError(.networkConnectionLost) }
            let http = HTTPURLResponse(
                url: request.url, statusCode: response.status, httpVersion: "HTTP/1.1", headerFields: response.headers)!
            return (response.body, http)
        }
    }

    private func send(_ request: Request) async throws -> Response {
        let route = check(request)
        if route == "POST /v1/tokens/refresh" {
            if let beforeRefresh { await beforeRefresh() }
            let delay = refreshDelayNanoseconds
            if delay > 0 { try await Task.sleep(nanoseconds: delay) }
        }
        return locked {
            if var queue = scripted[route], !queue.isEmpty {
                let response = queue.removeFirst()
                scripted[route] = queue
                return response
            }
            return handle(route, request)
        }
    }

    private func takeLostAnswer(_ route: String) -> Bool {
        locked {
            guard let left = lostAnswers[route], left > 0 else { return false }
            lostAnswers[route] = left - 1
            return true
        }
    }

    /// The route of a request, without recording it.
    private func check(route request: Request) -> String {
        let path = String(request.url.path.dropFirst(Self.baseURL.path.count))
        return WireContract.route(method: request.method, path: path)?.name ?? "\(request.method) \(path)"
    }

    /// Records the request and checks it against the operations TransferKit calls; returns its route.
    private func check(_ request: Request) -> String {
        let path = String(request.url.path.dropFirst(Self.baseURL.path.count))
        let endpoint = WireContract.route(method: request.method, path: path)
        let route = endpoint?.name ?? "\(request.method) \(path)"
        let entry = Recorded(route: route, request: request)
        locked {
            recorded.append(entry)
            guard let endpoint else { return problems.append("\(route): not an operation TransferKit calls") }
            let extra = entry.bodyKeys.subtracting(endpoint.bodyFields)
            if !extra.isEmpty { problems.append("\(route): undeclared body fields \(extra.sorted())") }
            let extraQuery = Set(entry.query.keys).subtracting(endpoint.queryFields)
            if !extraQuery.isEmpty { problems.append("\(route): undeclared query \(extraQuery.sorted())") }
            if (entry.bearer != nil) != endpoint.needsToken { problems.append("\(route): Authorization header mismatch") }
            if (request.headers["X-Device-Secret"] != nil) != endpoint.needsDeviceProof { problems.append("\(route): X-Device-Secret header mismatch") }
            if request.body != nil && request.headers["Content-Type"] != "application/json" {
                problems.append("\(route): body without Content-Type application/json")
            }
        }
        return route
    }


    // MARK: Behaviour (a small model of the contract)

    private func handle(_ route: String, _ request: Request) -> Response {
        let body = (request.body.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }) ?? [:]
        let caller = request.headers["Authorization"].flatMap { accessTokens[String($0.dropFirst("Bearer ".count))] }
        let path = String(request.url.path.dropFirst(Self.baseURL.path.count))
        if WireContract.route(method: request.method, path: path)?.needsToken == true, caller == nil {
            return error(401, "invalid_token")
        }
        // A sibling's token may only read the account and log out (and refresh, which takes no token).
        if caller?.client != nil && !["POST /v1/logout", "GET /v1/me"].contains(route) {
            return error(403, "insufficient_scope")
        }
        // Changing a way back, or deleting the account, needs the device's secret beside the token.
        if WireContract.route(method: request.method, path: path)?.needsDeviceProof == true,
            let caller, devices[caller.device]?.secret != request.headers["X-Device-Secret"]
        {
            return error(401, "device_proof_required")
        }
        switch route {
        case "POST /v1/devices/login":
            return login(body)
        case "POST /v1/tokens/refresh":
            guard let token = body["refreshToken"] as? String else { return error(401, "invalid_refresh_token") }
            guard let pair = refreshTokens.removeValue(forKey: token) else {
                // A rotated token presented again: the session it belonged to is revoked.
                if let pair = rotated.removeValue(forKey: token) {
                    refreshTokens = refreshTokens.filter { $0.value != pair }
                    accessTokens = accessTokens.filter { $0.value != pair }
                }
                return error(401, "invalid_refresh_token")
            }
            rotated[token] = pair
            return session(pair, created: false, status: 200, rotate: true)
        case "POST /v1/logout":
            // The host's logout also ends the sibling sessions of its pair.
            let pair = caller!
            let ends = { (other: Pair) in other == pair || (pair.client == nil && other.host == pair) }
            refreshTokens = refreshTokens.filter { !ends($0.value) }
            accessTokens = accessTokens.filter { !ends($0.value) }
            return Response(status: 204)
        case "GET /v1/devices/accounts":
            let device = devices[caller!.device]!
            let items: [[String: Any]] = device.accounts.map {
                ["accountId": $0, "userName": userNames[$0]!, "current": $0 == device.current,
                 "addedAt": "2026-11-21T12:00:00Z", "lastLoginAt": NSNull(), "pushEnabled": true]
            }
            return json(200, ["deviceId": caller!.device, "accounts": items])
        case "PUT /v1/devices/current-account":
            let id = body["accountId"] as! String
            guard devices[caller!.device]!.accounts.contains(id) else { return error(403, "account_not_on_device") }
            devices[caller!.device]!.current = id
            return Response(status: 204)
        case "DELETE /v1/devices/accounts/{accountId}":
            let id = String(request.url.lastPathComponent)
            let abandon = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "abandon" }?.value
            guard devices[caller!.device]!.accounts.contains(id) else { return error(403, "account_not_on_device") }
            guard abandon == "true" || hasWayBack(id) else {
                return error(409, "account_would_be_lost")
            }
            takeOff(id, from: caller!.device)
            return Response(status: 204)
        case "PUT /v1/me/transfer":
            return setUpTransfer(body, account: caller!.account)
        case "DELETE /v1/me/transfer":
            transfers[caller!.account] = nil
            return Response(status: 204)
        case "PUT /v1/me/recovery-code":
            let code = Self.randomCode(length: 20)
            recoveryCodes[caller!.account] = code
            // A replaced code is no longer the proof of a repeat.
            wins.removeAll { $0.account == caller!.account && $0.credentials.hasPrefix("recovery:") }
            return json(201, ["recoveryCode": Self.grouped(code), "createdAt": Self.format(clock.now)])
        case "DELETE /v1/me/recovery-code":
            recoveryCodes[caller!.account] = nil
            return Response(status: 204)
        case "PUT /v1/me/backup-key":
            guard let store = body["store"] as? String, Self.backupStores.contains(store) else { return error(400, "invalid_request") }
            let key = Self.randomBackupKey()
            backupKeys[caller!.account, default: [:]][store] = (key, clock.now)
            // A replaced key is no longer the proof of a repeat.
            wins.removeAll { $0.account == caller!.account && $0.credentials.hasPrefix("backup:\(store):") }
            return json(201, ["backupKey": key, "store": store, "createdAt": Self.format(clock.now)])
        case "DELETE /v1/me/backup-key":
            let store = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "store" }?.value
            guard let store, Self.backupStores.contains(store) else { return error(400, "invalid_request") }
            backupKeys[caller!.account]?[store] = nil
            return Response(status: 204)
        case "POST /v1/transfers/claim":
            return claim(body)
        case "POST /v1/handoff/codes":
            return createHandoffCode(body, host: caller!)
        case "POST /v1/handoff/token":
            return redeemHandoff(body)
        case "GET /v1/me":
            return me(caller!)
        case "DELETE /v1/me":
            let account = caller!.account
            takeOff(account, from: caller!.device)
            transfers[account] = nil
            recoveryCodes[account] = nil
            backupKeys[account] = nil
            appleLinks = appleLinks.filter { $0.value.account != account }
            deleted.insert(account)
            return Response(status: 204)
        case "POST /v1/attestation/challenge":
            var generator = SystemRandomNumberGenerator()
            let challenge = Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
                .base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            attestationChallenges.insert(challenge)
            return json(201, ["challenge": challenge, "expiresIn": 300])
        case "POST /v1/apple/nonce":
            let nonce = "nonce-\(newID())"
            appleNonces.insert(nonce)
            return json(201, ["nonce": nonce, "expiresIn": 300])
        case "PUT /v1/me/apple":
            guard let sub = appleSub(body) else { return error(401, "invalid_identity_token") }
            if let link = appleLinks[sub], link.account != caller!.account { return error(409, "apple_id_in_use") }
            let linked = appleLinks[sub] != nil
            appleLinks[sub] = (caller!.account, "\(sub)@privaterelay.appleid.com")
            return json(linked ? 200 : 201, ["email": appleLinks[sub]!.email, "isPrivateEmail": true])
        case "DELETE /v1/me/apple":
            appleLinks = appleLinks.filter { $0.value.account != caller!.account }
            return Response(status: 204)
        case "POST /v1/transfers/apple":
            guard let sub = appleSub(body) else { return error(401, "invalid_identity_token") }
            guard let link = appleLinks[sub] else { return error(404, "apple_id_not_linked") }
            if let repeated = repeatedClaim(body, credentials: "apple:\(sub)") { return repeated }
            let response = move(link.account, onto: body)
            if response.isSuccess {
                transfers[link.account] = nil
                won(body, credentials: "apple:\(sub)", account: link.account)
            }
            return response
        default:  // push endpoints
            return Response(status: 204)
        }
    }

    private func login(_ body: [String: Any]) -> Response {
        let deviceId = (body["deviceId"] as! String).lowercased(), secret = body["deviceSecret"] as! String
        let accountId = body["accountId"] as? String, newAccount = body["newAccount"] as? Bool ?? false
        // As the service: a malformed attestation is a 400 on every login, in every mode.
        if let malformed = Self.malformedAttestation(body["attestation"]) { return json(400, ["error": "invalid_request", "message": malformed]) }
        guard var device = devices[deviceId] else {
            if accountId != nil { return error(403, "account_not_on_device") }
            if let refused = attestationGate(body, device: deviceId, adding: false) { return refused }
            let id = newID()
            userNames[id] = deviceId
            devices[deviceId] = Device(secret: secret, accounts: [id], current: id)
            return session(Pair(device: deviceId, account: id), created: true, status: 201)
        }
        guard device.secret == secret else { return error(401, "invalid_device_credentials") }
        if let accountId {
            if deleted.contains(accountId) { return error(410, "account_deleted") }
            guard device.accounts.contains(accountId) else { return notOnDevice(Pair(device: deviceId, account: accountId)) }
            return session(Pair(device: deviceId, account: accountId), created: false, status: 200)
        }
        if newAccount {
            if let refused = attestationGate(body, device: deviceId, adding: true) { return refused }
            let id = newID()
            userNames[id] = id
            device.accounts.append(id)
            device.current = id
            devices[deviceId] = device
            return session(Pair(device: deviceId, account: id), created: true, status: 201)
        }
        guard let current = device.current else { return error(403, "account_not_on_device") }
        guard device.accounts.contains(current) else { return notOnDevice(Pair(device: deviceId, account: current)) }
        return session(Pair(device: deviceId, account: current), created: false, status: 200)
    }

    /// Why a login's `attestation` is malformed (the service's `400 invalid_request`), or nil:
    /// absent or null, or an object with a known `platform`, a `challenge` and its platform's
    /// fields, each a non-empty string.
    private static func malformedAttestation(_ value: Any?) -> String? {
        guard let value, !(value is NSNull) else { return nil }
        guard let attestation = value as? [String: Any] else { return "attestation must be an object." }
        let needed: [String]
        switch attestation["platform"] as? String {
        case "apple": needed = ["challenge", "keyId", "attestationObject"]
        case "android": needed = ["challenge", "integrityToken"]
        default: return "attestation.platform must be apple or android."
        }
        for name in needed where ((attestation[name] as? String) ?? "").isEmpty {
            return "attestation.\(name) must be a non-empty string."
        }
        return nil
    }

    /// The contract's gate for a login that creates an account (an unknown device, or `adding`
    /// one with `newAccount`): nil lets it through (and records the outcome), else the refusal.
    /// A challenge is used up by its first login, good or bad; a device verified once adds
    /// accounts without a new attestation.
    private func attestationGate(_ body: [String: Any], device: String, adding: Bool) -> Response? {
        guard mode != .off, !(adding && attestedDevices.contains(device)) else { return nil }
        let outcome: String
        if let attestation = body["attestation"] as? [String: Any] {  // well-formed: `login` checked it
            let fields = attestation.compactMapValues { $0 as? String }
            if let challenge = fields["challenge"], attestationChallenges.remove(challenge) != nil {
                outcome = check(fields).map { "failed: \($0)" } ?? "verified"
            } else {
                outcome = "failed: challenge"
            }
        } else {
            outcome = "missing"
        }
        if mode == .enforce {
            if outcome == "missing" { return error(403, "attestation_required") }
            if outcome != "verified" {
                return json(401, ["error": "invalid_attestation", "message": String(outcome.dropFirst("failed: ".count))])
            }
        }
        if outcome == "verified" { attestedDevices.insert(device) }
        attestationOutcomes[device] = outcome
        return nil
    }

    /// `410 device_transferred` (with the accounts left) for a moved account, else `403`.
    private func notOnDevice(_ pair: Pair) -> Response {
        guard moved.contains(pair) else { return error(403, "account_not_on_device") }
        let device = devices[pair.device]!
        return json(410, [
            "error": "device_transferred", "message": "Fake device_transferred.", "transferredAt": "2026-11-21T13:00:00Z",
            "accounts": device.accounts.map { ["accountId": $0, "userName": userNames[$0]!, "current": false] },
        ])
    }

    private func setUpTransfer(_ body: [String: Any], account: String) -> Response {
        let method = body["method"] as? String ?? "password"
        let createdAt = clock.now, expiresAt = clock.now.addingTimeInterval(24 * 3600)
        let recent = (setUps[account] ?? []).filter { createdAt.timeIntervalSince($0) < 3600 }
        if recent.count >= 10 {
            let wait = max(1, Int((3600 - createdAt.timeIntervalSince(recent[0])).rounded(.up)))
            var limited = error(429, "rate_limited")
            limited.headers["retry-after"] = String(wait)
            return limited
        }
        setUps[account] = recent + [createdAt]
        switch method {
        case "code":
            guard body["email"] == nil, body["temporaryPassword"] == nil else { return error(400, "invalid_request") }
            let code = Self.randomCode(length: 16)
            transfers[account] = PendingTransfer(account: account, code: code, createdAt: createdAt, expiresAt: expiresAt)
            return json(201, ["transferCode": Self.grouped(code), "expiresAt": Self.format(expiresAt)])
        case "password":
            guard let email = body["email"] as? String, let password = body["temporaryPassword"] as? String else {
                return error(400, "invalid_request")
            }
            if live.values.contains(where: { $0.account != account && $0.email?.lowercased() == email.lowercased() }) {
                return error(409, "email_in_use")
            }
            transfers[account] = PendingTransfer(
                account: account, email: email, password: password, createdAt: createdAt, expiresAt: expiresAt)
            return json(201, ["email": email, "expiresAt": Self.format(expiresAt)])
        default:
            return error(400, "invalid_request")
        }
    }

    /// A claim by email and password, transfer code, recovery code, or backup key.
    private func claim(_ body: [String: Any]) -> Response {
        let email = body["email"] as? String, password = body["temporaryPassword"] as? String
        let code = body["transferCode"] as? String, recovery = body["recoveryCode"] as? String
        let backupKey = body["backupKey"] as? String
        let account: String?, credentials: String
        var usedStore: String?
        if let backupKey {
            guard email == nil, password == nil, code == nil, recovery == nil else { return error(400, "invalid_request") }
            let found = backupKeys.lazy.flatMap { entry in entry.value.map { (account: entry.key, store: $0.key, key: $0.value.key) } }
                .first { $0.key == backupKey }
            usedStore = found?.store
            credentials = "backup:\(found?.store ?? "-"):\(backupKey)"
            account = found?.account
            if found == nil {
                // A used key stays the winner's repeat until it is replaced.
                let repeated = wins.last { $0.credentials.hasSuffix(":\(backupKey)") && $0.credentials.hasPrefix("backup:") }
                return repeatedClaim(body, credentials: repeated?.credentials ?? credentials) ?? error(401, "invalid_transfer_credentials")
            }
        } else if let recovery {
            guard email == nil, password == nil, code == nil else { return error(400, "invalid_request") }
            let read = Self.read(recovery, length: 20)
            credentials = "recovery:\(read ?? recovery)"
            account = recoveryCodes.first { $0.value == read }?.key
        } else if let code {
            guard email == nil, password == nil else { return error(400, "invalid_request") }
            let read = Self.read(code, length: 16)
            credentials = "code:\(read ?? code)"
            account = live.values.first { $0.code != nil && $0.code == read }?.account
        } else {
            guard let email, let password else { return error(400, "invalid_request") }
            credentials = "password:\(email.lowercased()):\(password)"
            account = live.values.first { $0.email?.lowercased() == email.lowercased() && $0.password == password }?.account
        }
        guard let account else {
            return repeatedClaim(body, credentials: credentials) ?? error(401, "invalid_transfer_credentials")
        }
        let response = move(account, onto: body)
        if response.isSuccess {
            transfers[account] = nil
            if recovery != nil { recoveryCodes[account] = nil }
            if let usedStore { backupKeys[account]?[usedStore] = nil }
            won(body, credentials: credentials, account: account)
        }
        return response
    }

    private func won(_ body: [String: Any], credentials: String, account: String) {
        wins.append(Win(
            device: (body["deviceId"] as! String).lowercased(), secret: body["deviceSecret"] as! String,
            credentials: credentials, account: account, at: clock.now))
    }

    /// The session again for the device that won a claim with these credentials, if the account
    /// is still on it by that very move (no time limit, contract v1.3); nil otherwise.
    private func repeatedClaim(_ body: [String: Any], credentials: String) -> Response? {
        let device = (body["deviceId"] as? String)?.lowercased(), secret = body["deviceSecret"] as? String
        guard let win = wins.last(where: { $0.device == device && $0.secret == secret && $0.credentials == credentials }),
            devices[win.device]?.accounts.contains(win.account) == true,
            boundAt[Pair(device: win.device, account: win.account)] == win.at
        else { return nil }
        return session(Pair(device: win.device, account: win.account), created: false, status: 200)
    }

    /// A code as the service reads it: case-insensitive, spaces and hyphens ignored, I/L → 1, O → 0.
    static func read(_ typed: String, length: Int) -> String? {
        let alphabet = Set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        var result = ""
        for character in typed.uppercased() where character != " " && character != "-" {
            let read: Character = character == "I" || character == "L" ? "1" : character == "O" ? "0" : character
            guard alphabet.contains(read) else { return nil }
            result.append(read)
        }
        return result.count == length ? result : nil
    }

    static func randomCode(length: Int) -> String {
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        return String((0..<length).map { _ in alphabet.randomElement()! })
    }

    static func grouped(_ code: String) -> String {
        stride(from: 0, to: code.count, by: 4).map { start in
            let from = code.index(code.startIndex, offsetBy: start)
            return String(code[from..<code.index(from, offsetBy: 4)])
        }.joined(separator: "-")
    }

    static func format(_ date: Date) -> String { date.formatted(.iso8601) }

    /// The device part of a claim (by password or Apple ID): the account moves onto the body's device.
    private func move(_ account: String, onto body: [String: Any]) -> Response {
        let deviceId = (body["deviceId"] as! String).lowercased(), secret = body["deviceSecret"] as! String
        let replace = body["replaceExistingAccount"] as? Bool ?? false, add = body["addAccount"] as? Bool ?? false
        let abandon = body["abandonExisting"] as? Bool ?? false
        if replace && add || abandon && !replace { return error(400, "invalid_request") }
        var device = devices[deviceId] ?? Device(secret: secret, accounts: [], current: nil)
        if retired.contains(deviceId) { return error(409, "device_retired") }  // before the secret, as the service
        guard device.secret == secret else { return error(401, "invalid_device_credentials") }
        if device.accounts.contains(account) { return error(409, "device_already_bound") }
        if !device.accounts.isEmpty && !replace && !add { return error(409, "device_has_account") }
        // This phone is the only one of its accounts: one with no way back would be stranded.
        if replace && !abandon && !device.accounts.allSatisfy(hasWayBack) { return error(409, "account_would_be_lost") }
        for (id, old) in devices where old.accounts.contains(account) {
            takeOff(account, from: id, movedAway: true)
        }
        if replace {
            for id in device.accounts { takeOff(id, from: deviceId) }
            device.accounts = []
        }
        device.accounts.append(account)
        device.current = account
        devices[deviceId] = device
        boundAt[Pair(device: deviceId, account: account)] = clock.now
        return session(Pair(device: deviceId, account: account), created: false, status: 200)
    }

    private func me(_ caller: Pair) -> Response {
        let account = caller.account
        let transfer = live[account].map { pending -> [String: Any] in
            var transfer: [String: Any] = [
                "method": pending.code == nil ? "password" : "code",
                "createdAt": Self.format(pending.createdAt), "expiresAt": Self.format(pending.expiresAt),
            ]
            if let email = pending.email { transfer["email"] = email }  // absent for a code
            return transfer
        }
        let link = appleLinks.first { $0.value.account == account }.map {
            ["email": $0.value.email, "isPrivateEmail": true, "linkedAt": "2026-11-21T12:30:00Z"] as [String: Any]
        }
        let onDevices = devices.filter { $0.value.accounts.contains(account) }.map {
            let bound = boundAt[Pair(device: $0.key, account: account)] ?? clock.now
            return ["deviceId": $0.key, "boundAt": Self.format(bound), "current": $0.key == caller.device] as [String: Any]
        }
        return json(200, [
            "accountId": account, "userName": userNames[account]!, "createdAt": "2026-11-21T12:00:00Z",
            "migrationFlag": transfer != nil, "transferId": NSNull(), "transfer": transfer ?? NSNull(),
            "devices": onDevices, "apple": link ?? NSNull(),
            "waysBack": [
                transfer.map { _ in "transfer" }, link.map { _ in "apple" }, recoveryCodes[account].map { _ in "recoveryCode" },
                (backupKeys[account]?.isEmpty ?? true) ? nil : "backupKey",
            ].compactMap { $0 },
            "backupKeys": (backupKeys[account] ?? [:]).sorted { $0.key < $1.key }.map {
                ["store": $0.key, "createdAt": Self.format($0.value.createdAt)] as [String: Any]
            },
        ])
    }

    /// The Apple `sub` of the body's identity token, when its nonce is one this server issued
    /// (used up here) and the token carries its SHA-256; nil: `invalid_identity_token`.
    private func appleSub(_ body: [String: Any]) -> String? {
        guard let nonce = body["nonce"] as? String, appleNonces.remove(nonce) != nil,
            let parts = (body["identityToken"] as? String)?.split(separator: ":"), parts.count == 3, parts[0] == "apple",
            parts[2] == AppleNonce(value: nonce, expiresIn: 0).sha256
        else { return nil }
        return String(parts[1])
    }

    private func createHandoffCode(_ body: [String: Any], host: Pair) -> Response {
        guard let client = body["clientId"] as? String, let challenge = body["codeChallenge"] as? String,
            body["codeChallengeMethod"] as? String == "S256", challenge.count == 43
        else { return error(400, "invalid_request") }
        guard handoffClients.contains(client) else { return error(403, "unknown_client") }
        let code = "hc-\(newID())"
        handoffCodes[code] = HandoffGrant(host: host, client: client, challenge: challenge)
        return json(201, ["code": code, "expiresIn": 60])
    }

    /// One `invalid_grant` for every failure; a used code presented again with its verifier
    /// ends the session its first redemption opened.
    private func redeemHandoff(_ body: [String: Any]) -> Response {
        guard let code = body["code"] as? String, let verifier = body["codeVerifier"] as? String,
            let client = body["clientId"] as? String
        else { return error(400, "invalid_request") }
        guard let grant = handoffCodes[code], grant.client == client, WireContract.pkceChallenge(for: verifier) == grant.challenge,
            devices[grant.host.device]?.accounts.contains(grant.host.account) == true
        else { return error(400, "invalid_grant") }
        let sibling = Pair(device: grant.host.device, account: grant.host.account, client: client)
        if grant.used {
            refreshTokens = refreshTokens.filter { $0.value != sibling }
            accessTokens = accessTokens.filter { $0.value != sibling }
            return error(400, "invalid_grant")
        }
        handoffCodes[code]!.used = true
        accessTokens = accessTokens.filter { $0.value != sibling }  // a later hand-off replaces the session
        return session(sibling, created: false, status: 200, rotate: true)
    }

    /// What would bring the account back once it leaves its phone: a pending transfer, a
    /// linked Apple ID, an unused recovery code, an unused backup key.
    private func hasWayBack(_ account: String) -> Bool {
        live[account] != nil || appleLinks.values.contains { $0.account == account } || recoveryCodes[account] != nil
            || !(backupKeys[account]?.isEmpty ?? true)
    }

    static let backupStores: Set<String> = ["icloud-keychain", "block-store"]

    /// 256 random bits as 43 base64url characters.
    static func randomBackupKey() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// A moved account stays its old device's current one (the plain login keeps answering 410).
    private func takeOff(_ account: String, from deviceId: String, movedAway: Bool = false) {
        devices[deviceId]!.accounts.removeAll { $0 == account }
        if devices[deviceId]!.accounts.isEmpty { retired.insert(deviceId) }
        if movedAway {
            moved.insert(Pair(device: deviceId, account: account))
        } else if devices[deviceId]!.current == account {
            devices[deviceId]!.current = devices[deviceId]!.accounts.last
        }
        refreshTokens = refreshTokens.filter { $0.value.account != account }
        accessTokens = accessTokens.filter { $0.value.account != account }
    }

    /// A session of `pair`: a new access token, and the session's refresh token. Only a refresh
    /// rotates it (the contract); a login or claim of an open session returns the current one.
    private func session(_ pair: Pair, created: Bool, status: Int, rotate: Bool = false) -> Response {
        if boundAt[pair.host] == nil { boundAt[pair.host] = clock.now }
        let access = "at-\(newID())"
        accessTokens[access] = pair
        let open = refreshTokens.first { $0.value == pair }?.key
        let refresh = (rotate ? nil : open) ?? "rt-\(newID())"
        refreshTokens = refreshTokens.filter { $0.value != pair }
        refreshTokens[refresh] = pair
        let device = devices[pair.device]!
        // A sibling's session lists only its account.
        let accounts = pair.client == nil ? device.accounts : [pair.account]
        return json(status, [
            "accountId": pair.account, "userName": userNames[pair.account]!, "deviceId": pair.device,
            "created": created, "migrationFlag": false, "accessToken": access, "tokenType": "Bearer",
            "expiresIn": expiresIn, "refreshToken": refresh,
            "accounts": accounts.map {
                ["accountId": $0, "userName": userNames[$0]!, "current": $0 == device.current || pair.client != nil]
            },
        ])
    }

    private func newID() -> String {
        counter += 1
        return String(format: "00000000-0000-4000-8000-%012d", counter)
    }

    private func json(_ status: Int, _ object: [String: Any]) -> Response {
        Response(status: status, headers: ["content-type": "application/json"], body: try! JSONSerialization.data(withJSONObject: object))
    }

    private func error(_ status: Int, _ code: String) -> Response {
        json(status, ["error": code, "message": "Fake \(code)."])
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}


extension FakeTransferService {
    /// One answer.
    struct Response {
        var status: Int
        var headers: [String: String] = [:]
        var body: Data = Data()
        var isSuccess: Bool { (200..<300).contains(status) }
    }

    /// Settings a test changes while requests run.
    final class Hooks: @unchecked Sendable {
        struct Values {
            var refreshDelay: UInt64 = 0
            var beforeRefresh: (@Sendable () async -> Void)?
        }
        private let lock = NSLock()
        private var values = Values()
        func get<T>(_ read: (Values) -> T) -> T {
            lock.lock()
            defer { lock.unlock() }
            return read(values)
        }
        func set(_ change: (inout Values) -> Void) {
            lock.lock()
            change(&values)
            lock.unlock()
        }
    }
}
