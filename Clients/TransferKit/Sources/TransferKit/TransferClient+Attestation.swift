import Foundation

// Device attestation for new accounts (contract v1.2). Every decision is here, over the
// ``AttestationProvider`` protocol, and tested on Linux with a fake provider; the App Attest
// bridge (AppAttestProvider.swift) only translates.
//
// The rules:
// - Only a login that may create an account is ever attested: the launch's plain login and
//   `addAccount()`'s `newAccount` login. Logins naming an account (renewals, restore checks,
//   departures), refreshes, claims and Apple moves never consult the provider.
// - Up front only when creation is certain and attestation likely needed: the first launch of a
//   device id minted by that launch. Otherwise (a known identity whose service record may be
//   gone, or adding an account to a device the service may have verified already) the login goes
//   without, and `403 attestation_required` is answered once: a new challenge, the provider, the
//   same login again with the attestation.
// - Bounded: one login with an attestation per call. A provider that replaced its key
//   (`AttestationKeyReplaced`) is asked once more, with a new challenge (single use).
// - Every challenge is sent at most once: each attestation fetches its own.

extension TransferClient {
    /// `POST /v1/devices/login` for a login that may create an account (`request` names no
    /// account): with an attestation up front when `attestUpFront`, otherwise with one only
    /// after the service asks for it (`403 attestation_required`), once.
    func creatingLogin(_ request: LoginRequest, for accountId: String?, attestUpFront: Bool) async throws -> SessionBody {
        var request = request
        var consulted = false
        if attestUpFront, attestationProvider != nil {
            consulted = true
            request.attestation = try await freshAttestation()
        }
        do {
            return try await login(request, for: accountId)
        } catch let error as TransferError where error.code == .attestationRequired && !consulted && attestationProvider != nil {
            // The service does not know this device any more (its record lost, or state lost
            // here) and checks attestation: answer once.
            guard let attestation = try await freshAttestation() else { throw error }
            request.attestation = attestation
            return try await login(request, for: accountId)
        }
    }

    /// An attestation of this device for a challenge fetched for it alone; nil when there is no
    /// provider, the service offers no challenge (an earlier version, or attestation not
    /// configured there) or the device cannot attest. A provider that replaced its key is asked
    /// once more, with a new challenge.
    ///
    /// - Throws: the challenge's refusal as the service's ``TransferError`` (`rate_limited` with
    ///   its `retryAfter`, `network`, …), ``TransferError/Code/attestationFailed`` for the
    ///   provider's errors, `CancellationError`.
    func freshAttestation() async throws -> AttestationBody? {
        guard let provider = attestationProvider else { return nil }
        var keyReplaced = false
        while true {
            guard let challenge = try await attestationChallenge() else { return nil }
            do {
                return try await provider.attestation(challenge: challenge).map { AttestationBody($0, challenge: challenge) }
            } catch is AttestationKeyReplaced where !keyReplaced {
                keyReplaced = true
            } catch let error as CancellationError {
                throw error
            } catch let error as TransferError {
                throw error
            } catch {
                throw TransferError(
                    .attestationFailed,
                    "This device could not be attested\(keyReplaced ? " (its key was replaced once already)" : ""): \(error)")
            }
        }
    }

    /// `POST /v1/attestation/challenge`: a new single-use challenge; nil when the service has no
    /// such operation (`404`) or has attestation off and says so (`501 not_configured`).
    func attestationChallenge() async throws -> String? {
        let response = try await send(.attestationChallenge)
        if response.status == 404 || response.status == 501 { return nil }
        guard response.isSuccess else {
            let refused = TransferError(response: response)
            throw TransferError(
                code: refused.code, message: "No attestation challenge: \(refused.message)",
                status: refused.status, retryAfter: refused.retryAfter)
        }
        return try Wire.decode(AttestationChallengeBody.self, from: response).challenge
    }
}
