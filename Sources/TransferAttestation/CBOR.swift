// A strict decoder for the subset of CBOR (RFC 8949) that App Attest uses: unsigned and
// negative integers, byte strings, text strings, arrays and maps, all of definite length.
//
// It depends on the standard library only, so scripts/fuzz-cbor.sh builds this file alone
// under libFuzzer. Everything outside the subset is refused rather than skipped: tags, floats
// and simple values (false, true, null, undefined), indefinite lengths, the reserved
// additional-information values, bytes after the one top-level item, a map key that is not an
// integer or a string, a key repeated in one map, text that is not UTF-8, and nesting deeper
// than `maximumDepth`. A declared length is checked against the bytes that remain before
// anything is allocated, so a short input cannot make the decoder reserve a large buffer.
// Integers written in more bytes than they need are accepted (the encodings App Attest sends
// are canonical; a longer one changes no value the verifier reads).

/// One decoded CBOR data item.
public indirect enum CBOR: Hashable, Sendable {
    case unsigned(UInt64)
    /// A negative integer, stored as CBOR writes it: the value is `-1 - n`.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    /// The entries in the order they were written; keys are unique.
    case map([Entry])

    public struct Entry: Hashable, Sendable {
        public var key: CBOR
        public var value: CBOR
        public init(_ key: CBOR, _ value: CBOR) {
            self.key = key
            self.value = value
        }
    }

    /// How deep arrays and maps may nest: an App Attest object is three levels deep
    /// (map → attStmt → x5c), a COSE key one.
    public static let maximumDepth = 8

    /// Decodes exactly one data item that fills `bytes`.
    public static func decode(_ bytes: [UInt8], maximumDepth: Int = CBOR.maximumDepth) throws(CBORError) -> CBOR {
        var reader = Reader(bytes: bytes, maximumDepth: maximumDepth)
        let item = try reader.item(depth: 0)
        guard reader.offset == bytes.count else { throw .trailingBytes(offset: reader.offset) }
        return item
    }

    /// Decodes one data item at the start of `bytes` and tells how many bytes it took, for
    /// an item followed by something else (the COSE key inside authData).
    public static func decodePrefix(_ bytes: [UInt8], maximumDepth: Int = CBOR.maximumDepth) throws(CBORError) -> (item: CBOR, length: Int) {
        var reader = Reader(bytes: bytes, maximumDepth: maximumDepth)
        let item = try reader.item(depth: 0)
        return (item, reader.offset)
    }

    // MARK: Reading a decoded item

    /// The value of a map's text key, or nil (also when this is no map).
    public subscript(key: String) -> CBOR? {
        self[.text(key)]
    }

    /// The value of a map's key, or nil (also when this is no map).
    public subscript(key: CBOR) -> CBOR? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == key }?.value
    }

    public var bytes: [UInt8]? {
        if case .bytes(let value) = self { return value }
        return nil
    }

    public var text: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    public var array: [CBOR]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var isMap: Bool {
        if case .map = self { return true }
        return false
    }

    /// The integer's value when it fits an Int64.
    public var integer: Int64? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int64.max) ? Int64(n) : nil
        case .negative(let n): return n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: return nil
        }
    }
}

/// Why bytes are not one item of the CBOR subset; `offset` is where the decoder stopped.
public enum CBORError: Error, Hashable, Sendable, CustomStringConvertible {
    case truncated(offset: Int)
    case trailingBytes(offset: Int)
    case indefiniteLength(offset: Int)
    case reservedAdditionalInformation(offset: Int)
    /// A tag (major type 6) or a float or simple value (major type 7).
    case unsupportedType(majorType: UInt8, offset: Int)
    case invalidUTF8(offset: Int)
    case unsupportedMapKey(offset: Int)
    case duplicateMapKey(offset: Int)
    case tooDeep(offset: Int)

    public var description: String {
        switch self {
        case .truncated(let at): "CBOR ends early (at byte \(at))"
        case .trailingBytes(let at): "bytes follow the CBOR item (from byte \(at))"
        case .indefiniteLength(let at): "CBOR indefinite length is not accepted (at byte \(at))"
        case .reservedAdditionalInformation(let at): "reserved CBOR additional information (at byte \(at))"
        case .unsupportedType(let major, let at): "CBOR major type \(major) is not accepted (at byte \(at))"
        case .invalidUTF8(let at): "CBOR text string is not UTF-8 (at byte \(at))"
        case .unsupportedMapKey(let at): "a CBOR map key must be an integer or a string (at byte \(at))"
        case .duplicateMapKey(let at): "a CBOR map repeats a key (at byte \(at))"
        case .tooDeep(let at): "CBOR nests too deep (at byte \(at))"
        }
    }
}

private struct Reader {
    let bytes: [UInt8]
    let maximumDepth: Int
    var offset = 0

    init(bytes: [UInt8], maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    var remaining: Int { bytes.count - offset }

    mutating func byte() throws(CBORError) -> UInt8 {
        guard offset < bytes.count else { throw .truncated(offset: offset) }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// The argument of a head whose additional information is `info` (RFC 8949 §3).
    mutating func argument(_ info: UInt8, head: Int) throws(CBORError) -> UInt64 {
        switch info {
        case 0...23: return UInt64(info)
        case 24...27:
            let count = 1 << Int(info - 24)
            guard remaining >= count else { throw .truncated(offset: offset) }
            var value: UInt64 = 0
            for _ in 0..<count { value = value << 8 | UInt64(bytes[offset]); offset += 1 }
            return value
        case 31: throw .indefiniteLength(offset: head)
        default: throw .reservedAdditionalInformation(offset: head)
        }
    }

    /// A length that must fit in what remains, `unit` bytes at least per element.
    mutating func length(_ info: UInt8, head: Int, unit: Int) throws(CBORError) -> Int {
        let declared = try argument(info, head: head)
        guard declared <= UInt64(remaining / unit) else { throw .truncated(offset: head) }
        return Int(declared)
    }

    mutating func item(depth: Int) throws(CBORError) -> CBOR {
        let head = offset
        let initial = try byte()
        let major = initial >> 5, info = initial & 0x1f
        switch major {
        case 0:
            return .unsigned(try argument(info, head: head))
        case 1:
            return .negative(try argument(info, head: head))
        case 2:
            let count = try length(info, head: head, unit: 1)
            defer { offset += count }
            return .bytes(Array(bytes[offset..<offset + count]))
        case 3:
            let count = try length(info, head: head, unit: 1)
            guard let text = String(validating: bytes[offset..<offset + count], as: UTF8.self) else {
                throw .invalidUTF8(offset: head)
            }
            offset += count
            return .text(text)
        case 4:
            let count = try length(info, head: head, unit: 1)
            guard depth < maximumDepth else { throw .tooDeep(offset: head) }
            var items: [CBOR] = []
            items.reserveCapacity(count)
            for _ in 0..<count { items.append(try item(depth: depth + 1)) }
            return .array(items)
        case 5:
            let count = try length(info, head: head, unit: 2)
            guard depth < maximumDepth else { throw .tooDeep(offset: head) }
            var entries: [CBOR.Entry] = []
            entries.reserveCapacity(count)
            var keys = Set<CBOR>(minimumCapacity: count)
            for _ in 0..<count {
                let keyOffset = offset
                let key = try item(depth: depth + 1)
                switch key {
                case .unsigned, .negative, .bytes, .text: break
                case .array, .map: throw .unsupportedMapKey(offset: keyOffset)
                }
                guard keys.insert(key).inserted else { throw .duplicateMapKey(offset: keyOffset) }
                entries.append(CBOR.Entry(key, try item(depth: depth + 1)))
            }
            return .map(entries)
        default:
            throw .unsupportedType(majorType: major, offset: head)
        }
    }
}
