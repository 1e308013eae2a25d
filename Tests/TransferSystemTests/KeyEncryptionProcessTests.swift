import Crypto
import Foundation
import Synchronization
import Testing
import TransferCore
@testable import TransferHTTP
import TransferSettings
@testable import TransferTestSupport

extension ProcessTests {
    @Test("transfer-server refuses an invalid --key-encryption-key-file and keys under another one with exit 2 (not restarted), each in one line")
    func keyEncryptionKeyAtStart() async throws {
        let database = TempDatabase()
        defer { database.remove() }
        let kek = try KEKFile(), other = try KEKFile(), bad = try SecretFile.make("short")
        defer { kek.remove(); other.remove(); try? FileManager.default.removeItem(at: bad) }
        let argument = "sqlite:\(database.path)"
        let invalid = try Executable.run("transfer-server", ["--database", argument, "--key-encryption-key-file", bad.path])
        #expect(invalid.code == 2, "\(invalid)")
        #expect(invalid.err == "transfer-server: --key-encryption-key-file: '\(bad.path)' does not hold 32 bytes in base64 (make one with: openssl rand -base64 32)\n")

        try await KEKFile.sealSigningKeys(argument, kek.key)
        let wrong = try Executable.run("transfer-server", ["--database", argument, "--port", "0", "--key-encryption-key-file", other.path])
        #expect(wrong.code == 2, "\(wrong)")
        let last = lines(of: wrong.err).last.map(String.init) ?? ""
        #expect(last.hasPrefix("transfer-server: --key-encryption-key-file: the signing keys are encrypted with key-encryption key \(kek.key.id)"), "\(wrong)")
        #expect(!wrong.err.contains(kek.base64) && !wrong.err.contains(other.base64))
    }
}
