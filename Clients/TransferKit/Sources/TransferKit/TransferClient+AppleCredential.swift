import Foundation

/// What TransferKit sends from a Sign in with Apple credential: decided here, on every platform;
/// the Apple-only overloads below only read the credential's two fields.
enum AppleCredentialTokens {
    /// The identity token (a JWT, UTF-8); a credential without one cannot link or claim.
    static func identityToken(_ data: Data?) throws -> String {
        guard let data, !data.isEmpty, let token = String(data: data, encoding: .utf8) else {
            throw TransferError(.invalidIdentityToken, "The Sign in with Apple credential carries no identity token.")
        }
        return token
    }

    /// The authorization code, when Apple sent one.
    static func authorizationCode(_ data: Data?) -> String? {
        guard let data, !data.isEmpty else { return nil }
        return String(data: data, encoding: .utf8)
    }
}

#if canImport(AuthenticationServices)
import AuthenticationServices

// Compiled only on Apple platforms (not built in this repository's Linux CI).
@available(iOS 13, macOS 10.15, tvOS 13, watchOS 6, *)
extension TransferClient {
    /// ``linkAppleID(identityToken:nonce:authorizationCode:of:)`` with the credential Sign in
    /// with Apple returned: its identity token and authorization code are read for you. Runs on
    /// the caller's actor, so the (non-`Sendable`) credential never leaves it.
    @discardableResult
    public func linkAppleID(
        _ credential: ASAuthorizationAppleIDCredential, nonce: AppleNonce, of accountId: String? = nil,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> AppleIDLink {
        let token = try AppleCredentialTokens.identityToken(credential.identityToken)
        let code = AppleCredentialTokens.authorizationCode(credential.authorizationCode)
        return try await linkAppleID(identityToken: token, nonce: nonce, authorizationCode: code, of: accountId)
    }

    /// ``claimWithAppleID(identityToken:nonce:existingAccounts:)`` with the credential Sign in
    /// with Apple returned.
    @discardableResult
    public func claimWithAppleID(
        _ credential: ASAuthorizationAppleIDCredential, nonce: AppleNonce, existingAccounts: ClaimChoice = .fail,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> Account {
        let token = try AppleCredentialTokens.identityToken(credential.identityToken)
        return try await claimWithAppleID(identityToken: token, nonce: nonce, existingAccounts: existingAccounts)
    }
}
#endif
