import Foundation
import Testing
@testable import TransferKit

@Suite("PKCE")
struct PKCETests {
    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    @Test("SHA-256 gives the FIPS 180-4 example digests")
    func sha256Vectors() {
        let vectors: [(message: String, digest: String)] = [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            // 448 bits: the padding needs a second block.
            ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
            // 896 bits: two blocks of message.
            ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
             "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
        ]
        for (message, digest) in vectors {
            #expect(hex(SHA256.hash(message.utf8)) == digest, "\"\(message)\"")
        }
    }

    @Test("SHA-256 pads correctly around the block boundaries")
    func sha256Boundaries() {
        // "a" repeated: 55 bytes is the most that pads into one block; 56 needs two.
        let digests: [Int: String] = [
            55: "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318",
            56: "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a",
            63: "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34",
            64: "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb",
            65: "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0",
            119: "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb",
            120: "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c",
            128: "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e",
        ]
        for (length, digest) in digests {
            #expect(hex(SHA256.hash([UInt8](repeating: UInt8(ascii: "a"), count: length))) == digest, "\(length) bytes")
        }
    }

    @Test("the S256 challenge of RFC 7636 Appendix B")
    func rfc7636() {
        let request = HandoffRequest(clientId: "com.example.news", codeVerifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(request.codeChallenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(PKCE.challenge(for: request.codeVerifier) == request.codeChallenge)
    }

    @Test("a request has a fresh 43-character verifier, survives Codable, and never prints it")
    func makeRequest() throws {
        let request = HandoffRequest.make(clientId: "com.example.news")
        let base64URL = { (text: String) in text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") } }
        #expect(request.clientId == "com.example.news")
        #expect(request.codeVerifier.count == 43 && base64URL(request.codeVerifier))
        #expect(request.codeChallenge.count == 43 && base64URL(request.codeChallenge))
        #expect(request.codeChallenge == PKCE.challenge(for: request.codeVerifier))
        #expect(HandoffRequest.make(clientId: "com.example.news").codeVerifier != request.codeVerifier)

        let decoded = try JSONDecoder().decode(HandoffRequest.self, from: JSONEncoder().encode(request))
        #expect(decoded == request)
        #expect(decoded.codeChallenge == request.codeChallenge)
        #expect(!"\(request)".contains(request.codeVerifier))
        #expect("\(request)".contains(request.codeChallenge))
    }
}
