import Foundation

/// The one error type of TransferKit.
///
/// An error the service answered carries the contract's `error` code (``code``), its `message`
/// and the HTTP ``status``. Errors TransferKit raises itself (storage, network, a dropped
/// refresh) carry one of its own codes and no status.
///
/// Branch on ``kind`` for the cases apps handle:
///
/// ```swift
/// do {
///     try await transfer.removeAccount(id)
/// } catch let error as TransferError where error.kind == .accountWouldBeLost {
///     // Offer to set up a transfer first, or remove it anyway with `abandon: true`.
/// }
/// ```
public struct TransferError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The contract's error code (`email_in_use`, `device_has_account`, …) or one of TransferKit's
    /// own (`storage_unavailable`, `not_signed_in`, `signed_out`, `handoff_required`, `network`,
    /// `unexpected_response`).
    public let code: String
    /// One sentence for a human. Codes are stable; messages may change.
    public let message: String
    /// The HTTP status of the service's answer; nil for errors raised by TransferKit itself.
    public let status: Int?
    /// Seconds to wait before trying again (`Retry-After`), with `rate_limited`, `too_many_attempts`,
    /// `overloaded` and `unavailable`.
    public let retryAfter: Int?

    /// The case an app branches on; ``Kind/other`` for codes without a case of their own.
    public var kind: Kind { Kind(rawValue: code) ?? .other }

    /// The errors apps branch on. The raw value is the ``TransferError/code``.
    public enum Kind: String, Sendable, CaseIterable {
        // Login and sessions.
        /// The device's secret does not match (`401`).
        case invalidDeviceCredentials = "invalid_device_credentials"
        /// The account was moved to another phone by a claim (`410`).
        case deviceTransferred = "device_transferred"
        /// Support revoked this device (`403`).
        case deviceRevoked = "device_revoked"
        /// The account was deleted (`410`).
        case accountDeleted = "account_deleted"
        /// The account is not on this device (`403`).
        case accountNotOnDevice = "account_not_on_device"
        /// The access token was refused (`401`). Throw ``TransferError/accessTokenRejected`` from a
        /// ``TransferClient/withAccessToken(of:_:)`` body when your own backend refuses the token.
        case invalidToken = "invalid_token"
        /// The refresh token was refused (`401`); TransferKit then logs in again with the device secret.
        case invalidRefreshToken = "invalid_refresh_token"
        // Accounts on the device.
        /// Removing the account would leave it on no device, with no transfer pending and no Apple ID
        /// linked (`409`); remove it with `abandon: true` to keep it only for support.
        case accountWouldBeLost = "account_would_be_lost"
        /// The device holds the most accounts it may (`409`).
        case deviceAccountLimit = "device_account_limit"
        // Transfers.
        /// Another account has a pending transfer with this email (`409`).
        case emailInUse = "email_in_use"
        /// The email breaks the contract's rules (`400`).
        case invalidEmail = "invalid_email"
        /// The temporary password breaks a rule; the message says which (`400`).
        case weakPassword = "weak_password"
        /// Unknown email, wrong password, expired, cancelled, claimed or voided transfer (`401`).
        case invalidTransferCredentials = "invalid_transfer_credentials"
        /// Five wrong passwords in a row locked the transfer for 15 minutes (`429`).
        case tooManyAttempts = "too_many_attempts"
        /// This phone already holds accounts; claim again with `.replace` or `.add` (`409`).
        case deviceHasAccount = "device_has_account"
        /// The claimed account is already on this phone (`409`).
        case deviceAlreadyBound = "device_already_bound"
        /// This phone's device id was retired (`409`); call ``TransferClient/startOver()``.
        case deviceRetired = "device_retired"
        // Push.
        /// The push token does not suit its provider (`400`).
        case invalidPushToken = "invalid_push_token"
        // Sign in with Apple.
        /// The identity token failed a check, which the message names: signature, issuer, audience,
        /// expiry, or a nonce that is not the one sent, not issued by the service, used or expired (`401`).
        case invalidIdentityToken = "invalid_identity_token"
        /// Another account is linked to this Apple ID (`409`).
        case appleIdInUse = "apple_id_in_use"
        /// No account is linked to this Apple ID (`404`, bringing an account over with it).
        case appleIdNotLinked = "apple_id_not_linked"
        // Sibling apps.
        /// The client id is not one of the service's sibling apps (`403`, when making a hand-off code).
        case unknownClient = "unknown_client"
        /// The hand-off code is unknown, expired or used, or the verifier or client id does not
        /// match (`400`, one answer for all). Do not retry with the same code: ask the host again.
        case invalidGrant = "invalid_grant"
        /// The service has the feature off: sibling apps, or Sign in with Apple (`501`).
        case notConfigured = "not_configured"
        // Load.
        /// Too many requests from this client address (`429`, see ``TransferError/retryAfter``).
        case rateLimited = "rate_limited"
        /// The password-hashing queue is full (`503`, see ``TransferError/retryAfter``).
        case overloaded = "overloaded"
        /// The service's database cannot be reached (`503`, see ``TransferError/retryAfter``).
        case unavailable = "unavailable"
        // TransferKit's own.
        /// The credential store cannot be read now (device locked before its first unlock).
        case storageUnavailable = "storage_unavailable"
        /// There is no device identity or no current account yet.
        case notSignedIn = "not_signed_in"
        /// The account was signed out or moved while this call waited for its tokens.
        case signedOut = "signed_out"
        /// A ``SiblingSession`` has no session (none yet, signed out, or the service ended it):
        /// ask the host app for a new hand-off.
        case handoffRequired = "handoff_required"
        /// The request did not reach the service or its answer did not arrive.
        case network = "network"
        /// The service answered something TransferKit cannot read.
        case unexpectedResponse = "unexpected_response"
        /// Any other code: look at ``TransferError/code``.
        case other
    }

    /// An error with a code and message of your own.
    public init(code: String, message: String, status: Int? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
        self.retryAfter = retryAfter
    }

    init(_ kind: Kind, _ message: String, status: Int? = nil) {
        self.init(code: kind.rawValue, message: message, status: status)
    }

    /// The error of a service answer that is not 2xx.
    init(response: HTTPResponse) {
        let body = try? Wire.decoder().decode(ErrorBody.self, from: response.body)
        self.init(
            code: body?.error ?? Kind.unexpectedResponse.rawValue,
            message: body?.message ?? "The service answered HTTP \(response.status).",
            status: response.status,
            retryAfter: response.headers["retry-after"].flatMap { Int($0) }
        )
    }

    /// Throw this from a ``TransferClient/withAccessToken(of:_:)`` body when your own backend
    /// answered 401 to the token: TransferKit renews the token once and runs the body once more.
    public static let accessTokenRejected = TransferError(
        code: Kind.invalidToken.rawValue, message: "The access token was refused.", status: 401)

    public var description: String {
        "TransferError(\(code)\(status.map { ", HTTP \($0)" } ?? "")): \(message)"
    }
}
