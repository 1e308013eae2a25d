import Foundation
import Testing
import TransferCore
@testable import TransferHTTP

/// The session answer is written by hand on the hot path; it must stay byte for byte what
/// `API.json`'s encoder writes, for every field and every string a user can put in it.
@Suite("The session answer")
struct SessionBodyTests {
    static func encoded(_ body: SessionBody) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(body))
    }

    static func body(userName: String, accounts: [ListedAccount]) -> SessionBody {
        SessionBody(
            accountId: "01J0ACCOUNT", userName: userName, deviceId: "3F2504E0-4F89-41D3-9A0C-0305E82C3301", created: true,
            migrationFlag: false, accessToken: "eyJhbGciOiJFZERTQSJ9.e30.sig-_", tokenType: "Bearer", expiresIn: 899,
            refreshToken: "r3fr3sh_-token", accounts: accounts)
    }

    @Test("written by hand, it is byte for byte what JSONEncoder writes: no account, one, several; every control character, quotes, slashes, non-ASCII")
    func sameBytes() throws {
        let awkward = String((0..<0x80).map { Character(Unicode.Scalar(UInt8($0))) }) + "é 日本 👩‍💻 \u{2028}"
        let cases: [SessionBody] = [
            Self.body(userName: "plain", accounts: []),
            Self.body(userName: awkward, accounts: [ListedAccount(accountID: "a", userName: awkward, current: true)]),
            Self.body(userName: "a/b\\c\"d", accounts: [
                ListedAccount(accountID: "first", userName: "x", current: false),
                ListedAccount(accountID: "second", userName: "", current: true),
            ]),
        ]
        for body in cases {
            let expected = try Self.encoded(body)
            let written = body.json()
            #expect(written == expected, "hand-written \(String(decoding: written, as: UTF8.self)) differs from JSONEncoder's \(String(decoding: expected, as: UTF8.self))")
        }
    }
}
