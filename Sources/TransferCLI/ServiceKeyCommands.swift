import ArgumentParser
import Foundation
import TransferCore

/// `transfer service-key create|list|revoke`: the keys app backends call the service API with.
struct ServiceKey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "service-key",
        abstract: "Make, list and revoke the keys app backends call the service API with.",
        subcommands: [Create.self, List.self, Revoke.self])

    struct Create: StoreCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a service key for an app backend; it is printed once.",
            discussion: "Only its SHA-256 is kept: a lost key cannot be shown again; revoke it and make another.")

        @OptionGroup var common: CommonOptions
        @OptionGroup var change: ChangeOptions
        @Argument(help: "A name for the key: 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-' (say which backend holds it).") var name: String

        func validate() throws {
            guard ServiceKeys.isValidName(name) else {
                throw ValidationError("NAME must be 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-'.")
            }
        }

        func run(_ store: any SupportStore) async throws {
            let service = try await store.service()
            guard let made = try await service.createServiceKey(name: name, by: change.initiator, reason: change.trimmedReason) else {
                throw Failure.conflict("a service key named '\(name)' exists already (revoked keys keep their names); pick another name.")
            }
            struct Out: Encodable { var name: String; var key: String; var createdAt: String }
            try common.output(
                json: Out(name: made.record.name, key: made.key, createdAt: made.record.createdAt.rfc3339),
                text: Text.section("Made service key '\(made.record.name)'", [
                    ("key", made.key + "   (shown once)"),
                    ("use", "Authorization: Bearer <key> on /v1/service/…"),
                ]))
        }
    }

    struct List: StoreCommand {
        static let configuration = CommandConfiguration(abstract: "List the service keys: names, created, last used, revoked; never the keys.")

        @OptionGroup var common: CommonOptions

        func run(_ store: any SupportStore) async throws {
            let keys = try await store.serviceKeys()
            let now = SystemWallClock().now()
            struct Key: Encodable {
                var name: String; var createdAt: String; var createdBy: String; var lastUsedAt: String?
                var revokedAt: String?; var revokedBy: String?
            }
            struct Out: Encodable { var keys: [Key] }
            try common.output(
                json: Out(keys: keys.map {
                    Key(name: $0.name, createdAt: $0.createdAt.rfc3339, createdBy: $0.createdBy, lastUsedAt: $0.lastUsedAt?.rfc3339,
                        revokedAt: $0.revokedAt?.rfc3339, revokedBy: $0.revokedBy)
                }),
                text: keys.isEmpty
                    ? "No service keys; make one with `transfer service-key create NAME --reason …`."
                    : Text.table(["NAME", "CREATED", "BY", "LAST USED", "REVOKED"], keys.map { key in
                        [key.name, Text.time(key.createdAt, now: now), key.createdBy, key.lastUsedAt.map { Text.relative($0, now: now) } ?? "never",
                         key.revokedAt.map { "\(Text.relative($0, now: now)) by \(key.revokedBy ?? "unknown")" } ?? "no"]
                    }))
        }
    }

    struct Revoke: StoreCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a service key: it stops working at once, on every node.")

        @OptionGroup var common: CommonOptions
        @OptionGroup var change: ChangeOptions
        @Argument(help: "The key's name (see `transfer service-key list`).") var name: String

        func run(_ store: any SupportStore) async throws {
            let service = try await store.service()
            guard let before = try await service.revokeServiceKey(name: name, by: change.initiator, reason: change.trimmedReason) else {
                throw Failure.notFound("no service key is named '\(name)' (see `transfer service-key list`).")
            }
            struct Out: Encodable { var name: String; var revoked: Bool; var alreadyRevokedAt: String? }
            try common.output(
                json: Out(name: name, revoked: true, alreadyRevokedAt: before.revokedAt?.rfc3339),
                text: before.revokedAt.map { "Service key '\(name)' was already revoked (\($0.rfc3339)); nothing changed." }
                    ?? "Revoked service key '\(name)': requests with it now answer 401 invalid_service_key.")
        }
    }
}
