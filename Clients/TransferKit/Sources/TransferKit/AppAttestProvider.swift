#if canImport(DeviceCheck) && canImport(Security)
import DeviceCheck
import Foundation

// Compiled only on Apple platforms (never built in this repository's Linux CI). A one-to-one
// bridge: every decision (one key per install, its id in the Keychain, a new key on
// `DCError.invalidKey`) is in AppAttestKeys.swift and TransferClient+Attestation.swift, tested
// on every platform with a fake.

/// Apple App Attest for the new accounts this phone creates: give it to
/// `TransferClient.standard(baseURL:…, attestation: AppAttestProvider())`.
///
/// One key per install, generated the first time, its id kept in the Keychain (this device
/// only), attested with `clientDataHash` = SHA-256 of the service's challenge. After a
/// reinstall or a restore the kept key is refused (`DCError.invalidKey`): a new one is generated
/// and attested with a new challenge. On the simulator and devices without App Attest it
/// returns nil: the login goes without, and the service decides.
///
/// The app needs the App Attest capability (entitlement
/// `com.apple.developer.devicecheck.appattest-environment`: `development` in debug builds, and
/// the service run with `--app-attest-environment development` against them).
@available(iOS 14.0, macOS 11.0, tvOS 15.0, watchOS 9.0, *)
public struct AppAttestProvider: AttestationProvider {
    private let keys: AppAttestKeys<DeviceCheckAppAttest>

    /// A provider whose key id is kept in the Keychain at `keychain` (the app's own by default;
    /// App Attest keys are the app's, so an extension keeps its own).
    public init(keychain: KeychainLocation = .thisApp) {
        keys = AppAttestKeys(service: DeviceCheckAppAttest(), store: KeychainCredentialStore(location: keychain))
    }

    public func attestation(challenge: String) async throws -> Attestation? {
        try await keys.attestation(challenge: challenge)
    }
}

/// `DCAppAttestService.shared`, member for member.
@available(iOS 14.0, macOS 11.0, tvOS 15.0, watchOS 9.0, *)
struct DeviceCheckAppAttest: AppAttestService {
    var isSupported: Bool { DCAppAttestService.shared.isSupported }

    func generateKey() async throws -> String {
        try await DCAppAttestService.shared.generateKey()
    }

    func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data {
        try await DCAppAttestService.shared.attestKey(keyId, clientDataHash: clientDataHash)
    }

    func isInvalidKey(_ error: any Error) -> Bool {
        (error as? DCError)?.code == .invalidKey
    }
}
#endif
