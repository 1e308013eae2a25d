import Foundation

extension TransferClient {
    /// In the host app: makes a one-time code that hands the account (the current one when nil)
    /// to the sibling app `clientId` (`POST /v1/handoff/codes`, PKCE method `S256`).
    ///
    /// The sibling's universal link brings its client id and ``HandoffRequest/codeChallenge``
    /// (read them with ``HandoffChallenge/init(url:)``).
    /// Check the client id against your own list of sibling apps and ask the user first; then
    /// open the sibling's universal link with the code, never a custom URL scheme (any app can
    /// claim a scheme, only the sibling receives its universal link):
    ///
    /// ```swift
    /// let handoff = try await transfer.createHandoffCode(forClient: clientId, codeChallenge: challenge)
    /// await UIApplication.shared.open(handoff.url(sibling: URL(string: "https://news.example.com/handoff")!))
    /// ```
    ///
    /// - Throws: ``TransferError/Code/unknownClient`` (the service does not list `clientId`),
    ///   ``TransferError/Code/notConfigured`` (the service has no sibling apps),
    ///   ``TransferError/Code/invalidRequest`` (the challenge is not 43 base64url characters).
    public func createHandoffCode(
        forClient clientId: String, codeChallenge: String, of accountId: String? = nil
    ) async throws -> HandoffCode {
        let response = try await request(
            .createHandoffCode, as: accountId, body: HandoffCodeRequest(clientId: clientId, codeChallenge: codeChallenge))
        let body = try Wire.decode(HandoffCodeBody.self, from: response)
        return HandoffCode(code: body.code, expiresIn: body.expiresIn)
    }
}
