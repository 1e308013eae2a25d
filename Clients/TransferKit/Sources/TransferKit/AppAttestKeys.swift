import Foundation

// App Attest's decisions, on every platform: which key to attest, when to make a new one, where
// its id is kept. AppAttestProvider.swift (Apple platforms only) is the bridge that hands them
// DCAppAttestService; the tests hand them a fake.

/// What TransferKit uses of `DCAppAttestService`, one member each.
protocol AppAttestService: Sendable {
    /// `DCAppAttestService.isSupported`: false on the simulator and on devices without a Secure Enclave.
    var isSupported: Bool { get }
    /// `generateKey()`: a new key in the Secure Enclave; its id (base64 of its public key's SHA-256).
    func generateKey() async throws -> String
    /// `attestKey(_:clientDataHash:)`: Apple's attestation object for the key and hash.
    func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data
    /// Whether `error` is `DCError.invalidKey`: the key is not (or no longer) this app's on this
    /// device, after a reinstall, a restore from a backup or a move to another device.
    func isInvalidKey(_ error: any Error) -> Bool
}

/// One App Attest key per install: generated the first time an attestation is asked for, its id
/// kept in `store` (on iOS the Keychain, this device only: never in a backup, never on another
/// phone), and attested for each challenge.
///
/// An App Attest key does not survive a reinstall, a restore or a device migration, while a
/// Keychain item may (iOS keeps Keychain items when an app is deleted). Attesting such a kept
/// id fails with `DCError.invalidKey`, and an app that keeps the id then fails for good: the
/// Firebase App Check reports (firebase-ios-sdk issues #11853 and #12629) are that. So on
/// `invalidKey` the id is forgotten and ``AttestationKeyReplaced`` thrown: the next call, which
/// TransferKit makes at once with a new challenge, generates a new key. A key generated in the
/// same call that is refused is forgotten too, but its error is thrown (a new key will not help now).
struct AppAttestKeys<Service: AppAttestService>: AttestationProvider {
    /// Where the key's id is kept (a Keychain item beside the device identity by default).
    static var storeKey: String { "transferkit.app-attest.key-id" }

    let service: Service
    let store: any CredentialStore

    /// The attestation for `challenge`; nil when the device does not support App Attest.
    func attestation(challenge: String) async throws -> Attestation? {
        guard service.isSupported else { return nil }
        let kept = try storedKeyId()
        let keyId: String
        if let kept {
            keyId = kept
        } else {
            // Kept before it is used, so that a failed attestation (Apple's server unreachable)
            // is retried later with the same key rather than leaving keys behind.
            keyId = try await service.generateKey()
            try keep(keyId)
        }
        do {
            let object = try await service.attestKey(keyId, clientDataHash: Attestation.clientDataHash(challenge: challenge))
            return .apple(keyId: keyId, attestationObject: object)
        } catch where service.isInvalidKey(error) {
            try forget()
            if kept != nil { throw AttestationKeyReplaced() }
            throw error
        }
    }

    private func storedKeyId() throws -> String? {
        do {
            guard let data = try store.read(Self.storeKey), !data.isEmpty else { return nil }
            return String(decoding: data, as: UTF8.self)
        } catch {
            throw TransferError(storage: error)
        }
    }

    private func keep(_ keyId: String) throws {
        do { try store.write(Data(keyId.utf8), for: Self.storeKey) } catch { throw TransferError(storage: error) }
    }

    private func forget() throws {
        do { try store.remove(Self.storeKey) } catch { throw TransferError(storage: error) }
    }
}
