import ArgumentParser
import Foundation
import TransferCore

/// `transfer delete-account`: erases an account as `DELETE /v1/me` does.
struct DeleteAccount: AccountCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-account",
        abstract: "Delete an account for good, as the app's DELETE /v1/me does.",
        discussion: """
            The account leaves its device (retired if nothing is left on it); its sessions, transfers, \
            Apple link and push routing go; the emails and addresses recorded about it are erased. \
            Its phone then hears 410 account_deleted. This cannot be undone.
            """)

    @OptionGroup var common: CommonOptions
    @OptionGroup var change: ChangeOptions
    @Argument(help: .account) var account: String

    func run(_ store: any SupportStore, account match: AccountMatch) async throws {
        let service = try await store.service()
        let deleted: Bool
        do {
            try await service.deleteAccount(accountID: match.accountID, by: change.initiator, reason: change.trimmedReason)
            deleted = true
        } catch TransferError.accountNotFound {
            throw Failure.notFound("no account \(match.accountID).")
        } catch TransferError.accountDeleted {
            deleted = false
        }
        struct Out: Encodable { var accountId: String; var state: String }
        try common.output(
            json: Out(accountId: match.accountID, state: deleted ? "deleted" : "already deleted"),
            text: deleted
                ? "Deleted account \(match.accountID): its devices, sessions, transfers and Apple link are gone; its phone hears 410 account_deleted."
                : "Account \(match.accountID) was already deleted.")
    }
}

/// `transfer webhooks [retry]`: what waits in the outbox for the app backend (and for Apple).
struct Webhooks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List webhook deliveries that are pending or failed, and send failed ones again.",
        subcommands: [List.self, Retry.self], defaultSubcommand: List.self)

    struct List: StoreCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deliveries pending and failed, oldest first, with attempts and the last error (never their bodies).")

        @OptionGroup var common: CommonOptions

        func run(_ store: any SupportStore) async throws {
            let messages = try await store.outbox(limit: 1000)
            let now = SystemWallClock().now()
            if common.json {
                struct Message: Encodable {
                    var id: String; var kind: String; var type: String; var accountId: String; var createdAt: String
                    var state: String; var attempts: Int; var nextAttemptAt: String?; var lastError: String?
                }
                struct Out: Encodable { var deliveries: [Message] }
                return try JSON.print(Out(deliveries: messages.map {
                    Message(
                        id: $0.id, kind: $0.kind.rawValue, type: $0.type, accountId: $0.accountID, createdAt: $0.createdAt.rfc3339,
                        state: $0.state.rawValue, attempts: $0.attempts, nextAttemptAt: $0.state == .pending ? $0.nextAttemptAt.rfc3339 : nil,
                        lastError: $0.lastError)
                }))
            }
            guard !messages.isEmpty else { return print("No deliveries pending or failed.") }
            for m in messages {
                var rows = [
                    ("type", m.kind == .webhook ? m.type : "\(m.type) (to Apple)"), ("account", m.accountID),
                    ("created", Text.time(m.createdAt, now: now)), ("attempts", String(m.attempts)),
                ]
                if m.state == .pending { rows.append(("next attempt", Text.time(m.nextAttemptAt, now: now))) }
                if let error = m.lastError { rows.append(("last error", error)) }
                print(Text.section("\(m.id)  \(m.state.rawValue)", rows))
            }
        }
    }

    struct Retry: StoreCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send failed deliveries again (pending, due now, with three more days of retries).")

        @OptionGroup var common: CommonOptions
        @OptionGroup var change: ChangeOptions
        @Flag(help: "Every failed delivery.") var all = false
        @Argument(help: "The delivery's id (its webhook-id).") var eventId: String?

        func validate() throws {
            guard all != (eventId != nil) else { throw ValidationError("Name one EVENT_ID, or pass --all.") }
        }

        func run(_ store: any SupportStore) async throws {
            let retried = try await store.execute(RetryOutboxCommand(
                id: eventId?.lowercased(), now: SystemWallClock().now(), by: change.initiator, reason: change.trimmedReason)
            ).get()
            if retried.isEmpty, let eventId { throw Failure.notFound("no failed delivery \(eventId) (pending ones are being retried already).") }
            struct Out: Encodable { var retried: [String] }
            try common.output(
                json: Out(retried: retried.map(\.id)),
                text: retried.isEmpty
                    ? "No failed deliveries."
                    : "Sending \(retried.count) failed \(retried.count == 1 ? "delivery" : "deliveries") again: \(retried.map(\.id).joined(separator: ", ")).")
        }
    }
}
