import ArgumentParser
import Foundation
import Hummingbird
import Logging
import TransferHTTP

/// `transfer-server`: composes the configuration and the application, then runs until SIGTERM/SIGINT.
@main
struct TransferServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfer-server",
        abstract: "Device-transfer service: auto-login and account migration between devices.")

    @OptionGroup var flags: ServerFlags

    func run() async throws {
        let config: ServerConfiguration
        do {
            config = try ServerConfiguration.load(flags: flags, environment: ProcessInfo.processInfo.environment)
        } catch {
            Self.fail("\(error.description)", code: 2)
        }
        var logger = Logger(label: "transfer-server")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        do {
            let (app, _) = try await TransferApp.build(configuration: config, logger: logger)
            try await app.runService()
        } catch let error as TransferApp.StartupError {
            Self.fail(error.description, code: 1)
        } catch {
            Self.fail("stopped: \(type(of: error))", code: 1)
        }
    }

    /// One line on standard error, then exit.
    static func fail(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data("transfer-server: \(message)\n".utf8))
        Foundation.exit(code)
    }
}
