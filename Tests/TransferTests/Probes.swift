import TransferHTTP

/// The configuration parsers, as the server uses them.
enum ServerConfigurationProbe {
    static func duration(_ s: String) throws -> Duration { try ServerConfiguration.duration(s, "--x") }
    static func rateLimit(_ s: String) throws -> ServerConfiguration.RateLimit? { try ServerConfiguration.rateLimit(s, "--x") }
}
