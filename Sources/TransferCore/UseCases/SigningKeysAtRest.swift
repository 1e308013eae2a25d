import Crypto
import Foundation

// The signing keys at rest. With a key-encryption key (`--key-encryption-key-file`) every
// signing key's private key is stored sealed with AES-256-GCM, its kid as the associated data:
// a copy of the database alone signs nothing, and a sealed key copied into another row does
// not open. Without one they are stored as before, the raw key in base64. The stored text
// says which: `v1.aesgcm:<kek id>:<base64(nonce | ciphertext | tag)>`, or plain base64 (which
// never holds a colon). All keys are under one key-encryption key, or all plain: every change
// that adds or rewrites a key brings the others under its key-encryption key in the same
// transaction, or changes nothing.

/// The key that seals the signing keys: 32 random bytes. Its `id` (a short hash) names it in
/// the stored keys and in messages; nothing prints the key itself.
public struct KeyEncryptionKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    let key: SymmetricKey
    /// 12 hexadecimal digits of the SHA-256 of a label and the key.
    public let id: String

    public static let byteCount = 32

    /// The key from its base64 text (spaces and line breaks around it ignored); nil unless
    /// that is exactly 32 bytes.
    public init?(base64 text: String) {
        guard let bytes = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return nil }
        self.init(bytes: bytes)
    }

    /// nil unless `bytes` is 32 bytes long.
    public init?(bytes: Data) {
        guard bytes.count == Self.byteCount else { return nil }
        key = SymmetricKey(data: bytes)
        id = Hex.encode(SHA256.hash(data: Data("transfer key-encryption key id\0".utf8) + bytes).prefix(6))
    }

    /// Never the key.
    public var description: String { "KeyEncryptionKey(\(id))" }
    public var debugDescription: String { description }

    /// `v1.aesgcm:` then this key's id, then the sealed `raw` bound to `kid`.
    func seal(_ raw: Data, kid: String) -> String {
        // Sealing throws only for a key that is not 128, 192 or 256 bits long or a nonce of
        // another size than 12 bytes; the nonce is then random and `combined` is never nil.
        guard let combined = try? AES.GCM.seal(raw, using: key, authenticating: Data(kid.utf8)).combined else {
            preconditionFailure("AES-256-GCM with a random 12-byte nonce did not seal")
        }
        return StoredPrivateKey.sealedPrefix + id + ":" + combined.base64EncodedString()
    }

    /// The raw key sealed in `sealed` for `kid`; nil when it does not open (another kid, altered).
    func open(_ sealed: Data, kid: String) -> Data? {
        guard let box = try? AES.GCM.SealedBox(combined: sealed) else { return nil }
        return try? AES.GCM.open(box, using: key, authenticating: Data(kid.utf8))
    }
}

/// How a signing key's private key is stored (the `private_key` column).
public enum StoredPrivateKey: Sendable, Equatable {
    /// Stored before a key-encryption key was given: the raw key, base64.
    case plain(Data)
    /// Sealed under the key-encryption key `kekID`: nonce, ciphertext and tag.
    case sealed(kekID: String, Data)
    /// Neither: altered, or written by a later version.
    case unreadable

    static let sealedPrefix = "v1.aesgcm:"

    public init(_ text: String) {
        if text.hasPrefix(Self.sealedPrefix) {
            let rest = text.dropFirst(Self.sealedPrefix.count).split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard rest.count == 2, !rest[0].isEmpty, let box = Data(base64Encoded: String(rest[1])) else { self = .unreadable; return }
            self = .sealed(kekID: String(rest[0]), box)
        } else if !text.contains(":"), let raw = Data(base64Encoded: text) {
            self = .plain(raw)
        } else {
            self = .unreadable
        }
    }

    /// The key-encryption key it is sealed under; nil when it is not sealed.
    public var kekID: String? { if case .sealed(let id, _) = self { id } else { nil } }
}

/// Why the signing keys cannot be read with the key-encryption key at hand (or without one).
/// Names keys and key-encryption keys by their ids, never a key.
public enum SigningKeyAtRestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The keys are sealed under `kekID` and no key-encryption key was given.
    case keyEncryptionKeyNeeded(kekID: String)
    /// The keys are sealed under `needed`, and the key-encryption key given is `given`.
    case otherKeyEncryptionKey(needed: String, given: String)
    /// Sealed under the key-encryption key given, but it does not open for its kid: altered,
    /// or copied from another row.
    case doesNotOpen(kid: String, kekID: String)
    /// Neither a raw key in base64 nor a sealed one.
    case unreadable(kid: String)

    public var description: String {
        switch self {
        case .keyEncryptionKeyNeeded(let id):
            "the signing keys are encrypted with key-encryption key \(id), and no key-encryption key was given"
        case .otherKeyEncryptionKey(let needed, let given):
            "the signing keys are encrypted with key-encryption key \(needed), not with the one given (\(given))"
        case .doesNotOpen(let kid, let id):
            "signing key \(kid) does not decrypt with key-encryption key \(id): it was altered or copied from another row"
        case .unreadable(let kid):
            "signing key \(kid) is stored in a form this version does not read"
        }
    }
}

extension SigningKeyRecord {
    /// How its private key is stored.
    public var stored: StoredPrivateKey { StoredPrivateKey(privateKey) }

    /// The raw private key: opened with `kek` when it is sealed.
    public func rawPrivateKey(_ kek: KeyEncryptionKey?) throws(SigningKeyAtRestError) -> Data {
        switch stored {
        case .plain(let raw): return raw
        case .unreadable: throw .unreadable(kid: kid)
        case .sealed(let id, let box):
            guard let kek else { throw .keyEncryptionKeyNeeded(kekID: id) }
            guard kek.id == id else { throw .otherKeyEncryptionKey(needed: id, given: kek.id) }
            guard let raw = kek.open(box, kid: kid) else { throw .doesNotOpen(kid: kid, kekID: id) }
            return raw
        }
    }

    /// A new Ed25519 key, sealed under `kek` when one is given; its `kid` is the first 16
    /// base64url characters of the public key's SHA-256.
    public static func generate(now: Timestamp, kek: KeyEncryptionKey?) -> SigningKeyRecord {
        let key = Curve25519.Signing.PrivateKey()
        let kid = kid(for: key.publicKey)
        return SigningKeyRecord(
            kid: kid, algorithm: "EdDSA", privateKey: kek?.seal(key.rawRepresentation, kid: kid) ?? key.rawRepresentation.base64EncodedString(),
            createdAt: now)
    }
}

public enum SigningKeysAtRest {
    /// What keeps `kek` (nil: none) from reading every one of `keys`, from the ids alone (no
    /// key is opened); nil when nothing does. A plain key is read with or without one.
    public static func problem(_ keys: [SigningKeyRecord], kek: KeyEncryptionKey?) -> SigningKeyAtRestError? {
        for key in keys {
            switch key.stored {
            case .plain: continue
            case .unreadable: return .unreadable(kid: key.kid)
            case .sealed(let id, _):
                guard let kek else { return .keyEncryptionKeyNeeded(kekID: id) }
                if id != kek.id { return .otherKeyEncryptionKey(needed: id, given: kek.id) }
            }
        }
        return nil
    }

    /// The keys of `keys` that change to be all under `kek`, as they are then stored: plain
    /// ones sealed, those under `old` opened and sealed again; those under `kek` stay as they
    /// are. Without `kek`, nothing changes, and sealed keys are refused. Refused as a whole
    /// when one key is under another key-encryption key or does not open.
    public static func bring(
        _ keys: [SigningKeyRecord], under kek: KeyEncryptionKey?, opening old: KeyEncryptionKey? = nil
    ) -> Result<[SigningKeyRecord], SigningKeyAtRestError> {
        guard let kek else {
            if let problem = problem(keys, kek: nil) { return .failure(problem) }
            return .success([])
        }
        var changed: [SigningKeyRecord] = []
        for key in keys where key.stored.kekID != kek.id {
            do throws(SigningKeyAtRestError) {
                var sealed = key
                sealed.privateKey = kek.seal(try key.rawPrivateKey(old), kid: key.kid)
                changed.append(sealed)
            } catch .keyEncryptionKeyNeeded(let needed), .otherKeyEncryptionKey(let needed, _) {
                return .failure(.otherKeyEncryptionKey(needed: needed, given: old?.id ?? kek.id))
            } catch {
                return .failure(error)
            }
        }
        return .success(changed)
    }

    /// Stores `changed` (from `bring(keys, …)`), and says so in the audit trail: how many,
    /// and the ids of the key-encryption keys before and after, never a key.
    static func effects(
        storing changed: [SigningKeyRecord], of keys: [SigningKeyRecord], under kek: KeyEncryptionKey?, now: Timestamp, by: Initiator,
        reason: String
    ) -> [Effect] {
        guard let kek, !changed.isEmpty else { return [] }
        let kids = Set(changed.map(\.kid))
        let was = Set(keys.filter { kids.contains($0.kid) }.map { $0.stored.kekID ?? "none" }).sorted().joined(separator: ", ")
        return changed.map { Effect.setSigningKeyPrivateKey(kid: $0.kid, privateKey: $0.privateKey) } + [
            .audit(AuditEvent(
                at: now, kind: .signingKeysEncrypted, accountID: nil, actor: by,
                reason: "\(changed.count) signing key(s) encrypted with key-encryption key \(kek.id) (was: \(was)): \(reason)")),
        ]
    }
}

/// What `transfer keys rotate-kek` did.
public enum Reencryption: Sendable, Equatable {
    /// `count` keys are now sealed under the new key-encryption key (the others were already).
    case reencrypted(count: Int, of: Int)
    /// Nothing changed: a key is under another key-encryption key than the old one given, or does not open.
    case refused(SigningKeyAtRestError)
}

/// Seals every signing key under `new`, opening those under `old`, in one transaction, or
/// changes nothing.
public struct ReencryptSigningKeysCommand: StoreOperation {
    public var new: KeyEncryptionKey
    public var old: KeyEncryptionKey?
    public var now: Timestamp
    public var by: Initiator
    public var reason: String
    public init(new: KeyEncryptionKey, old: KeyEncryptionKey?, now: Timestamp, by: Initiator, reason: String) {
        self.new = new
        self.old = old
        self.now = now
        self.by = by
        self.reason = reason
    }

    public var reads: [FactKey] { [.signingKeys] }

    /// Pure but for the nonces of what it seals.
    public func plan(_ facts: Facts) throws -> Plan<Reencryption> {
        let keys = try facts.signingKeys()
        switch SigningKeysAtRest.bring(keys, under: new, opening: old) {
        case .failure(.otherKeyEncryptionKey(let needed, _)) where old == nil: return Plan(.refused(.keyEncryptionKeyNeeded(kekID: needed)))
        case .failure(let problem): return Plan(.refused(problem))
        case .success(let changed):
            return Plan(
                .reencrypted(count: changed.count, of: keys.count),
                SigningKeysAtRest.effects(storing: changed, of: keys, under: new, now: now, by: by, reason: reason))
        }
    }
}

extension TransferService {
    /// `transfer keys rotate-kek`: every signing key sealed under `new` (opened with `old`).
    public func reencryptSigningKeys(new: KeyEncryptionKey, old: KeyEncryptionKey?, by: Initiator, reason: String) async throws -> Reencryption {
        try await store.execute(ReencryptSigningKeysCommand(new: new, old: old, now: clock.now(), by: by, reason: reason)).get()
    }
}
