import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit
import TransferKitTesting

/// `DCAppAttestService` as the documentation describes it: keys live in this install's Secure
/// Enclave (a reinstall or restore loses them: ``loseKeys()``), attesting a key it does not hold
/// fails with `invalidKey`, and Apple's server may be unreachable.
final class FakeAppAttestService: AppAttestService, @unchecked Sendable {
    struct InvalidKey: Error {}

    private let lock = NSLock()
    private var keys: Set<String> = []
    private var made = 0
    private var calls: [(keyId: String, hash: Data)] = []
    private var failures: [any Error] = []
    let isSupported: Bool

    init(isSupported: Bool = true) { self.isSupported = isSupported }

    /// The keys generated so far.
    var generated: Int { lock.withLock { made } }
    /// Every attestKey call: the key and the clientDataHash.
    var attested: [(keyId: String, hash: Data)] { lock.withLock { calls } }
    /// A reinstall, a restore from a backup, a move to another device: the Secure Enclave keys are gone.
    func loseKeys() { lock.withLock { keys = [] } }
    /// The next attestKey fails with `error`.
    func failNext(_ error: any Error) { lock.withLock { failures.append(error) } }

    func generateKey() async throws -> String {
        lock.withLock {
            made += 1
            let id = Data("key \(made)".utf8).base64EncodedString()
            keys.insert(id)
            return id
        }
    }

    func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data {
        try lock.withLock {
            calls.append((keyId, clientDataHash))
            if !failures.isEmpty { throw failures.removeFirst() }
            guard keys.contains(keyId) else { throw InvalidKey() }
            return Data("attestation of \(keyId)".utf8)
        }
    }

    func isInvalidKey(_ error: any Error) -> Bool { error is InvalidKey }
}

@Suite("App Attest keys: one per install, kept, replaced when refused")
struct AppAttestKeysTests {
    private func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

    @Test("clientDataHash is the SHA-256 of the challenge's UTF-8 bytes")
    func clientDataHash() {
        #expect(hex(Attestation.clientDataHash(challenge: "abc"))
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test("the first attestation generates the key and keeps its id; later ones attest the same key")
    func oneKeyPerInstall() async throws {
        let service = FakeAppAttestService(), store = MemoryCredentialStore()
        let keys = AppAttestKeys(service: service, store: store)
        let first = try #require(try await keys.attestation(challenge: "c1"))
        let second = try #require(try await keys.attestation(challenge: "c2"))
        let keyId = Data("key 1".utf8).base64EncodedString()
        #expect(first == .apple(keyId: keyId, attestationObject: Data("attestation of \(keyId)".utf8)))
        #expect(second == first)
        #expect(service.generated == 1)
        #expect(store.items[AppAttestKeys<FakeAppAttestService>.storeKey] == Data(keyId.utf8))
        #expect(service.attested.map(\.hash) == [Attestation.clientDataHash(challenge: "c1"), Attestation.clientDataHash(challenge: "c2")])
    }

    @Test("a kept key refused (reinstall, restore): its id is forgotten, AttestationKeyReplaced; the next call makes a new key")
    func invalidKeyReplaced() async throws {
        let service = FakeAppAttestService(), store = MemoryCredentialStore()
        let keys = AppAttestKeys(service: service, store: store)
        _ = try await keys.attestation(challenge: "c1")
        service.loseKeys()  // reinstalled: the Keychain kept the id, the Secure Enclave did not keep the key

        await #expect(throws: AttestationKeyReplaced.self) { try await keys.attestation(challenge: "c2") }
        #expect(store.items[AppAttestKeys<FakeAppAttestService>.storeKey] == nil, "the refused id is forgotten")
        let renewed = try #require(try await keys.attestation(challenge: "c3"))
        let newId = Data("key 2".utf8).base64EncodedString()
        #expect(renewed == .apple(keyId: newId, attestationObject: Data("attestation of \(newId)".utf8)))
        #expect(store.items[AppAttestKeys<FakeAppAttestService>.storeKey] == Data(newId.utf8))
        #expect(service.generated == 2)
    }

    @Test("a key generated in the same call and refused: forgotten, and its error thrown (a new key would not help now)")
    func freshKeyRefused() async throws {
        let service = FakeAppAttestService(), store = MemoryCredentialStore()
        service.failNext(FakeAppAttestService.InvalidKey())
        await #expect(throws: FakeAppAttestService.InvalidKey.self) {
            try await AppAttestKeys(service: service, store: store).attestation(challenge: "c1")
        }
        #expect(store.items.isEmpty)
    }

    @Test("other failures (Apple unreachable) keep the key for the next try; unsupported devices attest nothing")
    func otherFailures() async throws {
        let service = FakeAppAttestService(), store = MemoryCredentialStore()
        let keys = AppAttestKeys(service: service, store: store)
        service.failNext(AppleUnreachable())
        await #expect(throws: AppleUnreachable.self) { try await keys.attestation(challenge: "c1") }
        _ = try await keys.attestation(challenge: "c2")
        #expect(service.generated == 1, "the key kept before its first attestation is used again")

        let simulator = FakeAppAttestService(isSupported: false), empty = MemoryCredentialStore()
        #expect(try await AppAttestKeys(service: simulator, store: empty).attestation(challenge: "c1") == nil)
        #expect(simulator.generated == 0 && empty.items.isEmpty)
    }

    @Test("a locked Keychain: storage_unavailable, no key generated")
    func lockedStore() async throws {
        let service = FakeAppAttestService(), store = MemoryCredentialStore()
        store.isAvailable = false
        await #expect { try await AppAttestKeys(service: service, store: store).attestation(challenge: "c1") } throws: {
            TransferError.kind(of: $0) == .storageUnavailable
        }
        #expect(service.generated == 0)
    }

    @Test("end to end: a reinstalled phone's kept key is refused; a new key, attested with a second challenge, creates the account")
    func reinstalledPhone() async throws {
        let server = FakeServer()
        server.attestationMode = .enforce
        let service = FakeAppAttestService(), keyStore = MemoryCredentialStore()
        let keys = AppAttestKeys(service: service, store: keyStore)
        _ = try await keys.attestation(challenge: "an earlier install")
        service.loseKeys()

        let client = server.client(attestation: keys)
        guard case .signedIn(_, true) = try await client.launch() else { Issue.record("not created"); return }
        #expect(server.count("POST /v1/attestation/challenge") == 2 && server.count("POST /v1/devices/login") == 1)
        let login = try #require(server.requests("POST /v1/devices/login").first)
        let sent = try #require(login.body["attestation"] as? [String: String])
        let newId = Data("key 2".utf8).base64EncodedString()
        #expect(sent["keyId"] == newId)
        let challenge = try #require(sent["challenge"])
        #expect(service.attested.last?.hash == Attestation.clientDataHash(challenge: challenge))
        #expect(service.attested.count == 3 && service.attested[1].hash != service.attested[2].hash,
                "the refused attempt and the new key each had a challenge of their own")
        #expect(server.attestationOutcome(of: client.state.deviceId!) == "verified")
    }
}
