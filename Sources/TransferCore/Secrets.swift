import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// SHA-256 of a high-entropy secret (device secret, refresh token). Device secrets carry
/// at least 192 random bits, so a fast hash is enough; only the hash is ever stored.
public struct SecretHash: Hashable, Sendable {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public init(of secret: String) {
        bytes = Array(SHA256.hash(data: Array(secret.utf8)))
    }

    /// Compares in time that does not depend on where the hashes differ.
    public func matches(_ other: SecretHash) -> Bool {
        guard bytes.count == other.bytes.count else { return false }
        var diff: UInt8 = 0
        for i in bytes.indices { diff |= bytes[i] ^ other.bytes[i] }
        return diff == 0
    }
}

public enum RandomToken {
    /// `byteCount` random bytes from the kernel's CSPRNG, base64url without padding.
    public static func make(byteCount: Int = 32) -> String {
        Base64URL.encode(randomBytes(byteCount))
    }

    /// `count` bytes from the kernel's CSPRNG in one call: glibc's `arc4random_buf` (2.36 and
    /// later: Debian 12) is one `getrandom` syscall. swift-crypto's `SymmetricKey(size:)`, used
    /// before, asks `SystemRandomNumberGenerator` for 8 bytes at a time on Linux: eight
    /// syscalls for a login's 64 bytes.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        guard count > 0 else { return [] }
        #if canImport(Glibc)
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            arc4random_buf(buffer.baseAddress!, count)
            initialized = count
        }
        #else
        return SymmetricKey(size: SymmetricKeySize(bitCount: count * 8)).withUnsafeBytes { Array($0) }
        #endif
    }
}

/// Lower-case hexadecimal, two digits a byte.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out = [UInt8]()
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// base64url without padding (RFC 4648 §5), as JWTs and our tokens use it.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        let input = Array(bytes)
        var out = [UInt8]()
        out.reserveCapacity((input.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= input.count {
            let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        switch input.count - i {
        case 1:
            let n = UInt32(input[i]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)]]
        case 2:
            let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)]]
        default: break
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of base64url text (padding allowed); nil for anything else.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var values: [UInt8] = []
        values.reserveCapacity(text.utf8.count)
        for c in text.utf8 where c != UInt8(ascii: "=") {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(c - 65)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(c - 71)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(c + 4)
            case UInt8(ascii: "-"): values.append(62)
            case UInt8(ascii: "_"): values.append(63)
            default: return nil
            }
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 3 / 4)
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            var n: UInt32 = 0
            for (j, v) in chunk.enumerated() { n |= UInt32(v) << (18 - 6 * UInt32(j)) }
            out.append(UInt8(n >> 16 & 255))
            if chunk.count > 2 { out.append(UInt8(n >> 8 & 255)) }
            if chunk.count > 3 { out.append(UInt8(n & 255)) }
            i += 4
        }
        return out
    }
}
