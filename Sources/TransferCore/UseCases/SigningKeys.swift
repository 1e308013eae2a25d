import Crypto
import Foundation

// The keys that sign access tokens. One is current and signs; a rotation retires it and a new
// one signs from its commit on, on every node. A retired key stays published (JWKS) until
// every token it signed has expired, then leaves, and the pruner deletes it.

/// A token signing key as stored: an Ed25519 private key (raw 32 bytes, base64).
public struct SigningKeyRecord: Sendable, Equatable {
    public var kid: String
    public var algorithm: String
    public var privateKey: String
    public var createdAt: Timestamp
    /// When a newer key replaced it; nil for the current key.
    public var retiredAt: Timestamp?
    public init(kid: String, algorithm: String, privateKey: String, createdAt: Timestamp, retiredAt: Timestamp? = nil) {
        self.kid = kid
        self.algorithm = algorithm
        self.privateKey = privateKey
        self.createdAt = createdAt
        self.retiredAt = retiredAt
    }

    /// A new Ed25519 key; its `kid` is the first 16 base64url characters of the public key's SHA-256.
    public static func generate(now: Timestamp) -> SigningKeyRecord {
        let key = Curve25519.Signing.PrivateKey()
        return SigningKeyRecord(
            kid: kid(for: key.publicKey), algorithm: "EdDSA", privateKey: key.rawRepresentation.base64EncodedString(), createdAt: now)
    }

    public static func kid(for key: Curve25519.Signing.PublicKey) -> String {
        String(Base64URL.encode(Array(SHA256.hash(data: key.rawRepresentation))).prefix(16))
    }

    /// When a retired key leaves the JWKS: the longest an access token it signed can live,
    /// after the retirement, plus `SigningKeys.margin`. nil for the current key.
    public func leavesJWKS(accessTTL: Duration) -> Timestamp? { retiredAt.map { $0 + accessTTL + SigningKeys.margin } }

    /// Whether `/.well-known/jwks.json` publishes it (and tokens verify with it) at `now`.
    public func isPublished(accessTTL: Duration, now: Timestamp) -> Bool { leavesJWKS(accessTTL: accessTTL).map { now < $0 } ?? true }
}

public enum SigningKeys {
    /// How long past the access tokens' lifetime a retired key stays published: nodes pick a
    /// rotation up within seconds (they may sign with the old key until then) and clocks differ.
    public static let margin = Duration.seconds(120)
    /// A key that left the JWKS is deleted once it has been out this long (its private key too).
    public static let keptAfterLeaving = Duration.seconds(86_400)

    /// The pruner deletes the keys retired before this: a key retired then left the JWKS
    /// (``SigningKeyRecord/leavesJWKS(accessTTL:)``) at least `keptAfterLeaving` ago.
    public static func pruneRetiredBefore(now: Timestamp, accessTTL: Duration) -> Timestamp {
        now - accessTTL - margin - keptAfterLeaving
    }

    /// The key that signs: the one not retired.
    public static func current(_ keys: [SigningKeyRecord]) -> SigningKeyRecord? { keys.last { $0.retiredAt == nil } }

    /// The keys `/.well-known/jwks.json` publishes (and tokens verify with) at `now`, oldest first.
    public static func published(_ keys: [SigningKeyRecord], accessTTL: Duration, now: Timestamp) -> [SigningKeyRecord] {
        keys.filter { $0.isPublished(accessTTL: accessTTL, now: now) }
    }
}

/// The signing keys, oldest first. When none is current, `candidate` becomes the key (once,
/// even when several nodes start together).
public struct SigningKeysCommand: StoreOperation {
    public var candidate: SigningKeyRecord
    public var now: Timestamp
    public init(candidate: SigningKeyRecord, now: Timestamp) {
        self.candidate = candidate
        self.now = now
    }

    public var reads: [FactKey] { [.signingKeys] }

    public func plan(_ facts: Facts) throws -> Plan<[SigningKeyRecord]> {
        let keys = try facts.signingKeys()
        guard SigningKeys.current(keys) == nil else { return Plan(keys) }
        return Plan(keys + [candidate], [.addSigningKey(candidate)])
    }
}

/// What a signing-key rotation did (a rotation is never refused).
public enum Rotation: Sendable, Equatable {
    /// `new` signs from now on; `retired` (nil when there was no key) stays published for a while.
    case rotated(retired: SigningKeyRecord?, new: SigningKeyRecord)
    /// The key to replace was replaced already (another node or operator rotated first): `current` signs.
    case alreadyRotated(current: SigningKeyRecord)
}

/// Retires the current key and makes `candidate` current, in one transaction. With
/// `replacing`, only if that key is still current: nodes that decide together to rotate an
/// old key rotate it once.
public struct RotateSigningKeyCommand: StoreOperation {
    public var candidate: SigningKeyRecord
    public var replacing: String?
    public var now: Timestamp
    public var by: Initiator
    public var reason: String
    public init(candidate: SigningKeyRecord, replacing: String? = nil, now: Timestamp, by: Initiator, reason: String) {
        self.candidate = candidate
        self.replacing = replacing
        self.now = now
        self.by = by
        self.reason = reason
    }

    public var reads: [FactKey] { [.signingKeys] }

    public func plan(_ facts: Facts) throws -> Plan<Rotation> {
        let current = SigningKeys.current(try facts.signingKeys())
        if let replacing, let current, current.kid != replacing { return Plan(.alreadyRotated(current: current)) }
        var retired = current
        retired?.retiredAt = now
        return Plan(.rotated(retired: retired, new: candidate), (current.map { [Effect.retireSigningKey(kid: $0.kid, at: now)] } ?? []) + [
            .addSigningKey(candidate),
            .audit(AuditEvent(
                at: now, kind: .signingKeyRotated, accountID: nil, actor: by,
                reason: "signing key \(current?.kid ?? "none") → \(candidate.kid): \(reason)")),
        ])
    }
}

extension TransferService {
    /// `transfer keys rotate`: a new key signs from the commit on. With `replacing`, only if
    /// that key is still current (two operators rotating at once make one new key).
    public func rotateSigningKey(replacing: String?, by: Initiator, reason: String) async throws -> Rotation {
        let now = clock.now()
        return try await store.execute(RotateSigningKeyCommand(candidate: .generate(now: now), replacing: replacing, now: now, by: by, reason: reason)).get()
    }
}
