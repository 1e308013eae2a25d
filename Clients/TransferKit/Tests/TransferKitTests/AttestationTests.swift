import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit
import TransferKitTesting

/// An ``AttestationProvider`` that answers from a script (then attests), and remembers every
/// challenge it was given.
final class FakeAttestation: AttestationProvider, @unchecked Sendable {
    enum Answer {
        case apple, android, unsupported, keyReplaced
        /// A Play Integrity token that is empty: a malformed attestation.
        case emptyToken
        case failure(any Error)
    }

    private let lock = NSLock()
    private var script: [Answer]
    private var given: [String] = []

    init(_ script: [Answer] = []) { self.script = script }

    /// The challenges it was asked to attest, in order.
    var challenges: [String] { lock.withLock { given } }

    func attestation(challenge: String) async throws -> Attestation? {
        let answer = lock.withLock {
            given.append(challenge)
            return script.isEmpty ? Answer.apple : script.removeFirst()
        }
        switch answer {
        case .apple: return .apple(keyId: "a2V5LTE=", attestationObject: Data("object for \(challenge)".utf8))
        case .android: return .android(integrityToken: "integrity.\(challenge)")
        case .emptyToken: return .android(integrityToken: "")
        case .unsupported: return nil
        case .keyReplaced: throw AttestationKeyReplaced()
        case .failure(let error): throw error
        }
    }
}

struct AppleUnreachable: Error, CustomStringConvertible {
    var description: String { "DCError.serverUnavailable" }
}

/// A phone on `server` with `provider`, not launched yet; its Keychain holds `identity` when given
/// (a device id the service may not know: its record lost, or a launch that never arrived).
private struct Phone {
    let server: FakeServer
    let provider: FakeAttestation?
    let keychain = MemoryCredentialStore()
    let appFiles = MemoryCredentialStore()
    let client: TransferClient

    init(_ server: FakeServer, provider: FakeAttestation? = FakeAttestation(), identity: DeviceIdentity? = nil) throws {
        self.server = server
        self.provider = provider
        if let identity { try keychain.write(Wire.encode(identity), for: StoreKey.identity) }
        client = server.client(keychain: keychain, appFiles: appFiles, attestation: provider)
    }

    var logins: [FakeServer.Recorded] { server.requests("POST /v1/devices/login") }
    var challenges: Int { server.count("POST /v1/attestation/challenge") }
    /// The `attestation` object of each login, nil where none was sent.
    var attestations: [[String: String]?] {
        logins.map { ($0.body["attestation"] as? [String: Any])?.compactMapValues { $0 as? String } }
    }
    /// What the service's log says happened, one route per request ("challenge", "login").
    var trail: [String] {
        server.log.map { $0.route.hasSuffix("/challenge") ? "challenge" : $0.route.hasSuffix("/login") ? "login" : $0.route }
    }
}

private func enforcing() -> FakeServer {
    let server = FakeServer()
    server.attestationMode = .enforce
    return server
}

@Suite("Device attestation for new accounts")
struct AttestationTests {
    @Test("the first launch attests up front: a fresh challenge, then the creating login carrying it")
    func firstLaunchAttests() async throws {
        let phone = try Phone(enforcing())
        guard case .signedIn(_, created: true) = try await phone.client.launch() else {
            Issue.record("the first launch did not create the account: \(phone.trail)")
            return
        }
        #expect(phone.trail == ["challenge", "login"], "one challenge, one login: \(phone.trail)")
        let challenge = try #require(phone.provider?.challenges.first)
        #expect(phone.provider?.challenges == [challenge])
        let sent = try #require(phone.attestations.first ?? nil, "the creating login carried no attestation")
        #expect(sent == [
            "platform": "apple", "challenge": challenge, "keyId": "a2V5LTE=",
            "attestationObject": Data("object for \(challenge)".utf8).base64EncodedString(),
        ])
        let deviceId = try #require(phone.client.state.deviceId)
        #expect(phone.server.attestationOutcome(of: deviceId) == "verified")
        #expect(phone.server.requests("POST /v1/attestation/challenge").allSatisfy { $0.bearer == nil && $0.request.body == nil })
        #expect(phone.server.violations.isEmpty, "\(phone.server.violations)")
    }

    @Test("an Android token travels the same way: platform android, integrityToken")
    func androidToken() async throws {
        let phone = try Phone(enforcing(), provider: FakeAttestation([.android]))
        _ = try await phone.client.launch()
        let challenge = try #require(phone.provider?.challenges.first)
        #expect(phone.attestations == [["platform": "android", "challenge": challenge, "integrityToken": "integrity.\(challenge)"]])
    }

    @Test("never consulted for known accounts: relaunch, renewal, addAccount on a verified device, claims, Apple moves")
    func notConsultedForKnownAccounts() async throws {
        let server = enforcing()
        let a = try Phone(server)
        guard case .signedIn(let accountId, true) = try await a.client.launch() else { throw TransferError(code: "test", message: "no account") }

        // The app relaunched on the same stores, with the same provider.
        let relaunched = server.client(keychain: a.keychain, appFiles: a.appFiles, attestation: a.provider)
        #expect(try await relaunched.launch() == .signedIn(accountId: accountId, created: false))
        // Renewals: a refresh, then a login after the refresh token is refused.
        server.clock.advance(by: 3600)
        _ = try await relaunched.accessToken()
        server.scriptError("POST /v1/tokens/refresh", status: 401, "invalid_refresh_token")
        _ = try await relaunched.renewAccessToken()
        // A device the service verified adds accounts without a new attestation.
        let added = try await relaunched.addAccount()
        #expect(added.id != accountId)

        // Another phone brings an account over by code, and by Apple ID: claims create nothing.
        let offer = try await relaunched.setUpTransferCode(of: accountId)
        let b = try Phone(server)
        try await b.client.claimTransfer(code: offer.code)
        let nonce = try await relaunched.appleNonce()
        _ = try await relaunched.linkAppleID(identityToken: FakeServer.identityToken(sub: "001.apple", nonce: nonce), nonce: nonce, of: added.id)
        let c = try Phone(server)
        let appleNonce = try await c.client.appleNonce()
        try await c.client.claimWithAppleID(identityToken: FakeServer.identityToken(sub: "001.apple", nonce: appleNonce), nonce: appleNonce)
        // B and C relaunch: known accounts.
        _ = try await server.client(keychain: b.keychain, appFiles: b.appFiles, attestation: b.provider).launch()
        _ = try await server.client(keychain: c.keychain, appFiles: c.appFiles, attestation: c.provider).launch()

        #expect(a.provider?.challenges.count == 1, "only A's first launch attests: \(a.provider?.challenges.count ?? 0)")
        #expect(b.provider?.challenges.isEmpty == true && c.provider?.challenges.isEmpty == true)
        #expect(server.count("POST /v1/attestation/challenge") == 1)
        let attested = server.requests("POST /v1/devices/login").filter { $0.body["attestation"] != nil }
        #expect(attested.count == 1, "one login carried an attestation, not \(attested.count)")
        #expect(server.violations.isEmpty, "\(server.violations)")
    }

    @Test("state lost here: the login says attestation_required, one challenge, the same login once more")
    func lostStateAnswered() async throws {
        let phone = try Phone(enforcing(), identity: .generate())  // an identity the service never saw
        guard case .signedIn(_, created: true) = try await phone.client.launch() else {
            Issue.record("not created: \(phone.trail)")
            return
        }
        #expect(phone.trail == ["login", "challenge", "login"], "\(phone.trail)")
        #expect(phone.attestations.first! == nil && phone.attestations.last??["challenge"] == phone.provider?.challenges.first)
        let plain = phone.logins[0].bodyKeys, retried = phone.logins[1].bodyKeys
        #expect(retried == plain.union(["attestation"]), "the retry is the same login with the attestation: \(plain) → \(retried)")
    }

    @Test("addAccount on a device never verified (made while attestation was off): answered once")
    func addAccountOnUnverifiedDevice() async throws {
        let server = FakeServer()
        let phone = try Phone(server)
        _ = try await phone.client.launch()  // attested up front, ignored: attestation off
        #expect(server.attestationOutcome(of: phone.client.state.deviceId!) == nil)
        server.attestationMode = .enforce
        let added = try await phone.client.addAccount()
        #expect(phone.client.currentAccountId == added.id)
        #expect(phone.trail == ["challenge", "login", "login", "challenge", "login"], "\(phone.trail)")
        #expect(phone.logins.last?.body["newAccount"] as? Bool == true)
        #expect(server.attestationOutcome(of: phone.client.state.deviceId!) == "verified")
    }

    @Test("never more than one attested login: without a provider, unsupported, or refused after attaching")
    func boundedRetries() async throws {
        // No provider: the 403 is the answer.
        let bare = try Phone(enforcing(), provider: nil)
        await #expect { try await bare.client.launch() } throws: { error in
            let error = try #require(error as? TransferError)
            return error.code == .attestationRequired && error.status == 403
        }
        #expect(bare.trail == ["login"], "\(bare.trail)")

        // The device cannot attest (simulator): up front, nothing to attach; the 403 is not retried.
        let simulator = try Phone(enforcing(), provider: FakeAttestation([.unsupported, .unsupported]))
        await #expect { try await simulator.client.launch() } throws: { TransferError.kind(of: $0) == .attestationRequired }
        #expect(simulator.trail == ["challenge", "login"], "\(simulator.trail)")

        // Lost state and the device cannot attest: one challenge, no second login.
        let lost = try Phone(enforcing(), provider: FakeAttestation([.unsupported, .unsupported]), identity: .generate())
        await #expect { try await lost.client.launch() } throws: { TransferError.kind(of: $0) == .attestationRequired }
        #expect(lost.trail == ["login", "challenge"], "\(lost.trail)")

        // The service still says attestation_required though one was attached: surfaced, no loop.
        let server = enforcing()
        let odd = try Phone(server)
        server.scriptError("POST /v1/devices/login", status: 403, "attestation_required")
        server.scriptError("POST /v1/devices/login", status: 403, "attestation_required")
        await #expect { try await odd.client.launch() } throws: { TransferError.kind(of: $0) == .attestationRequired }
        #expect(odd.trail == ["challenge", "login"], "\(odd.trail)")

        // Lost state: the retry's own 403 is surfaced too.
        let twice = try Phone(server, identity: .generate())
        server.scriptError("POST /v1/devices/login", status: 403, "attestation_required")
        server.scriptError("POST /v1/devices/login", status: 403, "attestation_required")
        await #expect { try await twice.client.launch() } throws: { TransferError.kind(of: $0) == .attestationRequired }
        #expect(twice.trail.suffix(3) == ["login", "challenge", "login"], "\(twice.trail)")
    }

    @Test("invalid_attestation surfaces with the service's message; each launch attests with a challenge of its own")
    func invalidAttestation() async throws {
        let server = enforcing()
        server.attestationCheck = { _ in "certificate chain does not end at Apple's App Attestation Root CA" }
        let phone = try Phone(server)
        for _ in 0..<2 {
            await #expect { try await phone.client.launch() } throws: { error in
                let error = try #require(error as? TransferError)
                return error.code == .invalidAttestation && error.status == 401
                    && error.message == "certificate chain does not end at Apple's App Attestation Root CA"
            }
        }
        // The first launch attested up front; the second (its identity now stored) went without,
        // was asked, and attested once, with a new challenge.
        #expect(phone.trail == ["challenge", "login", "login", "challenge", "login"], "\(phone.trail)")
        let sent = phone.attestations.compactMap { $0?["challenge"] }
        #expect(sent.count == 2 && Set(sent).count == 2, "a challenge is never sent twice: \(sent)")
        #expect(sent == phone.provider?.challenges)
        #expect(phone.client.state.accounts.isEmpty)

        // Once the check passes, the next launch creates the account.
        server.attestationCheck = { _ in nil }
        guard case .signedIn(_, true) = try await phone.client.launch() else { Issue.record("not created"); return }
    }

    @Test("a provider that replaced its key is asked once more with a new challenge; a second replacement fails")
    func keyReplaced() async throws {
        let phone = try Phone(enforcing(), provider: FakeAttestation([.keyReplaced]))
        _ = try await phone.client.launch()
        #expect(phone.trail == ["challenge", "challenge", "login"], "\(phone.trail)")
        let challenges = try #require(phone.provider?.challenges)
        #expect(challenges.count == 2 && challenges[0] != challenges[1])
        #expect(phone.attestations.first??["challenge"] == challenges[1], "the login carries the second challenge")

        let stuck = try Phone(enforcing(), provider: FakeAttestation([.keyReplaced, .keyReplaced]))
        await #expect { try await stuck.client.launch() } throws: { error in
            let error = try #require(error as? TransferError)
            return error.code == .attestationFailed && error.status == nil && error.message.contains("replaced")
        }
        #expect(stuck.trail == ["challenge", "challenge"], "no login: \(stuck.trail)")
    }

    @Test("a provider that throws: attestation_failed, nothing sent to create; its TransferError and cancellation pass as they are")
    func providerThrows() async throws {
        let server = enforcing()
        let phone = try Phone(server, provider: FakeAttestation([.failure(AppleUnreachable())]))
        await #expect { try await phone.client.launch() } throws: { error in
            let error = try #require(error as? TransferError)
            return error.code == .attestationFailed && error.message.contains("DCError.serverUnavailable")
        }
        #expect(phone.trail == ["challenge"], "\(phone.trail)")
        // Launched again later: the identity is stored now, so the login goes first and is answered.
        guard case .signedIn(_, true) = try await phone.client.launch() else { Issue.record("not created"); return }
        #expect(phone.trail == ["challenge", "login", "challenge", "login"], "\(phone.trail)")

        let own = TransferError(code: .storageUnavailable, message: "locked")
        let passing = try Phone(server, provider: FakeAttestation([.failure(own)]))
        await #expect { try await passing.client.launch() } throws: { ($0 as? TransferError) == own }
        let cancelled = try Phone(server, provider: FakeAttestation([.failure(CancellationError())]))
        await #expect(throws: CancellationError.self) { try await cancelled.client.launch() }
    }

    @Test("the challenge refused: the service's error (rate_limited), no login; not offered: log in without")
    func challengeRefused() async throws {
        let server = enforcing()
        let phone = try Phone(server)
        server.script("POST /v1/attestation/challenge", status: 429, ["error": "rate_limited", "message": "Slow down."])
        await #expect { try await phone.client.launch() } throws: { error in
            let error = try #require(error as? TransferError)
            return error.code == .rateLimited && error.status == 429 && error.message.contains("attestation challenge")
        }
        #expect(phone.trail == ["challenge"], "\(phone.trail)")
        #expect(phone.provider?.challenges.isEmpty == true)

        // A service before attestation (404) or with it not configured (501): the login goes without.
        for status in [404, 501] {
            let older = FakeServer()
            let phone = try Phone(older)
            older.scriptError("POST /v1/attestation/challenge", status: status, status == 404 ? "not_found" : "not_configured")
            guard case .signedIn(_, true) = try await phone.client.launch() else { Issue.record("not created (\(status))"); return }
            #expect(phone.trail == ["challenge", "login"] && phone.attestations == [nil], "\(status): \(phone.trail)")
            #expect(phone.provider?.challenges.isEmpty == true)
        }
    }

    @Test("a malformed attestation is the service's 400 invalid_request in every mode, as the real service answers; nothing is created")
    func malformed() async throws {
        for mode in [FakeServer.AttestationMode.off, .monitor, .enforce] {
            let server = FakeServer()
            server.attestationMode = mode
            let phone = try Phone(server, provider: FakeAttestation([.emptyToken]))
            await #expect { try await phone.client.launch() } throws: { error in
                let error = try #require(error as? TransferError)
                return error.code == .invalidRequest && error.status == 400 && error.message.contains("attestation.integrityToken")
            }
            #expect(phone.client.state.accounts.isEmpty, "\(mode): nothing created")
        }
    }

    @Test("monitor: the account is created whatever the attestation, and the outcome recorded")
    func monitor() async throws {
        let server = FakeServer()
        server.attestationMode = .monitor
        server.attestationCheck = { _ in "rpIdHash" }
        let failing = try Phone(server)
        guard case .signedIn(_, true) = try await failing.client.launch() else { Issue.record("not created"); return }
        #expect(server.attestationOutcome(of: failing.client.state.deviceId!) == "failed: rpIdHash")
        let bare = try Phone(server, provider: nil)
        _ = try await bare.client.launch()
        #expect(server.attestationOutcome(of: bare.client.state.deviceId!) == "missing")
        #expect(bare.trail.filter { $0 == "challenge" }.count == 1, "only the first phone asked for a challenge")
    }
}
