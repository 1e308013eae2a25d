import JWTKit
import Foundation
import TransferArgon2
import TransferAttestation
import TransferCore
import TransferSettings

/// The server's whole configuration: typed, validated once at start. Each flag is declared
/// once, in `ServerFlags` (TransferSettings); `load` reads them and applies the rules that tie
/// several together.
public struct ServerConfiguration: Sendable {
    public typealias Database = DatabaseLocation
    public typealias RateLimit = TransferCore.RateLimit
    public typealias Invalid = TransferSettings.Invalid

    public var hostname = ServerFlags.hostname.defaultValue
    public var port = ServerFlags.port.defaultValue
    public var database = ServerFlags.database.defaultValue
    public var transferTTL = ServerFlags.transferTTL.defaultValue
    public var accessTokenTTL = ServerFlags.accessTokenTTL.defaultValue
    public var refreshTokenTTL = ServerFlags.refreshTokenTTL.defaultValue
    public var argon2 = Argon2Parameters()
    public var hashWorkers = ServerFlags.hashWorkers.defaultValue
    public var hashQueue = ServerFlags.hashQueue.defaultValue
    /// Connections each node keeps to PostgreSQL at most.
    public var databasePoolSize = ServerFlags.databasePoolSize.defaultValue
    /// How PostgreSQL is reached: directly (or a session pooler), or PgBouncer's transaction pooling.
    public var databasePooling = ServerFlags.databasePooling.defaultValue
    /// A connection that sends nothing this long is closed (not while it waits for its answer).
    public var idleTimeout = ServerFlags.idleTimeout.defaultValue
    /// A request not fully arrived this long after its first byte is answered 408 and its connection closed.
    public var requestTimeout = ServerFlags.requestTimeout.defaultValue
    /// Every per-client and per-account limit, and the IPv6 prefix that is one client.
    public var limits = RateLimits(
        accountCreation: ServerFlags.accountCreationLimit.defaultValue, claim: ServerFlags.claimLimit.defaultValue,
        setup: ServerFlags.setupLimit.defaultValue, nonce: ServerFlags.nonceLimit.defaultValue,
        handoff: ServerFlags.handoffLimit.defaultValue, ipv6Prefix: ServerFlags.ipv6Prefix.defaultValue)
    /// The proxies whose `X-Forwarded-For` is believed; none by default (the socket peer is the client).
    public var trustedProxies = ServerFlags.trustedProxy.defaultValue
    public var maxAccountsPerDevice = ServerFlags.maxAccountsPerDevice.defaultValue
    /// How long ended transfers and audit events are kept before the pruner removes them.
    public var auditRetention = ServerFlags.auditRetention.defaultValue
    /// How often the pruner runs; its first round is one interval after start.
    public var pruneInterval = ServerFlags.pruneInterval.defaultValue
    /// Accounts whose devices have all not logged in for this long are erased as inactive; nil (the default): never.
    public var inactiveAccountTTL = ServerFlags.inactiveAccountTTL.defaultValue
    /// A launch within this of the pair's last recorded activity writes nothing.
    public var activityResolution = ServerFlags.activityResolution.defaultValue
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
    public var signingKeyMaxAge = ServerFlags.signingKeyMaxAge.defaultValue
    /// Seals the signing keys in the database (`--key-encryption-key-file`); nil: they are stored unencrypted.
    public var keyEncryptionKey = ServerFlags.keyEncryptionKeyFile.defaultValue
    /// Sibling-app hand-off (`--handoff-clients`, `--handoff-code-ttl`); nil (the default): off, `501 not_configured`.
    public var handoff: HandoffPolicy?
    /// Device attestation for new accounts; off by default.
    public var attestation = AttestationConfiguration()
    /// Whether way-back changes and account deletion need `X-Device-Secret` (`--device-proof`, on).
    public var deviceProof = ServerFlags.deviceProof.defaultValue
    /// How often a node looks for a rotation (not a flag: a few seconds, so every node signs with a new key soon).
    public var signingKeyPollInterval = Duration.seconds(5)
    /// Traces over OTLP, from the standard `OTEL_*` variables (not flags); nil (the default): off.
    public var tracing: TracingConfiguration?

    public init() {}

    /// Reads `arguments` (the command line without the program's name); `TRANSFER_*` variables
    /// in `environment` fill in what they do not say. For tests and tools: `transfer-server`
    /// itself answers `--help` before it loads anything.
    public static func load(arguments: [String], environment: [String: String]) throws -> ServerConfiguration {
        switch try SettingsCommandLine.parse(arguments, settings: ServerFlags.all) {
        case .help: throw Invalid(description: "--help is not a setting")
        case .flags(let flags): return try load(SettingValues(flags: flags, environment: environment))
        }
    }

    /// Reads every setting from `values` (the command line, then `TRANSFER_*` variables and
    /// files), then the defaults, and checks the rules that tie several together.
    public static func load(_ values: SettingValues) throws(Invalid) -> ServerConfiguration {
        typealias F = ServerFlags
        var config = ServerConfiguration()
        config.hostname = try values.value(F.hostname)
        config.port = try values.value(F.port)
        config.database = try values.value(F.database)
        config.databasePoolSize = try values.value(F.databasePoolSize)
        config.databasePooling = try values.value(F.databasePooling)
        if config.databasePooling == .transaction, case .postgres = config.database, config.databasePoolSize < 2 {
            throw Invalid(description: "--database-pooling transaction needs --database-pool-size 2 or more (the pruner holds its lock's transaction on one connection while it prunes on another)")
        }
        config.idleTimeout = try values.value(F.idleTimeout)
        config.requestTimeout = try values.value(F.requestTimeout)
        config.transferTTL = try values.value(F.transferTTL)
        config.accessTokenTTL = try values.value(F.accessTokenTTL)
        config.refreshTokenTTL = try values.value(F.refreshTokenTTL)
        config.argon2 = try F.argon2(values)
        config.hashWorkers = try values.value(F.hashWorkers)
        config.hashQueue = try values.value(F.hashQueue)
        config.limits = RateLimits(
            accountCreation: try values.value(F.accountCreationLimit), claim: try values.value(F.claimLimit),
            setup: try values.value(F.setupLimit), nonce: try values.value(F.nonceLimit), handoff: try values.value(F.handoffLimit),
            ipv6Prefix: try values.value(F.ipv6Prefix))
        config.trustedProxies = try values.value(F.trustedProxy)
        config.maxAccountsPerDevice = try values.value(F.maxAccountsPerDevice)
        config.auditRetention = try values.value(F.auditRetention)
        config.inactiveAccountTTL = try values.value(F.inactiveAccountTTL)
        if config.inactiveAccountTTL != nil, case .postgres = config.database, config.databasePoolSize < 2 {
            // The pruner holds one connection for its lock and erases on others.
            throw Invalid(description: "--inactive-account-ttl needs --database-pool-size 2 or more on PostgreSQL (the pruner holds one connection while it erases on another)")
        }
        config.activityResolution = try values.value(F.activityResolution)
        if config.activityResolution.duration >= config.refreshTokenTTL {
            // A launch within the resolution does not extend its session: the session must outlive it.
            let source = values.source(of: F.activityResolution) ?? F.activityResolution.flag
            throw Invalid(description: "\(source): must be shorter than --refresh-token-ttl (a launch within it does not extend the session)")
        }
        config.pruneInterval = try values.value(F.pruneInterval)
        if let age = try values.given(F.signingKeyMaxAge), let maxAge = age.value {
            // Each rotation keeps the old key published for an access token's lifetime: rotating
            // faster would only pile up keys in the JWKS.
            guard maxAge >= .seconds(3600), maxAge > config.accessTokenTTL + SigningKeys.margin else {
                throw Invalid(description: "\(age.source): '\(age.text)' is too short; at least 1h and longer than --access-token-ttl")
            }
            config.signingKeyMaxAge = maxAge
        }
        config.keyEncryptionKey = try values.value(F.keyEncryptionKeyFile)
        config.apple = try AppleConfiguration.load(values)
        if let clients = try values.value(F.handoffClients) {
            config.handoff = HandoffPolicy(clients: Set(clients), codeTTL: try values.value(F.handoffCodeTTL))
        } else if let source = values.source(of: F.handoffCodeTTL) {
            throw Invalid(description: "\(source) needs --handoff-clients (the hand-off is off without it)")
        }
        config.attestation = try AttestationConfiguration.load(values)
        config.deviceProof = try values.value(F.deviceProof)
        let webhookURL = try values.value(F.webhookURL), webhookSecret = try values.value(F.webhookSecret)
        switch (webhookURL, webhookSecret) {
        case (nil, nil): break
        case (let url?, let secret?): config.webhook = WebhookConfiguration(url: url, signature: WebhookSignature(secret))
        default: throw Invalid(description: "--webhook-url and --webhook-secret go together")
        }
        config.tracing = try TracingConfiguration.load(environment: values.environment)
        return config
    }
}

/// Sign in with Apple (`--apple-*`).
public struct AppleConfiguration: Sendable {
    /// The bundle ids and services ids whose identity tokens are accepted (`aud`).
    public var clientIDs: [String]
    public var issuer = ServerFlags.appleIssuer.defaultValue
    public var jwksURL = ServerFlags.appleJWKSURL.defaultValue
    public var tokenURL = ServerFlags.appleTokenURL.defaultValue
    public var revokeURL = ServerFlags.appleRevokeURL.defaultValue
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
    static func load(_ values: SettingValues) throws(ServerConfiguration.Invalid) -> AppleConfiguration? {
        typealias F = ServerFlags
        guard let clientIDs = try values.value(F.appleClientIDs) else {
            let others: [any SettingDescription] = [
                F.appleIssuer, F.appleJWKSURL, F.appleTeamID, F.appleKeyID, F.applePrivateKey, F.appleTokenURL, F.appleRevokeURL,
            ]
            if let source = others.lazy.compactMap({ values.source(of: $0) }).first {
                throw .init(description: "\(source) needs --apple-client-ids (Sign in with Apple is off without it)")
            }
            return nil
        }
        var config = AppleConfiguration(clientIDs: clientIDs)
        config.issuer = try values.value(F.appleIssuer)
        config.jwksURL = try values.value(F.appleJWKSURL)
        config.tokenURL = try values.value(F.appleTokenURL)
        config.revokeURL = try values.value(F.appleRevokeURL)
        let teamID = try values.value(F.appleTeamID), keyID = try values.value(F.appleKeyID)
        switch (teamID, keyID, values.source(of: F.applePrivateKey)) {
        case (nil, nil, nil): break
        case (let teamID?, let keyID?, _?):
            guard let key = try values.given(F.applePrivateKey), let file = key.value else { break }
            guard (try? ES256PrivateKey(pem: file.pem)) != nil else {
                throw .init(description: "\(key.source): '\(key.text)' is not a P-256 private key in PEM (the .p8 file of a Sign in with Apple key)")
            }
            config.codeExchange = CodeExchange(teamID: teamID, keyID: keyID, privateKeyPEM: file.pem)
        default:
            throw .init(description: "--apple-team-id, --apple-key-id and --apple-private-key go together (the code exchange needs all three)")
        }
        return config
    }
}

extension AttestationConfiguration {
    /// `--attestation` and its platforms' flags. A platform is configured by its names
    /// (`--app-attest-app-ids`, `--play-integrity-packages`); monitor and enforce need one.
    static func load(_ values: SettingValues) throws(ServerConfiguration.Invalid) -> AttestationConfiguration {
        typealias F = ServerFlags
        var config = AttestationConfiguration(mode: try values.value(F.attestation))
        if let appIDs = try values.value(F.appAttestAppIDs) {
            let environment: AppAttestVerifier.Environment = try values.value(F.appAttestEnvironment) == "development" ? .development : .production
            var roots = [AppAttestVerifier.appleRoot]
            if let given = try values.given(F.appAttestRootCA), let file = given.value {
                do { roots = try AppAttestVerifier.roots(pem: file.pem) } catch {
                    throw .init(description: "\(given.source): '\(file.path)': \(error.description)")
                }
                config.rootCAPath = file.path
            }
            config.appAttest = AppAttestVerifier(appIDs: appIDs, environment: environment, trustRoots: roots)
        } else if let source = ([F.appAttestEnvironment, F.appAttestRootCA] as [any SettingDescription]).lazy.compactMap({ values.source(of: $0) }).first {
            throw .init(description: "\(source) needs --app-attest-app-ids (App Attest is off without it)")
        }
        let packages = try values.value(F.playIntegrityPackages)
        let decryption = try values.given(F.playIntegrityDecryptionKey), verification = try values.given(F.playIntegrityVerificationKey)
        switch (packages, decryption?.value ?? nil, verification?.value ?? nil) {
        case (nil, nil, nil): break
        case (let packages?, let decryptionKey?, let verificationKey?):
            do {
                config.playIntegrity = try PlayIntegrityVerifier(
                    decryptionKeyBase64: decryptionKey, verificationKeyBase64: verificationKey, packageNames: packages)
            } catch {
                // Which key: the error says; the source names where it came from (never the key).
                let source = error.description.contains("decryption") ? decryption?.source : verification?.source
                throw .init(description: "\(source ?? "--play-integrity-decryption-key"): \(error.description)")
            }
        default:
            throw .init(
                description: "--play-integrity-packages, --play-integrity-decryption-key and --play-integrity-verification-key go together (Play Integrity needs all three)")
        }
        if config.mode != .off, config.appAttest == nil, config.playIntegrity == nil {
            let source = values.source(of: F.attestation) ?? "--attestation"
            throw .init(
                description: "\(source) \(config.mode.rawValue) needs --app-attest-app-ids or --play-integrity-packages (no attestation could be verified)")
        }
        return config
    }
}
