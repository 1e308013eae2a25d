import Foundation

/// A `postgres://` URL in libpq's form, several hosts included:
/// `postgres://user:pass@host1:5432,host2:5432/db?target_session_attrs=read-write`.
///
/// Parsed once at start (the server's and the CLI's `--database`), so a bad URL is refused in
/// one line before anything runs. PostgresNIO takes one host; the store walks these in order
/// for each new connection, as libpq does (`PostgresStore`'s connection factory).
public struct PostgresURL: Sendable, Equatable {
    public struct Host: Sendable, Equatable, CustomStringConvertible {
        public var name: String
        public var port: Int
        public init(_ name: String, _ port: Int = 5432) {
            self.name = name
            self.port = port
        }
        /// `name:port`, an IPv6 address in brackets.
        public var description: String { name.contains(":") ? "[\(name)]:\(port)" : "\(name):\(port)" }
    }

    /// Which host a new connection keeps (libpq's `target_session_attrs`). The service writes,
    /// so libpq's `read-only`, `standby` and `prefer-standby` are refused.
    public enum TargetSessionAttributes: String, Sendable, CaseIterable {
        /// The first host that accepts the connection.
        case any
        /// The first where `SHOW transaction_read_only` is `off`.
        case readWrite = "read-write"
        /// The first where `pg_is_in_recovery()` is false (a primary, even one set read-only).
        case primary
    }

    /// libpq's `sslmode`. `require`, `verify-ca` and `verify-full` encrypt and verify the server's
    /// certificate chain and name against the system's roots (PostgresNIO's default TLS
    /// configuration); `disable`, `allow` and `prefer` connect without TLS, as before.
    public enum SSLMode: String, Sendable, CaseIterable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
        public var usesTLS: Bool { [.require, .verifyCA, .verifyFull].contains(self) }
    }

    public var hosts: [Host]
    public var user: String
    public var password: String?
    /// nil: the server's default (the user's name).
    public var database: String?
    public var targetSessionAttributes: TargetSessionAttributes = .any
    public var sslMode: SSLMode = .disable
    /// libpq's `connect_timeout`, per host tried: TCP connect, TLS and authentication.
    public var connectTimeout: Duration = Self.defaultConnectTimeout
    public var applicationName: String?

    /// 5 s, as the single-host client had; libpq waits forever by default, which a walk over
    /// several hosts cannot.
    public static let defaultConnectTimeout = Duration.seconds(5)
    /// The query parameters read; any other is refused (libpq refuses unknown ones too).
    public static let parameters = ["target_session_attrs", "sslmode", "connect_timeout", "application_name"]
    static let example = "postgres://user:pass@host1:5432,host2:5432/db?target_session_attrs=read-write"

    public init(hosts: [Host], user: String, password: String? = nil, database: String? = nil) {
        self.hosts = hosts
        self.user = user
        self.password = password
        self.database = database
    }

    /// Parses `text`; the error is one sentence naming what is wrong, the password redacted.
    public init(parsing text: String) throws(InvalidDatabaseURL) {
        func refuse(_ why: String) -> InvalidDatabaseURL {
            InvalidDatabaseURL(description: "'\(DatabaseLocation.redacted(text))' \(why)")
        }
        guard let scheme = ["postgres://", "postgresql://"].first(where: { text.hasPrefix($0) }) else {
            throw refuse("is not \(Self.example)")
        }
        var rest = Substring(text.dropFirst(scheme.count))
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }

        // user[:password]@ — up to the last "@" before the path or query (a password's own "@"
        // may stay unencoded; its "/" and "?" must be percent-encoded, as in any URL).
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        let afterAuthority = rest[authorityEnd...]
        guard let at = authority.lastIndex(of: "@") else { throw refuse("names no user; write \(Self.example)") }
        let userInfo = authority[..<at]
        authority = authority[authority.index(after: at)...]
        let userPart: Substring, passwordPart: Substring?
        if let colon = userInfo.firstIndex(of: ":") {
            userPart = userInfo[..<colon]
            passwordPart = userInfo[userInfo.index(after: colon)...]
        } else {
            userPart = userInfo
            passwordPart = nil
        }
        guard let user = userPart.removingPercentEncoding, !user.isEmpty else { throw refuse("names no user; write \(Self.example)") }
        let password: String?
        if let passwordPart {
            guard let decoded = passwordPart.removingPercentEncoding else { throw refuse("has a password with a broken %-escape") }
            password = decoded
        } else {
            password = nil
        }

        // host[:port],host[:port],… (an IPv6 address in brackets).
        var hosts: [Host] = []
        for entry in authority.split(separator: ",", omittingEmptySubsequences: false) {
            hosts.append(try Self.host(entry, refuse))
        }

        // /database?parameters
        var path = afterAuthority
        var query: Substring = ""
        if let question = path.firstIndex(of: "?") {
            query = path[path.index(after: question)...]
            path = path[..<question]
        }
        var database: String?
        if path.hasPrefix("/") {
            guard let name = path.dropFirst().removingPercentEncoding else { throw refuse("has a database name with a broken %-escape") }
            database = name.isEmpty ? nil : name
        }
        self.init(hosts: hosts, user: user, password: password, database: database)

        for pair in query.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = parts[0].removingPercentEncoding,
                let value = (parts.count > 1 ? parts[1] : "").replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            else { throw refuse("has a parameter with a broken %-escape") }
            switch name {
            case "target_session_attrs":
                guard let attributes = TargetSessionAttributes(rawValue: value) else {
                    if ["read-only", "standby", "prefer-standby"].contains(value) {
                        throw refuse("asks for target_session_attrs=\(value), but the service writes: use read-write, primary or any")
                    }
                    throw refuse("has target_session_attrs=\(value); it is any, read-write or primary")
                }
                targetSessionAttributes = attributes
            case "sslmode":
                guard let mode = SSLMode(rawValue: value) else {
                    throw refuse("has sslmode=\(value); it is one of \(SSLMode.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                sslMode = mode
            case "connect_timeout":
                guard let seconds = Int(value), (1...3600).contains(seconds) else {
                    throw refuse("has connect_timeout=\(value); it is a whole number of seconds, 1 to 3600")
                }
                // libpq treats 1 as 2: one second is too short for a connection over a real network.
                connectTimeout = .seconds(max(seconds, 2))
            case "application_name":
                applicationName = value
            case "host", "hostaddr", "port":
                throw refuse("has \(name)= among its parameters; list the hosts in the URL itself: \(Self.example)")
            default:
                throw refuse("has the parameter \(name), which this service does not read (it reads \(Self.parameters.joined(separator: ", ")))")
            }
        }
    }

    private static func host(_ entry: Substring, _ refuse: (String) -> InvalidDatabaseURL) throws(InvalidDatabaseURL) -> Host {
        var name: Substring, portText: Substring?
        if entry.hasPrefix("[") {
            guard let close = entry.firstIndex(of: "]") else { throw refuse("has an IPv6 host without its closing ]") }
            name = entry[entry.index(after: entry.startIndex)..<close]
            let after = entry[entry.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw refuse("has '\(entry)', which is not [address]:port") }
                portText = after.dropFirst()
            }
        } else if let colon = entry.firstIndex(of: ":") {
            name = entry[..<colon]
            portText = entry[entry.index(after: colon)...]
        } else {
            name = entry
        }
        guard !name.isEmpty else {
            throw refuse(entry.isEmpty ? "lists an empty host; write host:port,host:port" : "has a port without a host ('\(entry)')")
        }
        guard let decoded = name.removingPercentEncoding, !decoded.hasPrefix("/") else {
            throw refuse("names a host the service cannot reach ('\(name)'); give a host name or an address (no Unix socket)")
        }
        guard decoded.allSatisfy({ !$0.isWhitespace }) else { throw refuse("has a host with a space in it ('\(decoded)')") }
        var port = 5432
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else {
                throw refuse("has the port '\(portText)' for \(decoded); a port is 1 to 65535")
            }
            port = number
        }
        return Host(decoded, port)
    }
}
