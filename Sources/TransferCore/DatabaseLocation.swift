/// Where the data lives, as given by `--database` / `TRANSFER_DATABASE`.
public enum DatabaseLocation: Sendable, Equatable {
    case sqlite(path: String)
    case postgres(url: String)

    /// Where the server, the CLI and the benchmark look when neither `--database` nor
    /// `TRANSFER_DATABASE` is given.
    public static let `default` = DatabaseLocation.sqlite(path: "./transfer.sqlite")

    /// As written in `--database`.
    public var argument: String {
        switch self {
        case .sqlite(let path): "sqlite:\(path)"
        case .postgres(let url): url
        }
    }

    /// `sqlite:PATH` or `postgres://user:pass@host:5432,host2:5432/db?…` (`PostgresURL`, which
    /// checks it here, at start); the error is one sentence.
    public static func parse(_ text: String) throws(InvalidDatabaseURL) -> DatabaseLocation {
        if text.hasPrefix("sqlite:") {
            let path = String(text.dropFirst("sqlite:".count))
            guard !path.isEmpty else { throw InvalidDatabaseURL(description: "sqlite: needs a file path, like sqlite:./transfer.sqlite") }
            return .sqlite(path: path)
        }
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            _ = try PostgresURL(parsing: text)
            return .postgres(url: text)
        }
        throw InvalidDatabaseURL(description: "'\(redacted(text))' is neither sqlite:PATH nor postgres://user:pass@host:5432/db")
    }

    /// A database URL with any password replaced, for messages and logs.
    public static func redacted(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@"), let scheme = url.range(of: "://"),
            let colon = url[scheme.upperBound..<at].firstIndex(of: ":")
        else { return url }
        return String(url[..<url.index(after: colon)]) + "***" + String(url[at...])
    }
}

/// How PostgreSQL is reached (`--database-pooling`): directly or through a pooler in session
/// mode, where a connection is one server session (`session`); or through PgBouncer in
/// transaction pooling mode (`transaction`), where consecutive transactions of one connection
/// may run on different server sessions: no named prepared statement or session lock is then
/// relied on across transactions.
public enum DatabasePooling: String, Sendable, CaseIterable {
    case session, transaction
}

public struct InvalidDatabaseURL: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}
