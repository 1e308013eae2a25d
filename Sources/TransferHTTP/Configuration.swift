import ArgumentParser
import JWTKit
import Foundation
import TransferArgon2
import TransferCore

/// The server's whole configuration: typed, validated once at start.
public struct ServerConfiguration: Sendable {
    public typealias Database = DatabaseLocation

    public struct RateLimit: Sendable, Equatable {
        public var count: Int
        public var period: Duration
        public init(count: Int, period: Duration) {
            self.count = count
            self.period = period
        }
    }

    public var hostname = "127.0.0.1"
    public var port = 8080
    public var database = Database.default
    public var transferTTL = ServicePolicy.standard.transferTTL
    public var accessTokenTTL = Duration.seconds(15 * 60)
    public var refreshTokenTTL = ServicePolicy.standard.refreshTokenTTL
    public var argon2 = Argon2Parameters()
    public var hashWorkers = ProcessInfo.processInfo.activeProcessorCount
    public var hashQueue = 64
    /// Connections each node keeps to PostgreSQL at most.
    public var databasePoolSize = 20
    public var accountCreationLimit: RateLimit? = RateLimit(count: 60, period: .seconds(60))
    public var claimLimit: RateLimit? = RateLimit(count: 30, period: .seconds(60))
    public var trustedProxy = false
    public var maxAccountsPerDevice = ServicePolicy.standard.maxAccountsPerDevice
    /// How long ended transfers and audit events are kept before the pruner removes them.
    public var auditRetention = Duration.seconds(400 * 86_400)
    /// How often the pruner runs (not a flag: an hour keeps each round small).
    public var pruneInterval = Duration.seconds(3600)
    /// `iss` of access tokens.
    public var issuer = "transfer-server"
    /// `aud` of access tokens.
    public var audience = "transfer-api"
    /// Sign in with Apple; nil (the default) turns its routes off (`501 not_configured`).
    public var apple: AppleConfiguration?
    /// Where events for the app backend go; nil (the default): nowhere (they are kept three days).
    public var webhook: WebhookConfiguration?
    /// How outbox messages are retried (not a flag: the contract fixes it; tests shorten it).
    public var outboxPolicy = OutboxPolicy.standard
    /// How often an idle outbox worker looks for due messages (not a flag).
    public var outboxPollInterval = Duration.milliseconds(500)
    /// After this long a node rotates the signing key by itself (once across all nodes); nil: only `transfer keys rotate`.
    public var signingKeyMaxAge: Duration?
    /// Sibling-app hand-off (`--handoff-clients`, `--handoff-code-ttl`); nil (the default): off, `501 not_configured`.
    public var handoff: HandoffPolicy?
    /// How often a node looks for a rotation (not a flag: a few seconds, so every node signs with a new key soon).
    public var signingKeyPollInterval = Duration.seconds(5)

    public init() {}

    /// A bad value: one line for the operator.
    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    /// Reads every setting from `flags`, falling back to `TRANSFER_*` variables in
    /// `environment`, then to the defaults.
    public static func load(flags: ServerFlags, environment: [String: String]) throws(Invalid) -> ServerConfiguration {
        var config = ServerConfiguration()
        func value(_ flag: String?, _ name: String) -> (String, String)? {
            if let flag { return (flag, "--\(name)") }
            let env = "TRANSFER_" + name.uppercased().replacingOccurrences(of: "-", with: "_")
            if let v = environment[env] { return (v, env) }
            return nil
        }
        if let (v, _) = value(flags.hostname, "hostname") { config.hostname = v }
        if let (v, n) = value(flags.port, "port") { config.port = try integer(v, n, in: 0...65535) }
        if let (v, n) = value(flags.database, "database") { config.database = try database(v, n) }
        if let (v, n) = value(flags.transferTTL, "transfer-ttl") { config.transferTTL = try duration(v, n) }
        if let (v, n) = value(flags.accessTokenTTL, "access-token-ttl") { config.accessTokenTTL = try duration(v, n) }
        if let (v, n) = value(flags.refreshTokenTTL, "refresh-token-ttl") { config.refreshTokenTTL = try duration(v, n) }
        if let (v, n) = value(flags.argon2MemoryKiB, "argon2-memory-kib") {
            config.argon2.memoryKiB = UInt32(try integer(v, n, in: 8...4_194_304))
        }
        if let (v, n) = value(flags.argon2Iterations, "argon2-iterations") {
            config.argon2.iterations = UInt32(try integer(v, n, in: 1...100))
        }
        if let (v, n) = value(flags.argon2Parallelism, "argon2-parallelism") {
            config.argon2.parallelism = UInt32(try integer(v, n, in: 1...64))
        }
        guard config.argon2.memoryKiB >= 8 * config.argon2.parallelism else {
            throw Invalid(description: "argon2 memory must be at least 8 KiB per lane of parallelism")
        }
        if let (v, n) = value(flags.hashWorkers, "hash-workers") { config.hashWorkers = try integer(v, n, in: 1...1024) }
        if let (v, n) = value(flags.hashQueue, "hash-queue") { config.hashQueue = try integer(v, n, in: 0...1_000_000) }
        if let (v, n) = value(flags.databasePoolSize, "database-pool-size") { config.databasePoolSize = try integer(v, n, in: 1...1000) }
        if let (v, n) = value(flags.accountCreationLimit, "account-creation-limit") {
            config.accountCreationLimit = try rateLimit(v, n)
        }
        if let (v, n) = value(flags.claimLimit, "claim-limit") { config.claimLimit = try rateLimit(v, n) }
        if let (v, n) = value(flags.maxAccountsPerDevice, "max-accounts-per-device") {
            config.maxAccountsPerDevice = try integer(v, n, in: 1...100)
        }
        if let (v, n) = value(flags.auditRetention, "audit-retention") { config.auditRetention = try duration(v, n) }
        if let (v, n) = value(flags.signingKeyMaxAge, "signing-key-max-age"), v.lowercased() != "off" {
            let age = try duration(v, n)
            // Each rotation keeps the old key published for an access token's lifetime: rotating
            // faster would only pile up keys in the JWKS.
            guard age >= .seconds(3600), age > config.accessTokenTTL + SigningKeys.margin else {
                throw Invalid(description: "\(n): '\(v)' is too short; at least 1h and longer than --access-token-ttl")
            }
            config.signingKeyMaxAge = age
        }
        config.apple = try AppleConfiguration.load(flags: flags, value: value)
        config.handoff = try handoff(clients: value(flags.handoffClients, "handoff-clients"), ttl: value(flags.handoffCodeTTL, "handoff-code-ttl"))
        switch (value(flags.webhookURL, "webhook-url"), value(flags.webhookSecret, "webhook-secret")) {
        case (nil, nil): break
        case (let (url, urlName)?, let (secret, secretName)?):
            guard let u = URL(string: url), ["http", "https"].contains(u.scheme?.lowercased() ?? ""), u.host?.isEmpty == false else {
                throw Invalid(description: "\(urlName): '\(url)' is not an http(s) URL")
            }
            guard let key = WebhookSignature(secret: secret) else {
                throw Invalid(description: "\(secretName): not whsec_ followed by the base64 of 24 to 64 random bytes")
            }
            config.webhook = WebhookConfiguration(url: url, signature: key)
        default:
            throw Invalid(description: "--webhook-url and --webhook-secret go together")
        }
        if flags.trustedProxy {
            config.trustedProxy = true
        } else if let (v, n) = value(nil, "trusted-proxy") {
            config.trustedProxy = try boolean(v, n)
        }
        return config
    }

    /// `--handoff-clients`: client ids (1–255 visible ASCII characters, no comma), comma-separated.
    static func handoff(clients: (String, String)?, ttl: (String, String)?) throws(Invalid) -> HandoffPolicy? {
        guard let (list, listName) = clients else {
            if let (_, name) = ttl { throw Invalid(description: "\(name) needs --handoff-clients (the hand-off is off without it)") }
            return nil
        }
        let ids = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !ids.isEmpty else { throw Invalid(description: "\(listName): name at least one sibling app's client id, comma-separated") }
        for id in ids where id.utf8.count > 255 || !id.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) {
            throw Invalid(description: "\(listName): '\(id)' is not a client id (1 to 255 visible ASCII characters, such as com.example.news)")
        }
        var policy = HandoffPolicy(clients: Set(ids))
        if let (v, n) = ttl {
            let codeTTL = try duration(v, n)
            guard codeTTL >= .seconds(10), codeTTL <= .seconds(600) else {
                throw Invalid(description: "\(n): '\(v)' is out of range; a hand-off code lives 10s to 10m")
            }
            policy.codeTTL = codeTTL
        }
        return policy
    }

    static func integer(_ text: String, _ name: String, in range: ClosedRange<Int>) throws(Invalid) -> Int {
        guard let n = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(n) else {
            throw Invalid(description: "\(name): '\(text)' is not a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    /// `30s`, `15m`, `24h`, `7d`.
    public static func duration(_ text: String, _ name: String) throws(Invalid) -> Duration {
        guard let duration = Duration(flag: text) else {
            throw Invalid(description: "\(name): '\(text)' is not a duration like 90s, 15m, 24h or 7d")
        }
        return duration
    }

    /// `N/PERIOD` (`60/1m`) or `off`.
    public static func rateLimit(_ text: String, _ name: String) throws(Invalid) -> RateLimit? {
        let t = text.trimmingCharacters(in: .whitespaces)
        if t.lowercased() == "off" { return nil }
        let parts = t.split(separator: "/", maxSplits: 1)
        guard parts.count == 2, let n = Int(parts[0]), n > 0 else {
            throw Invalid(description: "\(name): '\(text)' is not N/PERIOD (like 60/1m) or off")
        }
        return RateLimit(count: n, period: try duration(String(parts[1]), name))
    }

    static func boolean(_ text: String, _ name: String) throws(Invalid) -> Bool {
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off", "": return false
        default: throw Invalid(description: "\(name): '\(text)' is not on or off")
        }
    }

    static func database(_ text: String, _ name: String) throws(Invalid) -> Database {
        do {
            return try DatabaseLocation.parse(text)
        } catch {
            throw Invalid(description: "\(name): \(error.description)")
        }
    }
}

/// Sign in with Apple (`--apple-*`).
public struct AppleConfiguration: Sendable {
    /// The bundle ids and services ids whose identity tokens are accepted (`aud`).
    public var clientIDs: [String]
    public var issuer = "https://appleid.apple.com"
    public var jwksURL = "https://appleid.apple.com/auth/keys"
    public var tokenURL = "https://appleid.apple.com/auth/token"
    public var revokeURL = "https://appleid.apple.com/auth/revoke"
    /// With these the link exchanges the authorization code and keeps Apple's refresh token.
    public var codeExchange: CodeExchange?

    /// Its description never shows the private key.
    public struct CodeExchange: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
        public var description: String { "CodeExchange(teamID: \(teamID), keyID: \(keyID), privateKey: <redacted>)" }
        public var debugDescription: String { description }
        public var teamID: String
        public var keyID: String
        /// The Sign in with Apple key from the developer account: a P-256 private key, PEM.
        public var privateKeyPEM: String
        public init(teamID: String, keyID: String, privateKeyPEM: String) {
            self.teamID = teamID
            self.keyID = keyID
            self.privateKeyPEM = privateKeyPEM
        }
    }

    public init(clientIDs: [String]) { self.clientIDs = clientIDs }

    /// nil when `--apple-client-ids` is not set; then no other `--apple-*` value may be.
    static func load(
        flags: ServerFlags, value: (String?, String) -> (String, String)?
    ) throws(ServerConfiguration.Invalid) -> AppleConfiguration? {
        let others: [(String?, String)] = [
            (flags.appleIssuer, "apple-issuer"), (flags.appleJWKSURL, "apple-jwks-url"), (flags.appleTeamID, "apple-team-id"),
            (flags.appleKeyID, "apple-key-id"), (flags.applePrivateKey, "apple-private-key"), (flags.appleTokenURL, "apple-token-url"),
            (flags.appleRevokeURL, "apple-revoke-url"),
        ]
        guard let (ids, idsName) = value(flags.appleClientIDs, "apple-client-ids") else {
            if let (_, name) = others.compactMap({ value($0.0, $0.1) }).first {
                throw .init(description: "\(name) needs --apple-client-ids (Sign in with Apple is off without it)")
            }
            return nil
        }
        let clientIDs = ids.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !clientIDs.isEmpty else { throw .init(description: "\(idsName): name at least one bundle id or services id, comma-separated") }
        var config = AppleConfiguration(clientIDs: clientIDs)
        func url(_ flag: String?, _ name: String, into keyPath: WritableKeyPath<AppleConfiguration, String>) throws(ServerConfiguration.Invalid) {
            guard let (v, n) = value(flag, name) else { return }
            guard let parsed = URL(string: v), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw .init(description: "\(n): '\(v)' is not an http(s) URL")
            }
            config[keyPath: keyPath] = v
        }
        if let (v, _) = value(flags.appleIssuer, "apple-issuer") { config.issuer = v }
        try url(flags.appleJWKSURL, "apple-jwks-url", into: \.jwksURL)
        try url(flags.appleTokenURL, "apple-token-url", into: \.tokenURL)
        try url(flags.appleRevokeURL, "apple-revoke-url", into: \.revokeURL)
        let team = value(flags.appleTeamID, "apple-team-id"), key = value(flags.appleKeyID, "apple-key-id")
        let privateKey = value(flags.applePrivateKey, "apple-private-key")
        switch (team, key, privateKey) {
        case (nil, nil, nil): break
        case (let (teamID, _)?, let (keyID, _)?, let (path, name)?):
            guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw .init(description: "\(name): cannot read '\(path)'")
            }
            guard (try? ES256PrivateKey(pem: pem)) != nil else {
                throw .init(description: "\(name): '\(path)' is not a P-256 private key in PEM (the .p8 file of a Sign in with Apple key)")
            }
            config.codeExchange = CodeExchange(teamID: teamID, keyID: keyID, privateKeyPEM: pem)
        default:
            throw .init(description: "--apple-team-id, --apple-key-id and --apple-private-key go together (the code exchange needs all three)")
        }
        return config
    }
}

/// The server's flags, each also read from `TRANSFER_<FLAG>`.
public struct ServerFlags: ParsableArguments {
    @Option(help: "Address to listen on (TRANSFER_HOSTNAME; default 127.0.0.1).") public var hostname: String?
    @Option(help: "Port to listen on (TRANSFER_PORT; default 8080).") public var port: String?
    @Option(help: "sqlite:PATH or postgres://user:pass@host:5432/db (TRANSFER_DATABASE; default sqlite:./transfer.sqlite).")
    public var database: String?
    @Option(name: .customLong("transfer-ttl"), help: "Lifetime of a transfer, like 24h (TRANSFER_TRANSFER_TTL).")
    public var transferTTL: String?
    @Option(name: .customLong("access-token-ttl"), help: "Lifetime of an access token, like 15m (TRANSFER_ACCESS_TOKEN_TTL).")
    public var accessTokenTTL: String?
    @Option(name: .customLong("refresh-token-ttl"), help: "Lifetime of a refresh token, like 30d (TRANSFER_REFRESH_TOKEN_TTL).")
    public var refreshTokenTTL: String?
    @Option(name: .customLong("argon2-memory-kib"), help: "argon2id memory cost in KiB (default 19456).")
    public var argon2MemoryKiB: String?
    @Option(name: .customLong("argon2-iterations"), help: "argon2id iterations (default 2).")
    public var argon2Iterations: String?
    @Option(name: .customLong("argon2-parallelism"), help: "argon2id lanes (default 1).")
    public var argon2Parallelism: String?
    @Option(name: .customLong("hash-workers"), help: "Threads that hash passwords (default: number of cores).")
    public var hashWorkers: String?
    @Option(name: .customLong("hash-queue"), help: "Set-ups and claims that may wait for a hash worker before 503 overloaded (default 64).")
    public var hashQueue: String?
    @Option(name: .customLong("database-pool-size"), help: "PostgreSQL connections per node at most (TRANSFER_DATABASE_POOL_SIZE; default 20).")
    public var databasePoolSize: String?
    @Option(name: .customLong("account-creation-limit"), help: "New accounts per client address, N/PERIOD or off (default 60/1m).")
    public var accountCreationLimit: String?
    @Option(name: .customLong("claim-limit"), help: "Claim attempts per client address, N/PERIOD or off (default 30/1m).")
    public var claimLimit: String?
    @Option(name: .customLong("max-accounts-per-device"), help: "Accounts one device may hold (TRANSFER_MAX_ACCOUNTS_PER_DEVICE; default 5).")
    public var maxAccountsPerDevice: String?
    @Option(name: .customLong("audit-retention"), help: "How long audit events and ended transfers are kept, like 400d (TRANSFER_AUDIT_RETENTION).")
    public var auditRetention: String?
    @Option(name: .customLong("signing-key-max-age"), help: "Rotate the token signing key by itself after this long, like 90d (TRANSFER_SIGNING_KEY_MAX_AGE; default off).")
    public var signingKeyMaxAge: String?
    @Option(name: .customLong("webhook-url"), help: "The app backend's webhook (TRANSFER_WEBHOOK_URL; off when unset).")
    public var webhookURL: String?
    @Option(name: .customLong("webhook-secret"), help: "whsec_… secret the webhook's signatures use (TRANSFER_WEBHOOK_SECRET).")
    public var webhookSecret: String?
    @Option(name: .customLong("apple-client-ids"), help: "Sign in with Apple: the accepted bundle and services ids, comma-separated (off when unset).")
    public var appleClientIDs: String?
    @Option(name: .customLong("apple-issuer"), help: "The identity tokens' iss (default https://appleid.apple.com).")
    public var appleIssuer: String?
    @Option(name: .customLong("apple-jwks-url"), help: "Apple's keys (default https://appleid.apple.com/auth/keys).")
    public var appleJWKSURL: String?
    @Option(name: .customLong("apple-team-id"), help: "Team id, for the code exchange (with --apple-key-id and --apple-private-key).")
    public var appleTeamID: String?
    @Option(name: .customLong("apple-key-id"), help: "Id of the Sign in with Apple key, for the code exchange.")
    public var appleKeyID: String?
    @Option(name: .customLong("apple-private-key"), help: "PATH of the Sign in with Apple key (.p8), for the code exchange.")
    public var applePrivateKey: String?
    @Option(name: .customLong("apple-token-url"), help: "Apple's token endpoint (default https://appleid.apple.com/auth/token).")
    public var appleTokenURL: String?
    @Option(name: .customLong("apple-revoke-url"), help: "Apple's revoke endpoint (default https://appleid.apple.com/auth/revoke).")
    public var appleRevokeURL: String?
    @Option(name: .customLong("handoff-clients"), help: "Sibling apps that may receive a hand-off: their client ids, comma-separated (TRANSFER_HANDOFF_CLIENTS; off when unset).")
    public var handoffClients: String?
    @Option(name: .customLong("handoff-code-ttl"), help: "Lifetime of a hand-off code, 10s to 10m (TRANSFER_HANDOFF_CODE_TTL; default 60s).")
    public var handoffCodeTTL: String?
    @Flag(name: .customLong("trusted-proxy"), help: "Take the client address from the last X-Forwarded-For hop (TRANSFER_TRUSTED_PROXY=on).")
    public var trustedProxy = false

    public init() {}
}
