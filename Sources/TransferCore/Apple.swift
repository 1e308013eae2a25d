// Sign in with Apple: an account linked to the user's Apple ID, as a way back to it on a new phone.

/// What a verified identity token says about the user. Verifying it (signature, issuer,
/// audience, times, nonce) is the HTTP layer's job; the core only sees a verified one.
public struct AppleIdentity: Sendable, Equatable {
    /// Apple's stable user id for our team: what an account is linked by.
    public var sub: String
    /// Apple sends the email on the first sign-in only; nil afterwards.
    public var email: String?
    public var isPrivateEmail: Bool?
    public init(sub: String, email: String? = nil, isPrivateEmail: Bool? = nil) {
        self.sub = sub
        self.email = email
        self.isPrivateEmail = isPrivateEmail
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
    public init(accountID: String, sub: String, email: String?, isPrivateEmail: Bool?, linkedAt: Timestamp, refreshToken: String? = nil) {
        self.accountID = accountID
        self.sub = sub
        self.email = email
        self.isPrivateEmail = isPrivateEmail
        self.linkedAt = linkedAt
        self.refreshToken = refreshToken
    }
}

public enum AppleNonces {
    /// A nonce is good for five minutes, once.
    public static let lifetime = Duration.seconds(300)

    /// 256 random bits, base64url.
    public static func make() -> String { RandomToken.make(byteCount: 32) }

    /// What the identity token must carry for `nonce`: its SHA-256 in lower-case hex.
    public static func claim(for nonce: String) -> String {
        let digits = Array("0123456789abcdef".unicodeScalars)
        var out = ""
        for byte in SecretHash(of: nonce).bytes {
            out.unicodeScalars.append(digits[Int(byte >> 4)])
            out.unicodeScalars.append(digits[Int(byte & 15)])
        }
        return out
    }
}
