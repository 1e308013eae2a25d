// A test-only CBOR encoder (RFC 8949, the decoder's subset), writing every head in its
// shortest form. The tests build attestation objects and COSE keys with it, and
// scripts/fuzz-cbor.sh compiles it next to the decoder (standard library only) to check
// that whatever the decoder accepts encodes and decodes back to the same value.
#if canImport(TransferAttestation)
import TransferAttestation
#endif

enum CBOREncoder {
    static func encode(_ item: CBOR) -> [UInt8] {
        var out: [UInt8] = []
        write(item, to: &out)
        return out
    }

    static func head(_ major: UInt8, _ argument: UInt64) -> [UInt8] {
        let type = major << 5
        switch argument {
        case 0..<24: return [type | UInt8(argument)]
        case 24...0xff: return [type | 24, UInt8(argument)]
        case 0x100...0xffff: return [type | 25] + bigEndian(argument, 2)
        case 0x1_0000...0xffff_ffff: return [type | 26] + bigEndian(argument, 4)
        default: return [type | 27] + bigEndian(argument, 8)
        }
    }

    static func bigEndian(_ value: UInt64, _ count: Int) -> [UInt8] {
        (0..<count).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    static func write(_ item: CBOR, to out: inout [UInt8]) {
        switch item {
        case .unsigned(let n): out += head(0, n)
        case .negative(let n): out += head(1, n)
        case .bytes(let bytes): out += head(2, UInt64(bytes.count)) + bytes
        case .text(let text):
            let utf8 = Array(text.utf8)
            out += head(3, UInt64(utf8.count)) + utf8
        case .array(let items):
            out += head(4, UInt64(items.count))
            for element in items { write(element, to: &out) }
        case .map(let entries):
            out += head(5, UInt64(entries.count))
            for entry in entries {
                write(entry.key, to: &out)
                write(entry.value, to: &out)
            }
        }
    }
}
