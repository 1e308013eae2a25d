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
            FileHandle.standardError.write(Data("transfer-server: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
        var logger = Logger(label: "transfer-server")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        do {
            let (app, _) = try await TransferApp.build(configuration: config, logger: logger)
            try await app.runService()
        } catch let error as ServerConfiguration.Invalid {
            FileHandle.standardError.write(Data("transfer-server: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
    }
}
