import Foundation

// The JSON bodies exchanged with the service, field for field as in openapi.yaml
// (components/schemas). Property names are the JSON keys (synthesized Codable); optional
// request fields that are nil are left out of the JSON. The tests check these names against
// openapi.yaml, so rename nothing here without the document.

// MARK: Requests

/// `LoginRequest`.
struct LoginRequest: Codable, Sendable {
    var deviceId: String
    var deviceSecret: String
    var accountId: String? = nil
    var newAccount: Bool? = nil
    /// Only on a login that creates an account (contract v1.2).
    var attestation: AttestationBody? = nil
}

/// `RefreshRequest`.
struct RefreshRequest: Codable, Sendable {
    var refreshToken: String
}

/// `TransferRequest` (set up a transfer on the old phone): `email` and `temporaryPassword`
/// (`method` left out: a v1 set-up, which every server version takes), or `method: "code"` alone.
struct TransferRequest: Codable, Sendable {
    var method: String? = nil
    var email: String? = nil
    var temporaryPassword: String? = nil
}

/// `ClaimRequest` (on the new phone): one kind of credentials (email and temporary password,
/// a transfer code, or a recovery code), and the device.
struct ClaimRequest: Codable, Sendable {
    var email: String? = nil
    var temporaryPassword: String? = nil
    var transferCode: String? = nil
    var recoveryCode: String? = nil
    var backupKey: String? = nil
    var deviceId: String
    var deviceSecret: String
    var replaceExistingAccount: Bool? = nil
    var addAccount: Bool? = nil
    var abandonExisting: Bool? = nil
}

/// `CurrentAccountRequest`.
struct CurrentAccountRequest: Codable, Sendable {
    var accountId: String
}

/// `PushTokenRequest`.
struct PushTokenRequest: Codable, Sendable {
    var provider: String
    var token: String
    var environment: String? = nil
}

/// `PushPreferencesRequest`.
struct PushPreferencesRequest: Codable, Sendable {
    var mode: String
}

/// `AccountPushRequest`.
struct AccountPushRequest: Codable, Sendable {
    var enabled: Bool
}

/// `HandoffCodeRequest` (the host app asks for a code for a sibling app).
struct HandoffCodeRequest: Codable, Sendable {
    var clientId: String
    var codeChallenge: String
    var codeChallengeMethod: String = PKCE.method
}

/// `HandoffTokenRequest` (the sibling app redeems the code).
struct HandoffTokenRequest: Codable, Sendable {
    var code: String
    var codeVerifier: String
    var clientId: String
}

/// `AppleLinkRequest` (link the caller's account to an Apple ID).
struct AppleLinkRequest: Codable, Sendable {
    var identityToken: String
    var nonce: String
    var authorizationCode: String? = nil
}

/// `AppleMoveRequest` (bring the account linked to an Apple ID onto this device, as a claim).
struct AppleMoveRequest: Codable, Sendable {
    var identityToken: String
    var nonce: String
    var deviceId: String
    var deviceSecret: String
    var replaceExistingAccount: Bool? = nil
    var addAccount: Bool? = nil
    var abandonExisting: Bool? = nil
}

// MARK: Responses

/// `Session` (login, refresh, claim, hand-off).
struct SessionBody: Codable, Sendable {
    var accountId: String
    var userName: String
    var deviceId: String
    var created: Bool
    var migrationFlag: Bool
    var accessToken: String
    var tokenType: String
    var expiresIn: Int
    var refreshToken: String
    var accounts: [AccountOnDevice]
}

/// `AccountOnDevice` (the `accounts` of a session and of a `410 device_transferred` body).
struct AccountOnDevice: Codable, Sendable {
    var accountId: String
    var userName: String
    var current: Bool
}

/// `DeviceAccounts` (`GET /v1/devices/accounts`).
struct DeviceAccountsBody: Codable, Sendable {
    var deviceId: String
    var accounts: [DeviceAccountBody]
}

/// An item of `DeviceAccounts.accounts`.
struct DeviceAccountBody: Codable, Sendable {
    var accountId: String
    var userName: String
    var current: Bool
    var addedAt: Date
    var lastLoginAt: Date?
    var pushEnabled: Bool
}

/// `Transfer` (the answer to setting up a transfer).
struct TransferBody: Codable, Sendable {
    var email: String
    var expiresAt: Date
}

/// `TransferCode` (the answer to setting up a transfer with `method: "code"`).
struct TransferCodeBody: Codable, Sendable {
    var transferCode: String
    var expiresAt: Date
}

/// `RecoveryCode` (the answer to `PUT /v1/me/recovery-code`).
struct RecoveryCodeBody: Codable, Sendable {
    var recoveryCode: String
    var createdAt: Date
}

/// `BackupKeyRequest` (`PUT /v1/me/backup-key`).
struct BackupKeyRequest: Codable, Sendable {
    var store: String
}

/// `BackupKey` (the answer to `PUT /v1/me/backup-key`).
struct BackupKeyBody: Codable, Sendable {
    var backupKey: String
    var store: String
    var createdAt: Date
}

/// `HandoffCode`.
struct HandoffCodeBody: Codable, Sendable {
    var code: String
    var expiresIn: Int
}

/// `Me` (`GET /v1/me`).
struct MeBody: Codable, Sendable {
    var accountId: String
    var userName: String
    var createdAt: Date
    var migrationFlag: Bool
    var transferId: String?
    var transfer: MeTransferBody?
    var devices: [MeDeviceBody]
    var apple: AppleLinkBody?
    /// v1.2: `transfer`, `apple`, `recoveryCode`; nil from a server before v1.2.
    var waysBack: [String]? = nil
    /// v1.3: the account's unused backup keys by store; nil from a server before v1.3.
    var backupKeys: [MeBackupKeyBody]? = nil
}

/// An item of `Me.backupKeys`.
struct MeBackupKeyBody: Codable, Sendable {
    var store: String
    var createdAt: Date
}

/// `Me.transfer`: `email` only for a password transfer; `method` from v1.2 on.
struct MeTransferBody: Codable, Sendable {
    var email: String?
    var method: String? = nil
    var createdAt: Date
    var expiresAt: Date
}

/// An item of `Me.devices`.
struct MeDeviceBody: Codable, Sendable {
    var deviceId: String
    var boundAt: Date
    var lastLoginAt: Date?
    var current: Bool
}

/// `AppleLink` (the answer to linking), and `Me.apple`, which adds `linkedAt`.
struct AppleLinkBody: Codable, Sendable {
    var email: String?
    var isPrivateEmail: Bool?
    var linkedAt: Date? = nil
}

/// `AppleNonce`.
struct AppleNonceBody: Codable, Sendable {
    var nonce: String
    var expiresIn: Int
}

/// `Error`, and the extra fields of `TransferredError`.
struct ErrorBody: Codable, Sendable {
    var error: String
    var message: String
    var transferredAt: Date? = nil
    var accounts: [AccountOnDevice]? = nil
}

// MARK: Coding

enum Wire {
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = .sortedKeys
        return encoder
    }

    /// Dates are RFC 3339, with or without fractional seconds.
    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = parseDate(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not an RFC 3339 date: \(text)")
            }
            return date
        }
        return decoder
    }

    static func parseDate(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601) { return date }
        return try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)
    }

    static func encode(_ value: some Encodable) throws -> Data {
        try encoder().encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, from response: HTTPResponse) throws -> T {
        do {
            return try decoder().decode(type, from: response.body)
        } catch {
            throw TransferError(.unexpectedResponse, "The service's answer (HTTP \(response.status)) could not be read: \(error)", status: response.status)
        }
    }
}
