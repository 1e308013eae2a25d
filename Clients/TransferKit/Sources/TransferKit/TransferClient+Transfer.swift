import Foundation

extension TransferClient {
    /// On the old phone: sets up (or replaces) the transfer of the account (the current one when
    /// nil) to a new phone (`PUT /v1/me/transfer`). The user then types the same email and
    /// temporary password on the new phone.
    ///
    /// - Throws: ``TransferError/Code/invalidEmail``, ``TransferError/Code/weakPassword`` (the
    ///   message says which rule), ``TransferError/Code/emailInUse``, ``TransferError/Code/overloaded``.
    @discardableResult
    public func setUpTransfer(email: String, temporaryPassword: String, of accountId: String? = nil) async throws
        -> PendingTransfer
    {
        let response = try await request(
            .setUpTransfer, as: accountId, body: TransferRequest(email: email, temporaryPassword: temporaryPassword))
        let body = try Wire.decode(TransferBody.self, from: response)
        return PendingTransfer(email: body.email, expiresAt: body.expiresAt, method: .password)
    }

    /// On the old phone: cancels the account's pending transfer, if any (`DELETE /v1/me/transfer`).
    public func cancelTransfer(of accountId: String? = nil) async throws {
        _ = try await request(.cancelTransfer, as: accountId)
    }

    /// On the new phone: brings the account over with the email and temporary password set up on
    /// the old phone (`POST /v1/transfers/claim`). The account becomes this phone's current one;
    /// the old phone loses it (its next launch hears ``TransferError/Code/deviceTransferred``).
    ///
    /// Works before any ``launch()``, and after ``LaunchResult/restoredOntoNewPhone(previousAccounts:)``:
    /// a phone without a device identity gets one first (never when the store cannot be read).
    ///
    /// - Parameter existingAccounts: what to do when this phone already holds accounts:
    ///   ``ClaimChoice/fail`` (the default) throws ``TransferError/Code/deviceHasAccount`` so the app
    ///   can ask the user; ``ClaimChoice/replace`` takes them off the phone (unless one has no way
    ///   back: ``TransferError/Code/accountWouldBeLost``; ``ClaimChoice/abandonExisting`` takes it
    ///   off all the same); ``ClaimChoice/add`` keeps
    ///   them beside the claimed one; ``ClaimChoice/deleteExisting`` keeps them until the claim has
    ///   won, then deletes them (the account a new phone made by itself: ask the user first).
    ///
    /// An answer lost on the way back (a network failure after the request may have reached the
    /// service) is asked for again with the same request: the service answers the device that
    /// won the claim with the session again, for as long as the account is on it. When the app is
    /// killed before the answer, the next ``launch()`` repeats the claim and lands in the account.
    /// - Returns: the claimed account.
    /// - Throws: ``TransferError/Code/invalidTransferCredentials`` (unknown email, wrong password,
    ///   expired, cancelled, claimed or voided: one answer for all), ``TransferError/Code/tooManyAttempts``,
    ///   ``TransferError/Code/rateLimited``, ``TransferError/Code/deviceHasAccount``,
    ///   ``TransferError/Code/accountWouldBeLost``,
    ///   ``TransferError/Code/deviceAccountLimit``, ``TransferError/Code/deviceAlreadyBound``,
    ///   ``TransferError/Code/deviceRetired`` (call ``startOver()`` and claim again),
    ///   ``TransferError/Code/storageUnavailable``.
    @discardableResult
    public func claimTransfer(
        email: String, temporaryPassword: String, existingAccounts: ClaimChoice = .fail
    ) async throws -> Account {
        try await claim(.claimTransfer, choice: existingAccounts) { identity in
            ClaimRequest(
                email: email, temporaryPassword: temporaryPassword,
                deviceId: identity.deviceId, deviceSecret: identity.deviceSecret,
                replaceExistingAccount: existingAccounts.replaceExistingAccount, addAccount: existingAccounts.addAccount,
                abandonExisting: existingAccounts.abandonExisting)
        }
    }

    // MARK: Transfer codes

    /// On the old phone: sets up (or replaces) a transfer of the account (the current one when
    /// nil) by code (`PUT /v1/me/transfer` with `method: "code"`): no email, no password. Show
    /// the code's ``TransferCode/grouped`` form and a QR code of ``TransferCode/url(base:)``; the
    /// new phone claims it with ``claimTransfer(code:existingAccounts:)``. The service keeps only
    /// the code's hash: it is never shown again. A new set-up of either kind replaces the old one.
    ///
    /// - Throws: ``TransferError/Code/rateLimited`` (too many set-ups), ``TransferError/Code/overloaded``.
    public func setUpTransferCode(of accountId: String? = nil) async throws -> CodeTransfer {
        let response = try await request(.setUpTransfer, as: accountId, body: TransferRequest(method: TransferMethod.code.rawValue))
        let body = try Wire.decode(TransferCodeBody.self, from: response)
        guard let code = TransferCode(body.transferCode) else {
            throw TransferError(.unexpectedResponse, "The service's transfer code is not 16 characters of Crockford base32.", status: response.status)
        }
        return CodeTransfer(code: code, expiresAt: body.expiresAt)
    }

    /// On the new phone: brings the account over with the transfer code set up on the old phone
    /// (`POST /v1/transfers/claim` with `transferCode`), exactly as
    /// ``claimTransfer(email:temporaryPassword:existingAccounts:)`` does with an email and password.
    ///
    /// Parse what the user typed or scanned with ``TransferCode/init(_:)`` or
    /// ``TransferCode/init(url:base:)`` first. An answer lost on the way back is asked for again
    /// (the service answers the winning device again for as long as the account is on it; after a
    /// kill, the next ``launch()`` repeats it).
    ///
    /// - Throws: ``TransferError/Code/invalidTransferCredentials`` (unknown, expired, cancelled,
    ///   claimed or voided: one answer for all), ``TransferError/Code/rateLimited``, and the
    ///   claim's device errors (``TransferError/Code/deviceHasAccount``, …).
    @discardableResult
    public func claimTransfer(code: TransferCode, existingAccounts: ClaimChoice = .fail) async throws -> Account {
        try await claim(.claimTransfer, choice: existingAccounts) { identity in
            ClaimRequest(
                transferCode: code.value, deviceId: identity.deviceId, deviceSecret: identity.deviceSecret,
                replaceExistingAccount: existingAccounts.replaceExistingAccount, addAccount: existingAccounts.addAccount,
                abandonExisting: existingAccounts.abandonExisting)
        }
    }

    // MARK: Recovery codes

    /// Makes the account's recovery code (`PUT /v1/me/recovery-code`), replacing the one it had:
    /// its way back onto a new phone if this one is lost. Show it once and ask the user to keep it
    /// (write it down, or save it in a password manager); the service keeps only its hash.
    ///
    /// - Parameter accountId: the account (the current one when nil).
    /// - Throws: ``TransferError/Code/insufficientScope`` from a sibling app's session.
    public func makeRecoveryCode(of accountId: String? = nil) async throws -> IssuedRecoveryCode {
        let response = try await request(.makeRecoveryCode, as: accountId)
        let body = try Wire.decode(RecoveryCodeBody.self, from: response)
        guard let code = RecoveryCode(body.recoveryCode) else {
            throw TransferError(.unexpectedResponse, "The service's recovery code is not 20 characters of Crockford base32.", status: response.status)
        }
        return IssuedRecoveryCode(code: code, createdAt: body.createdAt)
    }

    /// Removes the account's recovery code, if it has one (`DELETE /v1/me/recovery-code`).
    public func deleteRecoveryCode(of accountId: String? = nil) async throws {
        _ = try await request(.deleteRecoveryCode, as: accountId)
    }

    /// On the new phone: brings the account over with its recovery code (`POST
    /// /v1/transfers/claim` with `recoveryCode`), as a claim does: its old phone loses it, a
    /// pending transfer is cancelled, and the code is used up (make a new one on this phone).
    ///
    /// - Throws: ``TransferError/Code/invalidTransferCredentials`` (every failure of the code),
    ///   ``TransferError/Code/rateLimited``, and the claim's device errors.
    @discardableResult
    public func claim(recoveryCode: RecoveryCode, existingAccounts: ClaimChoice = .fail) async throws -> Account {
        try await claim(.claimTransfer, choice: existingAccounts) { identity in
            ClaimRequest(
                recoveryCode: recoveryCode.value, deviceId: identity.deviceId, deviceSecret: identity.deviceSecret,
                replaceExistingAccount: existingAccounts.replaceExistingAccount, addAccount: existingAccounts.addAccount,
                abandonExisting: existingAccounts.abandonExisting)
        }
    }

    // MARK: Sending claims

    /// How many times a claim is sent when its answer is lost (the request may have won on the
    /// service): the service answers the winning device's repeat with the session again.
    static let claimAttempts = 3

    /// Sends a claim (`endpoint`, its body made with this phone's identity) and keeps the session
    /// it brings: the claimed account becomes the current one.
    ///
    /// `409 device_retired` says this phone's device id can never be bound again (every account
    /// left it): the accounts the phone still lists (read from the stores by a process that has
    /// not launched yet) have left it, and get their events; TransferKit starts over with a new
    /// identity and sends the claim once more. An answer that never arrived (a network failure after the
    /// request may have reached the service) is asked for again with the same body; the
    /// contract makes a claim repeated by the device that won it answer the same session.
    ///
    /// `repeatable` is false for a body that cannot be sent twice: an Apple move's nonce is used
    /// up by the first request, and its repeat needs a new Sign in with Apple (a fresh nonce).
    /// Its lost answer is found by the next ``launch()`` or by the user's next try.
    ///
    /// A repeatable claim is recorded before it is sent (``ClaimInFlight``): when the app is
    /// killed, or every answer is lost, the next ``launch()`` repeats it and lands in the account.
    func claim<Body: Encodable>(
        _ endpoint: Endpoint, choice: ClaimChoice = .fail, repeatable: Bool = true, backup: AccountBackup? = nil,
        body: (DeviceIdentity) -> Body
    ) async throws -> Account {
        var identity = try identityForClaim()
        let before = accountList
        claimsInProgress += 1
        defer { claimsInProgress -= 1 }
        let attempts = repeatable ? Self.claimAttempts : 1
        var data = try Wire.encode(body(identity))
        if repeatable && endpoint == .claimTransfer { recordClaimInFlight(data, choice: choice, backup: backup) }
        var response = try await sendClaim(endpoint, body: data, identity: identity, before: before, attempts: attempts)
        if !response.isSuccess, TransferError(response: response).code == .deviceRetired {
            // A retired device holds no account: whatever the phone lists left it.
            let listed = accountList
            accountList = []
            await noticeDepartures(from: listed)
            try startOver()
            identity = try identityForClaim()
            data = try Wire.encode(body(identity))
            if repeatable && endpoint == .claimTransfer { recordClaimInFlight(data, choice: choice, backup: backup) }
            response = try await sendClaim(endpoint, body: data, identity: identity, before: before, attempts: attempts)
        }
        // An answer arrived: nothing to repeat at the next launch, whatever it says.
        claimLanded()
        let session = try Wire.decode(SessionBody.self, from: try response.succeeded())
        return await claimWon(session, choice: choice, before: before, backup: backup)
    }

    /// What follows a claim's win, whether its answer came at once (``claim(_:choice:repeatable:backup:body:)``)
    /// or to the next launch's repeat (``resumeClaimInFlight()``): keeps the session (the claimed
    /// account becomes current), drops the accounts that left the phone (`.replace`), uses up a
    /// backup key's item (the account gets a new one, same name), deletes the phone's other
    /// accounts for `.deleteExisting`, and keeps the backup keys.
    ///
    /// - Parameter before: the accounts the phone listed before the claim.
    func claimWon(_ session: SessionBody, choice: ClaimChoice, before: [Account], backup: AccountBackup?) async -> Account {
        claimSettled()
        if let backup {
            // The key is used up: its item goes, and the account gets a new one below (same name).
            try? backupShelf?.remove(backup.accountId, ifStill: backup.key)
            if let name = backup.displayName { try? credentials.write(Data(name.utf8), for: StoreKey.displayName(session.accountId)) }
        }

        // With `.replace` the phone's other accounts left it: drop their tokens.
        let onDevice = Set(session.accounts.map(\.accountId))
        for id in Set(sessions.keys).union(accountList.map(\.id)) where !onDevice.contains(id) { forget(id) }
        let removed = accountList.filter { !onDevice.contains($0.id) }
        apply(session)
        for account in removed { hub.emit(.accountRemoved(accountId: account.id)) }
        hub.emit(.signedIn(accountId: session.accountId, created: session.created))
        hub.emit(.switched(accountId: session.accountId))
        await uploadPendingPushToken()
        if choice == .deleteExisting {
            for account in before where account.id != session.accountId && onDevice.contains(account.id) {
                do {
                    try await deleteAccount(account.id)
                } catch {
                    let reason = error as? TransferError ?? TransferError(.unexpectedResponse, "\(error)")
                    hub.emit(.accountNotDeleted(accountId: account.id, reason: reason))
                }
            }
        }
        await keepBackupKeys()
        return accountList.first { $0.id == session.accountId }
            ?? Account(id: session.accountId, userName: session.userName, isCurrent: true)
    }

    /// Sends a claim, again when its answer was lost (up to `attempts` times).
    ///
    /// After a lost answer, `409 device_already_bound` for an account the phone did not hold
    /// before says the first request won (a service that does not answer repeats): the phone's
    /// plain login then brings the claimed account's session (the claim made it current).
    private func sendClaim(
        _ endpoint: Endpoint, body: Data, identity: DeviceIdentity, before: [Account], attempts: Int
    ) async throws -> HTTPResponse {
        var lost = false
        for attempt in 1...attempts {
            do {
                let response = try await send(endpoint, body: body)
                if lost, response.status == 409, TransferError(response: response).code == .deviceAlreadyBound {
                    let login = try await send(
                        .login, body: Wire.encode(LoginRequest(deviceId: identity.deviceId, deviceSecret: identity.deviceSecret)))
                    if login.isSuccess, let session = try? Wire.decode(SessionBody.self, from: login),
                        !before.contains(where: { $0.id == session.accountId })
                    {
                        return login
                    }
                }
                return response
            } catch let error as TransferError where error.code == .network && attempt < attempts {
                lost = true
                try await Task.sleep(nanoseconds: UInt64(attempt) * 200_000_000)
            }
        }
        preconditionFailure("unreachable: the last attempt returns or throws")
    }
}
