import Foundation
import Hummingbird
import NIOCore

/// Any JSON value, read strictly by `JSONParser`: `1` is never a boolean and `"true"` never
/// a number.
enum JSONValue: Equatable {
    case null, bool(Bool), number(Double), string(String), array([JSONValue]), object([String: JSONValue])
}

/// A JSON request body read as an object, with field access that names the field in errors.
struct JSONBody {
    /// What an app's request may carry.
    static let maxBytes = 16 * 1024
    /// What an app backend's request to the service API may carry (1 000 account ids).
    static let serviceMaxBytes = 64 * 1024

    let fields: [String: JSONValue]

    /// Reads at most `limit` bytes and parses one JSON object.
    static func read(_ request: Request, context: some RequestContext, limit: Int = maxBytes) async throws -> JSONBody {
        if let type = request.headers[.contentType], !type.hasPrefix(ignoringASCIICase: "application/json") {
            throw APIError(.unsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json.")
        }
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw APIError(.contentTooLarge, "payload_too_large", "The request body is larger than \(limit / 1024) KiB.")
        }
        guard buffer.readableBytes > 0 else { throw APIError.invalidRequest("The request body must be a JSON object.") }
        // A body is UTF-8, or refused before it is parsed. UTF-16 of ASCII text is valid UTF-8
        // but full of NULs, which JSON text in UTF-8 never holds.
        guard !buffer.readableBytesView.contains(0), String(validating: buffer.readableBytesView, as: UTF8.self) != nil else {
            throw APIError.invalidRequest("The request body must be JSON encoded in UTF-8.")
        }
        // One pass over the bytes, each read once: nesting past the limit stops it where it is
        // reached, before anything deeper is read.
        let parsed: JSONParser.Parsed
        do {
            parsed = try JSONParser.parse(Array(buffer.readableBytesView))
        } catch .tooDeep {
            throw APIError.invalidRequest("The request body is nested deeper than \(JSONParser.maxDepth) levels.")
        } catch {
            throw APIError.invalidRequest("The request body is not valid JSON.")
        }
        guard case .object(let fields) = parsed.value else {
            throw APIError.invalidRequest("The request body must be a JSON object.")
        }
        // Parsers disagree on which of two equal keys wins; an ambiguous body is refused.
        if let key = parsed.duplicateKey {
            throw APIError.invalidRequest("\(key) appears more than once.")
        }
        return JSONBody(fields: fields)
    }

    /// Whether the body names the field (null included).
    func has(_ name: String) -> Bool { fields[name] != nil }

    func string(_ name: String) throws -> String {
        switch fields[name] {
        case .none, .null: throw APIError.invalidRequest("\(name) is required.")
        case .string(let s): return s
        default: throw APIError.invalidRequest("\(name) must be a string.")
        }
    }

    /// An optional string field: nil when absent or null.
    func optionalString(_ name: String) throws -> String? {
        switch fields[name] {
        case .none, .null: return nil
        case .string(let s): return s
        default: throw APIError.invalidRequest("\(name) must be a string.")
        }
    }

    func bool(_ name: String) throws -> Bool {
        switch fields[name] {
        case .none, .null: throw APIError.invalidRequest("\(name) is required.")
        case .bool(let b): return b
        default: throw APIError.invalidRequest("\(name) must be true or false.")
        }
    }

    /// A required string field whose value is one of `T`'s raw values.
    func choice<T: RawRepresentable & CaseIterable>(_ name: String, of: T.Type = T.self) throws -> T where T.RawValue == String {
        try Self.choice(try string(name), name: name)
    }

    static func choice<T: RawRepresentable & CaseIterable>(_ text: String, name: String) throws -> T where T.RawValue == String {
        guard let value = T(rawValue: text) else {
            throw APIError.invalidRequest("\(name) must be " + T.allCases.map { "'\($0.rawValue)'" }.joined(separator: " or ") + ".")
        }
        return value
    }

    /// A required array of strings.
    func strings(_ name: String) throws -> [String] {
        switch fields[name] {
        case .none, .null: throw APIError.invalidRequest("\(name) is required.")
        case .array(let items):
            return try items.enumerated().map { i, item in
                guard case .string(let s) = item else { throw APIError.invalidRequest("\(name)[\(i)] must be a string.") }
                return s
            }
        default: throw APIError.invalidRequest("\(name) must be an array of strings.")
        }
    }

    func bool(_ name: String, default fallback: Bool) throws -> Bool {
        switch fields[name] {
        case .none, .null: return fallback
        case .bool(let b): return b
        default: throw APIError.invalidRequest("\(name) must be true or false.")
        }
    }

    /// Compact JSON of string fields and `extra` JSON values, for error bodies.
    static func encode(_ fields: [String: String], extra: [String: Any] = [:]) -> [UInt8] {
        let all = (fields as [String: Any]).merging(extra) { a, _ in a }
        let data = (try? JSONSerialization.data(withJSONObject: all, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return [UInt8](data)
    }
}
