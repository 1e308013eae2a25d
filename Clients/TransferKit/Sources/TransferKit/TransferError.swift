import Foundation

/// The one error type of TransferKit.
///
/// An error the service answered carries the contract's `error` code (``code``), its `message`
/// and the HTTP ``status``. Errors TransferKit raises itself (storage, network, a dropped
/// renewal) carry one of its own codes and no status; a storage failure also carries the
/// ``storage`` error that says which (locked, missing entitlement, …).
///
/// Branch on ``code``; ``Code`` is an open set (a struct, not an enum), so a code the service
/// adds later never breaks a `switch` in your app:
///
/// ```swift
/// do {
///     try await transfer.removeAccount(id)
/// } catch let error as TransferError {
///     switch error.code {
///     case .accountWouldBeLost: offerTransferFirst()  // or remove it with `abandon: true`
///     case .rateLimited: retry(after: error.retryAfter)
///     default: show(error.localizedDescription)
///     }
/// }
/// ```
public struct TransferError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    /// The contract's error code (`email_in_use`, `device_has_account`, …) or one of TransferKit's
    /// own (`storage_unavailable`, `not_signed_in`, `signed_out`, `handoff_required`, `network`,
    /// `unexpected_response`, `attestation_failed`).
    public let code: Code
    /// One sentence for a human. Codes are stable; messages may change.
    public let message: String
    /// The HTTP status of the service's answer; nil for errors raised by TransferKit itself.
    public let status: Int?
    /// Seconds to wait before trying again (`Retry-After`), with `rate_limited`, `too_many_attempts`,
    /// `overloaded` and `unavailable`.
    public let retryAfter: Int?
    /// With ``Code/storageUnavailable``: what the store said (locked, missing entitlement, …).
    public let storage: StorageError?
    /// With ``Code/network``: what the transport threw (a `URLError` with `.urlSession`), so that
    /// the app can tell "offline" (`.notConnectedToInternet`) from a timeout or a TLS failure.
    /// Not compared by `==`.
    public private(set) var underlyingError: (any Error)?

    public static func == (lhs: TransferError, rhs: TransferError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.status == rhs.status
            && lhs.retryAfter == rhs.retryAfter && lhs.storage == rhs.storage
    }

    /// A ``Code/network`` error for what the transport threw: its description in the message, the
    /// error itself in ``underlyingError``.
    init(network error: any Error) {
        self.init(.network, "The service could not be reached: \(error.localizedDescription)")
        underlyingError = error
    }

    /// The same as ``code`` (TransferKit 1 called it `kind`).
    public var kind: Code { code }

    /// TransferKit 1's name of ``Code``.
    public typealias Kind = Code

    /// An error code: the contract's or TransferKit's own. An open set: compare with the static
    /// members (`error.code == .deviceHasAccount`), or with a string literal for a code this
    /// version does not name yet.
    public struct Code: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
        /// The code as the service spells it.
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.rawValue = value }
        public var description: String { rawValue }

        /// The device's secret does not match (`401`).
        public static let invalidDeviceCredentials = Code(rawValue: "invalid_device_credentials")
        /// The account was moved to another phone by a claim (`410`).
        public static let deviceTransferred = Code(rawValue: "device_transferred")
        /// Support revoked this device (`403`).
        public static let deviceRevoked = Code(rawValue: "device_revoked")
        /// The account was deleted (`410`).
        public static let accountDeleted = Code(rawValue: "account_deleted")
        /// The account is not on this device (`403`).
        public static let accountNotOnDevice = Code(rawValue: "account_not_on_device")
        /// The access token was refused (`401`). Throw ``TransferError/accessTokenRejected`` from a
        /// ``TransferClient/withAccessToken(of:isolation:_:)`` body when your own backend refuses the token.
        public static let invalidToken = Code(rawValue: "invalid_token")
        /// The refresh token was refused (`401`); TransferKit then logs in again with the device secret.
        public static let invalidRefreshToken = Code(rawValue: "invalid_refresh_token")
        /// Removing the account would leave it on no device, with no transfer pending, no Apple ID
        /// linked and no unused recovery code (`409`); remove it with `abandon: true` to keep it
        /// only for support. A claim with ``ClaimChoice/replace`` gets it when it would push such
        /// an account off this phone: claim with ``ClaimChoice/abandonExisting`` to abandon it.
        public static let accountWouldBeLost = Code(rawValue: "account_would_be_lost")
        /// The device holds the most accounts it may (`409`).
        public static let deviceAccountLimit = Code(rawValue: "device_account_limit")
        /// Another account has a pending transfer with this email (`409`).
        public static let emailInUse = Code(rawValue: "email_in_use")
        /// The email breaks the contract's rules (`400`).
        public static let invalidEmail = Code(rawValue: "invalid_email")
        /// The temporary password breaks a rule; the message says which (`400`).
        public static let weakPassword = Code(rawValue: "weak_password")
        /// Unknown email, wrong password, expired, cancelled, claimed or voided transfer (`401`).
        public static let invalidTransferCredentials = Code(rawValue: "invalid_transfer_credentials")
        /// Five wrong passwords in a row locked the transfer for 15 minutes (`429`).
        public static let tooManyAttempts = Code(rawValue: "too_many_attempts")
        /// This phone already holds accounts; claim again with `.replace` or `.add` (`409`).
        public static let deviceHasAccount = Code(rawValue: "device_has_account")
        /// The claimed account is already on this phone (`409`).
        public static let deviceAlreadyBound = Code(rawValue: "device_already_bound")
        /// This phone's device id was retired (`409`); call ``TransferClient/startOver()``.
        public static let deviceRetired = Code(rawValue: "device_retired")
        /// The push token does not suit its provider (`400`).
        public static let invalidPushToken = Code(rawValue: "invalid_push_token")
        /// The identity token failed a check, which the message names: signature, issuer, audience,
        /// expiry, or a nonce that is not the one sent, not issued by the service, used or expired (`401`).
        public static let invalidIdentityToken = Code(rawValue: "invalid_identity_token")
        /// Another account is linked to this Apple ID (`409`).
        public static let appleIdInUse = Code(rawValue: "apple_id_in_use")
        /// No account is linked to this Apple ID (`404`, bringing an account over with it).
        public static let appleIdNotLinked = Code(rawValue: "apple_id_not_linked")
        /// The client id is not one of the service's sibling apps (`403`, when making a hand-off code).
        public static let unknownClient = Code(rawValue: "unknown_client")
        /// The hand-off code is unknown, expired or used, or the verifier or client id does not
        /// match (`400`, one answer for all). Do not retry with the same code: ask the host again.
        public static let invalidGrant = Code(rawValue: "invalid_grant")
        /// The service accepts new accounts only from attested devices (`--attestation enforce`),
        /// and this login carried no attestation (`403`): no ``AttestationProvider`` is set, or
        /// the device cannot attest (the provider returned nil).
        public static let attestationRequired = Code(rawValue: "attestation_required")
        /// The device's attestation failed a check, which the message names, e.g. a used or
        /// expired challenge, the certificate chain, the app id (`401`). Nothing was created.
        public static let invalidAttestation = Code(rawValue: "invalid_attestation")
        /// The service has the feature off: sibling apps, or Sign in with Apple (`501`).
        public static let notConfigured = Code(rawValue: "not_configured")
        // Requests the service could not take.
        /// A sibling app's token on an endpoint of the host app (`403`).
        public static let insufficientScope = Code(rawValue: "insufficient_scope")
        /// A change of the account's ways back, or its deletion, without this phone's device
        /// secret beside the token (`401`). TransferKit always sends it; seen only when the
        /// phone's identity is not the one the token was issued to.
        public static let deviceProofRequired = Code(rawValue: "device_proof_required")
        /// A malformed request; the message names the field (`400`).
        public static let invalidRequest = Code(rawValue: "invalid_request")
        /// The device id is not an RFC 4122 UUID (`400`).
        public static let invalidDeviceId = Code(rawValue: "invalid_device_id")
        /// The device secret breaks the contract's rule (`400`).
        public static let invalidDeviceSecret = Code(rawValue: "invalid_device_secret")
        /// The request body is over 16 KiB (`413`).
        public static let payloadTooLarge = Code(rawValue: "payload_too_large")
        /// The request body is not JSON (`415`).
        public static let unsupportedMediaType = Code(rawValue: "unsupported_media_type")
        /// The service failed (`500`); try again later.
        public static let internalError = Code(rawValue: "internal_error")
        // Load.
        /// Too many requests from this client address (`429`, see ``TransferError/retryAfter``).
        public static let rateLimited = Code(rawValue: "rate_limited")
        /// The password-hashing queue is full (`503`, see ``TransferError/retryAfter``).
        public static let overloaded = Code(rawValue: "overloaded")
        /// The service's database cannot be reached (`503`, see ``TransferError/retryAfter``).
        public static let unavailable = Code(rawValue: "unavailable")
        /// The credential store cannot be read now (device locked before its first unlock).
        public static let storageUnavailable = Code(rawValue: "storage_unavailable")
        /// There is no device identity or no current account yet.
        public static let notSignedIn = Code(rawValue: "not_signed_in")
        /// The account was signed out or moved while this call waited for its tokens.
        public static let signedOut = Code(rawValue: "signed_out")
        /// A ``SiblingSession`` has no session (none yet, signed out, or the service ended it):
        /// ask the host app for a new hand-off.
        public static let handoffRequired = Code(rawValue: "handoff_required")
        /// The ``AttestationProvider`` could not attest this device (App Attest or Play Integrity
        /// failed, e.g. Apple's server could not be reached); the message says why. Nothing was
        /// sent to create an account: try again later.
        public static let attestationFailed = Code(rawValue: "attestation_failed")
        /// The request did not reach the service or its answer did not arrive.
        public static let network = Code(rawValue: "network")
        /// The service answered something TransferKit cannot read.
        public static let unexpectedResponse = Code(rawValue: "unexpected_response")

        /// Every code this version names, the contract's and its own.
        public static let known: [Code] = [
            .invalidDeviceCredentials, .deviceTransferred, .deviceRevoked, .accountDeleted,
            .accountNotOnDevice, .invalidToken, .invalidRefreshToken, .accountWouldBeLost,
            .deviceAccountLimit, .emailInUse, .invalidEmail, .weakPassword, .invalidTransferCredentials,
            .tooManyAttempts, .deviceHasAccount, .deviceAlreadyBound, .deviceRetired, .invalidPushToken,
            .invalidIdentityToken, .appleIdInUse, .appleIdNotLinked, .unknownClient, .invalidGrant,
            .notConfigured, .insufficientScope, .deviceProofRequired, .invalidRequest, .invalidDeviceId, .invalidDeviceSecret,
            .payloadTooLarge, .unsupportedMediaType, .internalError, .rateLimited, .overloaded,
            .unavailable, .storageUnavailable, .notSignedIn, .signedOut, .handoffRequired, .network,
            .unexpectedResponse, .attestationRequired, .invalidAttestation, .attestationFailed,
        ]
    }

    /// An error with a code and message of your own.
    public init(code: Code, message: String, status: Int? = nil, retryAfter: Int? = nil, storage: StorageError? = nil) {
        self.code = code
        self.message = message
        self.status = status
        self.retryAfter = retryAfter
        self.storage = storage
    }

    init(_ code: Code, _ message: String, status: Int? = nil) {
        self.init(code: code, message: message, status: status)
    }

    /// ``Code/storageUnavailable`` for what a store threw.
    init(storage error: any Error) {
        let storage = StorageError(error)
        self.init(code: .storageUnavailable, message: "The credential store cannot be used now: \(storage)", storage: storage)
    }

    /// The error of a service answer that is not 2xx.
    init(response: HTTPResponse) {
        let body = try? Wire.decoder().decode(ErrorBody.self, from: response.body)
        self.init(
            code: Code(rawValue: body?.error ?? Code.unexpectedResponse.rawValue),
            message: body?.message ?? "The service answered HTTP \(response.status).",
            status: response.status,
            retryAfter: response.headers["retry-after"].flatMap { Int($0) }
        )
    }

    /// Throw this from a ``TransferClient/withAccessToken(of:isolation:_:)`` body when your own backend
    /// answered 401 to the token: TransferKit renews the token once and runs the body once more.
    public static let accessTokenRejected = TransferError(
        code: .invalidToken, message: "The access token was refused.", status: 401)

    public var description: String {
        "TransferError(\(code)\(status.map { ", HTTP \($0)" } ?? "")): \(message)"
    }

    /// ``message``: one sentence for a human (in English; map ``code`` to your own words for the UI).
    public var errorDescription: String? { message }
}
