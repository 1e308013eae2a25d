import Crypto
import Foundation
import SwiftASN1
import TransferAttestation
import X509

/// A stand-in for Apple's App Attest service: a private root → intermediate → credential
/// certificate chain shaped like Apple's (P-384 CAs, a P-256 credential key, the nonce in
/// extension 1.2.840.113635.100.8.2), authData with a COSE key, all CBOR-encoded by the
/// test-only encoder. `Knobs` holds every field a check reads, so a test changes exactly one
/// and the rest stays a valid attestation (the nonce is always recomputed from what is sent,
/// unless the test replaces it).
struct FakeAppAttest {
    static let appID = "TEAM123456.com.example.transfer"
    /// A fixed clock: the certificates are valid a day either side of it.
    static let now = Date(timeIntervalSince1970: 1_900_000_000)

    struct Authority {
        let key: P384.Signing.PrivateKey
        let certificate: Certificate
        let name: DistinguishedName
    }

    let root: Authority
    let intermediate: Authority

    /// A fresh root and intermediate (each test has its own private CA).
    init(rootName: String = "Fake App Attestation Root CA") throws {
        let rootKey = P384.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName(rootName); OrganizationName("Example Test") }
        let rootCertificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey),
            notValidBefore: Self.now - 86_400 * 365, notValidAfter: Self.now + 86_400 * 365,
            issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA384,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(rootKey))
        root = Authority(key: rootKey, certificate: rootCertificate, name: rootName)

        let intermediateKey = P384.Signing.PrivateKey()
        let intermediateName = try DistinguishedName { CommonName("Fake App Attestation CA 1"); OrganizationName("Example Test") }
        let intermediateCertificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey),
            notValidBefore: Self.now - 86_400 * 30, notValidAfter: Self.now + 86_400 * 30,
            issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA384,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(rootKey))
        intermediate = Authority(key: intermediateKey, certificate: intermediateCertificate, name: intermediateName)
    }

    /// A verifier that trusts this fake's root.
    func verifier(
        appIDs: [String] = [FakeAppAttest.appID], environment: AppAttestVerifier.Environment = .production
    ) -> AppAttestVerifier {
        AppAttestVerifier(appIDs: appIDs, environment: environment, trustRoots: [root.certificate])
    }

    /// Everything an attestation carries that a check reads.
    struct Knobs {
        var format = "apple-appattest"
        var appID = FakeAppAttest.appID
        var counter: UInt32 = 0
        var aaguid = AppAttestVerifier.Environment.production.aaguid
        /// nil: the key id, as a device writes it.
        var credentialID: [UInt8]? = nil
        /// nil: SHA-256(authData ‖ clientDataHash), as Apple writes it.
        var nonce: [UInt8]? = nil
        var includeNonceExtension = true
        var includeIntermediate = true
        var credentialValidity: (notBefore: Date, notAfter: Date) = (FakeAppAttest.now - 86_400, FakeAppAttest.now + 86_400)
        /// Signs the credential certificate with another CA's key (the chain then ends nowhere trusted).
        var signer: Authority? = nil
        var receipt: [UInt8] = Array("fake receipt".utf8)
        /// Sends these bytes as authData instead of well-formed ones (the nonce covers them).
        var authData: [UInt8]? = nil
    }

    struct Attestation {
        let key: P256.Signing.PrivateKey
        /// SHA-256 of the key's X9.62 point, as `DCAppAttestService.generateKey` returns it.
        let keyID: [UInt8]
        let object: [UInt8]
        let authData: [UInt8]
    }

    /// An attestation of a new key for `clientDataHash`, as a device would send it.
    func attest(clientDataHash: [UInt8], _ knobs: Knobs = Knobs()) throws -> Attestation {
        let key = P256.Signing.PrivateKey()
        let point = Array(key.publicKey.x963Representation)
        let keyID = Array(SHA256.hash(data: point))
        let authData = knobs.authData ?? Self.authData(knobs: knobs, keyID: knobs.credentialID ?? keyID, point: point)
        let nonce = knobs.nonce ?? Array(SHA256.hash(data: authData + clientDataHash))

        let signer = knobs.signer ?? intermediate
        let subject = try DistinguishedName {
            CommonName(keyID.map { String(format: "%02x", $0) }.joined())
            OrganizationalUnitName("AAA Certification")
            OrganizationName("Example Test")
        }
        let nonceExtension = Certificate.Extension(
            oid: [1, 2, 840, 113635, 100, 8, 2], critical: false, value: ArraySlice(Self.nonceExtensionValue(nonce)))
        let includeNonce = knobs.includeNonceExtension
        let credential = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: knobs.credentialValidity.notBefore, notValidAfter: knobs.credentialValidity.notAfter,
            issuer: signer.name, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, nonRepudiation: true, keyEncipherment: true, dataEncipherment: true))
                if includeNonce { nonceExtension }
            },
            issuerPrivateKey: .init(signer.key))

        var x5c: [CBOR] = [.bytes(try Self.der(credential))]
        if knobs.includeIntermediate { x5c.append(.bytes(try Self.der(intermediate.certificate))) }
        let object = CBOR.map([
            .init(.text("fmt"), .text(knobs.format)),
            .init(.text("attStmt"), .map([
                .init(.text("x5c"), .array(x5c)),
                .init(.text("receipt"), .bytes(knobs.receipt)),
            ])),
            .init(.text("authData"), .bytes(authData)),
        ])
        return Attestation(key: key, keyID: keyID, object: CBOREncoder.encode(object), authData: authData)
    }

    /// rpIdHash ‖ flags (AT) ‖ counter ‖ aaguid ‖ credentialId length ‖ credentialId ‖ COSE key.
    static func authData(knobs: Knobs, keyID: [UInt8], point: [UInt8]) -> [UInt8] {
        var data = Array(SHA256.hash(data: Array(knobs.appID.utf8)))
        data.append(0x40)
        data += CBOREncoder.bigEndian(UInt64(knobs.counter), 4)
        data += knobs.aaguid
        data += CBOREncoder.bigEndian(UInt64(keyID.count), 2)
        data += keyID
        // COSE_Key (RFC 9053): kty EC2, alg ES256, crv P-256, x, y.
        data += CBOREncoder.encode(.map([
            .init(.unsigned(1), .unsigned(2)),
            .init(.unsigned(3), .negative(6)),
            .init(.negative(0), .unsigned(1)),
            .init(.negative(1), .bytes(Array(point[1..<33]))),
            .init(.negative(2), .bytes(Array(point[33..<65]))),
        ]))
        return data
    }

    /// SEQUENCE { [1] EXPLICIT OCTET STRING nonce }, as Apple writes the extension.
    static func nonceExtensionValue(_ nonce: [UInt8]) -> [UInt8] {
        let octets = [0x04, UInt8(nonce.count)] + nonce
        let tagged = [0xA1, UInt8(octets.count)] + octets
        return [0x30, UInt8(tagged.count)] + tagged
    }

    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    static func pem(_ certificate: Certificate) throws -> String {
        try certificate.serializeAsPEM().pemString
    }
}

/// A stand-in for Google's Play Integrity token: the app's decryption key (AES-256) and
/// verification key (EC P-256), a JSON verdict signed as an ES256 JWS, wrapped in a compact
/// JWE with A256KW and A256GCM. `Knobs` holds what a check reads.
struct FakePlayIntegrity {
    static let packageName = "com.example.transfer"
    static let now = Date(timeIntervalSince1970: 1_900_000_000)

    let decryptionKey = SymmetricKey(size: .bits256)
    let signingKey = P256.Signing.PrivateKey()

    var decryptionKeyBase64: String { decryptionKey.withUnsafeBytes { Data($0).base64EncodedString() } }
    var verificationKeyBase64: String { signingKey.publicKey.derRepresentation.base64EncodedString() }

    func verifier(packageNames: [String] = [FakePlayIntegrity.packageName]) throws -> PlayIntegrityVerifier {
        try PlayIntegrityVerifier(
            decryptionKeyBase64: decryptionKeyBase64, verificationKeyBase64: verificationKeyBase64, packageNames: packageNames)
    }

    struct Knobs {
        var jweHeader: [String: String] = ["alg": "A256KW", "enc": "A256GCM"]
        var jwsHeader: [String: String] = ["alg": "ES256"]
        /// Wraps the content key with another key than the app's.
        var wrappingKey: SymmetricKey? = nil
        var signingKey: P256.Signing.PrivateKey? = nil
        /// Replaces the verdict's JSON with these bytes.
        var rawPayload: [UInt8]? = nil
        var flipCiphertextBit = false
    }

    /// The verdict Google returns for a genuine app on a genuine device (classic request).
    static func verdict(nonce: String, at time: Date = FakePlayIntegrity.now) -> [String: Any] {
        [
            "requestDetails": [
                "requestPackageName": packageName,
                "nonce": nonce,
                "timestampMillis": String(Int64(time.timeIntervalSince1970 * 1000)),
            ],
            "appIntegrity": [
                "appRecognitionVerdict": "PLAY_RECOGNIZED",
                "packageName": packageName,
                "certificateSha256Digest": ["6a6a1474b5cbbb2b1aa57e0bc3"],
                "versionCode": "42",
            ],
            "deviceIntegrity": ["deviceRecognitionVerdict": ["MEETS_DEVICE_INTEGRITY"]],
            "accountDetails": ["appLicensingVerdict": "LICENSED"],
        ]
    }

    func token(_ verdict: [String: Any], _ knobs: Knobs = Knobs()) throws -> String {
        let payload = try knobs.rawPayload ?? Array(JSONSerialization.data(withJSONObject: verdict))
        let jwsHeader = Self.base64URL(try JSONSerialization.data(withJSONObject: knobs.jwsHeader))
        let signingInput = jwsHeader + "." + Self.base64URL(payload)
        let signature = try (knobs.signingKey ?? signingKey).signature(for: Array(signingInput.utf8))
        let jws = signingInput + "." + Self.base64URL(signature.rawRepresentation)

        let contentKey = SymmetricKey(size: .bits256)
        let wrapped = try AES.KeyWrap.wrap(contentKey, using: knobs.wrappingKey ?? decryptionKey)
        let jweHeader = Self.base64URL(try JSONSerialization.data(withJSONObject: knobs.jweHeader))
        let iv = AES.GCM.Nonce()
        let sealed = try AES.GCM.seal(Array(jws.utf8), using: contentKey, nonce: iv, authenticating: Array(jweHeader.utf8))
        var ciphertext = Array(sealed.ciphertext)
        if knobs.flipCiphertextBit { ciphertext[0] ^= 1 }
        return [jweHeader, Self.base64URL(wrapped), Self.base64URL(Array(iv)), Self.base64URL(ciphertext), Self.base64URL(sealed.tag)]
            .joined(separator: ".")
    }

    static func base64URL(_ bytes: some DataProtocol) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
