import Foundation

extension TransferClient {
    /// The accounts on this phone, oldest first (`GET /v1/devices/accounts`); also updates ``state``.
    /// An account that left the phone meanwhile gets its event (moved, deleted or removed).
    public func accounts() async throws -> [Account] {
        let response = try await request(.deviceAccounts, as: anyAccountOnDevice())
        let body = try Wire.decode(DeviceAccountsBody.self, from: response)
        let before = accountList
        setAccounts(body.accounts.map(Account.init))
        await noticeDepartures(from: before)
        return accountList
    }

    /// Whether the account (the current one when nil) has no way back onto a new phone (no
    /// pending transfer, no linked Apple ID, no recovery code: `GET /v1/me`'s `waysBack` is
    /// empty) and has been on this phone for at least `usedFor` seconds (3 days by default), so
    /// that losing the phone would now lose something. Then prompt "save your recovery code or
    /// link your Apple ID" (``makeRecoveryCode(of:)``,
    /// ``linkAppleID(identityToken:nonce:authorizationCode:of:)``). Ask at a calm moment (after
    /// a purchase, at the third launch…), not at every start: it costs a request.
    ///
    /// A service before contract v1.2 does not list `waysBack`: a pending transfer or an Apple ID
    /// then counts.
    public func needsWayBack(of accountId: String? = nil, usedFor: TimeInterval = 3 * 86_400) async throws -> Bool {
        let profile = try await profile(of: accountId)
        let ways = profile.waysBack
            ?? Set([profile.transfer.map { _ in WayBack.transfer }, profile.appleID.map { _ in WayBack.apple }].compactMap { $0 })
        guard ways.isEmpty else { return false }
        let here = profile.devices.first(where: \.isCurrent)?.boundAt ?? profile.createdAt
        return now().timeIntervalSince(here) >= usedFor
    }

    /// Makes `accountId` the phone's current account, the one the app shows and the plain login
    /// answers for (`PUT /v1/devices/current-account`). Emits ``TransferEvent/switched(accountId:)``.
    ///
    /// After ``TransferEvent/accountMoved(accountId:transferredAt:remainingAccounts:)`` pick one of
    /// the remaining accounts this way.
    ///
    /// - Throws: ``TransferError/Code/accountNotOnDevice`` when the account is not on this phone.
    public func switchAccount(to accountId: String) async throws {
        try restoreIfNeeded()
        let id = accountId.lowercased()
        _ = try await request(.setCurrentAccount, as: id, body: CurrentAccountRequest(accountId: id))
        setAccounts(accountList.map { account in
            var account = account
            account.isCurrent = account.id == id
            return account
        })
        hub.emit(.switched(accountId: id))
    }

    /// Creates one more account on this phone, which becomes the current one (login with `newAccount`).
    ///
    /// A device the service verified once adds accounts without a new attestation, so the
    /// ``AttestationProvider`` is asked only when the service answers `attestation_required`.
    ///
    /// - Throws: ``TransferError/Code/deviceAccountLimit`` when the phone holds the most accounts
    ///   it may, ``TransferError/Code/rateLimited`` (too many new accounts from this address, or
    ///   this phone created 10 in the last 24 hours, removed ones included: see
    ///   ``TransferError/retryAfter``); when the service checks attestation,
    ///   ``TransferError/Code/attestationRequired``, ``TransferError/Code/invalidAttestation``,
    ///   ``TransferError/Code/attestationFailed``.
    @discardableResult
    public func addAccount() async throws -> Account {
        let identity = try requireIdentity()
        let session = try await creatingLogin(
            LoginRequest(deviceId: identity.deviceId, deviceSecret: identity.deviceSecret, newAccount: true),
            for: current, attestUpFront: false)
        apply(session)
        hub.emit(.signedIn(accountId: session.accountId, created: session.created))
        hub.emit(.switched(accountId: session.accountId))
        await keepBackupKeys()
        return accountList.first { $0.id == session.accountId }
            ?? Account(id: session.accountId, userName: session.userName, isCurrent: true)
    }

    /// Takes the account off this phone (`DELETE /v1/devices/accounts/{accountId}`).
    ///
    /// Its session and push routing here end. If it was current, the service makes the most
    /// recently used remaining account current (``TransferEvent/switched(accountId:)``). When no
    /// account is left the phone's device id is retired, so TransferKit forgets it: the next
    /// ``launch()`` starts with a new one.
    ///
    /// - Parameter abandon: remove it even though it has no way back to a device (no pending
    ///   transfer, no linked Apple ID); the service keeps it for support only.
    /// - Throws: ``TransferError/Code/accountWouldBeLost`` when this is the account's only device
    ///   and it has neither a pending transfer nor a linked Apple ID, and `abandon` is false: offer
    ///   to set up a transfer first, or confirm and remove with `abandon: true`.
    ///
    /// The user chose to take the account off the phone: its backup key is deleted first (on the
    /// service and in the synchronized store), so that no other phone of the user offers it. When
    /// the removal is then refused (``TransferError/Code/accountWouldBeLost``: the key was its
    /// only way back), the account gets a new backup key, as it had. When the key cannot be
    /// deleted on the service (no network, ``TransferError/Code/rateLimited``, …) that error is
    /// thrown and nothing changes: the account stays, and so does its item.
    public func removeAccount(_ accountId: String, abandon: Bool = false) async throws {
        let id = try resolve(accountId)
        let wasCurrent = current == id
        let hadBackup = (try? backupShelf?.backup(of: id)) != nil
        // A key the service keeps counts as a way back: it must be gone before the removal, or
        // the removal must not happen (the item stays, the error is thrown).
        try await deleteBackupKey(of: id)
        do {
            _ = try await request(
                .removeAccount, as: id, path: ["accountId": id], query: abandon ? ["abandon": "true"] : [:])
        } catch {
            if hadBackup && backupKeysEnabled { try? await makeBackupKey(for: id) }
            throw error
        }
        try? credentials.remove(StoreKey.displayName(id))
        await left(id, wasCurrent: wasCurrent, event: .accountRemoved(accountId: id))
    }

    /// The account's profile (`GET /v1/me`): its pending transfer, its device, its Apple ID.
    ///
    /// - Parameter accountId: the account (the current one when nil).
    public func profile(of accountId: String? = nil) async throws -> AccountProfile {
        let response = try await request(.me, as: accountId)
        return try AccountProfile(Wire.decode(MeBody.self, from: response))
    }

    /// Deletes the account (the current one when nil) for good (`DELETE /v1/me`, App Store
    /// guideline 5.1.1(v)): ask the user to confirm first.
    ///
    /// The service erases it: it leaves this phone, its sessions (sibling apps' too), pending
    /// transfer, push routing and Apple ID link go. TransferKit forgets its tokens and emits
    /// ``TransferEvent/accountDeleted(accountId:)``. Then, as after
    /// ``removeAccount(_:abandon:)``: if it was current, the service makes the most recently used
    /// remaining account current (``TransferEvent/switched(accountId:)``); when no account is
    /// left the phone's device id is retired and forgotten, and the next ``launch()`` starts
    /// with a new one.
    public func deleteAccount(_ accountId: String? = nil) async throws {
        let id = try resolve(accountId)
        let wasCurrent = current == id
        _ = try await request(.deleteAccount, as: id)
        // The service erased the account's backup keys with it: their items go too.
        try? backupShelf?.remove(id)
        try? credentials.remove(StoreKey.displayName(id))
        await left(id, wasCurrent: wasCurrent, event: .accountDeleted(accountId: id))
    }

    /// After the account left this phone (removed or deleted): forgets it, emits `event`, and
    /// catches up with the service: no account left retires the identity, a current one gone
    /// makes another current.
    ///
    /// "No account left" is judged from the list read from the store (every caller restored it
    /// first), and only when that list knew the account: a list that is missing or out of date
    /// never makes TransferKit throw away an identity other accounts are bound to.
    private func left(_ accountId: String, wasCurrent: Bool, event: TransferEvent) async {
        let known = accountList.contains { $0.id == accountId }
        drop(accountId)
        hub.emit(event)
        if known && accountList.isEmpty {
            try? startOver()
        } else if wasCurrent, (try? await accounts()) != nil, let now = current {
            hub.emit(.switched(accountId: now))
        }
    }

    /// Ends the account's session on this phone (`POST /v1/logout`) and forgets its tokens.
    ///
    /// The account stays on the phone, and a later call for it logs in again with the device
    /// secret. The service also ends the sibling app sessions handed off from this session
    /// (``createHandoffCode(forClient:codeChallenge:of:)``). When the access token has
    /// expired, the refresh token renews it for the logout only, so that the service still ends
    /// the session. A renewal under way for it is dropped when it arrives. Nothing stays stored
    /// even if the service cannot be reached. Works before ``launch()`` too (it reads the stores).
    ///
    /// - Throws: ``TransferError/Code/notSignedIn`` when there is no such account (no current
    ///   one), ``TransferError/Code/storageUnavailable`` when the stores cannot be read now
    ///   (nothing was forgotten: try again after unlock).
    public func signOut(of accountId: String? = nil) async throws {
        let id = try resolve(accountId)
        let tokens = try cachedSession(id)
        forget(id)
        hub.emit(.signedOut(accountId: id))
        if let tokens { await transport.logOut(tokens, baseURL: baseURL) }
    }
}
