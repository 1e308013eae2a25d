import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TransferCore

/// What the handlers of every feature use.
extension API {
    /// An account id (a UUID, any case), lower-case.
    static func accountID(_ text: String, field: String) throws -> String {
        guard let id = CanonicalUUID.parse(text) else { throw APIError.invalidRequest("\(field) must be a UUID.") }
        return id
    }

    /// A route that takes no body: none, or a JSON object (`{}`), which is read and checked
    /// like any body (a body that is no JSON object is `400 invalid_request`).
    static func readNoBody(_ request: Request, _ context: Context) async throws {
        if request.headers[.contentLength].map({ $0 != "0" }) ?? (request.headers[.transferEncoding] != nil) {
            _ = try await JSONBody.read(request, context: context)
        }
    }

    /// The client's address in canonical form (`ClientAddress`): the socket peer, or behind
    /// the proxies `--trusted-proxy` names, the `X-Forwarded-For` hop they vouch for
    /// (`TrustedProxies.client`).
    func clientAddress(_ request: Request, _ context: Context) -> String {
        configuration.trustedProxies.client(peer: context.peerAddress) { request.headers[values: .xForwardedFor] }
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return json(bytes: try encoder.encode(value), status: status)
    }

    /// An answer already written as JSON (the hand-written session and `/v1/me` answers).
    static func json(bytes: some Sequence<UInt8>, status: HTTPResponse.Status) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func raw(_ bytes: [UInt8], type: String, cache: String = "no-store") -> Response {
        raw(ByteBuffer(bytes: bytes), type: type, cache: cache)
    }

    static func raw(_ buffer: ByteBuffer, type: String, cache: String = "no-store") -> Response {
        Response(status: .ok, headers: [.contentType: type, .cacheControl: cache], body: .init(byteBuffer: buffer))
    }
}

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}

/// An optional field written as `null` when absent, where the contract wants every field
/// present (the synthesized `Encodable` leaves a nil optional out).
@propertyWrapper
struct Nullable<Value: Encodable>: Encodable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        if let wrappedValue { try c.encode(wrappedValue) } else { try c.encodeNil() }
    }
}

extension StringProtocol {
    /// Whether the text starts with `prefix` (ASCII, lower case), any case: a header's scheme
    /// or media type, compared without lower-casing a copy of the whole value.
    func hasPrefix(ignoringASCIICase prefix: String) -> Bool {
        var text = utf8.makeIterator()
        for expected in prefix.utf8 {
            guard let c = text.next() else { return false }
            let lower = c >= 65 && c <= 90 ? c + 32 : c
            guard lower == expected else { return false }
        }
        return true
    }
}
