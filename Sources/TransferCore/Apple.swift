import Foundation

// Sign in with Apple: an account linked to the user's Apple ID, as a way back to it on a new phone.

/// What a verified identity token says about the user. Verifying it (signature, issuer,
/// audience, times, nonce) is the HTTP layer's job; the core only sees a verified one.
public struct AppleIdentity: Sendable, Equatable {
    /// Apple's stable user id for our team: what an account is linked by.
    public var sub: String
    /// Apple sends the email on the first sign-in only; nil afterwards.
    public var email: String?
    public var isPrivateEmail: Bool?
    /// The client id (bundle or services id) the token was issued to (its `aud`): an
    /// authorization code sent with it is exchanged, and its refresh token revoked, as that client.
    public var clientID: String?
    public init(sub: String, email: String? = nil, isPrivateEmail: Bool? = nil, clientID: String? = nil) {
        self.sub = sub
        self.email = email
        self.isPrivateEmail = isPrivateEmail
        self.clientID = clientID
    }
}

/// What Apple's token endpoint gave for an authorization code: the refresh token to keep (to
/// revoke it later), and whom Apple issued it for.
public struct AppleGrant: Sendable, Equatable {
    public var refreshToken: String
    /// The client id the code was issued to; its revocation names it.
    public var clientID: String
    /// The Apple ID Apple issued it for (the `sub` of the id_token that came with it); nil for a
    /// grant read back from a link.
    public var sub: String?
    public init(refreshToken: String, clientID: String, sub: String? = nil) {
        self.refreshToken = refreshToken
        self.clientID = clientID
        self.sub = sub
    }

    /// Revokes this grant at Apple after the commit. Apple ends the user's whole authorization
    /// of the app with it, so only for an Apple ID that leaves this service.
    func revocation(accountID: String, at now: Timestamp) -> Effect {
        .enqueue(OutboxEntry(
            kind: .appleRevoke, accountID: accountID, type: "apple.revoke",
            body: AppleRevocation(clientID: clientID, refreshToken: refreshToken).json, at: now))
    }
}

/// An account's link to an Apple ID, as stored.
public struct AppleLink: Sendable, Equatable {
    public var accountID: String
    public var sub: String
    public var email: String?
    public var isPrivateEmail: Bool?
    public var linkedAt: Timestamp
    /// Apple's refresh token, when the code exchange is configured: only ever sent back to Apple (revocation).
    public var refreshToken: String?
    /// The client id (bundle or services id) the refresh token was issued to: its revocation names it.
    public var clientID: String?
    /// False after Apple's `email-disabled`: the user stopped forwarding to the private relay address.
    public var emailEnabled: Bool
    /// When the account last arrived on a device by Sign in with Apple with this Apple ID (the
    /// winning move an Apple repeat must be: `ClaimRepeat`).
    public var movedAt: Timestamp?
    public init(
        accountID: String, sub: String, email: String?, isPrivateEmail: Bool?, linkedAt: Timestamp, refreshToken: String? = nil,
        clientID: String? = nil, emailEnabled: Bool = true, movedAt: Timestamp? = nil
    ) {
        self.movedAt = movedAt
        self.clientID = clientID
        self.emailEnabled = emailEnabled
        self.accountID = accountID
        self.sub = sub
        self.email = email
        self.isPrivateEmail = isPrivateEmail
        self.linkedAt = linkedAt
        self.refreshToken = refreshToken
    }
}

extension AppleLink {
    /// Apple's refresh token, to revoke after the commit (unlink, replacement, deletion); none
    /// when the code exchange did not keep one.
    public func revocation(at now: Timestamp) -> [Effect] {
        guard let grant else { return [] }
        return [grant.revocation(accountID: accountID, at: now)]
    }

    /// The refresh token kept for this link, and its client.
    public var grant: AppleGrant? {
        guard let refreshToken, let clientID else { return nil }
        return AppleGrant(refreshToken: refreshToken, clientID: clientID)
    }
}

/// What the outbox keeps to revoke a refresh token at Apple (never logged or listed).
public struct AppleRevocation: Sendable, Equatable, Codable {
    public var clientID: String
    public var refreshToken: String
    public init(clientID: String, refreshToken: String) {
        self.clientID = clientID
        self.refreshToken = refreshToken
    }

    public var json: String {
        String(decoding: (try? JSONEncoder().encode(self)) ?? Data(), as: UTF8.self)
    }
}

/// The single-use values `POST /v1/apple/nonce` and `POST /v1/attestation/challenge` hand out.
public enum AppleNonces {
    /// A nonce (or an attestation challenge) is good for five minutes, once.
    public static let lifetime = Duration.seconds(300)

    /// 256 random bits, base64url.
    public static func make() -> String { RandomToken.make(byteCount: 32) }

    /// What the identity token must carry for `nonce`: its SHA-256 in lower-case hex.
    public static func claim(for nonce: String) -> String { Hex.encode(SecretHash(of: nonce).bytes) }
}

/// One of Apple's server-to-server notifications, verified.
public struct AppleEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// The user stopped using Sign in with Apple with the app.
        case consentRevoked
        /// The user deleted the Apple ID (Apple has sent it as `account-delete` and as `account-deleted`).
        case accountDeleted
        case emailDisabled
        case emailEnabled
        /// A type this version does not know: acknowledged, nothing changes.
        case other(String)

        public init(type: String) {
            switch type {
            case "consent-revoked": self = .consentRevoked
            case "account-delete", "account-deleted": self = .accountDeleted
            case "email-disabled": self = .emailDisabled
            case "email-enabled": self = .emailEnabled
            default: self = .other(type)
            }
        }
    }

    /// The notification's id: a repeated one is acknowledged and ignored.
    public var jti: String
    /// When Apple signed it (`iat`): one older than `replayWindow` is acknowledged and ignored,
    /// since its `jti` may have been pruned.
    public var issuedAt: Timestamp
    public var kind: Kind
    public var sub: String
    public var email: String?
    public var isPrivateEmail: Bool?
    /// How long a notification's `jti` is kept, and how old a notification may be.
    public static let replayWindow = Duration.seconds(30 * 86_400)

    public init(jti: String, issuedAt: Timestamp, kind: Kind, sub: String, email: String? = nil, isPrivateEmail: Bool? = nil) {
        self.jti = jti
        self.issuedAt = issuedAt
        self.kind = kind
        self.sub = sub
        self.email = email
        self.isPrivateEmail = isPrivateEmail
    }
}
