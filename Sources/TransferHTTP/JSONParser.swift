/// A strict JSON parser (RFC 8259) over UTF-8 bytes, in one pass that reads each byte once:
/// a value's kind is its first byte, so nothing is tried in vain, and nesting deeper than
/// `maxDepth` stops the parse where it is reached.
struct JSONParser {
    enum Failure: Error, Equatable {
        /// Arrays and objects nested deeper than `maxDepth`.
        case tooDeep
        /// Not JSON text.
        case invalid
    }

    /// The parse: the value, the first key that appears twice in one object (a body that is
    /// otherwise valid is refused for it), and how many values were read (each exactly once).
    struct Parsed {
        var value: JSONValue
        var duplicateKey: String?
        var values: Int
    }

    /// Arrays and objects in each other: the outermost is level 1.
    static let maxDepth = 32

    private let bytes: [UInt8]
    private let maxDepth: Int
    private var i = 0
    private var depth = 0
    private var duplicateKey: String?
    private var values = 0

    private init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    /// Parses one JSON text (surrounding whitespace and a leading byte order mark allowed,
    /// nothing else; no trailing commas). `bytes` is UTF-8.
    static func parse(_ bytes: [UInt8], maxDepth: Int = maxDepth) throws(Failure) -> Parsed {
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.i = 3 }
        let value = try parser.value()
        parser.skipSpace()
        guard parser.i == bytes.count else { throw .invalid }
        return Parsed(value: value, duplicateKey: parser.duplicateKey, values: parser.values)
    }

    private mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    private mutating func value() throws(Failure) -> JSONValue {
        skipSpace()
        guard i < bytes.count else { throw .invalid }
        values += 1
        switch bytes[i] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw .invalid
        }
    }

    /// Enters an array or object at `i` (its opening byte).
    private mutating func enter() throws(Failure) {
        depth += 1
        guard depth <= maxDepth else { throw .tooDeep }
        i += 1
        skipSpace()
    }

    private mutating func object() throws(Failure) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        var fields: [String: JSONValue] = [:]
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
            i += 1
            return .object(fields)
        }
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw .invalid }
            let key = try string()
            // Said for the key's second appearance, before its value is read.
            if duplicateKey == nil, fields[key] != nil { duplicateKey = key }
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw .invalid }
            i += 1
            fields[key] = try value()
            skipSpace()
            guard i < bytes.count else { throw .invalid }
            switch bytes[i] {
            case UInt8(ascii: ","): i += 1
            case UInt8(ascii: "}"): i += 1; return .object(fields)
            default: throw .invalid
            }
        }
    }

    private mutating func array() throws(Failure) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        var items: [JSONValue] = []
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
            i += 1
            return .array(items)
        }
        while true {
            items.append(try value())
            skipSpace()
            guard i < bytes.count else { throw .invalid }
            switch bytes[i] {
            case UInt8(ascii: ","): i += 1
            case UInt8(ascii: "]"): i += 1; return .array(items)
            default: throw .invalid
            }
        }
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - i >= count else { throw .invalid }
        for k in 0..<count where bytes[i + k] != word.utf8Start[k] { throw .invalid }
        i += count
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func digits() throws(Failure) {
        guard i < bytes.count, Self.isDigit(bytes[i]) else { throw .invalid }
        while i < bytes.count, Self.isDigit(bytes[i]) { i += 1 }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, finite as a Double.
    private mutating func number() throws(Failure) -> Double {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        if i < bytes.count, bytes[i] == UInt8(ascii: "0") { i += 1 } else { try digits() }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            try digits()
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            try digits()
        }
        guard let number = Double(String(decoding: bytes[start..<i], as: UTF8.self)), number.isFinite else { throw .invalid }
        return number
    }

    /// A string at `i` (its opening quote). Control characters must be escaped; `\u` escapes
    /// of UTF-16 surrogates come in pairs.
    private mutating func string() throws(Failure) -> String {
        i += 1
        let start = i
        var escaped = false
        while true {
            guard i < bytes.count else { throw .invalid }
            let byte = bytes[i]
            if byte == UInt8(ascii: "\"") { break }
            guard byte >= 0x20 else { throw .invalid }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                i += 2
            } else {
                i += 1
            }
        }
        let end = i
        i += 1
        guard escaped else { return String(decoding: bytes[start..<end], as: UTF8.self) }
        return try Self.unescape(bytes[start..<end])
    }

    private static func unescape(_ raw: ArraySlice<UInt8>) throws(Failure) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var k = raw.startIndex
        func hex4(_ at: Int) throws(Failure) -> UInt32 {
            guard at + 4 <= raw.endIndex else { throw .invalid }
            var value: UInt32 = 0
            for byte in raw[at..<(at + 4)] {
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw .invalid
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
        while k < raw.endIndex {
            let byte = raw[k]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                k += 1
                continue
            }
            guard k + 1 < raw.endIndex else { throw .invalid }
            switch raw[k + 1] {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "/"): out.append(UInt8(ascii: "/"))
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4(k + 2)
                k += 6
                if (0xD800...0xDBFF).contains(scalar) {
                    // A high surrogate: its low one follows as `\uDC00`–`\uDFFF`.
                    guard k + 1 < raw.endIndex, raw[k] == UInt8(ascii: "\\"), raw[k + 1] == UInt8(ascii: "u") else { throw .invalid }
                    let low = try hex4(k + 2)
                    guard (0xDC00...0xDFFF).contains(low) else { throw .invalid }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    k += 6
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw .invalid
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw .invalid }
                out.append(contentsOf: Unicode.UTF8.encode(unicode).map(Array.init) ?? [])
                continue
            default: throw .invalid
            }
            k += 2
        }
        return String(decoding: out, as: UTF8.self)
    }
}
