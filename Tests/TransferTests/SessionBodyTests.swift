import Foundation
import Testing
import TransferCore
@testable import TransferHTTP

/// What `API.json` writes for a body: the reference the hand-written answers are held to.
func encodedByJSONEncoder(_ body: some Encodable) throws -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return Array(try encoder.encode(body))
}

/// The session answer is written by hand on the hot path; it must stay byte for byte what
/// `API.json`'s encoder writes, for every field and every string a user can put in it.
@Suite("The session answer")
struct SessionBodyTests {
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
            Self.body(userName: "\"starts and ends with escapes\n", accounts: []),
            Self.body(userName: awkward, accounts: [ListedAccount(accountID: "a", userName: awkward, current: true)]),
            Self.body(userName: "a/b\\c\"d", accounts: [
                ListedAccount(accountID: "first", userName: "x", current: false),
                ListedAccount(accountID: "second", userName: "", current: true),
            ]),
        ]
        for body in cases {
            let expected = try encodedByJSONEncoder(body)
            let written = body.json()
            #expect(written == expected, "hand-written \(String(decoding: written, as: UTF8.self)) differs from JSONEncoder's \(String(decoding: expected, as: UTF8.self))")
        }
    }
}

/// `GET /v1/me` is written by hand too (apps read it at launch); every field that may be
/// absent is absent in one case and present in another, as JSONEncoder writes each.
@Suite("The /v1/me answer")
struct MeBodyTests {
    @Test("written by hand, it is byte for byte what JSONEncoder writes: with and without a transfer, an email, an Apple link, devices, backup keys, ways back")
    func sameBytes() throws {
        let t0 = Timestamp(milliseconds: 1_795_000_000_123)
        let awkward = String((0..<0x80).map { Character(Unicode.Scalar(UInt8($0))) }) + "é 日本 👩‍💻 \u{2028}"
        let bare = AccountProfile(
            accountID: "01J0ACCOUNT", userName: "plain", createdAt: t0, movedToDeviceID: nil, transfer: nil, activeDevices: [])
        var everything = bare
        everything.userName = awkward
        everything.movedToDeviceID = "3F2504E0-4F89-41D3-9A0C-0305E82C3301"
        everything.transfer = .init(method: .password, email: "a/b\\c\"d@example.com", createdAt: t0, expiresAt: t0 + .seconds(3600))
        everything.activeDevices = [
            .init(deviceID: "DEVICE-A", boundAt: t0, lastLoginAt: nil),
            .init(deviceID: "DEVICE-B", boundAt: t0, lastLoginAt: t0 + .seconds(5)),
        ]
        everything.apple = AppleLink(accountID: "01J0ACCOUNT", sub: "sub", email: awkward, isPrivateEmail: true, linkedAt: t0)
        everything.recoveryCodeCreatedAt = t0
        everything.backupKeys = BackupKeyStore.allCases.map {
            BackupKeyRecord(accountID: "01J0ACCOUNT", store: $0, keyHash: SecretHash(bytes: [1]), createdAt: t0)
        }
        var codeTransfer = bare
        codeTransfer.transfer = .init(method: .code, email: nil, createdAt: t0, expiresAt: t0)
        codeTransfer.activeDevices = [.init(deviceID: "DEVICE-A", boundAt: t0, lastLoginAt: t0)]
        codeTransfer.apple = AppleLink(accountID: "01J0ACCOUNT", sub: "sub", email: nil, isPrivateEmail: nil, linkedAt: t0)
        for (profile, current) in [(bare, "DEVICE-A"), (everything, "DEVICE-B"), (codeTransfer, "DEVICE-A")] {
            let body = MeBody(profile, current: current)
            let expected = try encodedByJSONEncoder(body)
            let written = body.json()
            #expect(written == expected, "hand-written \(String(decoding: written, as: UTF8.self)) differs from JSONEncoder's \(String(decoding: expected, as: UTF8.self))")
        }
    }
}
