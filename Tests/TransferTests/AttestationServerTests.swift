import Crypto
import Foundation
import Testing
import TransferAttestation
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.2, "Device attestation for new accounts", through the HTTP API: the challenge,
/// the login's `attestation` object in monitor and enforce mode, what the device records,
/// and what is never gated. The attestations come from the fakes of FakeAttestation.swift (a
/// private App Attest CA, Play Integrity keys made here); the server's clock is set to the
/// fakes' time, when their certificates are valid.
@Suite("Device attestation: the server")
struct AttestationServerTests {
    /// One private App Attest CA and one set of Play Integrity keys, and a server trusting them.
    struct Rig: Sendable {
        let apple: FakeAppAttest
        let google: FakePlayIntegrity

        init() throws {
            apple = try FakeAppAttest()
            google = FakePlayIntegrity()
        }

        func configuration(_ mode: AttestationMode) throws -> AttestationConfiguration {
            AttestationConfiguration(mode: mode, appAttest: apple.verifier(), playIntegrity: try google.verifier())
        }

        /// The `attestation` object of a login: App Attest of a new key for `challenge`.
        func apple(_ challenge: String, _ knobs: FakeAppAttest.Knobs = .init(), keyID: [UInt8]? = nil) throws -> (
            body: [String: Any], keyID: [UInt8]
        ) {
            let attestation = try apple.attest(clientDataHash: Array(SHA256.hash(data: Array(challenge.utf8))), knobs)
            let id = keyID ?? attestation.keyID
            return ([
                "platform": "apple", "challenge": challenge, "keyId": Data(id).base64EncodedString(),
                "attestationObject": Data(attestation.object).base64EncodedString(),
            ], attestation.keyID)
        }

        /// The `attestation` object of a login: a Play Integrity token whose verdict `change` may alter.
        func android(
            _ challenge: String, at time: Date = FakePlayIntegrity.now, knobs: FakePlayIntegrity.Knobs = .init(),
            _ change: (inout [String: Any]) -> Void = { _ in }
        ) throws -> [String: Any] {
            var verdict = FakePlayIntegrity.verdict(nonce: challenge, at: time)
            change(&verdict)
            return ["platform": "android", "challenge": challenge, "integrityToken": try google.token(verdict, knobs)]
        }
    }

    /// Runs `body` against a server in `mode` whose clock reads the fakes' time.
    func withServer(
        _ kind: StoreKind, _ mode: AttestationMode, rig: Rig,
        configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (Client, Harness, TransferApp.Parts) async throws -> Void
    ) async throws {
        let attestation = try rig.configuration(mode)
        try await withHarness(kind, configure: {
            $0.attestation = attestation
            configure(&$0)
        }) { harness in
            Self.setClock(harness)
            try await harness.run { api, parts in try await body(api, harness, parts) }
        }
    }

    /// The fakes' certificates are valid a day either side of `FakeAppAttest.now`.
    static func setClock(_ harness: Harness) {
        harness.clock.advance(.milliseconds(Timestamp(FakeAppAttest.now).milliseconds - harness.clock.now().milliseconds))
    }

    static func challenge(_ api: Client, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        let reply = try await api.call(.post, "/v1/attestation/challenge")
        #expect(reply.status == .created, "\(reply.text)", sourceLocation: sourceLocation)
        return try reply.string("challenge")
    }

    static func login(_ api: Client, _ device: Device, attestation: [String: Any]? = nil, newAccount: Bool = false) async throws -> Reply {
        var body = device.loginBody
        if let attestation { body["attestation"] = attestation }
        if newAccount { body["newAccount"] = true }
        return try await api.call(.post, "/v1/devices/login", json: body)
    }

    /// The attestation the device recorded, read as support reads it.
    static func recorded(_ parts: TransferApp.Parts, _ device: Device, _ harness: Harness) async throws -> DeviceAttestation? {
        try await parts.store.device(device.id, at: harness.clock.now())?.attestation
    }

    // MARK: The challenge

    @Test("POST /v1/attestation/challenge: 201, 43 characters of base64url, expiresIn 300; each one new; counted by --nonce-limit")
    func challenge() async throws {
        let rig = try Rig()
        try await withServer(.sqlite, .enforce, rig: rig, configure: { $0.limits.nonce = RateLimit(count: 2, period: .seconds(60)) }) { api, _, _ in
            let first = try await api.call(.post, "/v1/attestation/challenge")
            #expect(first.status == .created, "\(first.text)")
            let challenge = try first.string("challenge")
            #expect(challenge.count == 43 && challenge.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }, "\(challenge)")
            #expect(first["expiresIn"] as? Int == 300)
            let second = try await api.call(.post, "/v1/attestation/challenge", json: [:])
            #expect(second.status == .created, "an empty object is no body: \(second.text)")
            #expect(try second.string("challenge") != challenge)
            let third = try await api.call(.post, "/v1/attestation/challenge")
            #expect(third.status == .tooManyRequests && third.error == "rate_limited", "the third of 2/1m: \(third.text)")
            #expect(third.headers[.retryAfter] != nil)
            let array = try await api.call(.post, "/v1/attestation/challenge", raw: "[]")
            #expect(array.status == .badRequest, "a body that is not an object: \(array.text)")
        }
    }

    // MARK: Enforce

    @Test("enforce: a genuine App Attest attestation creates the account; the device keeps verified, its key and counter", arguments: StoreKind.available)
    func enforceApple(kind: StoreKind) async throws {
        let rig = try Rig()
        try await withServer(kind, .enforce, rig: rig) { api, harness, parts in
            let device = Device()
            let proof = try rig.apple(try await Self.challenge(api))
            let created = try await Self.login(api, device, attestation: proof.body)
            #expect(created.status == .created, "\(created.text)")
            let recorded = try #require(try await Self.recorded(parts, device, harness))
            #expect(recorded.outcome == .verified && recorded.platform == .apple)
            #expect(recorded.key?.keyID == proof.keyID, "the keyId is kept")
            #expect(recorded.key?.publicKey.count == 65 && recorded.key?.counter == 0, "the X9.62 key and counter 0")
            // The next launch logs in without one.
            let again = try await api.login(device)
            #expect(again.status == .ok, "\(again.text)")
        }
    }

    @Test("enforce: a genuine Play Integrity token creates the account; the device keeps verified", arguments: StoreKind.available)
    func enforceAndroid(kind: StoreKind) async throws {
        let rig = try Rig()
        try await withServer(kind, .enforce, rig: rig) { api, harness, parts in
            let device = Device()
            let created = try await Self.login(api, device, attestation: try rig.android(try await Self.challenge(api)))
            #expect(created.status == .created, "\(created.text)")
            let recorded = try #require(try await Self.recorded(parts, device, harness))
            #expect(recorded.outcome == .verified && recorded.platform == .android && recorded.key == nil, "\(recorded)")
        }
    }

    @Test("enforce: no attestation → 403 attestation_required, and nothing is created", arguments: StoreKind.available)
    func enforceMissing(kind: StoreKind) async throws {
        let rig = try Rig()
        try await withServer(kind, .enforce, rig: rig) { api, harness, parts in
            let device = Device()
            let refused = try await api.login(device)
            #expect(refused.status == .forbidden && refused.error == "attestation_required", "\(refused.text)")
            #expect(try await parts.store.device(device.id, at: harness.clock.now()) == nil, "no device, no account")
            #expect(try await parts.store.stats(at: harness.clock.now()).accounts == 0)
        }
    }

    /// Every check the server answers for App Attest, each a genuine attestation with one thing changed.
    static let appleFailures: [(check: String, change: @Sendable (inout FakeAppAttest.Knobs) -> Void)] = [
        ("format", { $0.format = "packed" }),
        ("certificate_chain", { $0.includeIntermediate = false }),
        ("nonce", { $0.nonce = [UInt8](repeating: 7, count: 32) }),
        ("app_id", { $0.appID = "TEAM123456.com.example.impostor" }),
        ("counter", { $0.counter = 1 }),
        ("aaguid", { $0.aaguid = AppAttestVerifier.Environment.development.aaguid }),
        ("credential_id", { $0.credentialID = [UInt8](repeating: 0xAB, count: 32) }),
    ]

    @Test("enforce: each failing App Attest check → 401 invalid_attestation naming it; nothing is created")
    func enforceAppleFailures() async throws {
        let rig = try Rig()
        try await withServer(.sqlite, .enforce, rig: rig) { api, harness, parts in
            for (check, change) in Self.appleFailures {
                var knobs = FakeAppAttest.Knobs()
                change(&knobs)
                let device = Device()
                let refused = try await Self.login(api, device, attestation: try rig.apple(try await Self.challenge(api), knobs).body)
                #expect(refused.status == .unauthorized && refused.error == "invalid_attestation", "\(check): \(refused.text)")
                #expect((refused["message"] as? String)?.contains("its \(check) check") == true, "\(check): \(refused.text)")
                #expect(try await parts.store.device(device.id, at: harness.clock.now()) == nil, "\(check): nothing created")
            }
            // keyId that is not the certified key's.
            let otherKey = Array(SHA256.hash(data: Array(P256.Signing.PrivateKey().publicKey.x963Representation)))
            let wrongKey = try await Self.login(api, Device(), attestation: try rig.apple(try await Self.challenge(api), keyID: otherKey).body)
            #expect((wrongKey["message"] as? String)?.contains("its key_id check") == true, "\(wrongKey.text)")
            // An object that is not base64, or not CBOR.
            var garbled = try rig.apple(try await Self.challenge(api)).body
            garbled["attestationObject"] = "AAAA"
            let malformed = try await Self.login(api, Device(), attestation: garbled)
            #expect((malformed["message"] as? String)?.contains("its attestation_object check") == true, "\(malformed.text)")
            #expect(try await parts.store.stats(at: harness.clock.now()).accounts == 0)
        }
    }

    @Test("enforce: each failing Play Integrity check → 401 invalid_attestation naming it; nothing is created")
    func enforceAndroidFailures() async throws {
        let rig = try Rig()
        try await withServer(.sqlite, .enforce, rig: rig) { api, harness, parts in
            var otherKey = FakePlayIntegrity.Knobs()
            otherKey.wrappingKey = SymmetricKey(size: .bits256)
            var otherSigner = FakePlayIntegrity.Knobs()
            otherSigner.signingKey = P256.Signing.PrivateKey()
            func section(_ name: String, _ field: String, _ value: Any) -> (inout [String: Any]) -> Void {
                { verdict in
                    var part = verdict[name] as? [String: Any] ?? [:]
                    part[field] = value
                    verdict[name] = part
                }
            }
            let cases: [(String, FakePlayIntegrity.Knobs, (inout [String: Any]) -> Void, Date)] = [
                ("decryption", otherKey, { _ in }, FakePlayIntegrity.now),
                ("signature", otherSigner, { _ in }, FakePlayIntegrity.now),
                ("package_name", .init(), section("requestDetails", "requestPackageName", "com.example.impostor"), FakePlayIntegrity.now),
                ("nonce", .init(), section("requestDetails", "nonce", "b3RoZXJjaGFsbGVuZ2UxMjM0NTY3ODkwYWJjZGVmZ2g"), FakePlayIntegrity.now),
                ("timestamp", .init(), { _ in }, FakePlayIntegrity.now - 360),
                ("app_recognition", .init(), section("appIntegrity", "appRecognitionVerdict", "UNRECOGNIZED_VERSION"), FakePlayIntegrity.now),
                ("device_integrity", .init(), section("deviceIntegrity", "deviceRecognitionVerdict", ["MEETS_BASIC_INTEGRITY"]), FakePlayIntegrity.now),
            ]
            for (check, knobs, change, time) in cases {
                let device = Device()
                let proof = try rig.android(try await Self.challenge(api), at: time, knobs: knobs, change)
                let refused = try await Self.login(api, device, attestation: proof)
                #expect(refused.status == .unauthorized && refused.error == "invalid_attestation", "\(check): \(refused.text)")
                #expect((refused["message"] as? String)?.contains("its \(check) check") == true, "\(check): \(refused.text)")
                #expect(try await parts.store.device(device.id, at: harness.clock.now()) == nil, "\(check): nothing created")
            }
            let challenge = try await Self.challenge(api)
            let token = try await Self.login(api, Device(), attestation: ["platform": "android", "challenge": challenge, "integrityToken": "a.b.c"])
            #expect((token["message"] as? String)?.contains("its token check") == true, "\(token.text)")
        }
    }

    @Test("a platform this server has no keys for fails its platform check")
    func unconfiguredPlatform() async throws {
        let rig = try Rig()
        try await withHarness(.sqlite, configure: { $0.attestation = AttestationConfiguration(mode: .enforce, appAttest: rig.apple.verifier()) }) { harness in
            Self.setClock(harness)
            try await harness.run { api, _ in
                let refused = try await Self.login(api, Device(), attestation: try rig.android(try await Self.challenge(api)))
                #expect(refused.status == .unauthorized, "\(refused.text)")
                #expect((refused["message"] as? String)?.contains("its platform check: Play Integrity is not configured") == true, "\(refused.text)")
            }
        }
    }

    // MARK: Challenges

    @Test("a challenge dies at its first use, good or bad: reused → 401 naming the challenge", arguments: StoreKind.available)
    func challengeReuse(kind: StoreKind) async throws {
        let rig = try Rig()
        try await withServer(kind, .enforce, rig: rig) { api, _, _ in
            // Used by a failing attestation: a genuine one for the same challenge is refused.
            let first = try await Self.challenge(api)
            var bad = FakeAppAttest.Knobs()
            bad.counter = 1
            let failed = try await Self.login(api, Device(), attestation: try rig.apple(first, bad).body)
            #expect((failed["message"] as? String)?.contains("its counter check") == true, "\(failed.text)")
            let reused = try await Self.login(api, Device(), attestation: try rig.apple(first).body)
            #expect(reused.status == .unauthorized && reused.error == "invalid_attestation", "\(reused.text)")
            #expect((reused["message"] as? String)?.contains("its challenge check") == true, "\(reused.text)")

            // Used by a creation: another device cannot present it again.
            let second = try await Self.challenge(api)
            #expect(try await Self.login(api, Device(), attestation: try rig.android(second)).status == .created)
            let again = try await Self.login(api, Device(), attestation: try rig.android(second))
            #expect((again["message"] as? String)?.contains("its challenge check") == true, "\(again.text)")

            // One this service never issued.
            let unknown = try await Self.login(api, Device(), attestation: try rig.apple("bm90LWlzc3VlZC1oZXJlLW5vdC1pc3N1ZWQtaGVyZS0x").body)
            #expect((unknown["message"] as? String)?.contains("its challenge check") == true, "\(unknown.text)")
        }
    }

    @Test("an expired challenge is refused (five minutes), and the pruner removes it", arguments: StoreKind.available)
    func challengeExpiry(kind: StoreKind) async throws {
        let rig = try Rig()
        try await withServer(kind, .enforce, rig: rig) { api, harness, parts in
            let old = try await Self.challenge(api), fresh = try await Self.challenge(api)
            harness.clock.advance(.seconds(299))
            #expect(try await Self.login(api, Device(), attestation: try rig.apple(fresh).body).status == .created, "still good after 4:59")
            harness.clock.advance(.seconds(2))
            let expired = try await Self.login(api, Device(), attestation: try rig.apple(old).body)
            #expect(expired.status == .unauthorized, "\(expired.text)")
            #expect((expired["message"] as? String)?.contains("its challenge check") == true, "\(expired.text)")
            // Presented, even expired, a challenge is gone; one never presented waits for the pruner.
            _ = try await Self.challenge(api)
            harness.clock.advance(.seconds(301))
            let now = harness.clock.now()
            let counts = try #require(try await parts.store.prune(PruneCutoffs(now: now, retainedSince: now - .seconds(86_400 * 400)), batchSize: 100))
            #expect(counts.attestationChallenges == 1, "the one left unused: \(counts)")
        }
    }

    // MARK: Monitor

    @Test("monitor: missing, failing and genuine attestations all create; each device records its result; /metrics and stats count them",
          arguments: StoreKind.available)
    func monitor(kind: StoreKind) async throws {
        let rig = try Rig()
        try await withServer(kind, .monitor, rig: rig) { api, harness, parts in
            let missing = Device(), failing = Device(), apple = Device(), android = Device()
            #expect(try await api.login(missing).status == .created)
            var bad = FakeAppAttest.Knobs()
            bad.appID = "TEAM123456.com.example.impostor"
            #expect(try await Self.login(api, failing, attestation: try rig.apple(try await Self.challenge(api), bad).body).status == .created)
            #expect(try await Self.login(api, apple, attestation: try rig.apple(try await Self.challenge(api)).body).status == .created)
            #expect(try await Self.login(api, android, attestation: try rig.android(try await Self.challenge(api))).status == .created)

            #expect(try await Self.recorded(parts, missing, harness)?.outcome == .missing)
            #expect(try await Self.recorded(parts, failing, harness)?.outcome == .failed(check: "app_id"))
            #expect(try await Self.recorded(parts, failing, harness)?.platform == .apple)
            #expect(try await Self.recorded(parts, apple, harness)?.outcome == .verified)
            #expect(try await Self.recorded(parts, android, harness)?.outcome == .verified)

            let metrics = try await api.call(.get, "/metrics").text
            let lines = metrics.split(separator: "\n").filter { $0.hasPrefix("transfer_attestations_total{") }
            func count(_ labels: String...) -> String? {
                lines.first { line in labels.allSatisfy { line.contains($0) } }.map { String($0.split(separator: " ").last ?? "") }
            }
            #expect(count(#"platform="apple""#, #"outcome="verified""#) == "1", "\(lines)")
            #expect(count(#"platform="android""#, #"outcome="verified""#) == "1", "\(lines)")
            #expect(count(#"platform="apple""#, #"outcome="failed""#, #"check="app_id""#) == "1", "\(lines)")
            #expect(count(#"platform="none""#, #"outcome="missing""#) == "1", "\(lines)")

            let stats = try await parts.store.stats(at: harness.clock.now()).accountsCreatedLast24h
            #expect(stats == CreationsByAttestation(verified: 2, missing: 1, failed: 1, unchecked: 0), "\(stats)")
        }
    }

    @Test("support: transfer account shows each device's attestation, transfer stats counts the last 24 h's creations by outcome",
          arguments: StoreKind.available)
    func cli(kind: StoreKind) async throws {
        let rig = try Rig()
        try await withServer(kind, .monitor, rig: rig) { api, harness, _ in
            let apple = Device(), failing = Device()
            let account = try await Self.login(api, apple, attestation: try rig.apple(try await Self.challenge(api)).body).accountID
            var bad = FakePlayIntegrity.Knobs()
            bad.signingKey = P256.Signing.PrivateKey()
            let other = try await Self.login(api, failing, attestation: try rig.android(try await Self.challenge(api), knobs: bad)).accountID
            _ = try await Self.login(api, apple, newAccount: true)
            let db = harness.databaseArgument

            let text = try CLI.transfer(["account", account], database: db)
            #expect(text.code == 0, "\(text)")
            #expect(text.out.contains("ATTESTATION") && text.out.contains("verified (apple)"), "\(text.out)")
            let json = try CLI.transfer(["account", other, "--json"], database: db).json
            let device = try #require((json["devices"] as? [[String: Any]])?.first)
            let attestation = try #require(device["attestation"] as? [String: Any], "\(device)")
            #expect(attestation["outcome"] as? String == "failed: signature" && attestation["platform"] as? String == "android", "\(attestation)")
            #expect(attestation["keyId"] == nil, "Play Integrity certifies no key")
            let appleJSON = try CLI.transfer(["account", account, "--json"], database: db).json
            let appleDevice = try #require((appleJSON["devices"] as? [[String: Any]])?.first?["attestation"] as? [String: Any])
            #expect((appleDevice["keyId"] as? String)?.isEmpty == false && appleDevice["counter"] as? Int == 0, "\(appleDevice)")

            let stats = try CLI.transfer(["stats"], database: db)
            #expect(stats.out.contains("accounts created, attestation verified") && stats.out.contains("accounts created, attestation failed"), "\(stats.out)")
            let counts = try #require(try CLI.transfer(["stats", "--json"], database: db).json["accountsCreatedLast24h"] as? [String: Int])
            #expect(counts == ["verified": 2, "missing": 0, "failed": 1, "unchecked": 0], "the second account of the verified device counts as verified: \(counts)")
        }
    }

    @Test("off: an attestation is not consulted, and devices record none")
    func off() async throws {
        let rig = try Rig()
        try await withServer(.sqlite, .off, rig: rig) { api, harness, parts in
            let device = Device()
            var bad = FakeAppAttest.Knobs()
            bad.counter = 9
            let created = try await Self.login(api, device, attestation: try rig.apple("never-issued", bad).body)
            #expect(created.status == .created, "\(created.text)")
            #expect(try await Self.recorded(parts, device, harness) == nil)
            #expect(try await parts.store.stats(at: harness.clock.now()).accountsCreatedLast24h == CreationsByAttestation(unchecked: 1))
        }
    }

    // MARK: What is not gated

    @Test("a device verified once adds accounts without a new attestation; an unverified one needs one", arguments: StoreKind.available)
    func verifiedDeviceAddsAccounts(kind: StoreKind) async throws {
        let rig = try Rig()
        try await withServer(kind, .enforce, rig: rig) { api, harness, parts in
            let device = Device()
            let first = try await Self.login(api, device, attestation: try rig.apple(try await Self.challenge(api)).body)
            #expect(first.status == .created, "\(first.text)")
            let second = try await Self.login(api, device, newAccount: true)
            #expect(second.status == .created, "no attestation needed: \(second.text)")
            #expect(try second.accountIDs.count == 2)
            #expect(try await Self.recorded(parts, device, harness)?.outcome == .verified, "the device stays verified")
            #expect(try await parts.store.stats(at: harness.clock.now()).accountsCreatedLast24h.verified == 2)
        }
        // A device whose attestation failed (monitor) is not verified: enforce asks again.
        try await withHarness(kind) { harness in
            Self.setClock(harness)
            var monitor = harness
            monitor.configuration.attestation = try rig.configuration(.monitor)
            let device = Device()
            try await monitor.run { api, _ in
                let created = try await api.login(device)
                #expect(created.status == .created, "monitor: created without one: \(created.text)")
            }
            var enforce = harness
            enforce.configuration.attestation = try rig.configuration(.enforce)
            try await enforce.run { api, _ in
                #expect(try await api.login(device).status == .ok, "its account logs in")
                let refused = try await Self.login(api, device, newAccount: true)
                #expect(refused.status == .forbidden && refused.error == "attestation_required", "\(refused.text)")
                let added = try await Self.login(api, device, attestation: try rig.android(try await Self.challenge(api)), newAccount: true)
                #expect(added.status == .created, "with one it adds the account: \(added.text)")
            }
        }
    }

    @Test("enforce: accounts made before keep logging in, claims and code transfers are not gated", arguments: StoreKind.available)
    func notGated(kind: StoreKind) async throws {
        let rig = try Rig()
        try await withHarness(kind) { harness in
            Self.setClock(harness)
            let old = Device(), newPhone = Device()
            let made = LockedStrings()
            try await harness.run { api, _ in  // attestation off
                made.add(try await api.login(old).accountID)
            }
            let account = try #require(made.all.first)
            var enforce = harness
            enforce.configuration.attestation = try rig.configuration(.enforce)
            try await enforce.run { api, parts in
                let login = try await api.login(old)
                #expect(login.status == .ok && (try? login.accountID) == account, "\(login.text)")
                let code = try await api.call(.put, "/v1/me/transfer", json: ["method": "code"], token: try login.accessToken)
                #expect(code.status == .created, "\(code.text)")
                let claimed = try await api.call(.post, "/v1/transfers/claim", json: [
                    "transferCode": try code.string("transferCode"), "deviceId": newPhone.id, "deviceSecret": newPhone.secret,
                ])
                #expect(claimed.status == .ok && (try? claimed.accountID) == account, "a claim creates no account: \(claimed.text)")
                #expect(try await api.login(newPhone).status == .ok, "the new phone logs in")
                #expect(try await Self.recorded(parts, newPhone, harness) == nil, "nothing was attested")
            }
        }
    }

    @Test("a malformed attestation object is 400 invalid_request, whatever the mode")
    func malformedObject() async throws {
        let rig = try Rig()
        try await withServer(.sqlite, .off, rig: rig) { api, _, _ in
            for (attestation, message) in [
                ("apple" as Any, "attestation must be an object."),
                (["platform": "windows", "challenge": "x"], "attestation.platform must be 'apple' or 'android'."),
                (["platform": "apple", "challenge": "x", "keyId": "k"], "attestation.attestationObject is required."),
                (["platform": "android", "integrityToken": "t"], "attestation.challenge is required."),
                (["platform": "android", "challenge": "", "integrityToken": "t"], "attestation.challenge must be 1 to 128 bytes."),
            ] as [(Any, String)] {
                var body = Device().loginBody
                body["attestation"] = attestation
                let reply = try await api.call(.post, "/v1/devices/login", json: body)
                #expect(reply.status == .badRequest && reply.error == "invalid_request", "\(reply.text)")
                #expect(reply["message"] as? String == message)
            }
        }
    }

    // MARK: Migration

    @Test("a v11 database with a phone's account upgrades to v13: the phone logs in under enforce, its device recorded nothing, a new account on it needs an attestation",
          arguments: StoreKind.available)
    func upgradeFromV11(kind: StoreKind) async throws {
        let rig = try Rig()
        try await kind.withDatabaseLocation(empty: true) { location, file in
            let phone = Device()
            let account = "a1100000-0000-4000-8000-000000000001"
            let at = Timestamp(FakeAppAttest.now).milliseconds - 86_400_000
            let raw = RawDatabase(location: location)
            try await raw.migrate(through: 11)
            try await raw.run([
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(account), .text(phone.id), .int(at)]),
                ("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)", [.text(phone.id), .blob(SecretHash(of: phone.secret).bytes), .int(at)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)", [.text(phone.id), .text(account), .int(at)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(account), .text(phone.id)]),
                ("INSERT INTO rate_slots (kind, client, window_end, used) VALUES ('nonce', '192.0.2.1', ?, 1)", [.int(at)]),
            ])
            var enforcing = Harness(location: location, file: file)
            enforcing.configuration.attestation = try rig.configuration(.enforce)
            let harness = enforcing
            Self.setClock(harness)
            try await harness.run { api, parts in
                let login = try await api.login(phone)
                #expect(login.status == .ok && (try? login.accountID) == account, "the v11 account logs in: \(login.text)")
                #expect(try await Self.recorded(parts, phone, harness) == nil, "a device from before v13 recorded no attestation")
                let refused = try await Self.login(api, phone, newAccount: true)
                #expect(refused.status == .forbidden && refused.error == "attestation_required", "\(refused.text)")
                let added = try await Self.login(api, phone, attestation: try rig.apple(try await Self.challenge(api)).body, newAccount: true)
                #expect(added.status == .created, "\(added.text)")
                #expect(try await Self.recorded(parts, phone, harness)?.outcome == .verified)
            }
            #expect(try await raw.strings("SELECT attestation_outcome FROM devices WHERE attestation_outcome IS NOT NULL") == ["verified"])
            await #expect(throws: (any Error).self, "an outcome the contract does not know is refused") {
                try await raw.run([("UPDATE devices SET attestation_outcome = 'ok'", [])])
            }
        }
    }

    @Test("--app-attest-root-ca is logged as a warning at start, with its path; attestations chain to it")
    func stagingRootWarning() async throws {
        let rig = try Rig()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("staging-root-\(UUID().uuidString).pem")
        try FakeAppAttest.pem(rig.apple.root.certificate).write(to: root, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: root) }
        let loaded = try ServerConfiguration.load(
            arguments: ["--attestation", "enforce", "--app-attest-app-ids", FakeAppAttest.appID, "--app-attest-root-ca", root.path],
            environment: [:]).attestation
        try await withHarness(.sqlite, configure: { $0.attestation = loaded }) { harness in
            Self.setClock(harness)
            try await harness.run { api, _ in
                let created = try await Self.login(api, Device(), attestation: try rig.apple(try await Self.challenge(api)).body)
                #expect(created.status == .created, "\(created.text)")
            }
            let warning = harness.logs.lines.withLock { $0 }.first { $0.contains("App Attest trusts the root CA of --app-attest-root-ca") }
            #expect(warning?.hasPrefix("warning") == true && warning?.contains(root.path) == true, "\(harness.logs.all)")
        }
        try await withHarness(.sqlite, configure: { $0.attestation = (try? rig.configuration(.enforce)) ?? AttestationConfiguration() }) { harness in
            try await harness.run { _, _ in }
            #expect(!harness.logs.all.contains("App Attest trusts"), "no warning without --app-attest-root-ca")
        }
    }

    // MARK: Configuration

    @Test("flags: each problem is one line at start")
    func configuration() throws {
        let google = FakePlayIntegrity()
        let apple = try FakeAppAttest()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("root-\(UUID().uuidString).pem")
        try FakeAppAttest.pem(apple.root.certificate).write(to: root, atomically: true, encoding: .utf8)
        let junk = FileManager.default.temporaryDirectory.appendingPathComponent("junk-\(UUID().uuidString).pem")
        try "not a certificate".write(to: junk, atomically: true, encoding: .utf8)
        defer {
            try? FileManager.default.removeItem(at: root)
            try? FileManager.default.removeItem(at: junk)
        }
        func load(_ arguments: [String], _ environment: [String: String] = [:]) throws -> ServerConfiguration {
            try ServerConfiguration.load(arguments: arguments, environment: environment)
        }
        func refusal(_ arguments: [String], _ environment: [String: String] = [:]) -> String {
            do {
                _ = try load(arguments, environment)
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        let keys = [
            "--play-integrity-packages", "com.example.transfer", "--play-integrity-decryption-key", google.decryptionKeyBase64,
            "--play-integrity-verification-key", google.verificationKeyBase64,
        ]
        #expect(try load([]).attestation.mode == .off)
        let both = try load(["--attestation", "enforce", "--app-attest-app-ids", "TEAM123456.com.example.transfer"] + keys)
        #expect(both.attestation.mode == .enforce && both.attestation.appAttest?.trustsOnlyApple == true && both.attestation.playIntegrity != nil)
        #expect(both.attestation.appAttest?.environment == .production)
        let staging = try load(["--attestation", "monitor", "--app-attest-app-ids", "TEAM123456.a", "--app-attest-root-ca", root.path,
                                "--app-attest-environment", "development"])
        #expect(staging.attestation.rootCAPath == root.path && staging.attestation.appAttest?.trustsOnlyApple == false)
        #expect(staging.attestation.appAttest?.environment == .development)
        #expect(try load([], ["TRANSFER_ATTESTATION": "monitor", "TRANSFER_PLAY_INTEGRITY_PACKAGES": "a.b",
                              "TRANSFER_PLAY_INTEGRITY_DECRYPTION_KEY": google.decryptionKeyBase64,
                              "TRANSFER_PLAY_INTEGRITY_VERIFICATION_KEY": google.verificationKeyBase64]).attestation.mode == .monitor)

        #expect(refusal(["--attestation", "strict"]) == "--attestation: 'strict' is not off, monitor or enforce")
        #expect(refusal(["--attestation", "enforce"])
            == "--attestation enforce needs --app-attest-app-ids or --play-integrity-packages (no attestation could be verified)")
        #expect(refusal(["--app-attest-app-ids", "com.example.transfer"])
            == "--app-attest-app-ids: 'com.example.transfer' is not an app id (TEAMID.bundle.id: the 10-character team id, a dot, the bundle id)")
        #expect(refusal(["--app-attest-app-ids", "TEAM123456.a", "--app-attest-root-ca", "/nonexistent/root.pem"])
            == "--app-attest-root-ca: cannot read '/nonexistent/root.pem'")
        #expect(refusal(["--app-attest-app-ids", "TEAM123456.a", "--app-attest-root-ca", junk.path])
            == "--app-attest-root-ca: '\(junk.path)': the App Attest root CA file holds no PEM certificate")
        #expect(refusal(["--app-attest-root-ca", root.path]) == "--app-attest-root-ca needs --app-attest-app-ids (App Attest is off without it)")
        #expect(refusal(["--app-attest-environment", "staging", "--app-attest-app-ids", "TEAM123456.a"])
            == "--app-attest-environment: 'staging' is not production or development")
        var shortKey = keys
        shortKey[3] = "c2hvcnQ="
        #expect(refusal(shortKey) == "--play-integrity-decryption-key: the Play Integrity decryption key is not base64 of 32 bytes (AES-256)")
        var badKey = keys
        badKey[5] = "AAAA"
        #expect(refusal(badKey) == "--play-integrity-verification-key: the Play Integrity verification key is not base64 of a DER EC P-256 public key")
        #expect(refusal(Array(keys.prefix(4)))
            == "--play-integrity-packages, --play-integrity-decryption-key and --play-integrity-verification-key go together (Play Integrity needs all three)")
        #expect(!refusal(shortKey).contains("c2hvcnQ="), "the secret key is never repeated")
    }
}

/// The attestation gate of a creation as a pure plan: what it writes, and what it does not.
@Suite("Device attestation: the creation's plan")
struct AttestationPlanTests {
    let t0 = Timestamp(milliseconds: 1_900_000_000_000)
    let device = DeviceID("3f1c7a52-9a43-4e1b-8f0e-2a9c3d4b5e6f")!
    let challenge = SecretHash(of: "challenge")

    func command(_ mode: AttestationMode, _ verdict: AttestationVerdict?) -> LoginCommand {
        LoginCommand(
            deviceID: device, deviceSecret: "secret", now: t0, newAccountID: "acct",
            creationSlot: RateSlot(kind: .accountCreation, key: "192.0.2.1", limit: RateLimit(count: 1, period: .seconds(60)), at: t0),
            fresh: FreshSession(sessionID: "s1", key: SessionKey(bytes: Array(repeating: 7, count: 32)), expiresAt: t0 + .seconds(60)),
            clientAddress: "192.0.2.1",
            attestation: AttestationGate(mode: mode, proof: verdict.map { .init(platform: .apple, challengeHash: challenge, verdict: $0) }))
    }

    func facts(challengeExpiresAt: Timestamp?) -> Facts {
        Facts((.device(device.value), DeviceRecord?.none), (.attestationChallenge(challenge), challengeExpiresAt))
    }

    @Test("enforce refusals write nothing but the used challenge: no device, no account, no rate-limit slot")
    func refusals() {
        let missing = planned(command(.enforce, nil), facts(challengeExpiresAt: nil))
        #expect(missing.result == .failure(.attestationRequired))
        #expect(missing.effects.isEmpty, "\(missing.effects)")
        let failed = planned(command(.enforce, .failed(check: "nonce", message: "m")), facts(challengeExpiresAt: t0 + .seconds(1)))
        #expect(failed.result == .failure(.invalidAttestation(check: "nonce", message: "m")))
        #expect(failed.effects == [.consumeAttestationChallenge(hash: challenge)], "\(failed.effects)")
    }

    /// Counts the proofs it was asked to verify; says yes to each.
    final class CountingVerifier: AttestationVerifier, @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        var verified: Int { lock.withLock { count } }
        func verify(_ proof: AttestationProof, now: Timestamp) async -> AttestationVerdict {
            lock.withLock { count += 1 }
            return .verified(nil)
        }
    }

    func expectChallengeRefused(_ service: TransferService, _ proof: AttestationProof) async throws {
        do {
            _ = try await service.login(deviceID: DeviceID(UUID().uuidString)!, deviceSecret: "secret", attestation: proof, clientAddress: nil)
            Issue.record("an account was created with a challenge the service does not hold")
        } catch TransferError.invalidAttestation(let check, _) {
            #expect(check == "challenge")
        }
    }

    @Test("a proof with a challenge never issued here (or used) costs one read: no certificate or signature is checked",
          arguments: StoreKind.available)
    func replayCostsNoVerification(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let verifier = CountingVerifier()
            let service = try await TransferService(
                store: store, hasher: CountingHasher(),
                policy: ServicePolicy(attestation: AttestationPolicy(mode: .enforce, verifier: verifier)))
            let replayed = AttestationProof.android(challenge: "never-issued", integrityToken: "a genuine token, replayed")
            try await expectChallengeRefused(service, replayed)
            #expect(verifier.verified == 0, "the verifier ran for a challenge the store does not hold")
            let issued = try await service.issueNonce(.attestation, clientAddress: nil)
            let fresh = AttestationProof.android(challenge: issued.value, integrityToken: "token")
            let device = DeviceID(UUID().uuidString)!
            _ = try await service.login(deviceID: device, deviceSecret: "secret", attestation: fresh, clientAddress: nil)
            #expect(verifier.verified == 1)
            try await expectChallengeRefused(service, fresh)
            #expect(verifier.verified == 1, "a used challenge is not verified again")
        }
    }

    @Test("the challenge is checked first: unknown, used or expired fails whatever the verdict")
    func challengeFirst() {
        for expiresAt in [nil, t0, t0 - .seconds(1)] as [Timestamp?] {
            let plan = planned(command(.enforce, .verified(nil)), facts(challengeExpiresAt: expiresAt))
            guard case .failure(.invalidAttestation(let check, _)) = plan.result else {
                Issue.record("\(String(describing: expiresAt)): \(plan.result)")
                continue
            }
            #expect(check == "challenge")
        }
    }

    @Test("a creation records the result on the new device after creating it, and the audit event says it")
    func creation() throws {
        let key = AttestedKey(keyID: Array(repeating: 1, count: 32), publicKey: [4] + Array(repeating: 2, count: 64), counter: 0)
        let plan = planned(command(.monitor, .verified(key)), facts(challengeExpiresAt: t0 + .seconds(300)))
        guard case .success(let grant) = plan.result else { throw TestFailure("\(plan.result)") }
        #expect(grant.attestation == AttestationResult(platform: .apple, outcome: .verified))
        let record = Effect.recordDeviceAttestation(
            deviceID: device.value, DeviceAttestation(platform: .apple, outcome: .verified, key: key, at: t0))
        let created = try #require(plan.effects.firstIndex { if case .createDevice = $0 { true } else { false } })
        let recorded = try #require(plan.effects.firstIndex(of: record), "\(plan.effects)")
        #expect(created < recorded, "the device exists before it records")
        #expect(plan.effects.contains(.consumeAttestationChallenge(hash: challenge)))
        #expect(plan.effects.contains { if case .audit(let e) = $0 { e.reason == "attestation: verified" } else { false } })
    }
}
