/// Every way a request can fail in the domain. The HTTP layer maps each case to
/// the contract's status and error code; the CLI maps them to exit codes.
public enum TransferError: Error, Equatable, Sendable {
    // Field rules.
    case invalidDeviceID
    case invalidDeviceSecret
    case invalidEmail(String)
    case weakPassword(String)

    // Auto-login and tokens.
    case invalidDeviceCredentials
    /// `accounts`: the accounts left on the device, for the app to pick from.
    case deviceTransferred(at: Timestamp, accounts: [ListedAccount] = [])
    case deviceRevoked
    case invalidRefreshToken
    case invalidToken
    /// A sibling app's token on an endpoint that is the host app's (`403 insufficient_scope`, RFC 6750 §3.1).
    case insufficientScope
    /// A change of the account's ways back (or its deletion) without the secret of the device
    /// the access token was issued to (`401 device_proof_required`): a token alone is not enough.
    case deviceProofRequired

    // Transfers.
    case emailInUse
    case invalidTransferCredentials
    case tooManyAttempts(retryAfterSeconds: Int)
    case deviceHasAccount
    case deviceAlreadyBound
    case deviceRetired

    // Several accounts per device.
    case accountNotOnDevice
    case deviceAccountLimit(Int)
    case accountWouldBeLost

    // Deletion.
    /// The account was deleted (`410 account_deleted`).
    case accountDeleted
    /// No account has this id, or it was deleted (`404 account_not_found`, the service API).
    case accountNotFound

    // Push routing and the service API.
    case invalidPushToken(String)
    case invalidServiceKey

    // Sign in with Apple.
    /// The message says which check failed.
    case invalidIdentityToken(String)
    case appleIDInUse
    case appleIDNotLinked
    /// Apple did not give a refresh token for the `authorizationCode` (used, expired, another
    /// app's, or another Apple ID's): `400 invalid_request`, the message says which.
    case invalidAuthorizationCode(String)
    // Sibling-app hand-off.
    /// A hand-off code that is unknown, expired, used, or presented with the wrong verifier or client: one answer for all.
    case invalidGrant
    /// A client id that is not one of `--handoff-clients`.
    case unknownClient

    // Device attestation.
    /// `--attestation enforce`: a login that would create an account carries no attestation.
    case attestationRequired
    /// `--attestation enforce`: the attestation failed `check`; `message` says how.
    case invalidAttestation(check: String, message: String)

    /// A feature that is off in this deployment (`501 not_configured`).
    case notConfigured(String)

    // Capacity.
    /// The database cannot be reached (`503 unavailable`). `outcomeUnknown`: the connection was
    /// lost after the COMMIT was sent, so the change may or may not have been saved; every
    /// operation is idempotent or conditional, so the client retries either way.
    case unavailable(outcomeUnknown: Bool)
    case overloaded(retryAfterSeconds: Int)
    case rateLimited(retryAfterSeconds: Int)
}

extension TransferError {
    /// The contract's stable error code.
    public var code: String {
        switch self {
        case .invalidDeviceID: "invalid_device_id"
        case .invalidDeviceSecret: "invalid_device_secret"
        case .invalidEmail: "invalid_email"
        case .weakPassword: "weak_password"
        case .invalidDeviceCredentials: "invalid_device_credentials"
        case .deviceTransferred: "device_transferred"
        case .deviceRevoked: "device_revoked"
        case .invalidRefreshToken: "invalid_refresh_token"
        case .invalidToken: "invalid_token"
        case .insufficientScope: "insufficient_scope"
        case .deviceProofRequired: "device_proof_required"
        case .invalidGrant: "invalid_grant"
        case .unknownClient: "unknown_client"
        case .emailInUse: "email_in_use"
        case .invalidTransferCredentials: "invalid_transfer_credentials"
        case .tooManyAttempts: "too_many_attempts"
        case .deviceHasAccount: "device_has_account"
        case .deviceAlreadyBound: "device_already_bound"
        case .deviceRetired: "device_retired"
        case .accountNotOnDevice: "account_not_on_device"
        case .deviceAccountLimit: "device_account_limit"
        case .accountWouldBeLost: "account_would_be_lost"
        case .accountDeleted: "account_deleted"
        case .invalidPushToken: "invalid_push_token"
        case .invalidServiceKey: "invalid_service_key"
        case .invalidIdentityToken: "invalid_identity_token"
        case .appleIDInUse: "apple_id_in_use"
        case .appleIDNotLinked: "apple_id_not_linked"
        case .accountNotFound: "account_not_found"
        case .invalidAuthorizationCode: "invalid_request"
        case .attestationRequired: "attestation_required"
        case .invalidAttestation: "invalid_attestation"
        case .notConfigured: "not_configured"
        case .unavailable: "unavailable"
        case .overloaded: "overloaded"
        case .rateLimited: "rate_limited"
        }
    }
}
