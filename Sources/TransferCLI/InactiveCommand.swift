import ArgumentParser
import Foundation
import TransferCore
import TransferSettings

/// `transfer inactive`: what the pruner would erase as inactive, and what protection keeps; erases nothing.
struct Inactive: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Count the accounts the pruner would erase as inactive, and the protected ones; erases nothing.",
        discussion: """
            An account is inactive when every device it is or was on last logged in longer ago than \
            --inactive-account-ttl, and it has no pending transfer and no linked Apple ID. The pruner \
            erases those that the app backend has not protected, a batch at a time, in its next rounds.
            """)

    @OptionGroup var common: CommonOptions
    @Option(server: ServerFlags.inactiveAccountTTL, "decides which accounts are inactive")
    var inactiveAccountTTL: String?

    func run() async throws {
        guard let ttl = try ServerFlags.inactiveAccountTTL.read(flag: inactiveAccountTTL) else {
            throw Failure.usage(
                "inactive accounts are not erased: the servers have no --inactive-account-ttl; give it (or TRANSFER_INACTIVE_ACCOUNT_TTL) to count what it would erase.")
        }
        let policy = InactivityPolicy(ttl: ttl)
        try await common.withStore { store in
            let now = SystemWallClock().now()
            let before = policy.inactiveBefore(now)
            let counts = try await store.inactiveCounts(before: before, at: now)
            struct Out: Encodable {
                var inactiveAccountTTL: String
                var inactiveBefore: String
                var erasable: Int
                var protectedInactive: Int
                var protected: Int
            }
            try common.output(
                json: Out(
                    inactiveAccountTTL: ttl.flagText, inactiveBefore: before.rfc3339, erasable: counts.erasable,
                    protectedInactive: counts.protectedInactive, protected: counts.protected),
                text: Text.section("Inactive accounts (no login on any device since \(before.rfc3339), --inactive-account-ttl \(ttl.flagText))", [
                    ("to be erased", "\(counts.erasable) (by the pruner's next rounds; nothing is erased now)"),
                    ("kept as protected", "\(counts.protectedInactive)"),
                    ("protected in all", "\(counts.protected)"),
                ]))
        }
    }
}
