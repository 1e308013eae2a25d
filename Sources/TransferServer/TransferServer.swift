import Foundation
import Hummingbird
import Logging
import TransferHTTP
import TransferSettings

/// `transfer-server`: reads the configuration, composes the application, then runs until SIGTERM/SIGINT.
@main
enum TransferServerCommand {
    static let abstract = "Device-transfer service: auto-login and account migration between devices."

    static func main() async {
        let environment = ProcessInfo.processInfo.environment
        // Log lines go out in batches, off the request path (see `LogSink`).
        LoggingSystem.bootstrap { LogSink.standardError.handler(label: $0) }
        defer { LogSink.standardError.flush() }
        let config: ServerConfiguration
        do {
            switch try SettingsCommandLine.parse(Array(CommandLine.arguments.dropFirst()), settings: ServerFlags.all) {
            case .help:
                print(SettingsCommandLine.help(command: "transfer-server", abstract: abstract, settings: ServerFlags.all))
                return
            case .flags(let flags):
                config = try ServerConfiguration.load(SettingValues(flags: flags, environment: environment))
            }
        } catch let error as SettingsCommandLine.UsageError {
            // EX_USAGE, as an unknown flag always exited: restarting would repeat the mistake.
            fail("\(error.description) (see transfer-server --help)", code: 64)
        } catch {
            fail("\(error)", code: 2)
        }
        var logger = Logger(label: "transfer-server")
        logger.logLevel = environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        do {
            let (app, _) = try await TransferApp.build(configuration: config, logger: logger)
            try await app.runService()
        } catch let error as TransferApp.StartupError {
            fail(error.description, code: error.exitCode)
        } catch {
            fail("stopped: \(type(of: error))", code: 1)
        }
    }

    /// One line on standard error, then exit.
    static func fail(_ message: String, code: Int32) -> Never {
        LogSink.standardError.flush()
        FileHandle.standardError.write(Data("transfer-server: \(message)\n".utf8))
        Foundation.exit(code)
    }
}
