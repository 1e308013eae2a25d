import ArgumentParser
import Foundation
import TransferCore
import TransferSettings

/// `transfer keys list|rotate|rotate-kek`: the keys that sign access tokens, and the key that
/// encrypts them. Never prints a private key or a key-encryption key (only its id).
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List and rotate the keys that sign access tokens, and the key that encrypts them.",
        subcommands: [List.self, Rotate.self, RotateKEK.self])

    /// `--key-encryption-key-file`, as the servers take it: the key the signing keys are sealed under now.
    struct KEKOptions: ParsableArguments {
        @Option(server: ServerFlags.keyEncryptionKeyFile, "opens the signing keys as they are encrypted now")
        var keyEncryptionKeyFile: String?

        func read() throws -> KeyEncryptionKey? { try ServerFlags.keyEncryptionKeyFile.read(flag: keyEncryptionKeyFile) }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The signing keys: kid, created, current or retired, and when a retired one leaves the JWKS.")

        @OptionGroup var common: CommonOptions
        @Option(server: ServerFlags.accessTokenTTL, "decides when a retired key leaves the JWKS")
        var accessTokenTTL: String?

        func run() async throws {
            let ttl = try ServerFlags.accessTokenTTL.read(flag: accessTokenTTL)
            try await common.withStore { store in
                let keys = try await store.signingKeys()
                let now = SystemWallClock().now()
                func state(_ key: SigningKeyRecord) -> String {
                    guard key.retiredAt != nil else { return "current" }
                    return key.isPublished(accessTTL: ttl, now: now) ? "retired" : "unpublished"
                }
                struct Key: Encodable {
                    var kid: String; var algorithm: String; var createdAt: String; var state: String
                    var retiredAt: String?; var leavesJWKSAt: String?
                    /// The id of the key-encryption key it is sealed under; null when it is stored unencrypted.
                    var encryptedWith: String?
                }
                struct Out: Encodable { var keys: [Key] }
                try common.output(
                    json: Out(keys: keys.map {
                        Key(kid: $0.kid, algorithm: $0.algorithm, createdAt: $0.createdAt.rfc3339, state: state($0),
                            retiredAt: $0.retiredAt?.rfc3339, leavesJWKSAt: $0.leavesJWKS(accessTTL: ttl)?.rfc3339,
                            encryptedWith: $0.stored.kekID)
                    }),
                    text: keys.isEmpty
                        ? "No signing keys yet: the server makes the first one when it starts."
                        : Text.table(["KID", "CREATED", "STATE", "LEAVES THE JWKS", "ENCRYPTED WITH"], keys.map { key in
                            [key.kid, Text.time(key.createdAt, now: now), state(key),
                             key.leavesJWKS(accessTTL: ttl).map { Text.time($0, now: now) } ?? "-",
                             key.stored.kekID.map { "key-encryption key \($0)" } ?? "nothing (stored unencrypted)"]
                        }))
            }
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new signing key current on every node; the old one stays in the JWKS until the tokens it signed have expired.")

        @OptionGroup var common: CommonOptions
        @OptionGroup var change: ChangeOptions
        @OptionGroup var kek: KEKOptions

        func run() async throws {
            let kek = try kek.read()
            try await common.withStore { store in
                let before = SigningKeys.current(try await store.signingKeys())
                let service = try await store.service()
                let result = try await service.rotateSigningKey(replacing: before?.kid, kek: kek, by: change.initiator, reason: change.trimmedReason)
                let (retired, current, rotated): (String?, String, Bool)
                switch result {
                case .rotated(let old, let new): (retired, current, rotated) = (old?.kid, new.kid, true)
                case .alreadyRotated(let now): (retired, current, rotated) = (before?.kid, now.kid, false)
                case .refused(let problem): throw Failure.usage("no key was made: \(problem.advice).")
                }
                struct Out: Encodable { var current: String; var retired: String?; var rotated: Bool }
                try common.output(
                    json: Out(current: current, retired: retired, rotated: rotated),
                    text: rotated
                        ? "Key \(current) signs access tokens from now on (every node within seconds); \(retired ?? "no key") is retired and stays in the JWKS until the tokens it signed have expired."
                        : "Another rotation made \(current) current a moment ago; nothing more changed.")
            }
        }
    }

    struct RotateKEK: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-kek",
            abstract: "Encrypt every signing key with the key-encryption key in a new file, in one transaction.",
            discussion: """
                The keys are opened with --key-encryption-key-file (or TRANSFER_KEY_ENCRYPTION_KEY_FILE, as the servers \
                have it; not needed while they are stored unencrypted) and encrypted with the key in --new-key-file. \
                Then restart every node with --key-encryption-key-file naming the new file; until then the nodes \
                keep signing with the keys they hold but cannot take up a rotation. The old file can then be destroyed.
                """)

        @OptionGroup var common: CommonOptions
        @OptionGroup var change: ChangeOptions
        @OptionGroup var kek: KEKOptions
        @Option(
            name: .customLong("new-key-file"),
            help: ArgumentHelp("PATH of the new key-encryption key: 32 random bytes in base64 (openssl rand -base64 32).", valueName: "path"))
        var newKeyFile: String

        func run() async throws {
            let old = try kek.read()
            // Read as the servers read their file, the error naming --new-key-file.
            let given: KeyEncryptionKey?
            do { given = try ServerFlags.keyEncryptionKeyFile.parse(newKeyFile, source: "--new-key-file") } catch { throw Failure.usage(error.description) }
            guard let new = given else { throw Failure.usage("--new-key-file: no key in '\(newKeyFile)'") }
            try await common.withStore { store in
                let service = try await store.service()
                switch try await service.reencryptSigningKeys(new: new, old: old, by: change.initiator, reason: change.trimmedReason) {
                case .refused(let problem):
                    throw Failure.usage("nothing was changed: \(problem.advice).")
                case .reencrypted(let count, let total):
                    struct Out: Encodable { var keyEncryptionKey: String; var reencrypted: Int; var keys: Int }
                    try common.output(
                        json: Out(keyEncryptionKey: new.id, reencrypted: count, keys: total),
                        text: count == 0
                            ? "All \(total) signing keys were encrypted with key-encryption key \(new.id) already; nothing changed."
                            : "Encrypted \(count) of \(total) signing keys with key-encryption key \(new.id). Restart every node with --key-encryption-key-file naming that file; the old file can then be destroyed.")
                }
            }
        }
    }
}
