import Foundation

extension TransferClient {
    /// A nonce for one Sign in with Apple (`POST /v1/apple/nonce`): ask for one before each
    /// Apple request, and use it within ``AppleNonce/expiresIn`` seconds.
    ///
    /// TransferKit does not talk to Apple: your app shows the Sign in with Apple sheet
    /// (AuthenticationServices) and hands TransferKit the identity token it gets back.
    ///
    /// ```swift
    /// let nonce = try await transfer.appleNonce()
    /// let request = ASAuthorizationAppleIDProvider().createRequest()
    /// request.nonce = nonce.sha256
    /// // … present it; with the ASAuthorizationAppleIDCredential it returns:
    /// let token = String(decoding: credential.identityToken!, as: UTF8.self)
    /// let code = credential.authorizationCode.map { String(decoding: $0, as: UTF8.self) }
    /// try await transfer.linkAppleID(identityToken: token, nonce: nonce, authorizationCode: code)
    /// ```
    ///
    /// - Throws: ``TransferError/Code/notConfigured`` (the service has Sign in with Apple off), network errors.
    public func appleNonce() async throws -> AppleNonce {
        let body = try Wire.decode(AppleNonceBody.self, from: try await send(.appleNonce).succeeded())
        return AppleNonce(value: body.nonce, expiresIn: body.expiresIn)
    }

    /// Links the account (the current one when nil) to the user's Apple ID (`PUT /v1/me/apple`),
    /// replacing an Apple ID it was linked to. The link is the account's way back onto a new
    /// phone (``claimWithAppleID(identityToken:nonce:existingAccounts:)``), and lets it leave
    /// this phone without `abandon` (``removeAccount(_:abandon:)``).
    ///
    /// - Parameters:
    ///   - identityToken: the identity token (a JWT) of the Sign in with Apple credential.
    ///   - nonce: the nonce whose ``AppleNonce/sha256`` the Apple request carried; used up.
    ///   - authorizationCode: the credential's authorization code. Send it: the service exchanges
    ///     it for Apple's refresh token, which it revokes when the account is unlinked or deleted.
    /// - Returns: what Apple said about the user's email.
    /// - Throws: ``TransferError/Code/invalidIdentityToken`` (the message names the check that
    ///   failed; also a used or expired nonce), ``TransferError/Code/appleIdInUse`` (another
    ///   account is linked to this Apple ID), ``TransferError/Code/notConfigured``,
    ///   ``TransferError/Code/unavailable`` (Apple cannot be reached; try again).
    @discardableResult
    public func linkAppleID(
        identityToken: String, nonce: AppleNonce, authorizationCode: String? = nil, of accountId: String? = nil
    ) async throws -> AppleIDLink {
        let response = try await request(
            .linkApple, as: accountId,
            body: AppleLinkRequest(identityToken: identityToken, nonce: nonce.value, authorizationCode: authorizationCode))
        return try AppleIDLink(Wire.decode(AppleLinkBody.self, from: response))
    }

    /// Unlinks the account (the current one when nil) from its Apple ID, if it has one
    /// (`DELETE /v1/me/apple`).
    public func unlinkAppleID(of accountId: String? = nil) async throws {
        _ = try await request(.unlinkApple, as: accountId)
    }

    /// On the new phone: brings over the account linked to the user's Apple ID
    /// (`POST /v1/transfers/apple`), exactly as
    /// ``claimTransfer(email:temporaryPassword:existingAccounts:)`` does with an email and
    /// temporary password: the account becomes this phone's current one, its old phone loses it,
    /// and a transfer pending for it is cancelled. Works before any ``launch()`` too.
    ///
    /// - Parameters:
    ///   - identityToken: the identity token of a Sign in with Apple on this phone.
    ///   - nonce: the nonce whose ``AppleNonce/sha256`` the Apple request carried; used up.
    ///   - existingAccounts: what to do when this phone already holds accounts, as for a claim.
    /// An answer lost on the way back is not asked for again (the nonce is used up): the next
    /// ``launch()`` finds the account, or the user signs in with Apple once more (a fresh nonce)
    /// and the service answers this phone's repeat for as long as the account is on it.
    ///
    /// - Returns: the account brought over.
    /// - Throws: ``TransferError/Code/appleIdNotLinked`` (no account is linked to this Apple ID),
    ///   ``TransferError/Code/invalidIdentityToken``, ``TransferError/Code/notConfigured``, and
    ///   the claim's: ``TransferError/Code/deviceHasAccount``, ``TransferError/Code/deviceAccountLimit``,
    ///   ``TransferError/Code/deviceAlreadyBound``, ``TransferError/Code/deviceRetired``,
    ///   ``TransferError/Code/rateLimited``, ``TransferError/Code/storageUnavailable``.
    @discardableResult
    public func claimWithAppleID(
        identityToken: String, nonce: AppleNonce, existingAccounts: ClaimChoice = .fail
    ) async throws -> Account {
        try await claim(.claimWithApple, choice: existingAccounts, repeatable: false) { identity in
            AppleMoveRequest(
                identityToken: identityToken, nonce: nonce.value,
                deviceId: identity.deviceId, deviceSecret: identity.deviceSecret,
                replaceExistingAccount: existingAccounts.replaceExistingAccount, addAccount: existingAccounts.addAccount,
                abandonExisting: existingAccounts.abandonExisting)
        }
    }
}
