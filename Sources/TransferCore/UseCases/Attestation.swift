// Device attestation for new accounts (contract v1.2): the challenge a device attests, what
// an attestation leaves on its device, and the gate a login that would create an account
// passes. The verification itself (App Attest, Play Integrity: CPU and crypto) runs before
// the login's transaction, behind `AttestationVerifier`, which the server implements with
// TransferAttestation; the rules here decide from its verdict and from what the store read.

/// `--attestation`.
public enum AttestationMode: String, Sendable, CaseIterable {
    /// Attestations are not consulted (the default).
    case off
    /// Verified and recorded; the account is created whatever the result.
    case monitor
    /// A creation without a verified attestation is refused, and nothing is created.
    case enforce
}

/// The contract's `attestation.platform`.
public enum AttestationPlatform: String, Sendable, CaseIterable, Codable {
    /// Apple App Attest.
    case apple
    /// Google Play Integrity.
    case android
}

/// The `attestation` object of a login, as the device sent it.
public enum AttestationProof: Sendable, Equatable {
    /// keyId and attestationObject in base64, as `DCAppAttestService` produced them.
    case apple(challenge: String, keyID: String, attestationObject: String)
    case android(challenge: String, integrityToken: String)

    public var platform: AttestationPlatform {
        switch self {
        case .apple: .apple
        case .android: .android
        }
    }

    public var challenge: String {
        switch self {
        case .apple(let challenge, _, _), .android(let challenge, _): challenge
        }
    }
}

/// An App Attest key that a verified attestation certified: kept with the device, for
/// assertions later (the counter must rise).
public struct AttestedKey: Sendable, Equatable {
    /// SHA-256 of the public key.
    public var keyID: [UInt8]
    /// X9.62 uncompressed point (65 bytes).
    public var publicKey: [UInt8]
    public var counter: Int64
    public init(keyID: [UInt8], publicKey: [UInt8], counter: Int64) {
        self.keyID = keyID
        self.publicKey = publicKey
        self.counter = counter
    }
}

/// What verifying a proof said, before its challenge was looked up.
public enum AttestationVerdict: Sendable, Equatable {
    /// With the App Attest key (nil for Play Integrity, which certifies no key).
    case verified(AttestedKey?)
    /// `check`: a short stable name (`nonce`); `message`: the sentence the answer carries.
    case failed(check: String, message: String)
}

/// Verifies proofs. Stateless; never called inside a transaction.
public protocol AttestationVerifier: Sendable {
    func verify(_ proof: AttestationProof, now: Timestamp) async -> AttestationVerdict
}

/// `--attestation` and the verifier its platforms' flags configure.
public struct AttestationPolicy: Sendable {
    public var mode: AttestationMode
    public var verifier: (any AttestationVerifier)?
    public init(mode: AttestationMode, verifier: (any AttestationVerifier)?) {
        self.mode = mode
        self.verifier = verifier
    }
    public static let off = AttestationPolicy(mode: .off, verifier: nil)
}

/// The result a device records: `verified`, `missing`, or `failed: <check>`.
public enum AttestationOutcome: Sendable, Hashable, CustomStringConvertible {
    case verified
    case missing
    case failed(check: String)

    /// As stored and shown.
    public var description: String {
        switch self {
        case .verified: "verified"
        case .missing: "missing"
        case .failed(let check): "failed: \(check)"
        }
    }

    public init(stored text: String) throws(UnknownStoredValue) {
        switch text {
        case "verified": self = .verified
        case "missing": self = .missing
        case _ where text.hasPrefix("failed: "): self = .failed(check: String(text.dropFirst("failed: ".count)))
        default: throw UnknownStoredValue(column: "devices.attestation_outcome", value: text)
        }
    }
}

/// A device's attestation: the last result recorded when it created an account while
/// attestation was on (a verified one stays: it is never replaced by a later result).
public struct DeviceAttestation: Sendable, Equatable {
    /// nil when the attestation was missing.
    public var platform: AttestationPlatform?
    public var outcome: AttestationOutcome
    /// The App Attest key of a verified Apple attestation.
    public var key: AttestedKey?
    public var at: Timestamp
    public init(platform: AttestationPlatform?, outcome: AttestationOutcome, key: AttestedKey? = nil, at: Timestamp) {
        self.platform = platform
        self.outcome = outcome
        self.key = key
        self.at = at
    }
}

/// What a login that would create an account brings to its transaction while attestation is
/// on: the mode, and the proof's platform, challenge (as its SHA-256) and verdict, if it had one.
public struct AttestationGate: Sendable, Equatable {
    public struct Checked: Sendable, Equatable {
        public var platform: AttestationPlatform
        public var challengeHash: SecretHash
        public var verdict: AttestationVerdict
        public init(platform: AttestationPlatform, challengeHash: SecretHash, verdict: AttestationVerdict) {
            self.platform = platform
            self.challengeHash = challengeHash
            self.verdict = verdict
        }
    }
    public var mode: AttestationMode
    public var proof: Checked?
    public init(mode: AttestationMode, proof: Checked?) {
        self.mode = mode
        self.proof = proof
    }

    /// The one check the store answers: the challenge was issued here, is unused and unexpired.
    static let challengeCheck = "challenge"
    static let challengeMessage = "the challenge was not issued by this service, was used already or expired"

    /// The decision for a creation on `device` (nil: a new one), given when the proof's
    /// challenge expires (nil: unknown or used).
    func decide(device: DeviceRecord?, challengeExpiresAt: Timestamp?, now: Timestamp) -> AttestationDecision {
        // The challenge dies at its first use, good or bad.
        let consume: [Effect] = proof.map { [.consumeAttestationChallenge(hash: $0.challengeHash)] } ?? []
        if let earlier = device?.attestation, earlier.outcome == .verified {
            // A device verified once adds accounts without a new attestation.
            return AttestationDecision(
                refusal: nil, effects: consume, result: AttestationResult(platform: earlier.platform, outcome: .verified, earlier: true))
        }
        guard let proof else {
            let result = AttestationResult(platform: nil, outcome: .missing)
            if mode == .enforce { return AttestationDecision(refusal: .attestationRequired, effects: [], result: result) }
            return AttestationDecision(refusal: nil, effects: [], result: result, record: DeviceAttestation(platform: nil, outcome: .missing, at: now))
        }
        let verdict: AttestationVerdict
        if let expiresAt = challengeExpiresAt, now < expiresAt {
            verdict = proof.verdict
        } else {
            verdict = .failed(check: Self.challengeCheck, message: Self.challengeMessage)
        }
        switch verdict {
        case .verified(let key):
            let record = DeviceAttestation(platform: proof.platform, outcome: .verified, key: key, at: now)
            return AttestationDecision(
                refusal: nil, effects: consume, result: AttestationResult(platform: proof.platform, outcome: .verified), record: record)
        case .failed(let check, let message):
            let result = AttestationResult(platform: proof.platform, outcome: .failed(check: check))
            if mode == .enforce {
                return AttestationDecision(refusal: .invalidAttestation(check: check, message: message), effects: consume, result: result)
            }
            return AttestationDecision(
                refusal: nil, effects: consume, result: result,
                record: DeviceAttestation(platform: proof.platform, outcome: .failed(check: check), at: now))
        }
    }
}

/// What the gate decided for one creation.
struct AttestationDecision {
    /// Set in enforce mode: nothing is created (the challenge is still used up).
    var refusal: TransferError?
    /// The challenge used up.
    var effects: [Effect]
    var result: AttestationResult
    /// What the device records (nil: it keeps what it has).
    var record: DeviceAttestation?
}

/// The attestation of one account creation, for metrics and the audit trail.
public struct AttestationResult: Sendable, Equatable {
    /// nil when the attestation was missing.
    public var platform: AttestationPlatform?
    public var outcome: AttestationOutcome
    /// The device was verified at an earlier creation; nothing was verified now.
    public var earlier: Bool
    public init(platform: AttestationPlatform?, outcome: AttestationOutcome, earlier: Bool = false) {
        self.platform = platform
        self.outcome = outcome
        self.earlier = earlier
    }

    /// The `account.created` audit event's reason, which `transfer stats` counts by.
    public var auditReason: String { "attestation: \(outcome)" + (earlier ? " earlier" : "") }
}

extension TransferService {
    /// The gate of a login that may create an account, with its proof verified now (before
    /// any transaction); nil while attestation is off or when the login cannot create one.
    func attestationGate(_ proof: AttestationProof?, target: LoginTarget, now: Timestamp) async throws -> AttestationGate? {
        let attestation = policy.attestation
        guard attestation.mode != .off else { return nil }
        if case .account = target { return nil }  // a login to an account on the device creates none
        guard let proof else { return AttestationGate(mode: attestation.mode, proof: nil) }
        // A challenge that was never issued, was used or expired fails before any certificate
        // or signature is checked: a replayed proof costs one indexed read, not a verification.
        // (The transaction checks it again, under lock, and uses it up.)
        let hash = SecretHash(of: proof.challenge)
        let verdict: AttestationVerdict
        if let expires = try await store.attestationChallengeExpiry(hash: hash), expires > now {
            verdict = await attestation.verifier?.verify(proof, now: now)
                ?? .failed(check: "platform", message: "no attestation platform is configured on this service")
        } else {
            verdict = .failed(check: AttestationGate.challengeCheck, message: AttestationGate.challengeMessage)
        }
        return AttestationGate(
            mode: attestation.mode,
            proof: .init(platform: proof.platform, challengeHash: hash, verdict: verdict))
    }
}

