import Foundation
@_spi(TransferKitTesting) @testable import TransferKit

/// An in-process stand-in for the service: enough of its behaviour for the client's flows, a log
/// of every request, scripted answers, and a check of every request against `Endpoint.all`.
final class FakeServer: HTTPTransport, @unchecked Sendable {
    struct Recorded: Sendable {
        let route: String  // "POST /v1/devices/login" (the path template)
        let request: HTTPRequest
        /// The JSON body as an object.
        var body: [String: Any] {
            guard let body = request.body, let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any]
            else { return [:] }
            return object
        }
        var bodyKeys: Set<String> { Set(body.keys) }
        var bearer: String? {
            request.headers["Authorization"].map { String($0.dropFirst("Bearer ".count)) }
        }
        var query: [String: String] {
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

    private struct HandoffGrant {
        let host: Pair
        let client: String
        let challenge: String
        var used = false
    }

    static let baseURL = URL(string: "https://transfer.test/api")!

    private let lock = NSLock()
    private var devices: [String: Device] = [:]
    private var userNames: [String: String] = [:]
    private var refreshTokens: [String: Pair] = [:]
    private var accessTokens: [String: Pair] = [:]
    private var transfers: [String: (account: String, password: String)] = [:]
    private var handoffCodes: [String: HandoffGrant] = [:]
    /// Apple's `sub` → the account linked to it, and the email Apple sent.
    private var appleLinks: [String: (account: String, email: String)] = [:]
    private var appleNonces: Set<String> = []
    private var deleted: Set<String> = []
    /// (device, account) pairs a claim moved away.
    private var moved: Set<Pair> = []
    private var scripted: [String: [HTTPResponse]] = [:]
    private var recorded: [Recorded] = []
    private var problems: [String] = []
    private var counter = 0

    /// `expiresIn` of every session.
    let expiresIn = 900
    /// The sibling apps' client ids (`--handoff-clients`).
    let handoffClients: Set<String> = ["com.example.news", "com.example.weather"]
    /// How long a refresh takes.
    var refreshDelayNanoseconds: UInt64 = 0
    /// When set, refreshes wait until it opens.
    var refreshGate: Gate?

    // MARK: Looking at what happened

    var log: [Recorded] { locked { recorded } }
    func requests(_ route: String) -> [Recorded] { log.filter { $0.route == route } }
    func count(_ route: String) -> Int { requests(route).count }
    /// Requests that do not match `Endpoint.all` (route, body fields, query, token).
    var violations: [String] { locked { problems } }

    /// The next answer to `route` is this one, before any behaviour.
    func script(_ route: String, status: Int, _ body: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: body)
        locked { scripted[route, default: []].append(HTTPResponse(status: status, body: data)) }
    }

    func scriptError(_ route: String, status: Int, _ code: String) {
        script(route, status: status, ["error": code, "message": "Scripted \(code)."])
    }

    /// Whether the account's session on its device (or the sibling app `client`'s) is open: its
    /// refresh token works.
    func hasOpenSession(_ accountId: String, client: String? = nil) -> Bool {
        locked { refreshTokens.values.contains { $0.account == accountId && $0.client == client } }
    }

    /// Every access token issued so far expires (`401 invalid_token`); refresh tokens still work.
    func expireAccessTokens() { locked { accessTokens.removeAll() } }

    /// An identity token of the Apple ID `sub` for a Sign in with Apple made with `nonce`
    /// (this fake's format: Apple's are JWTs whose `nonce` claim is the nonce's hex SHA-256).
    static func identityToken(sub: String, nonce: AppleNonce) -> String { "apple:\(sub):\(nonce.sha256)" }

    func client(
        keychain: any CredentialStore = MemoryCredentialStore(), appFiles: any CredentialStore = MemoryCredentialStore(),
        clock: TestClock = TestClock()
    ) -> TransferClient {
        TransferClient(baseURL: Self.baseURL, credentials: keychain, accountList: appFiles, transport: self, now: { clock.now })
    }

    func sibling(
        clientId: String = "com.example.news", keychain: any CredentialStore = MemoryCredentialStore(),
        clock: TestClock = TestClock()
    ) -> SiblingSession {
        SiblingSession(baseURL: Self.baseURL, clientId: clientId, credentials: keychain, transport: self, now: { clock.now })
    }

    // MARK: HTTPTransport

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let route = check(request)
        if route == Endpoint.refresh.description {
            if let refreshGate { await refreshGate.pass() }
            if refreshDelayNanoseconds > 0 { try await Task.sleep(nanoseconds: refreshDelayNanoseconds) }
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

    /// Records the request and checks it against `Endpoint.all`; returns its route.
    private func check(_ request: HTTPRequest) -> String {
        let path = String(request.url.path.dropFirst(Self.baseURL.path.count))
        let endpoint = Endpoint.all.first { $0.method == request.method && Self.matches(template: $0.path, path: path) }
        let route = endpoint?.description ?? "\(request.method) \(path)"
        let entry = Recorded(route: route, request: request)
        locked {
            recorded.append(entry)
            guard let endpoint else { return problems.append("\(route): not in Endpoint.all") }
            let extra = entry.bodyKeys.subtracting(endpoint.bodyFields)
            if !extra.isEmpty { problems.append("\(route): undeclared body fields \(extra.sorted())") }
            let extraQuery = Set(entry.query.keys).subtracting(endpoint.queryFields)
            if !extraQuery.isEmpty { problems.append("\(route): undeclared query \(extraQuery.sorted())") }
            if (entry.bearer != nil) != endpoint.needsToken { problems.append("\(route): Authorization header mismatch") }
            if request.body != nil && request.headers["Content-Type"] != "application/json" {
                problems.append("\(route): body without Content-Type application/json")
            }
        }
        return route
    }

    static func matches(template: String, path: String) -> Bool {
        let a = template.split(separator: "/"), b = path.split(separator: "/")
        return a.count == b.count && zip(a, b).allSatisfy { $0.hasPrefix("{") || $0 == $1 }
    }

    // MARK: Behaviour (a small model of the contract)

    private func handle(_ route: String, _ request: HTTPRequest) -> HTTPResponse {
        let body = (request.body.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }) ?? [:]
        let caller = request.headers["Authorization"].flatMap { accessTokens[String($0.dropFirst("Bearer ".count))] }
        if Endpoint.all.first(where: { $0.description == route })?.needsToken == true, caller == nil {
            return error(401, "invalid_token")
        }
        // A sibling's token may only read the account and log out (and refresh, which takes no token).
        if caller?.client != nil && ![Endpoint.logout.description, Endpoint.me.description].contains(route) {
            return error(403, "insufficient_scope")
        }
        switch route {
        case Endpoint.login.description:
            return login(body)
        case Endpoint.refresh.description:
            guard let token = body["refreshToken"] as? String, let pair = refreshTokens.removeValue(forKey: token) else {
                return error(401, "invalid_refresh_token")
            }
            return session(pair, created: false, status: 200, rotate: true)
        case Endpoint.logout.description:
            // The host's logout also ends the sibling sessions of its pair.
            let pair = caller!
            let ends = { (other: Pair) in other == pair || (pair.client == nil && other.host == pair) }
            refreshTokens = refreshTokens.filter { !ends($0.value) }
            accessTokens = accessTokens.filter { !ends($0.value) }
            return HTTPResponse(status: 204)
        case Endpoint.deviceAccounts.description:
            let device = devices[caller!.device]!
            let items: [[String: Any]] = device.accounts.map {
                ["accountId": $0, "userName": userNames[$0]!, "current": $0 == device.current,
                 "addedAt": "2026-11-21T12:00:00Z", "lastLoginAt": NSNull(), "pushEnabled": true]
            }
            return json(200, ["deviceId": caller!.device, "accounts": items])
        case Endpoint.setCurrentAccount.description:
            let id = body["accountId"] as! String
            guard devices[caller!.device]!.accounts.contains(id) else { return error(403, "account_not_on_device") }
            devices[caller!.device]!.current = id
            return HTTPResponse(status: 204)
        case Endpoint.removeAccount.description:
            let id = String(request.url.lastPathComponent)
            let abandon = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "abandon" }?.value
            guard devices[caller!.device]!.accounts.contains(id) else { return error(403, "account_not_on_device") }
            let wayBack = transfers.values.contains { $0.account == id } || appleLinks.values.contains { $0.account == id }
            guard abandon == "true" || wayBack else {
                return error(409, "account_would_be_lost")
            }
            takeOff(id, from: caller!.device)
            return HTTPResponse(status: 204)
        case Endpoint.setUpTransfer.description:
            let email = body["email"] as! String
            transfers = transfers.filter { $0.value.account != caller!.account }
            transfers[email] = (caller!.account, body["temporaryPassword"] as! String)
            return json(201, ["email": email, "expiresAt": "2026-11-22T12:00:00Z"])
        case Endpoint.cancelTransfer.description:
            transfers = transfers.filter { $0.value.account != caller!.account }
            return HTTPResponse(status: 204)
        case Endpoint.claimTransfer.description:
            return claim(body)
        case Endpoint.createHandoffCode.description:
            return createHandoffCode(body, host: caller!)
        case Endpoint.redeemHandoff.description:
            return redeemHandoff(body)
        case Endpoint.me.description:
            return me(caller!)
        case Endpoint.deleteAccount.description:
            let account = caller!.account
            takeOff(account, from: caller!.device)
            transfers = transfers.filter { $0.value.account != account }
            appleLinks = appleLinks.filter { $0.value.account != account }
            deleted.insert(account)
            return HTTPResponse(status: 204)
        case Endpoint.appleNonce.description:
            let nonce = "nonce-\(newID())"
            appleNonces.insert(nonce)
            return json(201, ["nonce": nonce, "expiresIn": 300])
        case Endpoint.linkApple.description:
            guard let sub = appleSub(body) else { return error(401, "invalid_identity_token") }
            if let link = appleLinks[sub], link.account != caller!.account { return error(409, "apple_id_in_use") }
            let linked = appleLinks[sub] != nil
            appleLinks[sub] = (caller!.account, "\(sub)@privaterelay.appleid.com")
            return json(linked ? 200 : 201, ["email": appleLinks[sub]!.email, "isPrivateEmail": true])
        case Endpoint.unlinkApple.description:
            appleLinks = appleLinks.filter { $0.value.account != caller!.account }
            return HTTPResponse(status: 204)
        case Endpoint.claimWithApple.description:
            guard let sub = appleSub(body) else { return error(401, "invalid_identity_token") }
            guard let link = appleLinks[sub] else { return error(404, "apple_id_not_linked") }
            let response = move(link.account, onto: body)
            if response.isSuccess { transfers = transfers.filter { $0.value.account != link.account } }
            return response
        default:  // push endpoints
            return HTTPResponse(status: 204)
        }
    }

    private func login(_ body: [String: Any]) -> HTTPResponse {
        let deviceId = (body["deviceId"] as! String).lowercased(), secret = body["deviceSecret"] as! String
        let accountId = body["accountId"] as? String, newAccount = body["newAccount"] as? Bool ?? false
        guard var device = devices[deviceId] else {
            if accountId != nil { return error(403, "account_not_on_device") }
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

    /// `410 device_transferred` (with the accounts left) for a moved account, else `403`.
    private func notOnDevice(_ pair: Pair) -> HTTPResponse {
        guard moved.contains(pair) else { return error(403, "account_not_on_device") }
        let device = devices[pair.device]!
        return json(410, [
            "error": "device_transferred", "message": "Fake device_transferred.", "transferredAt": "2026-11-21T13:00:00Z",
            "accounts": device.accounts.map { ["accountId": $0, "userName": userNames[$0]!, "current": false] },
        ])
    }

    private func claim(_ body: [String: Any]) -> HTTPResponse {
        let email = body["email"] as! String, password = body["temporaryPassword"] as! String
        guard let transfer = transfers[email], transfer.password == password else {
            return error(401, "invalid_transfer_credentials")
        }
        let response = move(transfer.account, onto: body)
        if response.isSuccess { transfers[email] = nil }
        return response
    }

    /// The device part of a claim (by password or Apple ID): the account moves onto the body's device.
    private func move(_ account: String, onto body: [String: Any]) -> HTTPResponse {
        let deviceId = (body["deviceId"] as! String).lowercased(), secret = body["deviceSecret"] as! String
        let replace = body["replaceExistingAccount"] as? Bool ?? false, add = body["addAccount"] as? Bool ?? false
        if replace && add { return error(400, "invalid_request") }
        var device = devices[deviceId] ?? Device(secret: secret, accounts: [], current: nil)
        guard device.secret == secret else { return error(401, "invalid_device_credentials") }
        if device.accounts.contains(account) { return error(409, "device_already_bound") }
        if !device.accounts.isEmpty && !replace && !add { return error(409, "device_has_account") }
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
        return session(Pair(device: deviceId, account: account), created: false, status: 200)
    }

    private func me(_ caller: Pair) -> HTTPResponse {
        let account = caller.account
        let transfer = transfers.first { $0.value.account == account }.map {
            ["email": $0.key, "createdAt": "2026-11-21T12:00:00Z", "expiresAt": "2026-11-22T12:00:00Z"] as [String: Any]
        }
        let link = appleLinks.first { $0.value.account == account }.map {
            ["email": $0.value.email, "isPrivateEmail": true, "linkedAt": "2026-11-21T12:30:00Z"] as [String: Any]
        }
        let onDevices = devices.filter { $0.value.accounts.contains(account) }.map {
            ["deviceId": $0.key, "boundAt": "2026-11-21T12:00:00Z", "current": $0.key == caller.device] as [String: Any]
        }
        return json(200, [
            "accountId": account, "userName": userNames[account]!, "createdAt": "2026-11-21T12:00:00Z",
            "migrationFlag": transfer != nil, "transferId": NSNull(), "transfer": transfer ?? NSNull(),
            "devices": onDevices, "apple": link ?? NSNull(),
        ])
    }

    /// The Apple `sub` of the body's identity token, when its nonce is one this server issued
    /// (used up here) and the token carries its SHA-256; nil: `invalid_identity_token`.
    private func appleSub(_ body: [String: Any]) -> String? {
        guard let nonce = body["nonce"] as? String, appleNonces.remove(nonce) != nil,
            let parts = (body["identityToken"] as? String)?.split(separator: ":"), parts.count == 3, parts[0] == "apple",
            parts[2] == Hex.encode(SHA256.hash(nonce.utf8))
        else { return nil }
        return String(parts[1])
    }

    private func createHandoffCode(_ body: [String: Any], host: Pair) -> HTTPResponse {
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
    private func redeemHandoff(_ body: [String: Any]) -> HTTPResponse {
        guard let code = body["code"] as? String, let verifier = body["codeVerifier"] as? String,
            let client = body["clientId"] as? String
        else { return error(400, "invalid_request") }
        guard let grant = handoffCodes[code], grant.client == client, PKCE.challenge(for: verifier) == grant.challenge,
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

    /// A moved account stays its old device's current one (the plain login keeps answering 410).
    private func takeOff(_ account: String, from deviceId: String, movedAway: Bool = false) {
        devices[deviceId]!.accounts.removeAll { $0 == account }
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
    private func session(_ pair: Pair, created: Bool, status: Int, rotate: Bool = false) -> HTTPResponse {
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

    private func json(_ status: Int, _ object: [String: Any]) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["content-type": "application/json"], body: try! JSONSerialization.data(withJSONObject: object))
    }

    private func error(_ status: Int, _ code: String) -> HTTPResponse {
        json(status, ["error": code, "message": "Fake \(code)."])
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}

/// A clock the tests move by hand.
final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current = Date(timeIntervalSince1970: 1_800_000_000)
    var now: Date {
        lock.lock()
        defer { lock.unlock() }
        return current
    }
    func advance(by seconds: TimeInterval) {
        lock.lock()
        current += seconds
        lock.unlock()
    }
}

/// Holds whoever passes until it opens; counts arrivals.
final class Gate: @unchecked Sendable {
    private let lock = NSLock()
    private var isOpen = false
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private var arrivals = 0

    func pass() async {
        await withCheckedContinuation { continuation in
            lock.lock()
            arrivals += 1
            if isOpen {
                lock.unlock()
                continuation.resume()
            } else {
                waiting.append(continuation)
                lock.unlock()
            }
        }
    }

    func open() {
        lock.lock()
        isOpen = true
        let waiting = self.waiting
        self.waiting = []
        lock.unlock()
        for continuation in waiting { continuation.resume() }
    }

    private var hasArrivals: Bool {
        lock.lock()
        defer { lock.unlock() }
        return arrivals > 0
    }

    /// Waits (up to 5 s) until someone is held at the gate.
    func waitForArrival() async throws {
        for _ in 0..<5000 {
            if hasArrivals { return }
            try await Task.sleep(nanoseconds: 1_000_000)
        }
        throw CancellationError()
    }
}

/// Every event a client emits, in order.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [TransferEvent] = []

    init(_ client: TransferClient) {
        client.observeEvents { [weak self] event in self?.append(event) }
    }

    var all: [TransferEvent] {
        lock.lock()
        defer { lock.unlock() }
        return events
    }

    private func append(_ event: TransferEvent) {
        lock.lock()
        events.append(event)
        lock.unlock()
    }
}
