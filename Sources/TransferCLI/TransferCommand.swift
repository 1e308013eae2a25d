import ArgumentParser
import Foundation
import TransferCore

/// `transfer`: the support-staff command line. Exit codes: 0 done, 1 not found,
/// 2 usage error, 3 ambiguous or conflicting, 4 database unreachable.
@main
struct TransferCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfer",
        abstract: "Look into and fix device transfers for users who write in.",
        discussion: """
            ACCOUNT may be an accountId, a userName, any deviceId ever bound to the account, or the \
            email of a pending or past transfer. Commands that change something need --reason and \
            record it with the operator in the account's audit trail.
            Exit codes: 0 done, 1 not found, 2 usage error, 3 ambiguous or conflicting, 4 database unreachable.
            Every command takes --database URL (the servers' database; default: TRANSFER_DATABASE, else \
            sqlite:transfer.sqlite) and --json, before or after the command: \
            transfer --database URL account ACCOUNT, or transfer account ACCOUNT --database URL.
            """,
        subcommands: [
            Account.self, History.self, Cancel.self, Unlock.self, Issue.self, RevokeDevice.self, Stats.self, ServiceKey.self,
            DeleteAccount.self, Webhooks.self, Keys.self, Inactive.self,
        ])

    /// Runs the command and turns every failure into one sentence and the contract's exit code.
    static func main() async {
        do {
            var command = try parseAsRoot(commandFirst(Array(CommandLine.arguments.dropFirst())))
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let failure as Failure {
            FileHandle.standardError.write(Data("transfer: \(failure.message)\n".utf8))
            Foundation.exit(failure.code)
        } catch TransferError.unavailable(let outcomeUnknown) {
            let what = outcomeUnknown ? "the connection was lost while saving; check with `transfer account` before running it again" : "nothing was changed"
            FileHandle.standardError.write(Data("transfer: the database stopped answering (\(what)).\n".utf8))
            Foundation.exit(Failure.unreachable("").code)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Foundation.exit(0)
            }
            let sentence = message(for: error).split(separator: "\n").first.map(String.init) ?? "invalid arguments"
            FileHandle.standardError.write(Data("transfer: \(sentence) (see transfer --help).\n".utf8))
            Foundation.exit(2)
        }
    }
}

/// The options every command takes (`CommonOptions`) may stand before the command, as support
/// staff type them (`transfer --database URL account X`, as with `psql` or `git -C`): they are
/// moved behind the command's own words (before a `--`), where the command reads them. Anything
/// else before the command (`--help`) is left where it is.
func commandFirst(_ arguments: [String]) -> [String] {
    var leading: [String] = []
    var rest = arguments[...]
    while let first = rest.first {
        if first == "--json" || first.hasPrefix("--database=") {
            leading.append(first)
            rest.removeFirst()
        } else if first == "--database", rest.count >= 2 {
            leading += rest.prefix(2)
            rest.removeFirst(2)
        } else {
            break
        }
    }
    guard !leading.isEmpty, let command = rest.first, !command.hasPrefix("-") else { return arguments }
    var moved = Array(rest)
    moved.insert(contentsOf: leading, at: moved.firstIndex(of: "--") ?? moved.endIndex)
    return moved
}

/// A failure the user can act on: one sentence and an exit code.
struct Failure: Error {
    let code: Int32
    let message: String

    static func notFound(_ message: String) -> Failure { Failure(code: 1, message: message) }
    static func usage(_ message: String) -> Failure { Failure(code: 2, message: message) }
    static func conflict(_ message: String) -> Failure { Failure(code: 3, message: message) }
    static func unreachable(_ message: String) -> Failure { Failure(code: 4, message: message) }

    /// `cancel` and `unlock` found nothing to act on (none pending, or it ended meanwhile).
    static func noPendingTransfer(_ accountID: String) -> Failure { notFound("account \(accountID) has no pending transfer.") }
}
