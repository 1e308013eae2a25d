import Foundation

// TransferKit 1's spellings of the "which account" argument. TransferKit 2 names it `of:`
// everywhere a call acts for an account (nil: the current one); the account a call acts on
// (switchAccount(to:), removeAccount(_:abandon:), deleteAccount(_:)) stays its first argument.
extension TransferClient {
    @available(*, deprecated, renamed: "setPushEnabled(_:of:)")
    public func setPushEnabled(_ enabled: Bool, for accountId: String?) async throws {
        try await setPushEnabled(enabled, of: accountId)
    }

    @available(*, deprecated, renamed: "setUpTransfer(email:temporaryPassword:of:)")
    @discardableResult
    public func setUpTransfer(email: String, temporaryPassword: String, for accountId: String?) async throws -> PendingTransfer {
        try await setUpTransfer(email: email, temporaryPassword: temporaryPassword, of: accountId)
    }

    @available(*, deprecated, renamed: "cancelTransfer(of:)")
    public func cancelTransfer(for accountId: String?) async throws {
        try await cancelTransfer(of: accountId)
    }

    @available(*, deprecated, renamed: "linkAppleID(identityToken:nonce:authorizationCode:of:)")
    @discardableResult
    public func linkAppleID(identityToken: String, nonce: AppleNonce, authorizationCode: String? = nil, for accountId: String?)
        async throws -> AppleIDLink
    {
        try await linkAppleID(identityToken: identityToken, nonce: nonce, authorizationCode: authorizationCode, of: accountId)
    }

    @available(*, deprecated, renamed: "unlinkAppleID(of:)")
    public func unlinkAppleID(for accountId: String?) async throws {
        try await unlinkAppleID(of: accountId)
    }

    @available(*, deprecated, renamed: "createHandoffCode(forClient:codeChallenge:of:)")
    public func createHandoffCode(forClient clientId: String, codeChallenge: String, account accountId: String?) async throws
        -> HandoffCode
    {
        try await createHandoffCode(forClient: clientId, codeChallenge: codeChallenge, of: accountId)
    }

    @available(*, deprecated, renamed: "signOut(of:)")
    public func signOut(_ accountId: String?) async throws {
        try await signOut(of: accountId)
    }
}
