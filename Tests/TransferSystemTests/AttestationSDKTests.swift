import Foundation
import Testing
import TransferKit
import TransferKitTesting
@testable import TransferTestSupport

/// TransferKit's attestation provider against a real `transfer-server` process that enforces
/// attestation (Play Integrity with keys made here: its tokens carry the real time, which the
/// process's clock reads). The SDK and the server agree on the challenge, the `attestation`
/// object and the refusals.
@Suite("Device attestation: TransferKit against the real server")
struct AttestationSDKTests {
    /// A provider that answers as the Play Integrity API would on a genuine device.
    struct PlayIntegrityProvider: AttestationProvider {
        let google: FakePlayIntegrity
        var package = FakePlayIntegrity.packageName

        func attestation(challenge: String) async throws -> Attestation? {
            var verdict = FakePlayIntegrity.verdict(nonce: challenge, at: Date())
            var details = verdict["requestDetails"] as? [String: Any] ?? [:]
            details["requestPackageName"] = package
            verdict["requestDetails"] = details
            return .android(integrityToken: try google.token(verdict))
        }
    }

    func phone(_ name: String, _ base: URL, _ provider: (any AttestationProvider)?) -> SimulatedPhone {
        let network = LossyNetwork()
        return SimulatedPhone(name, network: network) { keychain, appFiles in
            TransferClient(
                baseURL: base, credentials: keychain, accountList: appFiles,
                transport: network.wrap(.urlSession(.shared), baseURL: base), attestation: provider)
        }
    }

    @Test("enforce: a phone whose provider attests creates its account; without one, or attested for another app, it is refused",
          arguments: StoreKind.available)
    func enforce(kind: StoreKind) async throws {
        let google = FakePlayIntegrity()
        try await kind.withDatabaseLocation { location, _ in
            let node = try Node(database: location.argument, extra: [
                "--attestation", "enforce", "--play-integrity-packages", FakePlayIntegrity.packageName,
                "--play-integrity-decryption-key", google.decryptionKeyBase64,
                "--play-integrity-verification-key", google.verificationKeyBase64,
            ])
            defer { node.stop() }
            try #require(try await node.waitReady())
            let base = try #require(URL(string: node.base))

            let attested = phone("A", base, PlayIntegrityProvider(google: google))
            let first = try await attested.launch()
            guard case .signedIn(let account, let created) = first else {
                Issue.record("the attested phone did not sign in: \(first)")
                return
            }
            #expect(created, "its first launch creates the account")
            let again = try await attested.relaunched().launch()
            #expect(again == .signedIn(accountId: account, created: false), "a relaunch logs in without attesting: \(again)")

            do {
                let result = try await phone("B", base, nil).launch()
                Issue.record("a phone without a provider got \(result)")
            } catch let error as TransferError {
                #expect(error.code == .attestationRequired, "\(error)")
            }
            do {
                let result = try await phone("C", base, PlayIntegrityProvider(google: google, package: "com.example.impostor")).launch()
                Issue.record("an impostor package got \(result)")
            } catch let error as TransferError {
                #expect(error.code == .invalidAttestation, "\(error)")
                #expect(error.description.contains("package_name"), "the check is named: \(error)")
            }
        }
    }
}
