import Foundation
import Testing

@testable import TransferCore
@testable import TransferHTTP
@testable import TransferPostgres
@testable import TransferSQLite
@testable import TransferTestSupport

/// What the binaries carry inside them: SwiftPM's `embedInCode` copies these files into the
/// code at build time, so a deployment is the binary alone, with no resource bundle beside it.
@Suite("files compiled into the binaries")
struct EmbeddedFilesTests {
    static func file(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: Repository.root.appendingPathComponent(path)))
    }

    @Test("the compiled-in OpenAPI document and common-password list equal the repository's files")
    func documents() throws {
        #expect(
            TransferApp.openAPIDocument == (try Self.file("Sources/TransferHTTP/Resources/openapi.yaml")),
            "the served openapi.yaml differs from the repository's: rebuild (swift build)")
        #expect(
            CommonPasswords.text == (try Self.file("Sources/TransferCore/Resources/common-passwords.txt")),
            "the compiled-in common-password list differs from the repository's: rebuild (swift build)")
        #expect(CommonPasswords.count > 9_000, "the common-password list compiled in has \(CommonPasswords.count) entries")
    }

    /// The store's name as the argument, so the test's report does not print the files' bytes.
    @Test("every migration file in the repository is compiled in, in order, byte for byte", arguments: ["SQLite", "Postgres"])
    func migrations(_ store: String) throws {
        let folder = "Sources/Transfer\(store)/Resources/migrations"
        let compiled = store == "SQLite" ? SQLiteStore.migrations : PostgresStore.migrations
        let files = try FileManager.default.contentsOfDirectory(atPath: Repository.root.appendingPathComponent(folder).path)
            .filter { $0.hasSuffix(".sql") }
            .map { String($0.dropLast(4)) }
            .sorted { Int($0.dropFirst()) ?? 0 < Int($1.dropFirst()) ?? 0 }
        #expect(
            compiled.map(\.version) == files,
            "\(folder) holds \(files) but the store applies \(compiled.map(\.version)): list a new file in the store's `migrations`")
        for (version, sql) in compiled where files.contains(version) {
            #expect(sql == (try Self.file("\(folder)/\(version).sql")), "\(folder)/\(version).sql differs from its compiled-in copy: rebuild")
        }
    }
}

/// The deployable binaries: `./test` builds them as docs/operating.md's deployment section does
/// (release, `--static-swift-stdlib`) and names their folder in `TRANSFER_TEST_RELEASE_BINARIES`.
/// Each runs copied alone into an empty folder, with an environment that names no toolchain.
@Suite("the release binaries, alone in an empty folder", .serialized)
struct ReleaseBinaryTests {
    static let folder = ProcessInfo.processInfo.environment["TRANSFER_TEST_RELEASE_BINARIES"].map { URL(fileURLWithPath: $0) }
    /// What a Debian machine without the toolchain offers.
    static let bareEnvironment = ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"]

    /// Copies the release build of `name` into `into`, alone.
    static func copy(_ name: String, into: URL) throws -> URL {
        guard let folder else {
            throw TestFailure(
                "TRANSFER_TEST_RELEASE_BINARIES is not set: run ./test, which builds the release binaries and sets it")
        }
        let target = into.appendingPathComponent(name)
        try FileManager.default.copyItem(at: folder.appendingPathComponent(name), to: target)
        return target
    }

    /// The shared libraries `binary` needs, as `ldd` resolves them.
    static func sharedLibraries(_ binary: URL) throws -> [String] {
        let run = try Executable.run("ldd", [binary.path], executable: URL(fileURLWithPath: "/usr/bin/ldd"))
        #expect(run.code == 0, "ldd \(binary.lastPathComponent): \(run)")
        return lines(of: run.out).map { $0.trimmingCharacters(in: .whitespaces) }
    }

    @Test(
        "transfer-server and transfer run from an empty folder: Swift runtime linked in, schema, OpenAPI and password list compiled in",
        .enabled(if: folder != nil || TestPostgres.required))
    func aloneInEmptyFolder() async throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("release-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        let server = try Self.copy("transfer-server", into: empty)
        let cli = try Self.copy("transfer", into: empty)

        // Linked: no Swift runtime or Foundation library is loaded from the toolchain; what is
        // left is the C runtime and the two Debian libraries docs/operating.md names.
        for binary in [server, cli] {
            let libraries = try Self.sharedLibraries(binary)
            let swiftRuntime = libraries.filter { $0.contains("libswift") || $0.contains("Foundation") || $0.contains("libdispatch") }
            #expect(swiftRuntime.isEmpty, "\(binary.lastPathComponent) loads the Swift runtime dynamically (build with --static-swift-stdlib): \(swiftRuntime)")
            #expect(!libraries.contains { $0.contains("not found") }, "\(binary.lastPathComponent) misses a library: \(libraries)")
            // No resource bundle of ours is looked up (SwiftPM's Bundle.module names its folder).
            let bytes = try Data(contentsOf: binary)
            #expect(bytes.range(of: Data("device-transfer_".utf8)) == nil, "\(binary.lastPathComponent) refers to a resource bundle of this package")
        }

        // The server, on its embedded default: ./transfer.sqlite in the empty folder.
        let node = try Node(database: nil, executable: server, folder: empty, environment: Self.bareEnvironment)
        defer { node.stop() }
        #expect(try await node.waitReady(), "the release transfer-server did not start from an empty folder")
        #expect(FileManager.default.fileExists(atPath: empty.appendingPathComponent("transfer.sqlite").path))

        // The schema's migrations ran: a device logs in and sets up a transfer.
        let device = Device()
        let (status, session) = try node.post("/v1/devices/login", #"{"deviceId":"\#(device.id)","deviceSecret":"\#(device.secret)"}"#)
        #expect(status == 201, "\(session)")
        let token = try #require(session["accessToken"] as? String, "\(session)")
        // The common-password list is there: a common password is refused for what it is.
        let (weak, weakBody) = try Curl.call([
            "-X", "PUT", "-H", "Content-Type: application/json", "-H", "Authorization: Bearer \(token)",
            "-H", "X-Device-Secret: \(try #require(Keychain.secret(forToken: token)))",
            "-d", #"{"email":"mia@example.com","temporaryPassword":"sunshine"}"#, "\(node.base)/v1/me/transfer",
        ])
        #expect(weak == 400 && weakBody.contains("weak_password") && weakBody.contains("common"), "\(weak) \(weakBody)")
        #expect(try node.put("/v1/me/transfer", #"{"email":"mia@example.com","temporaryPassword":"plum-harbor-71-sail"}"#, token: token) == 201)

        // The OpenAPI document it serves is the repository's, byte for byte.
        let (docStatus, document) = try Curl.call(["\(node.base)/openapi.yaml"])
        #expect(docStatus == 200)
        #expect(Array(document.utf8) == (try EmbeddedFilesTests.file("Sources/TransferHTTP/Resources/openapi.yaml")))

        // The CLI, also alone, reads the same default database while the server runs.
        let stats = try Executable.run("transfer", ["stats", "--json"], environment: Self.bareEnvironment, executable: cli, folder: empty)
        #expect(stats.code == 0, "\(stats)")
        #expect(try stats.json["accounts"] as? Int == 1, "\(stats)")
        #expect(try stats.json["transfersPending"] as? Int == 1, "\(stats)")

        node.process.terminate()
        node.process.waitUntilExit()
        let log = try node.log()
        #expect(node.process.terminationStatus == 0, "\(log.suffix(1500))")
    }
}
