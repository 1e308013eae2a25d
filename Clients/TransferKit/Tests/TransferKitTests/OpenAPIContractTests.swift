import Foundation
import Testing
@testable import TransferKit

/// The service's OpenAPI document, read line by line (no YAML library): enough to find an
/// operation's block, a schema's block, and the property names, required fields and query
/// parameters in them. It relies on the document's two-space indentation.
struct OpenAPIDocument {
    /// `Clients/TransferKit/../../Sources/TransferHTTP/Resources/openapi.yaml`, found from this file.
    static let url: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // TransferKitTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // Clients/TransferKit
        .appendingPathComponent("../../Sources/TransferHTTP/Resources/openapi.yaml")
        .standardizedFileURL

    static var isPresent: Bool { FileManager.default.fileExists(atPath: url.path) }

    /// Contract v1.2's operations and fields the SDK uses (transfer codes, recovery codes, ways
    /// back). The SDK was built against the contract while the server's openapi.yaml was being
    /// written: until the document describes v1.2 (it has `/v1/me/recovery-code`), these are
    /// left out of the comparison; from then on they are checked like everything else.
    static let v12Operations: Set<String> = ["PUT /v1/me/recovery-code", "DELETE /v1/me/recovery-code"]
    static let v12Fields: Set<String> = ["method", "transferCode", "recoveryCode", "waysBack"]

    /// Whether the document describes contract v1.2.
    var describesV12: Bool { lines.contains { $0.trimmed == "/v1/me/recovery-code:" } }

    /// Contract v1.2's device attestation, which the SDK was built against while the server's
    /// half (and its openapi.yaml) was written beside it: left out of the comparison until the
    /// document has `/v1/attestation/challenge`, then checked like everything else.
    static let attestationOperations: Set<String> = ["POST /v1/attestation/challenge"]
    static let attestationFields: Set<String> = ["attestation"]
    static let attestationCodes: Set<TransferError.Code> = [.attestationRequired, .invalidAttestation]

    /// Whether the document describes device attestation.
    var describesAttestation: Bool { lines.contains { $0.trimmed == "/v1/attestation/challenge:" } }

    /// Contract v1.3's device proof: compared once the document declares the `deviceSecret` scheme.
    var describesDeviceProof: Bool { lines.contains { $0.trimmed == "name: X-Device-Secret" } }

    let lines: [String]

    init() throws {
        lines = try String(contentsOf: Self.url, encoding: .utf8).components(separatedBy: "\n")
    }

    /// The lines under `path:` → `method:` in `paths`.
    func operation(_ method: String, _ path: String) -> [String]? {
        guard let paths = block(under: "paths:", indent: 0, in: lines),
            let item = block(under: "\(path):", indent: 2, in: paths)
        else { return nil }
        return block(under: "\(method.lowercased()):", indent: 4, in: item)
    }

    /// The lines of `components` → `schemas` → `name`.
    func schema(_ name: String) -> [String]? {
        guard let components = block(under: "components:", indent: 0, in: lines),
            let schemas = block(under: "schemas:", indent: 2, in: components)
        else { return nil }
        return block(under: "\(name):", indent: 4, in: schemas)
    }

    /// A schema's block and, for one written as a `oneOf` of named schemas (a claim's proofs, a
    /// set-up's methods, a push token's providers), the blocks of those schemas: a request of
    /// that schema may carry the properties of any of them.
    func schemaWithAlternatives(_ name: String) -> [[String]]? {
        guard let schema = schema(name) else { return nil }
        guard let oneOf = schema.firstIndex(where: { $0.indent == 6 && $0.trimmed == "oneOf:" }) else { return [schema] }
        let names = schema[(oneOf + 1)...].prefix { $0.indent > 6 }.compactMap { Self.reference("#/components/schemas/", in: $0) }
        return [schema] + names.compactMap { self.schema($0) }
    }

    /// The schema of an operation's first response that names one (its 2xx answer, listed
    /// first), also through a `#/components/responses/` entry.
    func responseSchemaName(_ operation: [String]) -> String? {
        guard let start = operation.firstIndex(where: { $0.trimmed.hasPrefix("responses:") }) else { return nil }
        for line in operation[start...] {
            if let name = Self.reference("#/components/schemas/", in: line) { return name }
            if let name = Self.reference("#/components/responses/", in: line) {
                let response = block(under: "components:", indent: 0, in: lines)
                    .flatMap { block(under: "responses:", indent: 2, in: $0) }
                    .flatMap { block(under: "\(name):", indent: 4, in: $0) }
                return response?.lazy.compactMap { Self.reference("#/components/schemas/", in: $0) }.first
            }
        }
        return nil
    }

    /// The names of the schemas a block refers to (`$ref: "#/components/schemas/Name"`).
    static func referencedSchemas(_ block: [String]) -> Set<String> {
        Set(block.compactMap { reference("#/components/schemas/", in: $0) })
    }

    /// The name after `prefix` in a `$ref` on `line`.
    static func reference(_ prefix: String, in line: String) -> String? {
        line.range(of: prefix).map { String(line[$0.upperBound...].prefix { $0.isLetter || $0.isNumber }) }
    }

    /// An operation's request body schema written in place (`schema:` then `type: object`), its
    /// lines shifted as if it were a component schema (its `properties:` at indent 6); nil when
    /// the body refers to a component schema.
    static func inlineRequestSchema(_ operation: [String]) -> [String]? {
        guard let start = operation.firstIndex(where: { $0.trimmed.hasPrefix("requestBody:") }),
            let schema = operation[start...].firstIndex(where: { $0.trimmed == "schema:" }),
            schema + 1 < operation.count, operation[schema + 1].trimmed == "type: object"
        else { return nil }
        let shift = operation[schema].indent - 4
        var block: [String] = []
        for line in operation[(schema + 1)...] {
            if !line.trimmed.isEmpty && line.indent <= operation[schema].indent { break }
            block.append(String(line.dropFirst(min(shift, line.indent))))
        }
        return block
    }

    /// The schema an operation's request body refers to.
    func requestSchemaName(_ operation: [String]) -> String? {
        guard let start = operation.firstIndex(where: { $0.trimmed.hasPrefix("requestBody:") }) else { return nil }
        for line in operation[start...] {
            if let range = line.range(of: "#/components/schemas/") {
                return String(line[range.upperBound...].prefix { $0.isLetter || $0.isNumber })
            }
        }
        return nil
    }

    /// Names of the properties of a schema block: only the schema's own (`topLevel`), or those at
    /// any depth (nested objects, `allOf` parts, array items).
    static func properties(_ schema: [String], topLevel: Bool) -> Set<String> {
        var names: Set<String> = []
        for (index, line) in schema.enumerated() where line.trimmed == "properties:" {
            let indent = line.indent
            if topLevel && indent != 6 { continue }
            for child in schema[(index + 1)...] {
                if child.trimmed.isEmpty { continue }
                if child.indent <= indent { break }
                if child.indent == indent + 2, let colon = child.trimmed.firstIndex(of: ":") {
                    names.insert(String(child.trimmed[..<colon]))
                }
            }
        }
        return names
    }

    /// Every field named in a `required: [a, b]` list of a schema block, at any depth.
    static func required(_ schema: [String]) -> Set<String> {
        var names: Set<String> = []
        for line in schema where line.trimmed.hasPrefix("required: [") {
            let list = line.trimmed.dropFirst("required: [".count).prefix { $0 != "]" }
            for name in list.split(separator: ",") { names.insert(name.trimmingCharacters(in: .whitespaces)) }
        }
        return names
    }

    /// The query parameters (`- name: x` followed by `in: query`) of an operation.
    static func queryParameters(_ operation: [String]) -> Set<String> {
        var names: Set<String> = []
        for (index, line) in operation.enumerated() where line.trimmed.hasPrefix("- name: ") && index + 1 < operation.count {
            if operation[index + 1].trimmed == "in: query" { names.insert(String(line.trimmed.dropFirst("- name: ".count))) }
        }
        return names
    }

    /// Whether an operation's request body is `required: true`.
    static func requiresBody(_ operation: [String]) -> Bool {
        guard let start = operation.firstIndex(where: { $0.trimmed.hasPrefix("requestBody:") }) else { return false }
        let indent = operation[start].indent
        return operation[(start + 1)...].prefix { $0.indent > indent }.contains { $0.trimmed == "required: true" }
    }

    static func needsBearer(_ operation: [String]) -> Bool {
        operation.contains { $0.trimmed == "security: [{ bearer: [] }]" || $0.trimmed == "security: [{ bearer: [], deviceSecret: [] }]" }
    }

    /// Whether the operation needs the device's secret beside the token (`X-Device-Secret`).
    static func needsDeviceSecret(_ operation: [String]) -> Bool {
        operation.contains { $0.trimmed == "security: [{ bearer: [], deviceSecret: [] }]" }
    }

    /// The lines after the line `key` at exactly `indent` spaces, up to the next line at that indent or less.
    private func block(under key: String, indent: Int, in lines: [String]) -> [String]? {
        guard let start = lines.firstIndex(where: { $0.indent == indent && $0.trimmed == key }) else { return nil }
        var result: [String] = []
        for line in lines[(start + 1)...] {
            if !line.trimmed.isEmpty && line.indent <= indent { break }
            result.append(line)
        }
        return result
    }
}

extension String {
    var indent: Int { prefix { $0 == " " }.count }
    var trimmed: String { trimmingCharacters(in: .whitespaces) }
}

/// The stored property names of a value (the JSON keys of our synthesized Codable types), and
/// which of them are optional.
private func fields(of value: Any) -> (all: Set<String>, nonOptional: Set<String>) {
    var all: Set<String> = [], nonOptional: Set<String> = []
    for child in Mirror(reflecting: value).children {
        guard let label = child.label else { continue }
        all.insert(label)
        if Mirror(reflecting: child.value).displayStyle != .optional { nonOptional.insert(label) }
    }
    return (all, nonOptional)
}

@Suite("Wire format matches openapi.yaml", .enabled(if: OpenAPIDocument.isPresent, "openapi.yaml is not beside this package"))
struct OpenAPIContractTests {
    let document: OpenAPIDocument

    init() throws {
        document = try OpenAPIDocument()
    }

    @Test("every operation the SDK calls exists, with its request fields, query parameters and security",
          arguments: Endpoint.all.map { EndpointArgument(endpoint: $0) })
    func endpoint(_ argument: EndpointArgument) throws {
        let endpoint = argument.endpoint
        let v12 = !document.describesV12
        if v12 && OpenAPIDocument.v12Operations.contains(endpoint.description) { return }  // see v12Operations
        let attestation = !document.describesAttestation
        if attestation && OpenAPIDocument.attestationOperations.contains(endpoint.description) { return }
        let operation = try #require(document.operation(endpoint.method, endpoint.path), "\(endpoint) is not in openapi.yaml")
        #expect(OpenAPIDocument.needsBearer(operation) == endpoint.needsToken, "\(endpoint): bearer security")
        if document.describesDeviceProof {
            #expect(
                OpenAPIDocument.needsDeviceSecret(operation) == endpoint.needsDeviceProof,
                "\(endpoint): X-Device-Secret (openapi.yaml's deviceSecret security) and Endpoint's deviceProof disagree")
        }
        #expect(Set(endpoint.queryFields).isSubset(of: OpenAPIDocument.queryParameters(operation)), "\(endpoint): query")
        if endpoint.bodyFields.isEmpty {
            #expect(!OpenAPIDocument.requiresBody(operation), "\(endpoint) requires a body the SDK does not send")
        } else {
            let inline = OpenAPIDocument.inlineRequestSchema(operation)
            let name = try #require(
                inline == nil ? document.requestSchemaName(operation) : "its inline schema", "\(endpoint) has no request body in openapi.yaml")
            let schemas = try #require(inline.map { [$0] } ?? document.schemaWithAlternatives(name), "schema \(name)")
            let properties = schemas.reduce(into: Set<String>()) { $0.formUnion(OpenAPIDocument.properties($1, topLevel: true)) }
            let unknown = Set(endpoint.bodyFields).subtracting(properties).subtracting(v12 ? OpenAPIDocument.v12Fields : [])
                .subtracting(attestation ? OpenAPIDocument.attestationFields : [])
            #expect(unknown.isEmpty, "\(endpoint): \(unknown.sorted()) are not properties of \(name) (\(properties.sorted()))")
            // The SDK sends every field the document requires: the schema's own, and those of
            // one of its alternatives at least (the SDK need not offer every proof of a claim).
            let fields = Set(endpoint.bodyFields)
            #expect(OpenAPIDocument.required(schemas[0]).subtracting(fields).isEmpty, "\(endpoint): required fields")
            let alternatives = schemas.dropFirst()
            #expect(alternatives.isEmpty || alternatives.contains { OpenAPIDocument.required($0).isSubset(of: fields) },
                    "\(endpoint): the SDK sends the required fields of none of \(name)'s alternatives")
        }
    }

    @Test("each request type's fields are exactly its endpoint's declared body fields")
    func requestTypes() {
        let samples: [(Any, Endpoint)] = [
            (LoginRequest(deviceId: "", deviceSecret: ""), .login),
            (RefreshRequest(refreshToken: ""), .refresh),
            (TransferRequest(), .setUpTransfer),
            (ClaimRequest(deviceId: "", deviceSecret: ""), .claimTransfer),
            (CurrentAccountRequest(accountId: ""), .setCurrentAccount),
            (PushTokenRequest(provider: "", token: ""), .registerPushToken),
            (PushPreferencesRequest(mode: ""), .setPushPreferences),
            (AccountPushRequest(enabled: true), .setAccountPush),
            (HandoffCodeRequest(clientId: "", codeChallenge: ""), .createHandoffCode),
            (HandoffTokenRequest(code: "", codeVerifier: "", clientId: ""), .redeemHandoff),
            (AppleLinkRequest(identityToken: "", nonce: ""), .linkApple),
            (AppleMoveRequest(identityToken: "", nonce: "", deviceId: "", deviceSecret: ""), .claimWithApple),
            (BackupKeyRequest(store: ""), .makeBackupKey),
        ]
        for (sample, endpoint) in samples {
            #expect(fields(of: sample).all == Set(endpoint.bodyFields), "\(type(of: sample)) vs \(endpoint)")
        }
        let covered = samples.map(\.1)
        for endpoint in Endpoint.all where !endpoint.bodyFields.isEmpty {
            #expect(covered.contains(endpoint), "\(endpoint) has no request type in this test")
        }
    }

    @Test("each response type reads only documented properties, and relies only on required ones")
    func responseTypes() throws {
        var samples: [(Any, [String])] = [
            (SessionBody(accountId: "", userName: "", deviceId: "", created: false, migrationFlag: false, accessToken: "",
                         tokenType: "", expiresIn: 0, refreshToken: "", accounts: []), ["Session"]),
            (AccountOnDevice(accountId: "", userName: "", current: false), ["AccountOnDevice"]),
            (DeviceAccountsBody(deviceId: "", accounts: []), ["DeviceAccounts"]),
            (DeviceAccountBody(accountId: "", userName: "", current: false, addedAt: Date(), lastLoginAt: nil, pushEnabled: true),
             ["DeviceAccounts"]),
            (TransferBody(email: "", expiresAt: Date()), ["Transfer"]),
            (HandoffCodeBody(code: "", expiresIn: 0), ["HandoffCode"]),
            (MeBody(accountId: "", userName: "", createdAt: Date(), migrationFlag: false, transferId: nil, transfer: nil,
                    devices: [], apple: nil), ["Me"]),
            (MeTransferBody(email: "", createdAt: Date(), expiresAt: Date()), ["Me"]),
            (MeDeviceBody(deviceId: "", boundAt: Date(), lastLoginAt: nil, current: true), ["Me"]),
            (AppleLinkBody(email: nil, isPrivateEmail: nil), ["Me", "AppleLink"]),
            (AppleNonceBody(nonce: "", expiresIn: 0), ["AppleNonce"]),
            (ErrorBody(error: "", message: ""), ["Error", "TransferredError"]),
        ]
        if document.describesV12 {
            samples += [
                (TransferCodeBody(transferCode: "", expiresAt: Date()), ["TransferCode"]),
                (RecoveryCodeBody(recoveryCode: "", createdAt: Date()), ["RecoveryCode"]),
            ]
        }
        let skipped = document.describesV12 ? [] : OpenAPIDocument.v12Fields
        if document.describesAttestation {
            let challenge = try #require(document.operation("POST", "/v1/attestation/challenge"))
            let name = try #require(document.responseSchemaName(challenge), "the challenge's answer names no schema")
            samples.append((AttestationChallengeBody(challenge: "", expiresIn: 0), [name]))
        }
        for (sample, names) in samples {
            let schemas = try names.map { try #require(document.schema($0), "schema \($0)") }
            let properties = schemas.reduce(into: Set<String>()) { $0.formUnion(OpenAPIDocument.properties($1, topLevel: false)) }
            let required = schemas.reduce(into: Set<String>()) { $0.formUnion(OpenAPIDocument.required($1)) }
            let (all, nonOptional) = fields(of: sample)
            let undocumented = all.subtracting(properties).subtracting(skipped)
            #expect(undocumented.isEmpty, "\(type(of: sample)): \(undocumented.sorted()) not in \(names)")
            #expect(nonOptional.subtracting(required).isEmpty, "\(type(of: sample)): \(nonOptional.subtracting(required).sorted()) not required in \(names)")
        }
    }

    @Test("the login's attestation object sends only fields the document names (in LoginRequest or a schema it refers to)",
          .enabled(if: (try? OpenAPIDocument())?.describesAttestation == true, "openapi.yaml does not describe attestation yet"))
    func attestationObject() throws {
        let login = try #require(document.schema("LoginRequest"), "schema LoginRequest")
        let referenced = OpenAPIDocument.referencedSchemas(login).sorted()
        var properties = OpenAPIDocument.properties(login, topLevel: false)
        for name in referenced {
            properties.formUnion(OpenAPIDocument.properties(try #require(document.schema(name), "schema \(name)"), topLevel: false))
        }
        let apple = AttestationBody(.apple(keyId: "", attestationObject: Data()), challenge: "")
        let android = AttestationBody(.android(integrityToken: ""), challenge: "")
        let sent = fields(of: apple).all.union(fields(of: android).all)
        #expect(sent.subtracting(properties).isEmpty,
                "LoginRequest.attestation: \(sent.subtracting(properties).sorted()) not in LoginRequest or \(referenced)")
    }

    @Test("the error codes apps branch on are the document's; TransferKit's own codes are not")
    func errorCodes() throws {
        let error = try #require(document.schema("Error")).joined(separator: " ")
        let own: Set<TransferError.Code> = [
            .storageUnavailable, .notSignedIn, .signedOut, .handoffRequired, .network, .unexpectedResponse, .attestationFailed,
        ]
        let pending = document.describesAttestation ? [] : OpenAPIDocument.attestationCodes
        for kind in TransferError.Code.known where !pending.contains(kind) {
            let listed = [" \(kind.rawValue),", " \(kind.rawValue)]", "[\(kind.rawValue),"].contains { error.contains($0) }
            #expect(listed != own.contains(kind), "\(kind.rawValue)")
        }
    }
}

struct EndpointArgument: Sendable, CustomTestStringConvertible {
    let endpoint: Endpoint
    var testDescription: String { endpoint.description }
}
