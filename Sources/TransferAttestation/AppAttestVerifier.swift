import Crypto
import Foundation
import SwiftASN1
@_spi(FixedExpiryValidationTime) import X509

/// Verifies an App Attest attestation object as Apple's "Validating apps that connect to your
/// server" lists it (contract v1.2, "Device attestation for new accounts"):
///
/// 1. `x5c` (credential certificate first, then the intermediate) chains to a trusted root
///    (Apple App Attestation Root CA unless replaced), every certificate valid at `now`;
/// 2–4. the credential certificate's extension 1.2.840.113635.100.8.2 holds
///    SHA-256(authData ‖ clientDataHash);
/// 5. keyId is the SHA-256 of the certificate's public key (X9.62 uncompressed point);
/// 6. authData's rpIdHash is the SHA-256 of one of the app ids (`TEAMID.bundle.id`);
/// 7. the counter is 0;
/// 8. the AAGUID is `appattest` followed by seven zero bytes (production) or
///    `appattestdevelop` (development);
/// 9. the credentialId equals keyId.
///
/// The checks run in that order and the first that fails is thrown, as an `AppAttestError`
/// that names it. Nothing here keeps state: the caller stores the key and counter it returns.
public struct AppAttestVerifier: Sendable {
    public enum Environment: String, Sendable, CaseIterable {
        case production, development

        /// The AAGUID an attestation from this environment carries.
        public var aaguid: [UInt8] {
            switch self {
            case .production: Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
            case .development: Array("appattestdevelop".utf8)
            }
        }
    }

    public let trustRoots: [Certificate]
    public let appIDs: [String]
    public let environment: Environment
    private let rpIDHashes: [(appID: String, hash: [UInt8])]

    /// - Parameters:
    ///   - appIDs: `TEAMID.bundle.id` of each app allowed to attest.
    ///   - environment: which AAGUID is accepted.
    ///   - trustRoots: the roots an `x5c` chain may end at: Apple's, unless a private staging
    ///     CA replaces it (`--app-attest-root-ca`).
    public init(appIDs: [String], environment: Environment, trustRoots: [Certificate] = [AppAttestVerifier.appleRoot]) {
        self.appIDs = appIDs
        self.environment = environment
        self.trustRoots = trustRoots
        self.rpIDHashes = appIDs.map { ($0, Array(SHA256.hash(data: Array($0.utf8)))) }
    }

    /// Whether the trust root is Apple's own; the server warns at start when it is not.
    public var trustsOnlyApple: Bool { trustRoots == [Self.appleRoot] }

    /// Reads every certificate of a PEM file (a private staging root for `--app-attest-root-ca`).
    public static func roots(pem: String) throws(AttestationConfigurationError) -> [Certificate] {
        let documents: [PEMDocument]
        do { documents = try PEMDocument.parseMultiple(pemString: pem) } catch {
            throw AttestationConfigurationError("the App Attest root CA file holds no PEM certificate")
        }
        var roots: [Certificate] = []
        for document in documents {
            guard document.discriminator == "CERTIFICATE", let root = try? Certificate(pemDocument: document) else {
                throw AttestationConfigurationError("the App Attest root CA file holds something that is not a certificate")
            }
            roots.append(root)
        }
        guard !roots.isEmpty else { throw AttestationConfigurationError("the App Attest root CA file holds no PEM certificate") }
        return roots
    }

    /// The most certificates `x5c` may carry: the credential certificate and its intermediates.
    static let maximumChainLength = 4
    static let nonceExtension = ASN1ObjectIdentifier(arrayLiteral: 1, 2, 840, 113635, 100, 8, 2)

    /// Verifies one attestation.
    /// - Parameters:
    ///   - keyID: the key identifier as the device reported it (decoded from base64: 32 bytes).
    ///   - attestationObject: the CBOR the device produced.
    ///   - clientDataHash: the hash the device attested (the contract: SHA-256 of the
    ///     challenge's UTF-8 bytes).
    ///   - now: the time the certificates must be valid at.
    public func verify(
        keyID: [UInt8], attestationObject: [UInt8], clientDataHash: [UInt8], now: Date
    ) async throws(AppAttestError) -> AppAttestKey {
        let object = try AttestationObject(attestationObject)

        // 1. The chain, to one of the trusted roots, at `now`.
        let credentialCertificate: Certificate
        do { credentialCertificate = try Certificate(derEncoded: object.x5c[0]) } catch {
            throw .certificateChain("the credential certificate is not X.509 DER")
        }
        var intermediates: [Certificate] = []
        for der in object.x5c.dropFirst() {
            guard let certificate = try? Certificate(derEncoded: der) else {
                throw .certificateChain("an intermediate certificate is not X.509 DER")
            }
            intermediates.append(certificate)
        }
        var verifier = Verifier(rootCertificates: CertificateStore(trustRoots)) {
            RFC5280Policy(fixedExpiryValidationTime: now)
        }
        let result = await verifier.validate(leaf: credentialCertificate, intermediates: CertificateStore(intermediates))
        guard case .validCertificate = result else {
            throw .certificateChain("the certificates do not chain to the App Attest root, or are not valid now")
        }

        // 2–4. The nonce the certificate carries.
        let expectedNonce = Array(SHA256.hash(data: object.authData + clientDataHash))
        guard let nonce = Self.nonce(in: credentialCertificate), nonce == expectedNonce else { throw .nonce }

        // 5. keyId names the certified key.
        guard let publicKey = P256.Signing.PublicKey(credentialCertificate.publicKey) else {
            throw .malformed("the credential certificate's key is not an EC P-256 key")
        }
        let x963 = Array(publicKey.x963Representation)
        guard Array(SHA256.hash(data: x963)) == keyID else { throw .keyID }

        let authData = try AuthenticatorData(object.authData)
        // 6. The app.
        guard let appID = rpIDHashes.first(where: { $0.hash == authData.rpIDHash })?.appID else { throw .appID }
        // 7. A new key has signed nothing yet.
        guard authData.counter == 0 else { throw .counter }
        // 8. The environment.
        guard authData.aaguid == environment.aaguid else { throw .aaguid(expected: environment) }
        // 9. The credential is the key.
        guard authData.credentialID == keyID else { throw .credentialID }

        return AppAttestKey(
            keyID: keyID, publicKey: publicKey, counter: authData.counter, receipt: object.receipt,
            appID: appID, environment: environment)
    }

    /// Verifies the contract's `attestation` object as the request carries it: keyId and
    /// attestationObject in base64 as the device produced them, and the challenge whose
    /// UTF-8 bytes' SHA-256 is the clientDataHash the device attested.
    public func verify(
        keyIDBase64: String, attestationObjectBase64: String, challenge: String, now: Date
    ) async throws(AppAttestError) -> AppAttestKey {
        guard let keyID = Data(base64Encoded: keyIDBase64) else { throw .malformed("keyId is not base64") }
        guard let object = Data(base64Encoded: attestationObjectBase64) else { throw .malformed("attestationObject is not base64") }
        return try await verify(
            keyID: Array(keyID), attestationObject: Array(object), clientDataHash: Array(SHA256.hash(data: Array(challenge.utf8))),
            now: now)
    }

    /// The octet string of extension 1.2.840.113635.100.8.2: SEQUENCE { [1] EXPLICIT OCTET STRING }.
    static func nonce(in certificate: Certificate) -> [UInt8]? {
        guard let value = certificate.extensions[oid: nonceExtension]?.value else { return nil }
        return try? DER.sequence(try DER.parse(value), identifier: .sequence) { nodes in
            try DER.explicitlyTagged(&nodes, tagNumber: 1, tagClass: .contextSpecific) { node in
                Array(try ASN1OctetString(derEncoded: node).bytes)
            }
        }
    }
}

/// What a verified attestation proves: the device's App Attest key, to keep with the device.
public struct AppAttestKey: Sendable, Equatable {
    /// SHA-256 of the public key: the key identifier the device uses from now on.
    public let keyID: [UInt8]
    public let publicKey: P256.Signing.PublicKey
    /// The signature counter (0 for a new key); later assertions must raise it.
    public let counter: UInt32
    /// Apple's receipt (PKCS #7), for App Attest fraud-metric requests; empty when the object has none.
    public let receipt: [UInt8]
    /// The app id whose hash the attestation carries.
    public let appID: String
    public let environment: AppAttestVerifier.Environment

    /// The public key as an X9.62 uncompressed point (0x04 ‖ x ‖ y, 65 bytes).
    public var x963: [UInt8] { Array(publicKey.x963Representation) }
    /// The public key as a DER SubjectPublicKeyInfo.
    public var der: [UInt8] { Array(publicKey.derRepresentation) }

    public static func == (a: AppAttestKey, b: AppAttestKey) -> Bool {
        a.keyID == b.keyID && a.x963 == b.x963 && a.counter == b.counter && a.receipt == b.receipt
            && a.appID == b.appID && a.environment == b.environment
    }
}

/// The check an App Attest attestation failed. `check` is a short stable name (for
/// `failed: <check>`), `message` the sentence an `invalid_attestation` answer carries.
public enum AppAttestError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Not the CBOR map App Attest produces, or authData too short for its fields.
    case malformed(String)
    /// `fmt` is not `apple-appattest`.
    case format
    case certificateChain(String)
    case nonce
    case keyID
    case appID
    case counter
    case aaguid(expected: AppAttestVerifier.Environment)
    case credentialID

    public var check: String {
        switch self {
        case .malformed: "attestation_object"
        case .format: "format"
        case .certificateChain: "certificate_chain"
        case .nonce: "nonce"
        case .keyID: "key_id"
        case .appID: "app_id"
        case .counter: "counter"
        case .aaguid: "aaguid"
        case .credentialID: "credential_id"
        }
    }

    public var message: String {
        switch self {
        case .malformed(let detail): "the attestation object is malformed: \(detail)"
        case .format: "the attestation format is not apple-appattest"
        case .certificateChain(let detail): "the certificate chain is not valid: \(detail)"
        case .nonce: "the certificate's nonce is not SHA-256(authData ‖ clientDataHash): the attestation is not for this challenge"
        case .keyID: "keyId is not the SHA-256 of the certified public key"
        case .appID: "the attestation's rpIdHash matches none of the app ids"
        case .counter: "the attestation's counter is not 0"
        case .aaguid(let expected): "the attestation's AAGUID is not that of the \(expected.rawValue) environment"
        case .credentialID: "the attestation's credentialId is not keyId"
        }
    }

    public var description: String { message }
}

/// A configuration value that cannot be used (a key or root file the server cannot read).
public struct AttestationConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The CBOR map `{fmt, attStmt: {x5c, receipt}, authData}`.
struct AttestationObject {
    let x5c: [[UInt8]]
    let receipt: [UInt8]
    let authData: [UInt8]

    init(_ bytes: [UInt8]) throws(AppAttestError) {
        let root: CBOR
        do { root = try CBOR.decode(bytes) } catch { throw .malformed(error.description) }
        guard root.isMap else { throw .malformed("it is not a CBOR map") }
        guard let format = root["fmt"]?.text else { throw .malformed("fmt is missing or not text") }
        guard format == "apple-appattest" else { throw .format }
        guard let statement = root["attStmt"], statement.isMap else { throw .malformed("attStmt is missing or not a map") }
        guard let chain = statement["x5c"]?.array else { throw .malformed("attStmt.x5c is missing or not an array") }
        guard (1...AppAttestVerifier.maximumChainLength).contains(chain.count) else {
            throw .malformed("attStmt.x5c holds \(chain.count) certificates")
        }
        var x5c: [[UInt8]] = []
        for certificate in chain {
            guard let der = certificate.bytes else { throw .malformed("attStmt.x5c holds something other than bytes") }
            x5c.append(der)
        }
        let receipt: [UInt8]
        switch statement["receipt"] {
        case nil: receipt = []
        case .bytes(let bytes)?: receipt = bytes
        case _?: throw .malformed("attStmt.receipt is not bytes")
        }
        guard let authData = root["authData"]?.bytes else { throw .malformed("authData is missing or not bytes") }
        self.x5c = x5c
        self.receipt = receipt
        self.authData = authData
    }
}

/// WebAuthn authenticator data with attested credential data:
/// rpIdHash(32) ‖ flags(1) ‖ counter(4, big-endian) ‖ aaguid(16) ‖ credentialIdLength(2) ‖
/// credentialId ‖ the COSE key and any extensions (not read: the nonce already binds them).
struct AuthenticatorData {
    let rpIDHash: [UInt8]
    let counter: UInt32
    let aaguid: [UInt8]
    let credentialID: [UInt8]

    init(_ bytes: [UInt8]) throws(AppAttestError) {
        guard bytes.count >= 55 else { throw .malformed("authData is \(bytes.count) bytes, too short for attested credential data") }
        rpIDHash = Array(bytes[0..<32])
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        aaguid = Array(bytes[37..<53])
        let length = Int(bytes[53]) << 8 | Int(bytes[54])
        guard bytes.count >= 55 + length else { throw .malformed("authData ends inside the credentialId") }
        credentialID = Array(bytes[55..<55 + length])
    }
}
