import Foundation
import Testing
import TransferCore
import TransferHTTP
import TransferSettings
@testable import TransferTestSupport

/// Contract v1.3: `--database` takes libpq's multi-host form; a bad one is refused at start,
/// by the server and by the CLI, in one line that says what is wrong.
@Suite("Database URL")
struct DatabaseURLTests {
    typealias Host = PostgresURL.Host

    @Test("libpq's multi-host form: hosts in order, default ports, target_session_attrs, sslmode, connect_timeout, escapes")
    func forms() throws {
        let two = try PostgresURL(parsing: "postgres://app:s3cret@db1.internal:5433,db2.internal/transfer?target_session_attrs=read-write")
        #expect(two.hosts == [Host("db1.internal", 5433), Host("db2.internal", 5432)])
        #expect(two.user == "app" && two.password == "s3cret" && two.database == "transfer")
        #expect(two.targetSessionAttributes == .readWrite)
        #expect(two.sslMode == .disable && !two.sslMode.usesTLS)

        let one = try PostgresURL(parsing: "postgresql://transfer@127.0.0.1:6432/postgres")
        #expect(one.hosts == [Host("127.0.0.1", 6432)])
        #expect(one.password == nil)
        #expect(one.targetSessionAttributes == .any, "any is libpq's default")
        #expect(one.connectTimeout == PostgresURL.defaultConnectTimeout)

        let v6 = try PostgresURL(parsing: "postgres://u:p%40ss%2Fw@[::1]:5432,[fd00::2]/d%20b?target_session_attrs=primary&sslmode=require&connect_timeout=1&application_name=transfer-1")
        #expect(v6.hosts == [Host("::1", 5432), Host("fd00::2", 5432)])
        #expect(v6.password == "p@ss/w", "percent-escapes are decoded")
        #expect(v6.database == "d b")
        #expect(v6.targetSessionAttributes == .primary)
        #expect(v6.sslMode.usesTLS)
        #expect(v6.connectTimeout == .seconds(2), "libpq treats connect_timeout=1 as 2")
        #expect(v6.applicationName == "transfer-1")
        #expect(v6.hosts[0].description == "[::1]:5432")

        // A password's own "@" may stay unescaped: the last one before the hosts ends it.
        #expect(try PostgresURL(parsing: "postgres://u:p@ss@h1,h2/db").password == "p@ss")
        #expect(try PostgresURL(parsing: "postgres://u@h1:1,h2:2,h3:3").hosts.map(\.port) == [1, 2, 3])
        #expect(try PostgresURL(parsing: "postgres://u@h1").database == nil)
        #expect(try DatabaseLocation.parse("postgres://u:p@h1:5432,h2:5432/db?target_session_attrs=read-write")
            == .postgres(url: "postgres://u:p@h1:5432,h2:5432/db?target_session_attrs=read-write"))
    }

    /// The one-line refusals, the password never repeated.
    static let refused: [(url: String, says: String)] = [
        ("postgres://h1:5432,h2:5432/db", "names no user"),
        ("postgres://u:pw@h1:5432,,h2/db", "lists an empty host"),
        ("postgres://u:pw@h1:5432,/db", "lists an empty host"),
        ("postgres://u:pw@:5432/db", "has a port without a host"),
        ("postgres://u:pw@h1:5432,h2:99999/db", "has the port '99999' for h2; a port is 1 to 65535"),
        ("postgres://u:pw@h1:port/db", "has the port 'port' for h1"),
        ("postgres://u:pw@[::1/db", "IPv6 host without its closing ]"),
        ("postgres://u:pw@h1,h2/db?target_session_attrs=read-only", "the service writes: use read-write, primary or any"),
        ("postgres://u:pw@h1,h2/db?target_session_attrs=standby", "the service writes"),
        ("postgres://u:pw@h1,h2/db?target_session_attrs=readwrite", "it is any, read-write or primary"),
        ("postgres://u:pw@h1/db?sslmode=on", "has sslmode=on; it is one of disable, allow, prefer, require, verify-ca, verify-full"),
        ("postgres://u:pw@h1/db?connect_timeout=soon", "a whole number of seconds"),
        ("postgres://u:pw@h1/db?host=h2", "list the hosts in the URL itself"),
        ("postgres://u:pw@h1/db?pool_size=3", "has the parameter pool_size, which this service does not read"),
        ("postgres://u:pw@%2Fvar%2Frun%2Fpostgresql/db", "no Unix socket"),
        ("mysql://u:pw@h1/db", "is neither sqlite:PATH nor postgres://"),
    ]

    @Test("bad forms are refused in one sentence that names the problem and never the password")
    func refusals() {
        for (url, says) in Self.refused {
            do {
                let location = try DatabaseLocation.parse(url)
                Issue.record("\(url) was accepted as \(location)")
            } catch {
                #expect(error.description.contains(says), "\(url): \(error.description)")
                #expect(!error.description.contains("pw@"), "the password is redacted: \(error.description)")
                #expect(!error.description.contains("\n"))
            }
        }
    }

    @Test("the server refuses a bad multi-host URL at start with one line naming --database, as a flag or in TRANSFER_DATABASE")
    func serverRefuses() throws {
        func failure(_ arguments: [String], _ environment: [String: String] = [:]) -> String {
            do {
                let config = try ServerConfiguration.load(arguments: arguments, environment: environment)
                return "accepted: \(config.database)"
            } catch { return "\(error)" }
        }
        #expect(failure(["--database", "postgres://u:pw@h1,,h2/db"])
            == "--database: 'postgres://u:***@h1,,h2/db' lists an empty host; write host:port,host:port")
        #expect(failure([], ["TRANSFER_DATABASE": "postgres://u:pw@h1,h2/db?target_session_attrs=prefer-standby"])
            == "TRANSFER_DATABASE: 'postgres://u:***@h1,h2/db?target_session_attrs=prefer-standby' asks for target_session_attrs=prefer-standby, but the service writes: use read-write, primary or any")
        #expect(try ServerConfiguration.load(arguments: ["--database", "postgres://u:pw@h1,h2/db?target_session_attrs=read-write"], environment: [:])
            .database == .postgres(url: "postgres://u:pw@h1,h2/db?target_session_attrs=read-write"))
        #expect(failure(["--database-pooling", "statement"]) == "--database-pooling: 'statement' is not session or transaction")
        #expect(failure(["--database", "postgres://u@h1/db", "--database-pooling", "transaction", "--database-pool-size", "1"])
            .contains("needs --database-pool-size 2 or more"))
        #expect(try ServerConfiguration.load(arguments: ["--database-pooling", "transaction"], environment: [:]).databasePooling == .transaction)
    }

    @Test("the server and the CLI stop at once, in one line, on a bad multi-host URL")
    func processesRefuse() throws {
        let bad = "postgres://u:pw@h1:5432,h2:70000/db?target_session_attrs=read-write"
        let server = try Executable.run("transfer-server", ["--database", bad])
        #expect(server.code != 0, "\(server)")
        #expect(server.err.split(separator: "\n").count == 1, "\(server)")
        #expect(server.err.contains("--database") && server.err.contains("a port is 1 to 65535"), "\(server)")
        #expect(!server.err.contains("pw@"), "\(server)")

        let cli = try CLI.transfer(["account", "someone"], database: bad)
        #expect(cli.code != 0, "\(cli)")
        #expect(cli.err.split(separator: "\n").count == 1, "\(cli)")
        #expect(cli.err.contains("a port is 1 to 65535"), "\(cli)")
        #expect(!cli.err.contains("pw@"), "\(cli)")
    }
}
