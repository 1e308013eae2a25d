import Crypto

/// How a session's refresh token is kept without being stored.
///
/// A login of an open session must hand back the session's *current* refresh token (an app
/// and its extensions that log in side by side must not rotate each other out), yet the
/// database never holds a token a reader of a dump could use. So each session has a random
/// 32-byte key; its refresh token of generation g is HMAC-SHA256(key, "refresh:sid:g"). The key
/// is stored only wrapped twice: by the device secret (a login presents it) and by the current
/// refresh token (a refresh presents it). Either secret unwraps the key; the database alone
/// gives neither the key nor a token. A refresh derives the next generation's token and wraps
/// the key by it anew, so a rotated token unwraps nothing any more.
public struct SessionKey: Sendable, Equatable {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public static func random() -> SessionKey { SessionKey(bytes: RandomToken.randomBytes(32)) }

    /// The session's refresh token of `generation`: 43 characters of base64url, 256 bits.
    public func refreshToken(sessionID: String, generation: Int) -> String {
        let mac = HMAC<SHA256>.authenticationCode(
            for: Array("refresh:\(sessionID):\(generation)".utf8), using: SymmetricKey(data: bytes))
        return Base64URL.encode(Array(mac))
    }

    /// The key, wrapped so that only `secret` (the device secret or the current refresh token) unwraps it.
    public func wrapped(by secret: String, sessionID: String) -> [UInt8] {
        zip(bytes, Self.pad(secret, sessionID: sessionID)).map { $0 ^ $1 }
    }

    /// The key `wrapped` holds, given the secret it was wrapped by. A wrong secret gives a
    /// wrong key, which the caller notices because the token it derives has the wrong hash.
    public static func unwrap(_ wrapped: [UInt8], by secret: String, sessionID: String) -> SessionKey? {
        guard wrapped.count == 32 else { return nil }
        return SessionKey(bytes: zip(wrapped, pad(secret, sessionID: sessionID)).map { $0 ^ $1 })
    }

    /// The pad is keyed by a fixed label with the secret in the message, not keyed by the
    /// secret: HMAC shortens a key longer than 64 bytes to its SHA-256, and a device secret of
    /// up to 128 characters would then be keyed by exactly the hash the database stores.
    private static func pad(_ secret: String, sessionID: String) -> [UInt8] {
        var mac = wrapLabel
        mac.update(data: Array("\(sessionID)\u{0}\(secret)".utf8))
        return Array(mac.finalize())
    }

    /// The pad's HMAC with its fixed key already taken in, made once (not for every login).
    private static let wrapLabel = HMAC<SHA256>(key: SymmetricKey(data: Array("transfer session key wrap".utf8)))
}

/// A pair's app session as stored: never the token, never the bare key.
public struct PairSession: Sendable, Equatable {
    public var sessionID: String
    public var startedAt: Timestamp
    public var generation: Int
    /// SHA-256 of the current refresh token.
    public var refreshHash: SecretHash
    public var expiresAt: Timestamp
    /// The key wrapped by the device secret; nil for a session carried over from schema v2
    /// (its first login then opens a new session).
    public var keyByDevice: [UInt8]?
    /// The key wrapped by the current refresh token; nil for a session carried over from v2.
    public var keyByToken: [UInt8]?

    public init(
        sessionID: String, startedAt: Timestamp, generation: Int, refreshHash: SecretHash, expiresAt: Timestamp,
        keyByDevice: [UInt8]?, keyByToken: [UInt8]?
    ) {
        self.sessionID = sessionID
        self.startedAt = startedAt
        self.generation = generation
        self.refreshHash = refreshHash
        self.expiresAt = expiresAt
        self.keyByDevice = keyByDevice
        self.keyByToken = keyByToken
    }

    /// A new session with `key`, for a device that presented `deviceSecret`; and its first token.
    public static func open(
        sessionID: String, key: SessionKey, deviceSecret: String, at now: Timestamp, expiresAt: Timestamp
    ) -> (PairSession, token: String) {
        let token = key.refreshToken(sessionID: sessionID, generation: 0)
        let session = PairSession(
            sessionID: sessionID, startedAt: now, generation: 0, refreshHash: SecretHash(of: token), expiresAt: expiresAt,
            keyByDevice: key.wrapped(by: deviceSecret, sessionID: sessionID),
            keyByToken: key.wrapped(by: token, sessionID: sessionID))
        return (session, token)
    }

    /// The current refresh token, recovered with the device secret; nil when the secret does
    /// not unwrap it (a session from schema v2, or stored bytes that do not add up).
    public func currentToken(deviceSecret: String) -> String? {
        guard let wrapped = keyByDevice, let key = SessionKey.unwrap(wrapped, by: deviceSecret, sessionID: sessionID) else {
            return nil
        }
        let token = key.refreshToken(sessionID: sessionID, generation: generation)
        return SecretHash(of: token).matches(refreshHash) ? token : nil
    }

    /// The session after a refresh with its current `token`: the next generation, and its
    /// token. `fallbackKey` becomes the key of a session from schema v2 (which has none).
    public func rotated(by token: String, fallbackKey: SessionKey, expiresAt: Timestamp) -> (PairSession, token: String) {
        var key = fallbackKey
        var next = self
        if let wrapped = keyByToken, let unwrapped = SessionKey.unwrap(wrapped, by: token, sessionID: sessionID),
            SecretHash(of: unwrapped.refreshToken(sessionID: sessionID, generation: generation)).matches(refreshHash)
        {
            key = unwrapped
        } else {
            next.keyByDevice = nil
        }
        next.generation = generation + 1
        let nextToken = key.refreshToken(sessionID: sessionID, generation: next.generation)
        next.refreshHash = SecretHash(of: nextToken)
        next.keyByToken = key.wrapped(by: nextToken, sessionID: sessionID)
        next.expiresAt = expiresAt
        return (next, nextToken)
    }
}
