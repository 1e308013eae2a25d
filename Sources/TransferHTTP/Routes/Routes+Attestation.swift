import Hummingbird
import TransferCore

// Device attestation for new accounts: the challenge a device attests, and the `attestation`
// object a login that would create an account may carry (read here, verified by the service).
extension API {
    static var attestationRoutes: [Route] {
        [Route(.post, "/v1/attestation/challenge") { $0.attestationChallenge }]
    }

    /// `POST /v1/attestation/challenge` (no body): `201 {"challenge", "expiresIn"}`, counted by `--nonce-limit`.
    func attestationChallenge(_ request: Request, _ context: Context) async throws -> Response {
        try await Self.readNoBody(request, context)
        let issued = try await service.issueNonce(.attestation, clientAddress: clientAddress(request, context))
        return try Self.json(
            AttestationChallengeBody(challenge: issued.value, expiresIn: Int(issued.expiresIn.components.seconds)), status: .created)
    }

    /// The login's optional `attestation` object: `{"platform": "apple", "challenge", "keyId",
    /// "attestationObject"}` or `{"platform": "android", "challenge", "integrityToken"}`. A
    /// malformed one is `400 invalid_request`, whatever the mode.
    static func attestationProof(_ body: JSONBody) throws -> AttestationProof? {
        let fields: [String: JSONValue]
        switch body.fields["attestation"] {
        case .none, .null?: return nil
        case .object(let object)?: fields = object
        case _?: throw APIError.invalidRequest("attestation must be an object.")
        }
        let attestation = JSONBody(fields: fields)
        func field(_ name: String, maxBytes: Int) throws -> String {
            let value: String
            do { value = try attestation.string(name) } catch let error as APIError {
                throw APIError.invalidRequest("attestation." + error.message)
            }
            guard !value.isEmpty, value.utf8.count <= maxBytes else {
                throw APIError.invalidRequest("attestation.\(name) must be 1 to \(maxBytes) bytes.")
            }
            return value
        }
        let platform: AttestationPlatform
        do { platform = try attestation.choice("platform") } catch let error as APIError {
            throw APIError.invalidRequest("attestation." + error.message)
        }
        // A challenge is 43 characters; a longer one cannot be ours (and is not looked up).
        let challenge = try field("challenge", maxBytes: 128)
        switch platform {
        case .apple:
            return .apple(
                challenge: challenge, keyID: try field("keyId", maxBytes: 128),
                attestationObject: try field("attestationObject", maxBytes: JSONBody.maxBytes))
        case .android:
            return .android(challenge: challenge, integrityToken: try field("integrityToken", maxBytes: JSONBody.maxBytes))
        }
    }
}

struct AttestationChallengeBody: Encodable {
    var challenge: String
    var expiresIn: Int
}
