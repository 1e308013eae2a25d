import ArgumentParser
import Foundation
import TransferCore
import TransferSettings

/// `transfer keys list|rotate`: the keys that sign access tokens. Never prints a private key.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List and rotate the keys that sign access tokens.",
        subcommands: [List.self, Rotate.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The signing keys: kid, created, current or retired, and when a retired one leaves the JWKS.")

        @OptionGroup var common: CommonOptions
        @Option(
            name: .customLong(ServerFlags.accessTokenTTL.name),
            help: .server(ServerFlags.accessTokenTTL, "decides when a retired key leaves the JWKS"))
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
                if common.json {
                    struct Key: Encodable {
                        var kid: String; var algorithm: String; var createdAt: String; var state: String
                        var retiredAt: String?; var leavesJWKSAt: String?
                    }
                    struct Out: Encodable { var keys: [Key] }
                    return try JSON.print(Out(keys: keys.map {
                        Key(kid: $0.kid, algorithm: $0.algorithm, createdAt: $0.createdAt.rfc3339, state: state($0),
                            retiredAt: $0.retiredAt?.rfc3339, leavesJWKSAt: $0.leavesJWKS(accessTTL: ttl)?.rfc3339)
                    }))
                }
                guard !keys.isEmpty else { return print("No signing keys yet: the server makes the first one when it starts.") }
                print(Text.table(["KID", "CREATED", "STATE", "LEAVES THE JWKS"], keys.map { key in
                    [key.kid, Text.time(key.createdAt, now: now), state(key),
                     key.leavesJWKS(accessTTL: ttl).map { Text.time($0, now: now) } ?? "-"]
                }))
            }
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new signing key current on every node; the old one stays in the JWKS until the tokens it signed have expired.")

        @OptionGroup var common: CommonOptions
        @OptionGroup var change: ChangeOptions

        func run() async throws {
            try await common.withStore { store in
                let before = SigningKeys.current(try await store.signingKeys())
                let service = try await store.service()
                let result = try await service.rotateSigningKey(replacing: before?.kid, by: change.initiator, reason: change.trimmedReason)
                let (retired, current, rotated): (String?, String, Bool)
                switch result {
                case .rotated(let old, let new): (retired, current, rotated) = (old?.kid, new.kid, true)
                case .alreadyRotated(let now): (retired, current, rotated) = (before?.kid, now.kid, false)
                }
                if common.json {
                    struct Out: Encodable { var current: String; var retired: String?; var rotated: Bool }
                    return try JSON.print(Out(current: current, retired: retired, rotated: rotated))
                }
                print(rotated
                    ? "Key \(current) signs access tokens from now on (every node within seconds); \(retired ?? "no key") is retired and stays in the JWKS until the tokens it signed have expired."
                    : "Another rotation made \(current) current a moment ago; nothing more changed.")
            }
        }
    }
}
