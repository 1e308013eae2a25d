import ArgumentParser
import Foundation
import TransferArgon2
import TransferCore
import Logging
import TransferSettings
import TransferStorage

/// Options every command takes.
struct CommonOptions: ParsableArguments {
    @Option(server: ServerFlags.database)
    var database: String?

    @Option(server: ServerFlags.databasePooling)
    var databasePooling: String?

    @Flag(help: "Print machine-readable JSON instead of text.")
    var json = false

    /// Runs `body` on the store the server uses. A missing SQLite file is an error, never a
    /// new empty database; a PostgreSQL that does not answer within 10 s is unreachable.
    func withStore<T: Sendable>(_ body: @Sendable (any SupportStore) async throws -> T) async throws -> T {
        let location = try ServerFlags.database.read(flag: database)
        let pooling = try ServerFlags.databasePooling.read(flag: databasePooling)
        let text = location.argument
        var quiet = Logger(label: "transfer")
        quiet.logLevel = .critical
        do {
            // A support command may read a large table: its statements get 30 s, not a request's bound.
            return try await Storage.withStore(
                location, poolSize: 2, pooling: pooling, statementTimeout: .seconds(30), logger: quiet, mustExist: true, migrate: false
            ) { store in
                do {
                    try await Storage.withTimeout(.seconds(10)) { try await store.ping() }
                } catch {
                    throw Failure.unreachable("the database at \(DatabaseLocation.redacted(text)) does not answer.")
                }
                return try await body(store)
            }
        } catch let error as Storage.OpenError {
            switch error.reason {
            case .invalidURL: throw Failure.usage("--database: \(error.description)")
            case .missingFile: throw Failure.unreachable("\(error.description); pass --database sqlite:PATH of the server's file.")
            case .cannotOpen: throw Failure.unreachable("\(error.description).")
            }
        }
    }
}

extension CommonOptions {
    /// Prints `value` as JSON with `--json`, else `text`.
    func output(json value: some Encodable, text: @autoclosure () -> String) throws {
        if json { try JSON.print(value) } else { print(text()) }
    }
}

/// A command that runs on the store the servers use: `run()` opens it (`CommonOptions.withStore`)
/// and hands it to `run(_:)`. A command that reads its own flags first, so that a usage error
/// never waits for the database, writes `run()` itself.
protocol StoreCommand: AsyncParsableCommand, Sendable {
    var common: CommonOptions { get }
    func run(_ store: any SupportStore) async throws
}

extension StoreCommand {
    func run() async throws {
        try await common.withStore { store in try await run(store) }
    }
}

/// A command on one ACCOUNT: it is resolved (`SupportStore.resolve`) before `run(_:account:)`.
protocol AccountCommand: StoreCommand {
    var account: String { get }
    func run(_ store: any SupportStore, account match: AccountMatch) async throws
}

extension AccountCommand {
    func run(_ store: any SupportStore) async throws {
        try await run(store, account: try await store.resolve(account))
    }
}

/// Options of commands that change something.
struct ChangeOptions: ParsableArguments {
    @Option(help: "Why this is done (the ticket, what the user proved); kept in the audit trail.")
    var reason: String

    @Option(name: .customLong("operator"), help: "Who does it (default: your login name).")
    var operatorName: String?

    func validate() throws {
        guard !reason.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw ValidationError("--reason must say why.")
        }
    }

    /// `--operator`, else the login name. Under `sudo -u transfer` (how docs/support.md runs the CLI
    /// as the service's user) `USER` names the service's user; `SUDO_USER` names the person.
    var initiator: Initiator {
        let environment = ProcessInfo.processInfo.environment
        let name = operatorName ?? [environment["SUDO_USER"], environment["USER"], environment["LOGNAME"]]
            .compactMap { $0 }.first { !$0.isEmpty }
            ?? getpwuid(getuid()).map { String(cString: $0.pointee.pw_name) } ?? "unknown"
        return .support(operator: name)
    }

    var trimmedReason: String { reason.trimmingCharacters(in: .whitespacesAndNewlines) }
}

extension ArgumentHelp {
    /// What an ACCOUNT argument may be (CLI.md), as every command's help and the not-found error say it.
    static let accountForms = "accountId, userName, deviceId, transfer email or Apple ID email"
    static let account = ArgumentHelp("\(accountForms).")
}

extension SupportStore {
    /// Resolves ACCOUNT to exactly one account, or fails with the contract's exit code.
    func resolve(_ query: String) async throws -> AccountMatch {
        let matches = try await findAccounts(query)
        switch matches.count {
        case 0: throw Failure.notFound("no account matches '\(query)' (as \(ArgumentHelp.accountForms)).")
        case 1: return matches[0]
        default:
            let list = matches.map { "\($0.accountID) (userName \($0.userName), by \($0.matchedBy.words))" }.joined(separator: "; ")
            throw Failure.conflict("'\(query)' matches \(matches.count) accounts: \(list); use an accountId.")
        }
    }

    /// The service over this store, for the commands that change something; `policy` as the
    /// servers are configured where a command depends on it (`transfer issue`: the transfer's
    /// lifetime), and argon2id with the servers' parameters (`TRANSFER_ARGON2_*`).
    func service(policy: ServicePolicy = .standard) async throws -> TransferService {
        let parameters: Argon2Parameters
        do {
            parameters = try ServerFlags.argon2(SettingValues(environment: ProcessInfo.processInfo.environment))
        } catch {
            throw Failure.usage("\(error)")
        }
        let hasher = Argon2Hasher(parameters: parameters, workers: 1, queueDepth: 1)
        return try await TransferService(store: self, hasher: hasher, policy: policy)
    }
}

extension AccountMatch.Field {
    var words: String {
        switch self {
        case .accountId: "account id"
        case .userName: "user name"
        case .deviceId: "device id"
        case .email: "transfer email"
        case .appleEmail: "Apple ID email"
        }
    }
}

extension Setting {
    /// This server setting as the CLI reads it: `flag` when given, else the servers' variables
    /// (`TRANSFER_…`, or the secret's `TRANSFER_…_FILE`), else the servers' default.
    func read(flag: String?) throws -> Value {
        do {
            return try SettingValues(flags: flag.map { [name: $0] } ?? [:], environment: ProcessInfo.processInfo.environment).value(self)
        } catch {
            throw Failure.usage(error.description)
        }
    }
}

extension Option where Value == String? {
    /// A server flag the CLI takes too, under the server's name, with the server's help: its
    /// variable and default included; `here` says what it decides in this command. Read it with
    /// the setting's `read(flag:)`, which falls back to the variable as the servers do.
    init(server setting: some SettingDescription, _ here: String? = nil) {
        let why = here.map { " As the servers have it: it \($0)." } ?? ""
        self.init(name: .customLong(setting.name), help: ArgumentHelp(setting.fullHelp + why, valueName: setting.valueName))
    }
}
