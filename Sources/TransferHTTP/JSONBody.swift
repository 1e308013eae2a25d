import Foundation
import Hummingbird
import NIOCore

/// Any JSON value, decoded strictly: `1` is never a boolean and `"true"` never a number.
enum JSONValue: Decodable {
    case null, bool(Bool), number(Double), string(String), array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        // Strings first: nearly every field is one, and each kind tried in vain throws (and
        // builds) a DecodingError.
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }
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
        // JSONDecoder guesses UTF-16 and UTF-32 from NUL bytes, and the duplicate-key check
        // reads UTF-8: a body is UTF-8, or refused before either looks at it. UTF-16 of ASCII
        // text is valid UTF-8 but full of NULs, which JSON text in UTF-8 never holds.
        guard !buffer.readableBytesView.contains(0), String(validating: buffer.readableBytesView, as: UTF8.self) != nil else {
            throw APIError.invalidRequest("The request body must be JSON encoded in UTF-8.")
        }
        // An object, read as one at once (no kind tried in vain at the top); on failure, the
        // body read again tells JSON that is no object from no JSON.
        let data = Data(buffer.readableBytesView)
        let fields: [String: JSONValue]
        do {
            fields = try JSONDecoder().decode([String: JSONValue].self, from: data)
        } catch {
            guard (try? JSONDecoder().decode(JSONValue.self, from: data)) != nil else {
                throw APIError.invalidRequest("The request body is not valid JSON.")
            }
            throw APIError.invalidRequest("The request body must be a JSON object.")
        }
        // Parsers disagree on which of two equal keys wins; an ambiguous body is refused.
        if let key = duplicateKey(in: Array(buffer.readableBytesView)) {
            throw APIError.invalidRequest("\(key) appears more than once.")
        }
        return JSONBody(fields: fields)
    }

    /// The first key that appears twice in one object of already-valid JSON, if any.
    static func duplicateKey(in bytes: [UInt8]) -> String? {
        // One entry per open object (its keys so far, and whether a key comes next) or array (nil).
        var stack: [(keys: Set<String>, expectKey: Bool)?] = []
        var i = 0
        while i < bytes.count {
            switch bytes[i] {
            case UInt8(ascii: "\""):
                let start = i
                i += 1
                while i < bytes.count, bytes[i] != UInt8(ascii: "\"") {
                    i += bytes[i] == UInt8(ascii: "\\") ? 2 : 1
                }
                if var top = stack.last ?? nil, top.expectKey {
                    let raw = bytes[start...min(i, bytes.count - 1)]
                    // Only keys with escapes need decoding to compare them ("a\u0041" is "aA").
                    let key = raw.contains(UInt8(ascii: "\\"))
                        ? (try? JSONDecoder().decode(String.self, from: Data(raw))) ?? String(decoding: raw, as: UTF8.self)
                        : String(decoding: raw.dropFirst().dropLast(), as: UTF8.self)
                    if top.keys.contains(key) { return key }
                    top.keys.insert(key)
                    top.expectKey = false
                    stack[stack.count - 1] = top
                }
            case UInt8(ascii: "{"): stack.append((keys: [], expectKey: true))
            case UInt8(ascii: "["): stack.append(nil)
            case UInt8(ascii: "}"), UInt8(ascii: "]"): _ = stack.popLast()
            case UInt8(ascii: ","):
                if var top = stack.last ?? nil {
                    top.expectKey = true
                    stack[stack.count - 1] = top
                }
            default: break
            }
            i += 1
        }
        return nil
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
