import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A sibling app's session of the account its host app handed it.
///
/// A sibling app has no device identity of its own: it signs in through a host app of the same
/// family that is signed in. It makes a ``HandoffRequest``, opens the host's universal link with
/// the client id and challenge, and redeems the code the host sends back through the sibling's
/// own universal link (``redeemHandoff(code:request:)``). The session is one of the host's
/// (device, account) pair: it refreshes like any session, and ends with that pair (the account
/// moved, removed or deleted, the device revoked), with the host's sign-out, or with a later
/// hand-off to the same client id. Then the calls throw ``TransferError/Code/handoffRequired``:
/// ask the host again.
///
/// ```swift
/// let session = SiblingSession.standard(
///     baseURL: URL(string: "https://transfer.example.com")!, clientId: "com.example.news")
///
/// // https://news.example.com/handoff?code=… arrived from the host app.
/// func handoffArrived(code: String) async throws {
///     let account = try await session.redeemHandoff(code: code, request: pending)
///     showHome(account.id)
/// }
///
/// func loadFeed() async throws -> Data {
///     do {
///         return try await session.withAccessToken { token in try await myBackend.feed(bearer: token) }
///     } catch let error as TransferError where error.code == .handoffRequired {
///         showSignInThroughHostApp()
///         throw error
///     }
/// }
/// ```
///
/// The tokens are kept in the ``CredentialStore`` under a key of their own, apart from a
/// ``TransferClient``'s and from other sibling apps' (the key names the client id). A sibling
/// token may call only `GET /v1/me` (``profile()``), `POST /v1/logout` and the refresh; the
/// host's operations answer it `403 insufficient_scope`.
public actor SiblingSession {
    /// This sibling app's client id, as listed in the service's `--handoff-clients` (its bundle id).
    public let clientId: String
    let baseURL: URL
    let transport: any HTTPTransport
    let credentials: any CredentialStore
    let now: @Sendable () -> Date

    /// The session; mirrored in `credentials` under ``StoreKey/siblingSession(clientId:)``.
    var stored: StoredSiblingSession?
    var loaded = false
    /// Whether other processes (the sibling app's extensions) use the same stored session: the
    /// store is then read at every call, not once.
    let sharesSession: Bool
    /// The renewal under way (keyed by the client id); dropped when the session is replaced,
    /// signed out or ended, so that a renewal under way then drops its result.
    var renewals = Renewals()

    /// A sibling session of the app `clientId` with the service at `baseURL`.
    ///
    /// - Parameters:
    ///   - clientId: this app's client id, as listed in the service's `--handoff-clients`.
    ///   - credentials: where the tokens are kept; on iOS a ``KeychainCredentialStore``. Sibling
    ///     apps may share one (a Keychain access group): each keeps its session under its own key.
    ///   - transport: how requests reach the service (see ``Transport``).
    ///   - clock: the time renewals are planned with.
    ///   - sharesSession: true when the app's extensions use the same session through a shared
    ///     store (a Keychain access group): the store is read at every call, so that a renewal or
    ///     a new hand-off made by another process is taken, never refreshed over.
    public init(
        baseURL: URL, clientId: String, credentials: any CredentialStore, transport: Transport = .urlSession(.shared),
        clock: @escaping @Sendable () -> Date = { Date() }, sharesSession: Bool = false
    ) {
        self.init(
            baseURL: baseURL, clientId: clientId, credentials: credentials, transport: transport as any HTTPTransport,
            now: clock, sharesSession: sharesSession)
    }

    /// A sibling session whose requests go through `urlSession` (TransferKit 1's initialiser).
    public init(baseURL: URL, clientId: String, credentials: any CredentialStore, urlSession: URLSession) {
        self.init(baseURL: baseURL, clientId: clientId, credentials: credentials, transport: .urlSession(urlSession))
    }

    init(
        baseURL: URL, clientId: String, credentials: any CredentialStore, transport: any HTTPTransport,
        now: @escaping @Sendable () -> Date = { Date() }, sharesSession: Bool = false
    ) {
        self.sharesSession = sharesSession
        self.baseURL = baseURL
        self.clientId = clientId
        self.credentials = credentials
        self.transport = transport
        self.now = now
    }

    /// The account handed to this app; nil when there is no session (ask the host app).
    ///
    /// - Throws: ``TransferError/Code/storageUnavailable`` when the store cannot be read now.
    public func account() throws -> Account? {
        try load().map { Account(id: $0.accountId, userName: $0.userName, isCurrent: true) }
    }

    /// Redeems the code the host app sent with the request it was made for
    /// (`POST /v1/handoff/token`), and keeps the session, replacing any earlier one.
    ///
    /// Redeem a code once: a second redemption of it ends the session the first one opened.
    ///
    /// - Parameter request: the request made for this app: its ``HandoffRequest/clientId`` must be
    ///   ``clientId``; a request of another app is refused (`invalid_grant`) before anything is sent.
    /// - Returns: the host's account, now this app's.
    /// - Throws: ``TransferError/Code/invalidGrant`` for every refusal (unknown, expired or used
    ///   code, another request's verifier or client id): make a new ``HandoffRequest`` and ask
    ///   the host again. ``TransferError/Code/notConfigured``, network errors.
    @discardableResult
    public func redeemHandoff(code: String, request: HandoffRequest) async throws -> Account {
        guard request.clientId == clientId else {
            throw TransferError(
                .invalidGrant,
                "The hand-off request was made for \(request.clientId), not for this session's app \(clientId); nothing was sent.")
        }
        let body = HandoffTokenRequest(code: code, codeVerifier: request.codeVerifier, clientId: clientId)
        let response = try await transport.send(.redeemHandoff, baseURL: baseURL, body: Wire.encode(body)).succeeded()
        let session = try Wire.decode(SessionBody.self, from: response)
        renewals.drop(clientId)  // a renewal of an earlier session drops its result
        keep(session)
        return Account(id: session.accountId, userName: session.userName, isCurrent: true)
    }

    /// Runs `body` with a valid access token, as ``TransferClient/withAccessToken(of:isolation:_:)`` does:
    /// renewed a little before it expires (one renewal however many callers wait), and when
    /// `body` throws ``TransferError/accessTokenRejected`` (or any ``TransferError/Code/invalidToken``),
    /// renewed once and `body` runs once more.
    ///
    /// `body` runs on the caller's actor (the main actor in a view model), so it may touch the
    /// caller's state; neither it nor its result needs to be `Sendable`.
    ///
    /// - Throws: ``TransferError/Code/handoffRequired`` when there is no session, or the service
    ///   refused the refresh token (the session ended; its tokens are forgotten): ask the host
    ///   app again. ``TransferError/Code/signedOut`` when the session was signed out or replaced
    ///   while this call waited for a renewal.
    public func withAccessToken<T>(
        isolation: isolated (any Actor)? = #isolation, _ body: (String) async throws -> T
    ) async throws -> T {
        let token = try await accessToken()
        do {
            return try await body(token)
        } catch let error as TransferError where error.code == .invalidToken {
            return try await body(renewAccessToken(rejected: token))
        }
    }

    /// The account's profile (`GET /v1/me`), as the service describes it to this session.
    ///
    /// - Throws: ``TransferError/Code/handoffRequired`` as ``withAccessToken(isolation:_:)`` does, network errors.
    public func profile() async throws -> AccountProfile {
        let transport = transport, baseURL = baseURL
        let response = try await withAccessToken { token in try await transport.send(.me, baseURL: baseURL, token: token).succeeded() }
        return try AccountProfile(Wire.decode(MeBody.self, from: response))
    }

    /// Ends the session (`POST /v1/logout`, which ends this sibling session only) and forgets
    /// its tokens, even if the service cannot be reached. An access token that has expired is
    /// renewed for the logout only. A renewal under way drops its result.
    public func signOut() async {
        let tokens = (try? load())?.tokens
        end()
        if let tokens { await transport.logOut(tokens, baseURL: baseURL) }
    }

    // MARK: Tokens

    /// A valid access token, renewed first when it is about to expire (one renewal however many
    /// callers ask). For an HTTP stack's interceptor: set it as the bearer token, and when your
    /// backend answers 401, ask ``renewAccessToken(rejected:)`` for a new one and retry once.
    ///
    /// - Throws: ``TransferError/Code/handoffRequired`` as ``withAccessToken(isolation:_:)`` does.
    public func accessToken() async throws -> String {
        guard let session = try load() else { throw Self.handoffRequired("There is no sibling session") }
        if session.tokens.refreshAt > now() { return session.tokens.accessToken }
        return try await renew()
    }

    /// A new access token after your backend refused `rejected` (a 401): the one another caller's
    /// renewal already brought, or a new one.
    ///
    /// - Throws: ``TransferError/Code/handoffRequired`` as ``withAccessToken(isolation:_:)`` does.
    public func renewAccessToken(rejected: String) async throws -> String {
        if let tokens = try load()?.tokens, tokens.accessToken != rejected, tokens.refreshAt > now() {
            return tokens.accessToken
        }
        return try await renew()
    }

    /// Renews the tokens; concurrent callers share one renewal (single flight).
    private func renew() async throws -> String {
        let flight = renewals.join(clientId) { flight in
            Task {
                defer { self.renewals.finished(flight, for: clientId) }
                return try await self.performRenewal(flight: flight)
            }
        }
        return try await waitUnlessCancelled(flight.task)
    }

    /// `POST /v1/tokens/refresh`, after reading the store again: another process sharing it (the
    /// app, or one of its extensions) may have renewed already, and its tokens are taken as they
    /// are, so that a refresh token it rotated is never presented (which would end the session
    /// for every process). A refused refresh token means the service ended the session: there is
    /// no device secret to log in with, so the tokens are forgotten, unless another process
    /// replaced them meanwhile (a renewal, a new hand-off): those are kept, and used when valid.
    private func performRenewal(flight: Int) async throws -> String {
        let known = stored
        let latest = try readStore()
        if let latest, latest.tokens.accessToken != known?.tokens.accessToken, latest.tokens.refreshAt > now() {
            stored = latest
            return latest.tokens.accessToken
        }
        guard let refreshToken = (latest ?? known)?.tokens.refreshToken else {
            stored = nil
            throw Self.handoffRequired("There is no sibling session")
        }
        let response = try await transport.send(
            .refresh, baseURL: baseURL, body: Wire.encode(RefreshRequest(refreshToken: refreshToken)))
        guard renewals.isCurrent(flight, for: clientId) else {
            throw TransferError(.signedOut, "The sibling session was signed out or replaced while its token was renewed.")
        }
        guard response.isSuccess else {
            let error = TransferError(response: response)
            guard error.code == .invalidRefreshToken || error.code == .invalidToken else { throw error }
            if let replaced = try? readStore(), replaced.tokens.refreshToken != refreshToken {
                // Another process renewed or was handed the session again meanwhile: its item stays.
                stored = replaced
                if replaced.tokens.refreshAt > now() { return replaced.tokens.accessToken }
                throw Self.handoffRequired("The service ended the sibling session (\(error.code))")
            }
            end()
            throw Self.handoffRequired("The service ended the sibling session (\(error.code))")
        }
        let session = try Wire.decode(SessionBody.self, from: response)
        keep(session)
        return session.accessToken
    }

    private static func handoffRequired(_ reason: String) -> TransferError {
        TransferError(.handoffRequired, "\(reason): ask the host app for a new hand-off.")
    }

    // MARK: Storage

    /// The stored session: read from the store once, or at every call when it is shared.
    private func load() throws -> StoredSiblingSession? {
        guard !loaded || sharesSession else { return stored }
        stored = try readStore()
        loaded = true
        return stored
    }

    /// The session in the store now.
    private func readStore() throws -> StoredSiblingSession? {
        do {
            return try credentials.read(StoredSiblingSession.self, StoreKey.siblingSession(clientId: clientId))
        } catch let error as StorageError where error.kind == .undecodable {
            // A cache: the session that no longer decodes is dropped, and the app asks the host again.
            try? credentials.remove(StoreKey.siblingSession(clientId: clientId))
            return nil
        } catch {
            throw TransferError(storage: error)
        }
    }

    /// Keeps a new session's tokens, here and in the store.
    private func keep(_ session: SessionBody) {
        let kept = StoredSiblingSession(
            accountId: session.accountId, userName: session.userName, tokens: StoredSession(session, receivedAt: now()))
        stored = kept
        loaded = true
        // A failed write only loses the session at the next start: the app asks the host again.
        try? credentials.write(Wire.encode(kept), for: StoreKey.siblingSession(clientId: clientId))
    }

    /// Forgets the session, here and in the store, and makes a renewal under way drop its result.
    private func end() {
        renewals.drop(clientId)
        stored = nil
        loaded = true
        try? credentials.remove(StoreKey.siblingSession(clientId: clientId))
    }
}

/// A sibling session as stored: the account and its tokens.
struct StoredSiblingSession: Codable, Sendable, Equatable {
    var accountId: String
    var userName: String
    var tokens: StoredSession
}
