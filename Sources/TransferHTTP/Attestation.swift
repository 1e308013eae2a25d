import Foundation
import TransferAttestation
import TransferCore

/// The service's `AttestationVerifier`: App Attest and Play Integrity as configured
/// (`--app-attest-*`, `--play-integrity-*`). Called by a login before its transaction, in
/// the request's task on Swift's cooperative pool (Hummingbird runs handlers there, not on
/// the NIO event loops): a verification is a few signature checks, no I/O.
struct PlatformAttestationVerifier: AttestationVerifier {
    let appAttest: AppAttestVerifier?
    let playIntegrity: PlayIntegrityVerifier?

    func verify(_ proof: AttestationProof, now: Timestamp) async -> AttestationVerdict {
        switch proof {
        case .apple(let challenge, let keyID, let object):
            guard let appAttest else {
                return .failed(check: "platform", message: "App Attest is not configured on this service (--app-attest-app-ids)")
            }
            do {
                let key = try await appAttest.verify(keyIDBase64: keyID, attestationObjectBase64: object, challenge: challenge, now: now.date)
                return .verified(AttestedKey(keyID: key.keyID, publicKey: key.x963, counter: Int64(key.counter)))
            } catch {
                return .failed(check: error.check, message: error.message)
            }
        case .android(let challenge, let token):
            guard let playIntegrity else {
                return .failed(check: "platform", message: "Play Integrity is not configured on this service (--play-integrity-packages)")
            }
            do {
                _ = try await playIntegrity.verify(token: token, expectedNonce: challenge, now: now.date)
                return .verified(nil)
            } catch {
                return .failed(check: error.check, message: error.message)
            }
        }
    }
}

/// Device attestation for new accounts (`--attestation`, `--app-attest-*`, `--play-integrity-*`).
public struct AttestationConfiguration: Sendable {
    public var mode: AttestationMode = .off
    /// nil: App Attest attestations fail their `platform` check.
    public var appAttest: AppAttestVerifier?
    /// nil: Play Integrity tokens fail their `platform` check.
    public var playIntegrity: PlayIntegrityVerifier?
    /// The PEM file whose roots replace Apple's (`--app-attest-root-ca`): warned about at start.
    public var rootCAPath: String?

    public init(mode: AttestationMode = .off, appAttest: AppAttestVerifier? = nil, playIntegrity: PlayIntegrityVerifier? = nil) {
        self.mode = mode
        self.appAttest = appAttest
        self.playIntegrity = playIntegrity
    }

    /// What the service runs with.
    var policy: AttestationPolicy {
        guard mode != .off else { return .off }
        return AttestationPolicy(mode: mode, verifier: PlatformAttestationVerifier(appAttest: appAttest, playIntegrity: playIntegrity))
    }
}
