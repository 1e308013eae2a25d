import Crypto
import Foundation
import Testing
import TransferAttestation
import X509
@testable import TransferTestSupport

/// Contract v1.2, "Device attestation for new accounts": the verifiers on their own, against
/// a private App Attest CA and Play Integrity keys made here (Helpers/FakeAttestation.swift).
/// Every check has a test that changes exactly that one thing in an otherwise valid
/// attestation and expects its own message.
@Suite("Device attestation: App Attest")
struct AppAttestTests {
    let challenge = "8wQp1Dk1mXrJ2b6XoVvYq0n5Xx8s4wQe1c9Gm0kqL2M"
    var clientDataHash: [UInt8] { Array(SHA256.hash(data: Array(challenge.utf8))) }

    /// Verifies `attestation`, expecting the failure `expected` names.
    func expectFailure(
        _ expected: AppAttestError, _ attestation: FakeAppAttest.Attestation, verifier: AppAttestVerifier,
        keyID: [UInt8]? = nil, clientDataHash: [UInt8]? = nil, now: Date = FakeAppAttest.now,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            let key = try await verifier.verify(
                keyID: keyID ?? attestation.keyID, attestationObject: attestation.object,
                clientDataHash: clientDataHash ?? self.clientDataHash, now: now)
            Issue.record("verified (\(key.appID)) but expected: \(expected.message)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.check == expected.check, "\(error.message)", sourceLocation: sourceLocation)
            #expect(error.message == expected.message, sourceLocation: sourceLocation)
        }
    }

    @Test("a genuine attestation verifies: the key, counter 0, the receipt and the app id come back")
    func verifies() async throws {
        let apple = try FakeAppAttest()
        let attestation = try apple.attest(clientDataHash: clientDataHash)
        let verifier = apple.verifier(appIDs: ["OTHERTEAM1.com.example.other", FakeAppAttest.appID])
        let key = try await verifier.verify(
            keyID: attestation.keyID, attestationObject: attestation.object, clientDataHash: clientDataHash, now: FakeAppAttest.now)
        #expect(key.keyID == attestation.keyID)
        #expect(key.x963 == Array(attestation.key.publicKey.x963Representation), "the certified key, as an X9.62 point")
        #expect(key.der == Array(attestation.key.publicKey.derRepresentation), "and as DER")
        #expect(key.counter == 0)
        #expect(key.receipt == Array("fake receipt".utf8))
        #expect(key.appID == FakeAppAttest.appID, "the second of the two app ids matched")
        #expect(key.environment == .production)
    }

    @Test("as the request carries it: base64 keyId and object, clientDataHash = SHA-256 of the challenge's UTF-8 bytes")
    func fromRequest() async throws {
        let apple = try FakeAppAttest()
        let attestation = try apple.attest(clientDataHash: clientDataHash)
        let keyID = Data(attestation.keyID).base64EncodedString(), object = Data(attestation.object).base64EncodedString()
        let key = try await apple.verifier().verify(keyIDBase64: keyID, attestationObjectBase64: object, challenge: challenge, now: FakeAppAttest.now)
        #expect(key.keyID == attestation.keyID)
        await #expect(throws: AppAttestError.nonce, "another challenge") {
            try await apple.verifier().verify(keyIDBase64: keyID, attestationObjectBase64: object, challenge: challenge + "x", now: FakeAppAttest.now)
        }
        await #expect(throws: AppAttestError.malformed("keyId is not base64")) {
            try await apple.verifier().verify(keyIDBase64: "not base64!", attestationObjectBase64: object, challenge: challenge, now: FakeAppAttest.now)
        }
        await #expect(throws: AppAttestError.malformed("attestationObject is not base64")) {
            try await apple.verifier().verify(keyIDBase64: keyID, attestationObjectBase64: "%%%", challenge: challenge, now: FakeAppAttest.now)
        }
    }

    @Test("development: appattestdevelop verifies with --app-attest-environment development, and only then")
    func development() async throws {
        let apple = try FakeAppAttest()
        var knobs = FakeAppAttest.Knobs()
        knobs.aaguid = AppAttestVerifier.Environment.development.aaguid
        let attestation = try apple.attest(clientDataHash: clientDataHash, knobs)
        let key = try await apple.verifier(environment: .development).verify(
            keyID: attestation.keyID, attestationObject: attestation.object, clientDataHash: clientDataHash, now: FakeAppAttest.now)
        #expect(key.environment == .development)
        await expectFailure(.aaguid(expected: .production), attestation, verifier: apple.verifier(environment: .production))
        // And a production attestation is refused by a development server.
        let production = try apple.attest(clientDataHash: clientDataHash)
        await expectFailure(.aaguid(expected: .development), production, verifier: apple.verifier(environment: .development))
    }

    @Test("check: the format is apple-appattest")
    func format() async throws {
        let apple = try FakeAppAttest()
        var knobs = FakeAppAttest.Knobs()
        knobs.format = "packed"
        await expectFailure(.format, try apple.attest(clientDataHash: clientDataHash, knobs), verifier: apple.verifier())
    }

    @Test("check: the chain ends at the trusted root (another CA's chain, Apple's root against a private chain)")
    func chainToAnotherRoot() async throws {
        let apple = try FakeAppAttest(), other = try FakeAppAttest(rootName: "Fake App Attestation Root CA")
        var knobs = FakeAppAttest.Knobs()
        knobs.signer = other.intermediate
        let foreign = try apple.attest(clientDataHash: clientDataHash, knobs)
        await expectFailure(.certificateChain(Self.chainMessage), foreign, verifier: apple.verifier())

        // The built-in root is Apple's: a private chain does not reach it.
        let genuine = try apple.attest(clientDataHash: clientDataHash)
        let apples = AppAttestVerifier(appIDs: [FakeAppAttest.appID], environment: .production)
        await expectFailure(.certificateChain(Self.chainMessage), genuine, verifier: apples)
    }

    static let chainMessage = "the certificates do not chain to the App Attest root, or are not valid now"

    @Test("check: the chain needs its intermediate")
    func chainWithoutIntermediate() async throws {
        let apple = try FakeAppAttest()
        var knobs = FakeAppAttest.Knobs()
        knobs.includeIntermediate = false
        await expectFailure(.certificateChain(Self.chainMessage), try apple.attest(clientDataHash: clientDataHash, knobs), verifier: apple.verifier())
    }

    @Test("check: the credential certificate is valid now (expired, not yet valid)")
    func chainValidity() async throws {
        let apple = try FakeAppAttest()
        var expired = FakeAppAttest.Knobs()
        expired.credentialValidity = (FakeAppAttest.now - 3 * 86_400, FakeAppAttest.now - 1)
        await expectFailure(.certificateChain(Self.chainMessage), try apple.attest(clientDataHash: clientDataHash, expired), verifier: apple.verifier())
        var early = FakeAppAttest.Knobs()
        early.credentialValidity = (FakeAppAttest.now + 60, FakeAppAttest.now + 3 * 86_400)
        await expectFailure(.certificateChain(Self.chainMessage), try apple.attest(clientDataHash: clientDataHash, early), verifier: apple.verifier())
        // The same genuine attestation, checked after its certificate expired.
        let genuine = try apple.attest(clientDataHash: clientDataHash)
        await expectFailure(.certificateChain(Self.chainMessage), genuine, verifier: apple.verifier(), now: FakeAppAttest.now + 2 * 86_400)
    }

    @Test("check: the nonce is SHA-256(authData ‖ clientDataHash) (another challenge, another nonce, no nonce)")
    func nonce() async throws {
        let apple = try FakeAppAttest()
        let genuine = try apple.attest(clientDataHash: clientDataHash)
        let otherChallenge = Array(SHA256.hash(data: Array("another challenge".utf8)))
        await expectFailure(.nonce, genuine, verifier: apple.verifier(), clientDataHash: otherChallenge)

        var knobs = FakeAppAttest.Knobs()
        knobs.nonce = [UInt8](repeating: 7, count: 32)
        await expectFailure(.nonce, try apple.attest(clientDataHash: clientDataHash, knobs), verifier: apple.verifier())

        var missing = FakeAppAttest.Knobs()
        missing.includeNonceExtension = false
        await expectFailure(.nonce, try apple.attest(clientDataHash: clientDataHash, missing), verifier: apple.verifier())
    }

    @Test("check: keyId is the SHA-256 of the certified key")
    func keyID() async throws {
        let apple = try FakeAppAttest()
        let genuine = try apple.attest(clientDataHash: clientDataHash)
        let otherKey = Array(SHA256.hash(data: Array(P256.Signing.PrivateKey().publicKey.x963Representation)))
        await expectFailure(.keyID, genuine, verifier: apple.verifier(), keyID: otherKey)
        await expectFailure(.keyID, genuine, verifier: apple.verifier(), keyID: Array(genuine.keyID.prefix(31)))
    }

    @Test("check: rpIdHash is the SHA-256 of one of the app ids")
    func appID() async throws {
        let apple = try FakeAppAttest()
        var knobs = FakeAppAttest.Knobs()
        knobs.appID = "TEAM123456.com.example.impostor"
        await expectFailure(.appID, try apple.attest(clientDataHash: clientDataHash, knobs), verifier: apple.verifier())
        // The bundle id alone, without the team, is another app id.
        let genuine = try apple.attest(clientDataHash: clientDataHash)
        await expectFailure(.appID, genuine, verifier: apple.verifier(appIDs: ["com.example.transfer"]))
    }

    @Test("check: the counter is 0")
    func counter() async throws {
        let apple = try FakeAppAttest()
        var knobs = FakeAppAttest.Knobs()
        knobs.counter = 1
        await expectFailure(.counter, try apple.attest(clientDataHash: clientDataHash, knobs), verifier: apple.verifier())
    }

    @Test("check: the AAGUID is appattest followed by seven zero bytes in production")
    func aaguid() async throws {
        let apple = try FakeAppAttest()
        var knobs = FakeAppAttest.Knobs()
        knobs.aaguid = Array("appattest".utf8) + [0, 0, 0, 0, 0, 0, 1]
        await expectFailure(.aaguid(expected: .production), try apple.attest(clientDataHash: clientDataHash, knobs), verifier: apple.verifier())
    }

    @Test("check: credentialId equals keyId")
    func credentialID() async throws {
        let apple = try FakeAppAttest()
        var knobs = FakeAppAttest.Knobs()
        knobs.credentialID = [UInt8](repeating: 0xAB, count: 32)
        await expectFailure(.credentialID, try apple.attest(clientDataHash: clientDataHash, knobs), verifier: apple.verifier())
    }

    @Test("an object that is not App Attest's CBOR is refused with what is wrong with it")
    func malformed() async throws {
        let apple = try FakeAppAttest()
        let genuine = try apple.attest(clientDataHash: clientDataHash)
        let verifier = apple.verifier()
        func object(_ bytes: [UInt8]) -> FakeAppAttest.Attestation {
            FakeAppAttest.Attestation(key: genuine.key, keyID: genuine.keyID, object: bytes, authData: genuine.authData)
        }
        await expectFailure(.malformed("CBOR ends early (at byte 0)"), object([]), verifier: verifier)
        await expectFailure(
            .malformed("bytes follow the CBOR item (from byte \(genuine.object.count))"), object(genuine.object + [0]), verifier: verifier)
        await expectFailure(.malformed("it is not a CBOR map"), object(CBOREncoder.encode(.array([]))), verifier: verifier)
        let noAuthData = CBOREncoder.encode(.map([
            .init(.text("fmt"), .text("apple-appattest")),
            .init(.text("attStmt"), .map([.init(.text("x5c"), .array([.bytes([0x30])]))])),
        ]))
        await expectFailure(.malformed("authData is missing or not bytes"), object(noAuthData), verifier: verifier)
        let noChain = CBOREncoder.encode(.map([
            .init(.text("fmt"), .text("apple-appattest")), .init(.text("attStmt"), .map([])),
            .init(.text("authData"), .bytes([])),
        ]))
        await expectFailure(.malformed("attStmt.x5c is missing or not an array"), object(noChain), verifier: verifier)
    }

    @Test("authData too short for its fields is malformed (the nonce over it still matches)")
    func shortAuthData() async throws {
        let apple = try FakeAppAttest()
        var short = FakeAppAttest.Knobs()
        short.authData = [UInt8](repeating: 0, count: 54)
        await expectFailure(
            .malformed("authData is 54 bytes, too short for attested credential data"),
            try apple.attest(clientDataHash: clientDataHash, short), verifier: apple.verifier())
        var cut = FakeAppAttest.Knobs()
        cut.authData = [UInt8](repeating: 0, count: 53) + [0x00, 0x20] + [UInt8](repeating: 0, count: 31)
        await expectFailure(
            .malformed("authData ends inside the credentialId"), try apple.attest(clientDataHash: clientDataHash, cut), verifier: apple.verifier())
    }

    @Test("a private staging root (--app-attest-root-ca) is read from PEM and trusted instead of Apple's")
    func stagingRoot() async throws {
        let apple = try FakeAppAttest()
        let roots = try AppAttestVerifier.roots(pem: FakeAppAttest.pem(apple.root.certificate))
        #expect(roots == [apple.root.certificate])
        let verifier = AppAttestVerifier(appIDs: [FakeAppAttest.appID], environment: .production, trustRoots: roots)
        let attestation = try apple.attest(clientDataHash: clientDataHash)
        let key = try await verifier.verify(
            keyID: attestation.keyID, attestationObject: attestation.object, clientDataHash: clientDataHash, now: FakeAppAttest.now)
        #expect(key.keyID == attestation.keyID)
        #expect(!verifier.trustsOnlyApple, "the server warns at start")
        #expect(AppAttestVerifier(appIDs: [FakeAppAttest.appID], environment: .production).trustsOnlyApple)

        #expect(throws: AttestationConfigurationError("the App Attest root CA file holds no PEM certificate")) {
            try AppAttestVerifier.roots(pem: "not a certificate")
        }
    }

    @Test("the built-in root is Apple App Attestation Root CA, pinned by its SHA-256 fingerprint, valid until 2045")
    func builtInRoot() throws {
        let root = AppAttestVerifier.appleRoot
        #expect(root.subject.description.contains("CN=Apple App Attestation Root CA"), "\(root.subject)")
        #expect(root.issuer == root.subject, "self-issued")
        #expect(root.notValidAfter == Date(timeIntervalSince1970: 2_373_148_800), "2045-03-15T00:00:00Z: \(root.notValidAfter)")
        let der = try FakeAppAttest.der(root)
        #expect(Array(SHA256.hash(data: der)) == AppAttestVerifier.appleRootFingerprint)
        #expect(
            AppAttestVerifier.appleRootFingerprint.map { String(format: "%02X", $0) }.joined(separator: ":")
                == "1C:B9:82:3B:A2:8B:A6:AD:2D:33:A0:06:94:1D:E2:AE:4F:51:3E:F1:D4:E8:31:B9:F7:E0:FA:7B:62:42:C9:32")
        #expect(root.publicKey.isValidSignature(root.signature, for: root), "self-signed")
        #expect(AppAttestVerifier(appIDs: [], environment: .production).trustRoots == [root], "the default trust root")
    }
}

@Suite("Device attestation: Play Integrity")
struct PlayIntegrityTests {
    let challenge = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWo"

    func expectFailure(
        _ expected: PlayIntegrityError, _ token: String, verifier: PlayIntegrityVerifier, nonce: String? = nil,
        now: Date = FakePlayIntegrity.now, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            let verdict = try await verifier.verify(token: token, expectedNonce: nonce ?? challenge, now: now)
            Issue.record("verified (\(verdict.packageName)) but expected: \(expected.message)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.check == expected.check, "\(error.message)", sourceLocation: sourceLocation)
            #expect(error.message == expected.message, sourceLocation: sourceLocation)
        }
    }

    /// The genuine verdict with one field at `path` replaced (nil removes it).
    func verdict(_ path: [String], _ value: Any?) -> [String: Any] {
        var verdict = FakePlayIntegrity.verdict(nonce: challenge)
        var section = verdict[path[0]] as? [String: Any] ?? [:]
        if path.count == 1 {
            verdict[path[0]] = value
        } else {
            section[path[1]] = value
            verdict[path[0]] = section
        }
        return verdict
    }

    @Test("a genuine token verifies and its verdict comes back")
    func verifies() async throws {
        let google = FakePlayIntegrity()
        let verifier = try google.verifier(packageNames: ["com.example.other", FakePlayIntegrity.packageName])
        let verdict = try await verifier.verify(
            token: try google.token(FakePlayIntegrity.verdict(nonce: challenge)), expectedNonce: challenge, now: FakePlayIntegrity.now)
        #expect(verdict.packageName == FakePlayIntegrity.packageName)
        #expect(verdict.deviceRecognitionVerdict == ["MEETS_DEVICE_INTEGRITY"])
        #expect(verdict.appLicensingVerdict == "LICENSED")
        #expect(verdict.timestamp == FakePlayIntegrity.now)
    }

    @Test("the nonce matches with or without base64 padding; a timestamp in numbers and a stronger device verdict verify")
    func tolerated() async throws {
        let google = FakePlayIntegrity()
        let verifier = try google.verifier()
        let padded = try google.token(FakePlayIntegrity.verdict(nonce: challenge + "="))
        _ = try await verifier.verify(token: padded, expectedNonce: challenge, now: FakePlayIntegrity.now)
        let numeric = try google.token(verdict(["requestDetails", "timestampMillis"], Int64(FakePlayIntegrity.now.timeIntervalSince1970 * 1000)))
        _ = try await verifier.verify(token: numeric, expectedNonce: challenge, now: FakePlayIntegrity.now)
        let strong = try google.token(verdict(
            ["deviceIntegrity", "deviceRecognitionVerdict"], ["MEETS_BASIC_INTEGRITY", "MEETS_DEVICE_INTEGRITY", "MEETS_STRONG_INTEGRITY"]))
        _ = try await verifier.verify(token: strong, expectedNonce: challenge, now: FakePlayIntegrity.now)
        // Four minutes either way is within five.
        _ = try await verifier.verify(token: try google.token(FakePlayIntegrity.verdict(nonce: challenge)), expectedNonce: challenge, now: FakePlayIntegrity.now + 240)
        _ = try await verifier.verify(token: try google.token(FakePlayIntegrity.verdict(nonce: challenge)), expectedNonce: challenge, now: FakePlayIntegrity.now - 240)
    }

    @Test("check: the token is a compact JWE with A256KW and A256GCM")
    func token() async throws {
        let google = FakePlayIntegrity()
        let verifier = try google.verifier()
        await expectFailure(.malformedToken("it is not a compact JWE (five parts)"), "a.b.c", verifier: verifier)
        await expectFailure(.malformedToken("a part is not base64url"), "a.b.c.d.e+", verifier: verifier)
        var rsa = FakePlayIntegrity.Knobs()
        rsa.jweHeader = ["alg": "RSA-OAEP", "enc": "A256GCM"]
        await expectFailure(
            .malformedToken("the JWE is not A256KW with A256GCM"), try google.token(FakePlayIntegrity.verdict(nonce: challenge), rsa), verifier: verifier)
        var cbc = FakePlayIntegrity.Knobs()
        cbc.jweHeader = ["alg": "A256KW", "enc": "A128CBC-HS256"]
        await expectFailure(
            .malformedToken("the JWE is not A256KW with A256GCM"), try google.token(FakePlayIntegrity.verdict(nonce: challenge), cbc), verifier: verifier)
    }

    @Test("check: the token decrypts with the app's key (another key, a changed ciphertext)")
    func decryption() async throws {
        let google = FakePlayIntegrity()
        let verifier = try google.verifier()
        var otherKey = FakePlayIntegrity.Knobs()
        otherKey.wrappingKey = SymmetricKey(size: .bits256)
        await expectFailure(.decryption, try google.token(FakePlayIntegrity.verdict(nonce: challenge), otherKey), verifier: verifier)
        var flipped = FakePlayIntegrity.Knobs()
        flipped.flipCiphertextBit = true
        await expectFailure(.decryption, try google.token(FakePlayIntegrity.verdict(nonce: challenge), flipped), verifier: verifier)
    }

    @Test("check: the verdict is signed ES256 by the app's verification key")
    func signature() async throws {
        let google = FakePlayIntegrity()
        let verifier = try google.verifier()
        var otherKey = FakePlayIntegrity.Knobs()
        otherKey.signingKey = P256.Signing.PrivateKey()
        await expectFailure(.signature, try google.token(FakePlayIntegrity.verdict(nonce: challenge), otherKey), verifier: verifier)
        var hs256 = FakePlayIntegrity.Knobs()
        hs256.jwsHeader = ["alg": "HS256"]
        await expectFailure(.signature, try google.token(FakePlayIntegrity.verdict(nonce: challenge), hs256), verifier: verifier)
    }

    @Test("check: the verdict is JSON with requestDetails")
    func payload() async throws {
        let google = FakePlayIntegrity()
        let verifier = try google.verifier()
        var notJSON = FakePlayIntegrity.Knobs()
        notJSON.rawPayload = Array("not json".utf8)
        await expectFailure(
            .malformedPayload("it is not the JSON of an integrity verdict"), try google.token([:], notJSON), verifier: verifier)
        await expectFailure(.malformedPayload("requestDetails is missing"), try google.token(verdict(["requestDetails"], nil)), verifier: verifier)
    }

    @Test("check: requestPackageName is one of --play-integrity-packages")
    func packageName() async throws {
        let google = FakePlayIntegrity()
        await expectFailure(
            .packageName, try google.token(verdict(["requestDetails", "requestPackageName"], "com.example.impostor")),
            verifier: try google.verifier())
        await expectFailure(.packageName, try google.token(verdict(["requestDetails", "requestPackageName"], nil)), verifier: try google.verifier())
    }

    @Test("check: the nonce is the challenge")
    func nonce() async throws {
        let google = FakePlayIntegrity()
        let token = try google.token(FakePlayIntegrity.verdict(nonce: challenge))
        await expectFailure(.nonce, token, verifier: try google.verifier(), nonce: "b3RoZXJjaGFsbGVuZ2UxMjM0NTY3ODkwYWJjZGVmZ2g")
        await expectFailure(.nonce, try google.token(verdict(["requestDetails", "nonce"], nil)), verifier: try google.verifier())
    }

    @Test("check: timestampMillis is within 5 minutes (six minutes old, six ahead, missing, not a number)")
    func timestamp() async throws {
        let google = FakePlayIntegrity()
        let verifier = try google.verifier()
        let token = try google.token(FakePlayIntegrity.verdict(nonce: challenge))
        await expectFailure(.timestamp, token, verifier: verifier, now: FakePlayIntegrity.now + 360)
        await expectFailure(.timestamp, token, verifier: verifier, now: FakePlayIntegrity.now - 360)
        await expectFailure(.timestamp, try google.token(verdict(["requestDetails", "timestampMillis"], nil)), verifier: verifier)
        await expectFailure(.timestamp, try google.token(verdict(["requestDetails", "timestampMillis"], "soon")), verifier: verifier)
    }

    @Test("check: appRecognitionVerdict is PLAY_RECOGNIZED")
    func appRecognition() async throws {
        let google = FakePlayIntegrity()
        await expectFailure(
            .appRecognition, try google.token(verdict(["appIntegrity", "appRecognitionVerdict"], "UNRECOGNIZED_VERSION")),
            verifier: try google.verifier())
        await expectFailure(.appRecognition, try google.token(verdict(["appIntegrity"], nil)), verifier: try google.verifier())
    }

    @Test("check: deviceRecognitionVerdict holds MEETS_DEVICE_INTEGRITY (basic only, empty, missing)")
    func deviceIntegrity() async throws {
        let google = FakePlayIntegrity()
        let verifier = try google.verifier()
        await expectFailure(
            .deviceIntegrity, try google.token(verdict(["deviceIntegrity", "deviceRecognitionVerdict"], ["MEETS_BASIC_INTEGRITY"])),
            verifier: verifier)
        await expectFailure(.deviceIntegrity, try google.token(verdict(["deviceIntegrity", "deviceRecognitionVerdict"], [String]())), verifier: verifier)
        await expectFailure(.deviceIntegrity, try google.token(verdict(["deviceIntegrity"], [String: Any]())), verifier: verifier)
    }

    @Test("keys that are not what Play Console gives are refused at start with a clear error")
    func configuration() throws {
        let google = FakePlayIntegrity()
        #expect(throws: AttestationConfigurationError("the Play Integrity decryption key is not base64 of 32 bytes (AES-256)")) {
            try PlayIntegrityVerifier(decryptionKeyBase64: "c2hvcnQ=", verificationKeyBase64: google.verificationKeyBase64, packageNames: [])
        }
        #expect(throws: AttestationConfigurationError("the Play Integrity verification key is not base64 of a DER EC P-256 public key")) {
            try PlayIntegrityVerifier(decryptionKeyBase64: google.decryptionKeyBase64, verificationKeyBase64: "AAAA", packageNames: [])
        }
    }
}

@Suite("Device attestation: strict CBOR")
struct CBORTests {
    func expectRefused(_ bytes: [UInt8], _ expected: CBORError, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(throws: expected, "\(bytes.map { String(format: "%02x", $0) }.joined())", sourceLocation: sourceLocation) {
            try CBOR.decode(bytes)
        }
    }

    @Test("the subset decodes and encodes back: integers to 64 bits, byte and text strings, arrays, maps")
    func roundTrip() throws {
        let value = CBOR.map([
            .init(.text("fmt"), .text("apple-appattest")),
            .init(.unsigned(1), .array([.unsigned(0), .unsigned(23), .unsigned(24), .unsigned(255), .unsigned(256), .unsigned(UInt64.max)])),
            .init(.negative(0), .array([.negative(0), .negative(UInt64.max), .bytes([]), .text(""), .text("é✓")])),
            .init(.bytes([1, 2]), .bytes([UInt8](repeating: 9, count: 300))),
        ])
        let bytes = CBOREncoder.encode(value)
        #expect(try CBOR.decode(bytes) == value)
        #expect(try CBOR.decode([0x20]).integer == -1)
        #expect(try CBOR.decode([0x3b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).integer == Int64.min)
        #expect(try CBOR.decode([0x19, 0x00, 0x01]) == .unsigned(1), "a longer head than needed is read")
        // RFC 8949 appendix A.
        #expect(try CBOR.decode([0xa2, 0x61, 0x61, 0x01, 0x61, 0x62, 0x82, 0x02, 0x03])
            == .map([.init(.text("a"), .unsigned(1)), .init(.text("b"), .array([.unsigned(2), .unsigned(3)]))]))
    }

    @Test("indefinite lengths are refused (byte string, text, array, map)")
    func indefinite() {
        expectRefused([0x5f, 0x41, 0x00, 0xff], .indefiniteLength(offset: 0))
        expectRefused([0x7f, 0x61, 0x61, 0xff], .indefiniteLength(offset: 0))
        expectRefused([0x9f, 0x01, 0xff], .indefiniteLength(offset: 0))
        expectRefused([0xbf, 0x61, 0x61, 0x01, 0xff], .indefiniteLength(offset: 0))
        expectRefused([0x81, 0x9f, 0xff], .indefiniteLength(offset: 1))
        expectRefused([0xff], .unsupportedType(majorType: 7, offset: 0))
    }

    @Test("bytes after the item are refused")
    func trailing() {
        expectRefused([0x01, 0x00], .trailingBytes(offset: 1))
        expectRefused([0xa0, 0xa0], .trailingBytes(offset: 1))
    }

    @Test("a map that repeats a key is refused, and a map key must be an integer or a string")
    func mapKeys() {
        expectRefused([0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02], .duplicateMapKey(offset: 4))
        expectRefused([0xa2, 0x01, 0x00, 0x01, 0x00], .duplicateMapKey(offset: 3))
        expectRefused([0xa1, 0x80, 0x00], .unsupportedMapKey(offset: 1))
        expectRefused([0xa1, 0xa0, 0x00], .unsupportedMapKey(offset: 1))
        // The same integer written two ways is one key.
        expectRefused([0xa2, 0x01, 0x00, 0x18, 0x01, 0x00], .duplicateMapKey(offset: 3))
        // Distinct keys of different types are fine.
        #expect((try? CBOR.decode([0xa2, 0x01, 0x00, 0x61, 0x01, 0x00])) != nil)
    }

    @Test("nesting deeper than the bound is refused, without exhausting the stack")
    func depth() throws {
        let eight = [UInt8](repeating: 0x81, count: 7) + [0x80]
        #expect((try? CBOR.decode(eight)) != nil, "eight levels are allowed")
        expectRefused([UInt8](repeating: 0x81, count: 8) + [0x80], .tooDeep(offset: 8))
        expectRefused([UInt8](repeating: 0x81, count: 100_000), .tooDeep(offset: 8))
        expectRefused([UInt8](repeating: 0xa1, count: 100_000), .tooDeep(offset: 8))
    }

    @Test("a length beyond the input is refused before anything is allocated")
    func lengths() {
        expectRefused([0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], .truncated(offset: 0))
        expectRefused([0x9b, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00], .truncated(offset: 0))
        expectRefused([0xba, 0xff, 0xff, 0xff, 0xff], .truncated(offset: 0))
        expectRefused([0x42, 0x00], .truncated(offset: 0))
        expectRefused([0x82, 0x00], .truncated(offset: 0))
        expectRefused([0x19, 0x01], .truncated(offset: 1))
        expectRefused([], .truncated(offset: 0))
    }

    @Test("tags, floats, simple values, reserved heads and text that is not UTF-8 are refused")
    func outsideTheSubset() {
        expectRefused([0xc0, 0x60], .unsupportedType(majorType: 6, offset: 0))
        expectRefused([0xf9, 0x3c, 0x00], .unsupportedType(majorType: 7, offset: 0))
        expectRefused([0xf5], .unsupportedType(majorType: 7, offset: 0))
        expectRefused([0xf6], .unsupportedType(majorType: 7, offset: 0))
        expectRefused([0x1c], .reservedAdditionalInformation(offset: 0))
        expectRefused([0x5e], .reservedAdditionalInformation(offset: 0))
        expectRefused([0x62, 0xc3, 0x28], .invalidUTF8(offset: 0))
        expectRefused([0x63, 0xed, 0xa0, 0x80], .invalidUTF8(offset: 0))
    }

    @Test("the committed fuzz corpus decodes without a crash, and what decodes encodes back the same")
    func fuzzCorpus() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Fuzz/cbor-corpus").standardized
        let files = try FileManager.default.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)
        #expect(files.count >= 10, "the seed corpus at \(corpus.path)")
        for file in files {
            let bytes = try [UInt8](Data(contentsOf: file))
            if let item = try? CBOR.decode(bytes) {
                #expect(try CBOR.decode(CBOREncoder.encode(item)) == item, "\(file.lastPathComponent)")
            }
        }
    }
}
