import Foundation
import Testing
@testable import TransferKit

@Suite("Transfer and recovery codes")
struct CodeTests {
    @Test("a transfer code is read as the service reads it: case, spaces, hyphens, I/L → 1, O → 0")
    func transferCodeReading() throws {
        let code = try #require(TransferCode("7KQM-2XD4-R9HW-C3NB"))
        #expect(code.value == "7KQM2XD4R9HWC3NB")
        #expect(code.grouped == "7KQM-2XD4-R9HW-C3NB")
        for typed in [
            "7kqm-2xd4-r9hw-c3nb", "7KQM2XD4R9HWC3NB", " 7kqm 2xd4 r9hw c3nb ", "7-K-Q-M-2XD4R9HW-C3NB",
            "7KQM\u{2010}2XD4\u{2013}R9HW\u{00A0}C3NB",  // hyphens and spaces as copy-paste brings them
        ] {
            #expect(TransferCode(typed) == code, "\(typed)")
        }
        #expect(TransferCode("IL0O-0000-0000-0000")?.value == "1100000000000000")
        #expect(TransferCode("il0o 0000 0000 0000")?.value == "1100000000000000")
        for wrong in [
            "", "7KQM-2XD4-R9HW-C3N", "7KQM-2XD4-R9HW-C3NBX", "7KQM-2XD4-R9HW-C3NU",  // U is not Crockford
            "7KQM_2XD4_R9HW_C3NB", "7KQM-2XD4-R9HW-C3N!", "7KQM-2XD4-R9HW-C3NB-5TGA",  // a recovery code's length
            "７KQM-2XD4-R9HW-C3NB",  // a full-width digit
            "7KQM-2XD4-R9HW-C3ß",  // "ß" upper-cases to "SS", which would make 16 characters
            "7KQM-2XD4-R9HW-C3Nı",  // a dotless i is not an I
        ] {
            #expect(TransferCode(wrong) == nil, "\(wrong)")
        }
    }

    @Test("a recovery code has 20 characters, five groups, the same reading rules")
    func recoveryCodeReading() throws {
        let code = try #require(RecoveryCode("7kqm-2xd4-r9hw-c3nb-5tga"))
        #expect(code.value == "7KQM2XD4R9HWC3NB5TGA")
        #expect(code.grouped == "7KQM-2XD4-R9HW-C3NB-5TGA")
        #expect(RecoveryCode("7KQM 2XD4 R9HW C3NB 5TGA") == code)
        #expect(RecoveryCode("IIII-LLLL-OOOO-oooo-0000")?.value == "11111111000000000000")
        #expect(RecoveryCode("7KQM-2XD4-R9HW-C3NB") == nil)  // a transfer code's length
        #expect(RecoveryCode("7KQM-2XD4-R9HW-C3NB-5TGU") == nil)
    }

    @Test("URL form: a custom scheme and a universal link round-trip; other links are refused")
    func urlRoundTrips() throws {
        let code = try #require(TransferCode("7KQM-2XD4-R9HW-C3NB"))
        let scheme = URL(string: "yourapp://transfer")!
        let link = code.url(base: scheme)
        #expect(link.absoluteString == "yourapp://transfer#code=7KQM-2XD4-R9HW-C3NB")
        #expect(TransferCode(url: link) == code)
        #expect(TransferCode(url: link, base: scheme) == code)
        #expect(TransferCode(url: URL(string: "YOURAPP://Transfer#code=7kqm2xd4r9hwc3nb")!, base: scheme) == code)

        let universal = URL(string: "https://app.example.com/transfer")!
        let web = code.url(base: universal)
        #expect(
            web.absoluteString == "https://app.example.com/transfer#code=7KQM-2XD4-R9HW-C3NB",
            "the code must travel in the fragment, which a browser never sends to the web server: \(web)")
        #expect(web.query == nil, "a code in the query reaches web and CDN logs when Safari opens the link")
        #expect(TransferCode(url: web, base: universal) == code)
        #expect(TransferCode(url: web, base: scheme) == nil)  // another scheme and host
        #expect(TransferCode(url: URL(string: "https://evil.example.com/transfer?code=7KQM-2XD4-R9HW-C3NB")!, base: universal) == nil)
        #expect(TransferCode(url: URL(string: "https://app.example.com/other?code=7KQM-2XD4-R9HW-C3NB")!, base: universal) == nil)
        #expect(TransferCode(url: URL(string: "yourapp://transfer?code=nope")!) == nil)
        #expect(TransferCode(url: URL(string: "yourapp://transfer")!) == nil)

        // A base with a query of its own keeps it; a code already in it is taken out.
        let withQuery = code.url(base: URL(string: "https://app.example.com/transfer?src=qr&code=old")!)
        #expect(withQuery.absoluteString == "https://app.example.com/transfer?src=qr#code=7KQM-2XD4-R9HW-C3NB")
        #expect(TransferCode(url: withQuery) == code)

        // Links made by TransferKit 2.0 (the code in the query) are still read.
        #expect(TransferCode(url: URL(string: "https://app.example.com/transfer?code=7KQM-2XD4-R9HW-C3NB")!, base: universal) == code)
        #expect(TransferCode(url: URL(string: "yourapp://transfer?code=7KQM-2XD4-R9HW-C3NB")!) == code)

        // Every code the alphabet allows survives the trip.
        for _ in 0..<50 {
            let random = String((0..<16).map { _ in Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ").randomElement()! })
            let typed = try #require(TransferCode(random))
            #expect(TransferCode(url: typed.url(base: scheme), base: scheme) == typed)
            #expect(TransferCode(typed.grouped) == typed)
        }
    }

    @Test("codes print as <redacted>, also inside the values that carry them")
    func redacted() throws {
        let transfer = try #require(TransferCode("7KQM-2XD4-R9HW-C3NB"))
        let recovery = try #require(RecoveryCode("7KQM-2XD4-R9HW-C3NB-5TGA"))
        let values: [Any] = [
            transfer, recovery, CodeTransfer(code: transfer, expiresAt: Date()),
            IssuedRecoveryCode(code: recovery, createdAt: Date()),
        ]
        for value in values {
            var dumped = ""
            dump(value, to: &dumped)
            for text in [String(describing: value), String(reflecting: value), dumped] {
                #expect(!text.contains("7KQM"), "\(text)")
                #expect(text.contains(Redacted.text), "\(text)")
            }
        }
        #expect("\(transfer)" == "TransferCode(<redacted>)")
        #expect("\(recovery)" == "RecoveryCode(<redacted>)")
    }
}

@Suite("Transfer code QR payload")
struct QRPayloadTests {
    @Test("the QR payload is the link with the code in its fragment, in UTF-8, and reads back as the code")
    func payloadIsTheFragmentLink() throws {
        let code = try #require(TransferCode("7KQM-2XD4-R9HW-C3NB"))
        let base = URL(string: "https://app.example.com/transfer")!
        let payload = code.qrPayload(base: base)
        #expect(String(decoding: payload, as: UTF8.self) == "https://app.example.com/transfer#code=7KQM-2XD4-R9HW-C3NB")
        let scanned = try #require(URL(string: String(decoding: payload, as: UTF8.self)))
        #expect(TransferCode(url: scanned, base: base) == code)
    }
}
