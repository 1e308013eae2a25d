/// Lower-case hexadecimal, two digits a byte: how APNs tokens and Apple's nonces are written.
enum Hex {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { byte in
            let digits = String(byte, radix: 16)
            return byte < 16 ? "0" + digits : digits
        }.joined()
    }
}
