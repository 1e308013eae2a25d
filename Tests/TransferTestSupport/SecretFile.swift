import Foundation
import Testing
import TransferCore
@testable import TransferHTTP

/// A secret in a file of its own (mode 0600), as the `*_FILE` variables and `--key-encryption-key-file` name one.
enum SecretFile {
    static func make(_ text: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)")
        try Data(text.utf8).write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        return url
    }
}

struct KEKFile {
    let base64: String
    let key: KeyEncryptionKey
    let url: URL
    var path: String { url.path }

    init() throws {
        base64 = Data(RandomToken.randomBytes(32)).base64EncodedString()
        key = try #require(KeyEncryptionKey(base64: base64))
        url = try SecretFile.make(base64 + "\n")
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

extension KEKFile {
    /// Makes the first signing key of the database at `argument`, sealed under `kek`, as a node would.
    static func sealSigningKeys(_ argument: String, _ kek: KeyEncryptionKey) async throws {
        try await Harness(location: try DatabaseLocation.parse(argument), file: TempDatabase()) { $0.keyEncryptionKey = kek }.run { _, _ in }
    }
}
