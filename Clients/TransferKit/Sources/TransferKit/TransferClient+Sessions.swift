import Foundation

extension TransferClient {
    /// Runs `body` with a valid access token of the account (the current one when nil).
    ///
    /// This is the one place requests are authorised, TransferKit's own and your backend's
    /// (which verifies the token with the service's JWKS). The token is renewed a little before
    /// it expires; concurrent callers share one renewal per account. When `body` throws
    /// ``TransferError/accessTokenRejected`` (or any ``TransferError/Code/invalidToken``),
    /// the token is renewed once and `body` runs once more.
    ///
    /// `body` runs on the caller's actor (the main actor in a view model), so it may touch the
    /// caller's state; neither it nor its result needs to be `Sendable`.
    ///
    /// ```swift
    /// let profile = try await transfer.withAccessToken { token in
    ///     var request = URLRequest(url: profileURL)
    ///     request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    ///     let (data, response) = try await URLSession.shared.data(for: request)
    ///     if (response as? HTTPURLResponse)?.statusCode == 401 { throw TransferError.accessTokenRejected }
    ///     return data
    /// }
    /// ```
    ///
    /// A renewal uses the refresh token; when the service refuses it (`invalid_refresh_token`),
    /// TransferKit logs in again with the device secret. When that login says the account moved,
    /// was deleted or the device revoked, the matching event is emitted and the error thrown.
    public func withAccessToken<T>(
        of accountId: String? = nil, isolation: isolated (any Actor)? = #isolation,
        _ body: (String) async throws -> T
    ) async throws -> T {
        let id = try await resolvedAccount(accountId)
        let token = try await accessToken(of: id)
        do {
            return try await body(token)
        } catch let error as TransferError where error.code == .invalidToken {
            return try await body(renewAccessToken(of: id, rejected: token))
        }
    }

    /// A valid access token of the account (the current one when nil), renewed first when it is
    /// about to expire (one renewal per account however many callers ask). For an HTTP stack's
    /// interceptor: set it as the bearer token, and when your backend answers 401, ask
    /// ``renewAccessToken(of:rejected:)`` for a new one and retry once.
    public func accessToken(of accountId: String? = nil) async throws -> String {
        try await accessToken(for: resolve(accountId))
    }

    /// A new access token of the account (the current one when nil), after your backend refused
    /// `rejected` (a 401). When another caller's renewal already replaced `rejected`, its token
    /// is returned without renewing again; without `rejected`, the token is renewed regardless.
    public func renewAccessToken(of accountId: String? = nil, rejected: String? = nil) async throws -> String {
        let id = try resolve(accountId)
        guard let rejected else { return try await renew(id) }
        return try await renewedAccessToken(for: id, rejected: rejected)
    }

    /// The account `accountId` names, or the current one (reading the stores first if needed).
    func resolvedAccount(_ accountId: String?) throws -> String {
        try resolve(accountId)
    }

    func authorized<T: Sendable>(_ accountId: String, _ body: @Sendable (String) async throws -> T) async throws -> T {
        let token = try await accessToken(for: accountId)
        do {
            return try await body(token)
        } catch let error as TransferError where error.code == .invalidToken {
            let renewed = try await renewedAccessToken(for: accountId, rejected: token)
            return try await body(renewed)
        }
    }

    /// Sends an authorised request for the account (the current one when nil); a 401 renews the
    /// token once and sends once more. Throws ``TransferError`` for any answer that is not 2xx.
    /// An endpoint that needs the device's proof gets this phone's device secret beside the token.
    func request(
        _ endpoint: Endpoint, as accountId: String?, path: [String: String] = [:], query: [String: String] = [:],
        body: (any Encodable & Sendable)? = nil
    ) async throws -> HTTPResponse {
        let accountId = try resolve(accountId)
        let data = try body.map { try Wire.encode($0) }
        let deviceSecret = endpoint.needsDeviceProof ? try requireIdentity().deviceSecret : nil
        return try await authorized(accountId) { token in
            try await self.send(endpoint, path: path, query: query, body: data, token: token, deviceSecret: deviceSecret).succeeded()
        }
    }

    /// Sends one request as is.
    nonisolated func send(
        _ endpoint: Endpoint, path: [String: String] = [:], query: [String: String] = [:], body: Data? = nil,
        token: String? = nil, deviceSecret: String? = nil
    ) async throws -> HTTPResponse {
        try await transport.send(endpoint, baseURL: baseURL, path: path, query: query, body: body, token: token, deviceSecret: deviceSecret)
    }

    // MARK: Tokens

    /// A token that is not about to expire, renewing it if needed.
    func accessToken(for accountId: String) async throws -> String {
        if let session = try cachedSession(accountId), session.refreshAt > now() { return session.accessToken }
        return try await renew(accountId)
    }

    /// A token other than `rejected`: the one another caller's renewal brought, or a new one.
    func renewedAccessToken(for accountId: String, rejected: String) async throws -> String {
        if let session = sessions[accountId], session.accessToken != rejected, session.refreshAt > now() {
            return session.accessToken
        }
        return try await renew(accountId)
    }

    /// Renews the account's tokens; concurrent callers share one renewal (single flight).
    func renew(_ accountId: String) async throws -> String {
        let flight = renewals.join(accountId) { flight in
            Task {
                defer { self.renewals.finished(flight, for: accountId) }
                return try await self.performRenewal(of: accountId, flight: flight)
            }
        }
        return try await waitUnlessCancelled(flight.task)
    }

    /// Renews the account's tokens, after reading them again from the store: another process
    /// sharing it (an app extension) may have renewed them already, and those are taken as they
    /// are. When sessions are shared (``TransferClient/init(baseURL:credentials:accountList:sharesSessions:transport:clock:)``),
    /// the renewal logs in with the device secret, which never rotates the refresh token (the
    /// contract's rule), so no process's stored refresh token is ever revoked by another's
    /// refresh. Otherwise it refreshes, and logs in when there is no refresh token or the
    /// service refuses it. The result is dropped if the account was signed out, moved, removed
    /// or deleted meanwhile.
    private func performRenewal(of accountId: String, flight: Int) async throws -> String {
        let identity = try requireIdentity()
        let stored = try readSession(accountId)
        // Renewed by another process: the store holds a token this one has not used (compared by
        // token: a stored date has lost the sub-second part of the one in memory).
        if let stored, let known = sessions[accountId], stored.accessToken != known.accessToken, stored.refreshAt > now() {
            sessions[accountId] = stored
            return stored.accessToken
        }
        var renewed: SessionBody?
        if !sharesSessions, let refreshToken = (stored ?? sessions[accountId])?.refreshToken {
            do {
                renewed = try await transport.refresh(refreshToken, baseURL: baseURL)
            } catch let error as TransferError where error.code == .invalidRefreshToken {
                // Rotated or ended: the login below opens the session again.
            }
        }
        let session: SessionBody
        if let renewed {
            session = renewed
        } else {
            session = try await login(
                LoginRequest(deviceId: identity.deviceId, deviceSecret: identity.deviceSecret, accountId: accountId),
                for: accountId)
        }
        guard renewals.isCurrent(flight, for: accountId) else {
            throw TransferError(.signedOut, "The account was signed out or left this phone while its token was renewed.")
        }
        apply(session)
        hub.emit(.tokenRefreshed(accountId: accountId))
        return session.accessToken
    }

    /// The account's tokens: as last read or written, else from the store.
    func cachedSession(_ accountId: String) throws -> StoredSession? {
        if let session = sessions[accountId] { return session }
        let session = try readSession(accountId)
        sessions[accountId] = session
        return session
    }

    /// The account's tokens in the store. Tokens that do not decode are a cache: dropped, with an event.
    func readSession(_ accountId: String) throws -> StoredSession? {
        do {
            return try credentials.read(StoredSession.self, StoreKey.session(accountId))
        } catch let error as StorageError where error.kind == .undecodable {
            try? credentials.remove(StoreKey.session(accountId))
            hub.emit(.unreadableDataDiscarded(.sessions))
            return nil
        } catch {
            throw storageUnavailable(error)
        }
    }

    // MARK: Logins and sessions

    /// `POST /v1/devices/login`. A refusal that says the account (`accountId`, or the current one)
    /// is gone from this phone becomes an event, and its tokens are forgotten.
    func login(_ body: LoginRequest, for accountId: String?) async throws -> SessionBody {
        let response = try await send(.login, body: Wire.encode(body))
        guard response.isSuccess else { throw accountLost(response, accountId: accountId) }
        return try Wire.decode(SessionBody.self, from: response)
    }

    private func accountLost(_ response: HTTPResponse, accountId: String?) -> TransferError {
        let error = TransferError(response: response)
        switch error.code {
        case .deviceTransferred:
            let body = try? Wire.decoder().decode(ErrorBody.self, from: response.body)
            lastMove = (accountId, body?.transferredAt)
            if let accountId { forget(accountId) }
            if let left = body?.accounts {
                setAccounts(left.map(Account.init))
            } else {
                setAccounts(accountList.filter { $0.id != accountId })
            }
            hub.emit(.accountMoved(accountId: accountId, transferredAt: body?.transferredAt, remainingAccounts: accountList))
        case .deviceRevoked:
            for id in Set(sessions.keys).union(accountList.map(\.id)) { forget(id) }
            hub.emit(.deviceRevoked)
        case .accountDeleted:
            // The service erased the account's backup keys with it: its item is not one to offer.
            if let accountId {
                drop(accountId)
                try? backupShelf?.remove(accountId)
            }
            hub.emit(.accountDeleted(accountId: accountId))
        case .accountNotOnDevice:
            if let accountId, accountList.contains(where: { $0.id == accountId }) {
                drop(accountId)
                hub.emit(.accountRemoved(accountId: accountId))
            }
        default:
            break
        }
        return error
    }

    /// Keeps a new session's tokens (its own item only) and the account list it brings.
    func apply(_ session: SessionBody) {
        let stored = StoredSession(session, receivedAt: now())
        sessions[session.accountId] = stored
        // A failed write only loses a cache: the next launch logs in with the device secret.
        try? credentials.write(Wire.encode(stored), for: StoreKey.session(session.accountId))
        setAccounts(session.accounts.map(Account.init))
    }

    /// The account left this phone: its tokens are forgotten and it leaves the local list.
    func drop(_ accountId: String) {
        forget(accountId)
        setAccounts(accountList.filter { $0.id != accountId })
    }

    /// Drops the account's tokens, here and in the store, and makes a renewal under way drop its result.
    func forget(_ accountId: String) {
        renewals.drop(accountId)
        sessions[accountId] = nil
        try? credentials.remove(StoreKey.session(accountId))
    }
}
