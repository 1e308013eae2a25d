import Foundation

/// Proof that a login which creates an account comes from your real app on a real device (contract
/// v1.2, "Device attestation for new accounts"): what an ``AttestationProvider`` makes from a
/// challenge of the service.
///
/// The challenge itself is not part of it: TransferKit fetched it, hands it to the provider and
/// sends it beside the answer, so that a provider can never pair an answer with another challenge.
public enum Attestation: Sendable, Equatable {
    /// Apple App Attest: the key's id as `DCAppAttestService.generateKey()` returned it (base64),
    /// and the attestation object `attestKey(_:clientDataHash:)` returned, made with
    /// `clientDataHash` = SHA-256 of the challenge's UTF-8 bytes (``clientDataHash(challenge:)``).
    case apple(keyId: String, attestationObject: Data)
    /// Google Play Integrity: the token of a classic integrity request whose `nonce` is the
    /// challenge as it is (already base64url), as the Play Integrity API returned it.
    case android(integrityToken: String)

    /// What App Attest signs for `challenge`: the SHA-256 of its UTF-8 bytes (32 bytes).
    public static func clientDataHash(challenge: String) -> Data {
        Data(SHA256.hash(Data(challenge.utf8)))
    }
}

/// Attests this device when a login would create an account. Give one to
/// ``TransferClient/init(baseURL:credentials:accountList:sharesSessions:transport:clock:attestation:)``
/// (or `standard(baseURL:…, attestation:)`) to opt in: ``AppAttestProvider`` on iOS, or your own
/// (e.g. a bridge that asks Play Integrity for a token, or a fake in tests).
///
/// TransferKit asks it only for a login that creates an account (never for a login of a known
/// account, a renewal, a claim or an Apple move), with a challenge it fetched from the service
/// just before, and at most twice per login (see ``AttestationKeyReplaced``).
public protocol AttestationProvider: Sendable {
    /// The attestation of this device for `challenge` (a base64url string of 32 random bytes,
    /// single use, valid for 5 minutes).
    ///
    /// - Returns: nil when this device cannot attest at all (App Attest is not supported on the
    ///   simulator and some devices): the login goes without, and the service decides (with
    ///   `--attestation enforce` it refuses: ``TransferError/Code/attestationRequired``).
    /// - Throws: ``AttestationKeyReplaced`` when the provider threw its key away and made a new
    ///   one: TransferKit asks once more with a new challenge. Anything else fails the call with
    ///   ``TransferError/Code/attestationFailed`` (a ``TransferError`` or `CancellationError`
    ///   thrown here is passed on as it is).
    func attestation(challenge: String) async throws -> Attestation?
}

/// Thrown by an ``AttestationProvider`` whose key was refused and replaced by a new one (App
/// Attest's `DCError.invalidKey` after a reinstall, a restore or a device migration): TransferKit
/// fetches a new challenge (each is single use) and asks the provider once more.
public struct AttestationKeyReplaced: Error, Sendable, Equatable, CustomStringConvertible {
    public init() {}
    public var description: String { "The attestation key was refused and replaced by a new one." }
}

// MARK: Wire

/// `AttestationChallenge` (the answer to `POST /v1/attestation/challenge`).
struct AttestationChallengeBody: Codable, Sendable {
    var challenge: String
    var expiresIn: Int
}

/// `LoginRequest.attestation`: `platform` and `challenge`, then Apple's `keyId` and
/// `attestationObject` (standard base64) or Android's `integrityToken`.
struct AttestationBody: Codable, Sendable, Equatable {
    var platform: String
    var challenge: String
    var keyId: String? = nil
    var attestationObject: String? = nil
    var integrityToken: String? = nil

    init(_ attestation: Attestation, challenge: String) {
        self.challenge = challenge
        switch attestation {
        case .apple(let keyId, let object):
            platform = "apple"
            self.keyId = keyId
            attestationObject = object.base64EncodedString()
        case .android(let token):
            platform = "android"
            integrityToken = token
        }
    }
}
