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
        return PendingTransfer(email: body.email, expiresAt: body.expiresAt)
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
    ///   can ask the user; ``ClaimChoice/replace`` takes them off the phone; ``ClaimChoice/add`` keeps
    ///   them beside the claimed one.
    /// - Returns: the claimed account.
    /// - Throws: ``TransferError/Code/invalidTransferCredentials`` (unknown email, wrong password,
    ///   expired, cancelled, claimed or voided: one answer for all), ``TransferError/Code/tooManyAttempts``,
    ///   ``TransferError/Code/rateLimited``, ``TransferError/Code/deviceHasAccount``,
    ///   ``TransferError/Code/deviceAccountLimit``, ``TransferError/Code/deviceAlreadyBound``,
    ///   ``TransferError/Code/deviceRetired`` (call ``startOver()`` and claim again),
    ///   ``TransferError/Code/storageUnavailable``.
    @discardableResult
    public func claimTransfer(
        email: String, temporaryPassword: String, existingAccounts: ClaimChoice = .fail
    ) async throws -> Account {
        try await claim(.claimTransfer) { identity in
            ClaimRequest(
                email: email, temporaryPassword: temporaryPassword,
                deviceId: identity.deviceId, deviceSecret: identity.deviceSecret,
                replaceExistingAccount: existingAccounts.replaceExistingAccount, addAccount: existingAccounts.addAccount)
        }
    }

    /// Sends a claim (`endpoint`, its body made with this phone's identity) and keeps the session
    /// it brings: the claimed account becomes the current one.
    ///
    /// `409 device_retired` says this phone's device id can never be bound again (every account
    /// left it): when the phone holds no account, TransferKit starts over with a new identity
    /// and sends the claim once more.
    func claim<Body: Encodable>(_ endpoint: Endpoint, body: (DeviceIdentity) -> Body) async throws -> Account {
        var identity = try identityForClaim()
        var response = try await send(endpoint, body: Wire.encode(body(identity)))
        if !response.isSuccess, TransferError(response: response).code == .deviceRetired, accountList.isEmpty {
            try startOver()
            identity = try identityForClaim()
            response = try await send(endpoint, body: Wire.encode(body(identity)))
        }
        let session = try Wire.decode(SessionBody.self, from: try response.succeeded())

        // With `.replace` the phone's other accounts left it: drop their tokens.
        let onDevice = Set(session.accounts.map(\.accountId))
        for id in Set(sessions.keys).union(accountList.map(\.id)) where !onDevice.contains(id) { forget(id) }
        let removed = accountList.filter { !onDevice.contains($0.id) }
        apply(session)
        for account in removed { hub.emit(.accountRemoved(accountId: account.id)) }
        hub.emit(.signedIn(accountId: session.accountId, created: session.created))
        hub.emit(.switched(accountId: session.accountId))
        await uploadPendingPushToken()
        return accountList.first { $0.id == session.accountId }
            ?? Account(id: session.accountId, userName: session.userName, isCurrent: true)
    }
}
