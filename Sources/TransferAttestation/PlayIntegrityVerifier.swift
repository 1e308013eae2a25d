import Crypto
import Foundation
import JWTKit

/// Verifies a Google Play Integrity token on the server with the app's own keys (contract
/// v1.2, "Device attestation for new accounts"), without calling Google:
///
/// - the token is a compact JWE (`A256KW` key wrap, `A256GCM` content) opened with the
///   decryption key (`--play-integrity-decryption-key`);
/// - inside it, an ES256 JWS verified with the verification key
///   (`--play-integrity-verification-key`);
/// - then the verdict: `requestDetails.requestPackageName` is one of the package names,
///   `requestDetails.nonce` is the challenge, `requestDetails.timestampMillis` is within five
///   minutes of `now` (either way), `appIntegrity.appRecognitionVerdict` is `PLAY_RECOGNIZED`,
///   `deviceIntegrity.deviceRecognitionVerdict` holds `MEETS_DEVICE_INTEGRITY`.
///
/// The checks run in that order and the first that fails is thrown as a `PlayIntegrityError`.
public struct PlayIntegrityVerifier: Sendable {
    public let packageNames: Set<String>
    private let decryptionKey: SymmetricKey
    private let verificationKey: P256.Signing.PublicKey

    /// How far `timestampMillis` may be from now.
    public static let maximumAge: Duration = .seconds(300)

    public init(decryptionKey: SymmetricKey, verificationKey: P256.Signing.PublicKey, packageNames: some Sequence<String>) {
        self.decryptionKey = decryptionKey
        self.verificationKey = verificationKey
        self.packageNames = Set(packageNames)
    }

    /// The keys as Play Console gives them: base64 of the raw AES-256 key, base64 of the DER
    /// (SubjectPublicKeyInfo) EC P-256 public key.
    public init(
        decryptionKeyBase64: String, verificationKeyBase64: String, packageNames: some Sequence<String>
    ) throws(AttestationConfigurationError) {
        guard let aes = Data(base64Encoded: decryptionKeyBase64.trimmingCharacters(in: .whitespacesAndNewlines)), aes.count == 32
        else { throw AttestationConfigurationError("the Play Integrity decryption key is not base64 of 32 bytes (AES-256)") }
        guard let der = Data(base64Encoded: verificationKeyBase64.trimmingCharacters(in: .whitespacesAndNewlines)),
            let key = try? P256.Signing.PublicKey(derRepresentation: der)
        else { throw AttestationConfigurationError("the Play Integrity verification key is not base64 of a DER EC P-256 public key") }
        self.init(decryptionKey: SymmetricKey(data: aes), verificationKey: key, packageNames: packageNames)
    }

    /// Verifies one token against the challenge it must carry as its nonce.
    public func verify(token: String, expectedNonce: String, now: Date) async throws(PlayIntegrityError) -> PlayIntegrityVerdict {
        let jws = try decrypt(token)
        let payload = try await verifySignature(jws)

        guard let details = payload.requestDetails else { throw .malformedPayload("requestDetails is missing") }
        guard let package = details.requestPackageName, packageNames.contains(package) else { throw .packageName }
        guard let nonce = details.nonce, Self.unpadded(nonce) == Self.unpadded(expectedNonce) else { throw .nonce }
        guard let millis = details.timestampMillis?.value else { throw .timestamp }
        let age = now.timeIntervalSince1970 * 1000 - Double(millis)
        guard abs(age) <= Double(Self.maximumAge.components.seconds) * 1000 else { throw .timestamp }
        guard payload.appIntegrity?.appRecognitionVerdict == "PLAY_RECOGNIZED" else { throw .appRecognition }
        let device = payload.deviceIntegrity?.deviceRecognitionVerdict ?? []
        guard device.contains("MEETS_DEVICE_INTEGRITY") else { throw .deviceIntegrity }

        return PlayIntegrityVerdict(
            packageName: package, timestamp: Date(timeIntervalSince1970: Double(millis) / 1000),
            deviceRecognitionVerdict: device, appLicensingVerdict: payload.accountDetails?.appLicensingVerdict)
    }

    /// The nonce as base64url with or without its padding.
    static func unpadded(_ value: String) -> Substring {
        value[...].prefix { $0 != "=" }
    }

    /// Opens the compact JWE: header.encryptedKey.iv.ciphertext.tag (RFC 7516 §7.1).
    func decrypt(_ token: String) throws(PlayIntegrityError) -> [UInt8] {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 5 else { throw .malformedToken("it is not a compact JWE (five parts)") }
        guard let headerBytes = Base64URL.decode(parts[0]), let encryptedKey = Base64URL.decode(parts[1]),
            let iv = Base64URL.decode(parts[2]), let ciphertext = Base64URL.decode(parts[3]), let tag = Base64URL.decode(parts[4])
        else { throw .malformedToken("a part is not base64url") }
        struct Header: Decodable { let alg: String?, enc: String?, zip: String?, crit: [String]? }
        guard let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)) else {
            throw .malformedToken("the JWE header is not JSON")
        }
        guard header.alg == "A256KW", header.enc == "A256GCM" else {
            throw .malformedToken("the JWE is not A256KW with A256GCM")
        }
        guard header.zip == nil, header.crit == nil else { throw .malformedToken("the JWE header asks for zip or crit") }
        guard iv.count == 12, tag.count == 16 else { throw .malformedToken("the JWE's IV or tag has the wrong length") }

        let contentKey: SymmetricKey
        do { contentKey = try AES.KeyWrap.unwrap(encryptedKey, using: decryptionKey) } catch { throw .decryption }
        guard contentKey.bitCount == 256 else { throw .decryption }
        do {
            let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: iv), ciphertext: ciphertext, tag: tag)
            // The additional authenticated data is the header as it was sent (base64url ASCII).
            return Array(try AES.GCM.open(box, using: contentKey, authenticating: Array(parts[0].utf8)))
        } catch { throw .decryption }
    }

    /// Verifies the inner JWS (ES256 only) and decodes its payload.
    func verifySignature(_ jws: [UInt8]) async throws(PlayIntegrityError) -> PlayIntegrityPayload {
        let parts = jws.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]) else {
            throw .malformedToken("the decrypted token is not a compact JWS")
        }
        struct Header: Decodable { let alg: String?, crit: [String]? }
        guard let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)) else {
            throw .malformedToken("the JWS header is not JSON")
        }
        guard header.alg == "ES256", header.crit == nil else { throw .signature }
        do {
            let keys = JWTKeyCollection()
            await keys.add(ecdsa: try ES256PublicKey(backing: verificationKey))
            return try await keys.verify(jws, as: PlayIntegrityPayload.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw .signature
        } catch {
            throw .malformedPayload("it is not the JSON of an integrity verdict")
        }
    }
}

/// What a verified token says, for the caller to record.
public struct PlayIntegrityVerdict: Sendable, Equatable {
    public let packageName: String
    /// When Google prepared the token.
    public let timestamp: Date
    public let deviceRecognitionVerdict: [String]
    public let appLicensingVerdict: String?
}

/// The check a Play Integrity token failed. `check` is a short stable name (for
/// `failed: <check>`), `message` the sentence an `invalid_attestation` answer carries.
public enum PlayIntegrityError: Error, Hashable, Sendable, CustomStringConvertible {
    case malformedToken(String)
    /// The key does not unwrap or the content does not authenticate: not for these keys.
    case decryption
    case signature
    case malformedPayload(String)
    case packageName
    case nonce
    case timestamp
    case appRecognition
    case deviceIntegrity

    public var check: String {
        switch self {
        case .malformedToken: "token"
        case .decryption: "decryption"
        case .signature: "signature"
        case .malformedPayload: "payload"
        case .packageName: "package_name"
        case .nonce: "nonce"
        case .timestamp: "timestamp"
        case .appRecognition: "app_recognition"
        case .deviceIntegrity: "device_integrity"
        }
    }

    public var message: String {
        switch self {
        case .malformedToken(let detail): "the integrity token is malformed: \(detail)"
        case .decryption: "the integrity token does not decrypt with the app's decryption key"
        case .signature: "the integrity verdict is not signed (ES256) by the app's verification key"
        case .malformedPayload(let detail): "the integrity verdict is malformed: \(detail)"
        case .packageName: "requestDetails.requestPackageName is none of the app's packages"
        case .nonce: "requestDetails.nonce is not the challenge"
        case .timestamp: "requestDetails.timestampMillis is more than 5 minutes from now"
        case .appRecognition: "appIntegrity.appRecognitionVerdict is not PLAY_RECOGNIZED"
        case .deviceIntegrity: "deviceIntegrity.deviceRecognitionVerdict does not hold MEETS_DEVICE_INTEGRITY"
        }
    }

    public var description: String { message }
}

/// The integrity verdict's JSON; every field optional, so an absent one fails its own check.
struct PlayIntegrityPayload: JWTPayload {
    struct RequestDetails: Codable {
        let requestPackageName: String?
        let nonce: String?
        let timestampMillis: Millis?
    }
    struct AppIntegrity: Codable { let appRecognitionVerdict: String? }
    struct DeviceIntegrity: Codable { let deviceRecognitionVerdict: [String]? }
    struct AccountDetails: Codable { let appLicensingVerdict: String? }

    /// Google writes `timestampMillis` as a string of digits; a number is read too.
    struct Millis: Codable {
        let value: Int64?
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                value = text.allSatisfy(\.isASCII) ? Int64(text) : nil
            } else {
                value = try? container.decode(Int64.self)
            }
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(value.map(String.init))
        }
    }

    let requestDetails: RequestDetails?
    let appIntegrity: AppIntegrity?
    let deviceIntegrity: DeviceIntegrity?
    let accountDetails: AccountDetails?

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Base64url without padding (RFC 4648 §5), as JOSE writes it; padding is refused.
enum Base64URL {
    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4)
        var buffer: UInt32 = 0, bits = 0
        for character in text {
            let value: UInt8
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = character - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = character - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // A single leftover character, or leftover bits that are not zero, is not base64url.
        guard bits < 6, buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }

    static func decode(_ text: Substring) -> [UInt8]? { decode(Array(text.utf8)) }

    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
