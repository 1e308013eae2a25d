import Crypto
import Foundation

// The keys that sign access tokens. One is current and signs; a rotation retires it and a new
// one signs from its commit on, on every node. A retired key stays published (JWKS) until
// every token it signed has expired, then leaves, and the pruner deletes it.

/// A token signing key as stored: an Ed25519 private key, the raw 32 bytes in base64, or
/// sealed under a key-encryption key (`SigningKeysAtRest.swift`).
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

/// The signing keys as a node starts, oldest first. With `kek`, plain keys are sealed under it
/// first; when none is current, `candidate` (sealed under `kek` when given) becomes the key.
/// Once, even when several nodes start together. When a key is under another key-encryption
/// key than `kek` (or any, without one), nothing changes: the keys come back as they are and
/// `SigningKeysAtRest.problem` says why the node cannot use them.
public struct SigningKeysCommand: StoreOperation {
    public var candidate: SigningKeyRecord
    public var kek: KeyEncryptionKey?
    public var now: Timestamp
    public init(candidate: SigningKeyRecord, kek: KeyEncryptionKey?, now: Timestamp) {
        self.candidate = candidate
        self.kek = kek
        self.now = now
    }

    public var reads: [FactKey] { [.signingKeys] }

    /// Pure but for the nonces of what it seals.
    public func plan(_ facts: Facts) throws -> Plan<[SigningKeyRecord]> {
        let keys = try facts.signingKeys()
        guard case .success(let changed) = SigningKeysAtRest.bring(keys, under: kek) else { return Plan(keys) }
        let effects = SigningKeysAtRest.effects(
            storing: changed, of: keys, under: kek, now: now, by: .system, reason: "a node started with a key-encryption key")
        let stored = keys.map { key in changed.first { $0.kid == key.kid } ?? key }
        guard SigningKeys.current(stored) == nil else { return Plan(stored, effects) }
        return Plan(stored + [candidate], effects + [.addSigningKey(candidate)])
    }
}

/// What a signing-key rotation did.
public enum Rotation: Sendable, Equatable {
    /// `new` signs from now on; `retired` (nil when there was no key) stays published for a while.
    case rotated(retired: SigningKeyRecord?, new: SigningKeyRecord)
    /// The key to replace was replaced already (another node or operator rotated first): `current` signs.
    case alreadyRotated(current: SigningKeyRecord)
    /// Nothing changed: the keys are under another key-encryption key than the new one's (or
    /// under one, and the new key would be plain).
    case refused(SigningKeyAtRestError)
}

/// Retires the current key and makes `candidate` current, in one transaction. With
/// `replacing`, only if that key is still current: nodes that decide together to rotate an
/// old key rotate it once. With `kek` (`candidate` is sealed under it), plain keys are sealed
/// too, and keys under another key-encryption key refuse the rotation; without, sealed keys do.
public struct RotateSigningKeyCommand: StoreOperation {
    public var candidate: SigningKeyRecord
    public var kek: KeyEncryptionKey?
    public var replacing: String?
    public var now: Timestamp
    public var by: Initiator
    public var reason: String
    public init(candidate: SigningKeyRecord, kek: KeyEncryptionKey?, replacing: String? = nil, now: Timestamp, by: Initiator, reason: String) {
        self.candidate = candidate
        self.kek = kek
        self.replacing = replacing
        self.now = now
        self.by = by
        self.reason = reason
    }

    public var reads: [FactKey] { [.signingKeys] }

    /// Pure but for the nonces of what it seals.
    public func plan(_ facts: Facts) throws -> Plan<Rotation> {
        let keys = try facts.signingKeys()
        let current = SigningKeys.current(keys)
        if let replacing, let current, current.kid != replacing { return Plan(.alreadyRotated(current: current)) }
        let changed: [SigningKeyRecord]
        switch SigningKeysAtRest.bring(keys, under: kek) {
        case .failure(let problem): return Plan(.refused(problem))
        case .success(let records): changed = records
        }
        var retired = current
        retired?.retiredAt = now
        return Plan(.rotated(retired: retired, new: candidate), SigningKeysAtRest.effects(
            storing: changed, of: keys, under: kek, now: now, by: by, reason: "with the rotation: \(reason)")
            + (current.map { [Effect.retireSigningKey(kid: $0.kid, at: now)] } ?? []) + [
            .addSigningKey(candidate),
            .audit(AuditEvent(
                at: now, kind: .signingKeyRotated, accountID: nil, actor: by,
                reason: "signing key \(current?.kid ?? "none") → \(candidate.kid): \(reason)")),
        ])
    }
}

extension TransferService {
    /// `transfer keys rotate`: a new key signs from the commit on, sealed under `kek` when
    /// given. With `replacing`, only if that key is still current (two operators rotating at
    /// once make one new key).
    public func rotateSigningKey(replacing: String?, kek: KeyEncryptionKey?, by: Initiator, reason: String) async throws -> Rotation {
        let now = clock.now()
        return try await store.execute(RotateSigningKeyCommand(
            candidate: .generate(now: now, kek: kek), kek: kek, replacing: replacing, now: now, by: by, reason: reason)).get()
    }
}
