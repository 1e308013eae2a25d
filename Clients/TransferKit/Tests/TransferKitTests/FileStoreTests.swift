import Foundation
import Testing
@testable import TransferKit

@Suite("File credential store")
struct FileStoreTests {
    @Test("creates 0600 files in a 0700 directory, writes atomically, missing reads as empty")
    func fileStore() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("transferkit-\(UUID().uuidString)/store")
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let store = FileCredentialStore(directory: directory)

        #expect(try store.read("transferkit.identity") == nil)
        try store.write(Data("first".utf8), for: "transferkit.identity")
        let path = directory.appendingPathComponent("transferkit.identity").path
        #expect(try permissions(path) == 0o600)
        #expect(try permissions(directory.path) == 0o700)
        #expect(try store.read("transferkit.identity") == Data("first".utf8))

        try store.write(Data("second".utf8), for: "transferkit.identity")
        #expect(try store.read("transferkit.identity") == Data("second".utf8))
        #expect(try permissions(path) == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["transferkit.identity"])  // no temporary files

        try store.remove("transferkit.identity")
        #expect(try store.read("transferkit.identity") == nil)
        try store.remove("transferkit.identity")  // removing nothing is fine
    }

    @Test("a file that exists but cannot be read is unavailable, not empty")
    func unreadable() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("transferkit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // A directory where the file should be: it exists, and reading it fails even as root.
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("transferkit.identity"), withIntermediateDirectories: true)
        #expect(throws: CredentialStoreUnavailable.self) { try FileCredentialStore(directory: directory).read("transferkit.identity") }
    }

    private func permissions(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }
}
