// libFuzzer entry point for the strict CBOR decoder (Sources/TransferAttestation/CBOR.swift),
// built by scripts/fuzz-cbor.sh together with the test-only encoder. Besides "no crash, no
// sanitizer report", each input checks that:
// - whatever decodes encodes (shortest heads) and decodes back to the same value, and
//   encoding that again gives the same bytes;
// - decodePrefix agrees with decode: it consumes at most the input, and when it consumes all
//   of it, decode returns the same item; when decode fails for trailing bytes only,
//   decodePrefix stops exactly there.

@_cdecl("LLVMFuzzerTestOneInput")
public func cborFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    let whole: Result<CBOR, CBORError> = Result { () throws(CBORError) in try CBOR.decode(bytes) }
    let prefix: Result<(item: CBOR, length: Int), CBORError> = Result { () throws(CBORError) in try CBOR.decodePrefix(bytes) }

    if case .success(let item) = whole {
        let encoded = CBOREncoder.encode(item)
        guard case .success(let back) = Result(catching: { () throws(CBORError) in try CBOR.decode(encoded) }), back == item else {
            fatalError("an accepted item does not survive encoding and decoding")
        }
        precondition(CBOREncoder.encode(back) == encoded, "encoding is not stable")
        guard case .success(let p) = prefix, p.length == bytes.count, p.item == item else {
            fatalError("decodePrefix disagrees with decode on a whole item")
        }
    }
    switch prefix {
    case .success(let p):
        precondition(p.length >= 1 && p.length <= bytes.count, "decodePrefix consumed \(p.length) of \(bytes.count) bytes")
        if p.length < bytes.count {
            precondition(whole == .failure(.trailingBytes(offset: p.length)), "trailing bytes are not reported where the item ends")
        }
    case .failure(let error):
        precondition(whole == .failure(error), "decode and decodePrefix fail differently")
    }
    return 0
}
