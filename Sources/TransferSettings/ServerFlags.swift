import Foundation
import TransferArgon2
import TransferCore

/// Every flag of `transfer-server`, each declared once: name, type, default, check and help.
/// Its environment variable is `TRANSFER_` + the name in upper snake case. Rules that tie
/// flags together (go together, longer than) are in `ServerConfiguration.load`; the `transfer`
/// CLI reads the flags it shares with the server (database, lifetimes) from here too.
public enum ServerFlags {
    public static let hostname: Setting<String> = .text("hostname", "Address to listen on.", value: "address", default: "127.0.0.1")
        .documented("address to listen on (`0.0.0.0` for every interface)")
    public static let port: Setting<Int> = .integer("port", "Port to listen on.", in: 0...65535, default: 8080)
        .documented("port to listen on")
    public static let database = Setting<DatabaseLocation>(
        "database",
        "sqlite:PATH, or postgres://user:pass@host:5432/db; several hosts as host1:5432,host2:5432 with ?target_session_attrs=read-write (or primary; any by default), tried in order for each new connection; ?sslmode=require for TLS.",
        value: "url",
        default: .default, shown: DatabaseLocation.default.argument, secret: true
    ) { text throws(SettingProblem) in
        do throws(InvalidDatabaseURL) { return try DatabaseLocation.parse(text) } catch { throw SettingProblem(error.description) }
    }
        .documented("`sqlite:PATH`, or `postgres://user:pass@host:5432/db`; several hosts in libpq's form, `postgres://user:pass@host1:5432,host2:5432/db?target_session_attrs=read-write` (see [Several database hosts](#several-database-hosts-and-failover)); add `sslmode=require` for TLS")
    public static let databasePoolSize: Setting<Int> = .integer(
        "database-pool-size", "PostgreSQL connections per node at most.", in: 1...1000, default: 20)
        .documented("PostgreSQL connections per node at most; nodes × pool ≤ `max_connections` (2 or more with `--inactive-account-ttl` or `--database-pooling transaction`: the pruner holds one while it works on others)")
    public static let databasePooling = Setting<DatabasePooling>(
        "database-pooling",
        "How PostgreSQL is reached: session (directly, or a pooler in session mode) or transaction (PgBouncer's pool_mode=transaction: no named prepared statement or session lock is kept across transactions).",
        value: "session|transaction", default: .session, shown: "session"
    ) { text throws(SettingProblem) in
        guard let pooling = DatabasePooling(rawValue: text.lowercased()) else { throw SettingProblem("'\(text)' is not session or transaction") }
        return pooling
    }
        .documented("`transaction` when the URL names PgBouncer in `pool_mode = transaction`: no named prepared statement or session lock is relied on across transactions (see [Behind PgBouncer](#behind-pgbouncer))")
    public static let idleTimeout: Setting<Duration> = .duration(
        "idle-timeout", "Close a connection that sends nothing for this long (one waiting for its answer is kept).",
        default: .seconds(60))
        .documented("close a connection that sends nothing and reads none of its answers for this long; one waiting for its answer is kept (see [Connections](#connections))")
    public static let requestTimeout: Setting<Duration> = .duration(
        "request-timeout", "Answer 408 and close when a request has not fully arrived this long after its first byte.",
        default: .seconds(10))
        .documented("a request whose head and body have not fully arrived this long after its first byte is answered `408 request_timeout` and its connection closed")

    public static let transferTTL: Setting<Duration> = .duration(
        "transfer-ttl", "Lifetime of a pending transfer, like 24h.", default: ServicePolicy.standard.transferTTL, shown: "24h")
        .documented("lifetime of a pending transfer (`90s`, `15m`, `24h`, `7d`)")
    public static let accessTokenTTL: Setting<Duration> = .duration(
        "access-token-ttl", "Lifetime of an access token, like 15m; a retired signing key stays in the JWKS this long (plus 2m).",
        default: .seconds(15 * 60))
        .documented("access token lifetime; a retired signing key stays in the JWKS this long plus 2 minutes")
    public static let refreshTokenTTL: Setting<Duration> = .duration(
        "refresh-token-ttl", "Lifetime of a session without use, like 30d (each login and refresh extends it).",
        default: ServicePolicy.standard.refreshTokenTTL)
        .documented("session lifetime without use (each refresh extends it, and each login that writes: see `--activity-resolution`)")

    /// The argon2id parameters as the servers hash with them: the server and `transfer issue`
    /// read them here, so a support-issued password costs what a set-up one does.
    public static func argon2(_ values: SettingValues) throws(Invalid) -> Argon2Parameters {
        let parameters = Argon2Parameters(
            memoryKiB: UInt32(try values.value(argon2MemoryKiB)), iterations: UInt32(try values.value(argon2Iterations)),
            parallelism: UInt32(try values.value(argon2Parallelism)))
        guard parameters.memoryKiB >= 8 * parameters.parallelism else {
            throw Invalid(description: "argon2 memory must be at least 8 KiB per lane of parallelism")
        }
        return parameters
    }

    public static let argon2MemoryKiB: Setting<Int> = .integer(
        "argon2-memory-kib", "argon2id memory cost in KiB.", in: 8...4_194_304, default: Int(Argon2Parameters().memoryKiB))
        .documented("argon2id memory cost in KiB")
    public static let argon2Iterations: Setting<Int> = .integer(
        "argon2-iterations", "argon2id iterations.", in: 1...100, default: Int(Argon2Parameters().iterations))
        .documented("argon2id time cost")
    public static let argon2Parallelism: Setting<Int> = .integer(
        "argon2-parallelism", "argon2id lanes.", in: 1...64, default: Int(Argon2Parameters().parallelism))
        .documented("argon2id lanes")
    public static let hashWorkers: Setting<Int> = .integer(
        "hash-workers", "Threads that hash passwords; argon2 memory is bounded by workers × memory cost.", in: 1...1024,
        default: ProcessInfo.processInfo.activeProcessorCount, shown: "number of cores")
        .documented("threads that hash; argon2 memory is bounded by workers × memory cost")
    public static let hashQueue: Setting<Int> = .integer(
        "hash-queue", "Set-ups and claims that may wait for a hash worker before 503 overloaded (at least 1); the last quarter is kept for claims.",
        in: 1...1_000_000, default: 64)
        .documented("set-ups and claims that may wait for a worker (at least 1: with none, set-ups could hold every worker and a claim would get `503`); beyond, `503 overloaded`. The last quarter (rounded up) is kept for claims: set-ups are refused first")

    public static let accountCreationLimit: Setting<RateLimit?> = .rateLimit(
        "account-creation-limit", "New accounts per client address, N/PERIOD or off.", default: RateLimit(count: 60, period: .seconds(60)))
        .documented("new accounts per client (`N/PERIOD` or `off`; see [Limits](#limits-that-hold-under-attack))")
    public static let claimLimit: Setting<RateLimit?> = .rateLimit(
        "claim-limit", "Claim attempts per client address, N/PERIOD or off.", default: RateLimit(count: 30, period: .seconds(60)))
        .documented("claim attempts per client, with any proof (Apple moves too)")
    public static let setupLimit: Setting<RateLimit?> = .rateLimit(
        "setup-limit", "Transfer set-ups per account, N/PERIOD or off (support's transfer issue does not count).",
        default: RateLimit(count: 10, period: .seconds(3600)))
        .documented("per account: transfer set-ups, recovery-code and backup-key changes, and push tokens moved onto its phone (support's `transfer issue` does not count)")
    public static let nonceLimit: Setting<RateLimit?> = .rateLimit(
        "nonce-limit", "Apple nonces and attestation challenges per client address, N/PERIOD or off.",
        default: RateLimit(count: 60, period: .seconds(60)))
        .documented("`POST /v1/apple/nonce` and attestation challenges per client")
    public static let handoffLimit: Setting<RateLimit?> = .rateLimit(
        "handoff-limit", "Hand-off codes per account, N/PERIOD or off.", default: RateLimit(count: 60, period: .seconds(3600)))
        .documented("`POST /v1/handoff/codes` per account")
    public static let ipv6Prefix: Setting<Int> = .integer(
        "ipv6-prefix", "The leading bits of an IPv6 address that count as one client for the limits (a /64 is one home line).",
        in: 48...128, default: 64)
        .documented("the leading bits of an IPv6 address that count as one client (48–128); an IPv4 client is its address")
    /// v1's bare switch (`--trusted-proxy`, `TRANSFER_TRUSTED_PROXY=on`) is refused, naming the new form.
    public static let trustedProxy = Setting<TrustedProxies>(
        "trusted-proxy",
        "The proxies in front of the server, addresses or CIDR ranges, comma-separated: X-Forwarded-For is read from the right past these only; any other peer is the client.",
        value: "ranges", default: .none, shown: "off",
        withoutValue: "--trusted-proxy names the proxies now, addresses or CIDR ranges: \(TrustedProxies.example)"
    ) { text throws(SettingProblem) in
        if ["on", "true", "yes", "1"].contains(text.trimmingCharacters(in: .whitespaces).lowercased()) {
            throw SettingProblem("'\(text)' was v1's switch; name the proxies, addresses or CIDR ranges: \(TrustedProxies.example)")
        }
        do throws(AddressRange.Problem) { return try TrustedProxies(text) } catch { throw SettingProblem(error.description) }
    }
        .documented("the proxies in front, addresses or CIDR ranges, comma-separated (`10.0.0.0/8,127.0.0.1`): from these peers `X-Forwarded-For` is read from the right past the proxies named (see [Limits](#limits-that-hold-under-attack)). v1's bare switch is refused at start")
    public static let maxAccountsPerDevice: Setting<Int> = .integer(
        "max-accounts-per-device", "Accounts one device may hold (409 device_account_limit beyond).", in: 1...100,
        default: ServicePolicy.standard.maxAccountsPerDevice)
        .documented("accounts one device may hold (`409 device_account_limit` beyond)")
    public static let auditRetention: Setting<Duration> = .duration(
        "audit-retention", "How long audit events and ended transfers are kept, like 400d.", default: .seconds(400 * 86_400))
        .documented("how long audit events and ended transfers are kept (by the pruner, on PostgreSQL one node at a time)")
    public static let inactiveAccountTTL = Setting<Duration?>(
        "inactive-account-ttl",
        "Erase an account whose devices have all not logged in for this long, like 400d (at least 30d), or off; a pending transfer, a linked Apple ID or the app backend's protection keeps it.",
        value: "duration|off", default: nil, shown: "off"
    ) { text throws(SettingProblem) in
        if text.lowercased() == "off" { return nil }
        let ttl = try Kinds.duration(text)
        guard ttl >= InactivityPolicy.minimumTTL else {
            throw SettingProblem("'\(text)' is too short; an account is erased as inactive after 30d without a login at the least")
        }
        return ttl
    }
        .documented("erase accounts whose devices have all not been used for this long (at least `30d`), unless they have a pending transfer, a linked Apple ID or protection (see [Inactive accounts](features.md#inactive-accounts))")
    public static let activityResolution = Setting<ActivityResolution>(
        "activity-resolution",
        "How finely the use of a session is recorded, 1m to 1d: a launch within this of the last recorded one writes nothing.",
        value: "duration", default: .standard, shown: ActivityResolution.standard.duration.flagText
    ) { text throws(SettingProblem) in
        let resolution = try Kinds.duration(text)
        guard ActivityResolution.bounds.contains(resolution) else {
            throw SettingProblem("'\(text)' is out of range; activity is recorded to between 1m and 1d")
        }
        return ActivityResolution(resolution)
    }
        .documented("how finely the use of a session is recorded, `1m` to `1d` and shorter than `--refresh-token-ttl`: a launch within this of the pair's last recorded activity writes nothing (see [Launches that write nothing](features.md#launches-that-write-nothing))")
    /// At least 1s: a duration is a whole number of seconds or more.
    public static let pruneInterval: Setting<Duration> = .duration(
        "prune-interval", "How often the pruner runs (expired sessions, old events, inactive accounts); the first round one interval after start.",
        default: .seconds(3600))
        .documented("how often the pruner runs (at least `1s`); its first round is one interval after start")
    public static let signingKeyMaxAge = Setting<Duration?>(
        "signing-key-max-age", "Rotate the token signing key by itself after this long, like 90d (at least 1h), or off.",
        value: "duration|off", default: nil, shown: "off"
    ) { text throws(SettingProblem) in
        if text.lowercased() == "off" { return nil }
        return try Kinds.duration(text)
    }
        .documented("rotate the token signing key by itself after this long (like `90d`; at least `1h` and longer than `--access-token-ttl`), once across all nodes (see [Signing keys](#signing-keys))")
    public static let keyEncryptionKeyFile = Setting<KeyEncryptionKey?>(
        "key-encryption-key-file",
        "PATH of a file holding 32 random bytes in base64 (openssl rand -base64 32) that encrypt the token signing keys in the database; off: stored unencrypted (warned about at start).",
        value: "path", default: nil, shown: "off"
    ) { path throws(SettingProblem) in
        // The path is not secret; the file's content is never repeated.
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw SettingProblem("cannot read '\(path)'")
        }
        guard let key = KeyEncryptionKey(base64: text) else {
            throw SettingProblem("'\(path)' does not hold 32 bytes in base64 (make one with: openssl rand -base64 32)")
        }
        return key
    }
        .documented("a file holding 32 random bytes in base64 (`openssl rand -base64 32`) that encrypt the token signing keys in the database; off: they are stored unencrypted and the server warns at start (see [Signing keys](#signing-keys))")

    public static let deviceProof = Setting<Bool>(
        "device-proof",
        "on: changing a way back (transfer, recovery code, Apple ID) or deleting the account needs the device's secret in X-Device-Secret beside the access token; off: the token alone, for apps that cannot send the header yet.",
        value: "on|off", default: true, shown: "on"
    ) { text throws(SettingProblem) in
        switch text.lowercased() {
        case "on": return true
        case "off": return false
        default: throw SettingProblem("'\(text)' is not on or off")
        }
    }
        .documented("`on`: way-back changes and `DELETE /v1/me` need `X-Device-Secret` beside the token; `off`: the token alone, for apps that cannot send it yet (warned at start)")

    public static let webhookURL = Setting<String?>(
        "webhook-url", "The app backend's webhook; needs --webhook-secret.", value: "url", default: nil, shown: "off"
    ) { text throws(SettingProblem) in try Kinds.httpURL(text) }
        .documented("the app backend's webhook (see [Webhooks](app-backend.md#webhooks)); needs `--webhook-secret`")
    public static let webhookSecret = Setting<WebhookSecret?>(
        "webhook-secret", "whsec_ and the base64 of 24 to 64 random bytes, the key of the webhook's signatures; needs --webhook-url.",
        value: "whsec_…", default: nil, shown: "off", secret: true
    ) { text throws(SettingProblem) in
        guard let secret = WebhookSecret(text) else { throw SettingProblem("not whsec_ followed by the base64 of 24 to 64 random bytes") }
        return secret
    }
        .documented("`whsec_` + base64 of 24–64 random bytes (`echo whsec_$(openssl rand -base64 32)`); needs `--webhook-url`")

    public static let appleClientIDs: Setting<[String]?> = .list(
        "apple-client-ids", "Sign in with Apple: the accepted bundle and services ids, comma-separated; the other --apple-* flags need it.",
        value: "ids", empty: "name at least one bundle id or services id, comma-separated")
        .documented("Sign in with Apple: the accepted bundle and services ids, comma-separated (see [Sign in with Apple](#sign-in-with-apple)); without it the Apple routes answer `501 not_configured`, and the other `--apple-*` flags need it")
    public static let appleIssuer: Setting<String> = .text(
        "apple-issuer", "The identity tokens' iss.", value: "issuer", default: "https://appleid.apple.com")
        .documented("Apple's identity tokens' `iss`; leave the default (tests point the Apple flags at a local fake)")
    public static let appleJWKSURL: Setting<String> = .url(
        "apple-jwks-url", "Apple's keys.", default: "https://appleid.apple.com/auth/keys")
        .documented("Apple's keys; leave the default")
    public static let appleTokenURL: Setting<String> = .url(
        "apple-token-url", "Apple's token endpoint.", default: "https://appleid.apple.com/auth/token")
        .documented("Apple's token endpoint, for the code exchange; leave the default")
    public static let appleRevokeURL: Setting<String> = .url(
        "apple-revoke-url", "Apple's revoke endpoint.", default: "https://appleid.apple.com/auth/revoke")
        .documented("Apple's revoke endpoint; leave the default")
    public static let appleTeamID = Setting<String?>(
        "apple-team-id", "Team id, for the code exchange (with --apple-key-id and --apple-private-key).", value: "id", default: nil,
        shown: "off") { $0 }
        .documented("Team ID (Membership details), for the code exchange; goes with `--apple-key-id` and `--apple-private-key`")
    public static let appleKeyID = Setting<String?>(
        "apple-key-id", "Id of the Sign in with Apple key, for the code exchange.", value: "id", default: nil, shown: "off") { $0 }
        .documented("Key ID of a key with Sign in with Apple enabled (Certificates, Identifiers & Profiles → Keys)")
    public static let applePrivateKey = Setting<PEMFile?>(
        "apple-private-key", "PATH of the Sign in with Apple key (.p8), for the code exchange.", value: "path", default: nil, shown: "off"
    ) { path throws(SettingProblem) in
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else { throw SettingProblem("cannot read '\(path)'") }
        return PEMFile(path: path, pem: pem)
    }
        .documented("PATH of that key's `.p8` file (Apple lets you download it once)")

    public static let handoffClients: Setting<[String]?> = .list(
        "handoff-clients", "Sibling apps that may receive a hand-off: their client ids, comma-separated (off: 501 not_configured).",
        value: "ids", empty: "name at least one sibling app's client id, comma-separated"
    ) { id in
        id.utf8.count <= 255 && id.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
            ? nil : "'\(id)' is not a client id (1 to 255 visible ASCII characters, such as com.example.news)"
    }
        .documented("sibling apps' client ids, comma-separated (see [Sibling apps](#sibling-apps-hand-off)); off: the hand-off routes answer `501 not_configured`")
    public static let handoffCodeTTL = Setting<Duration>(
        "handoff-code-ttl", "Lifetime of a hand-off code, 10s to 10m; needs --handoff-clients.", value: "duration",
        default: HandoffPolicy(clients: []).codeTTL, shown: HandoffPolicy(clients: []).codeTTL.flagText
    ) { text throws(SettingProblem) in
        let ttl = try Kinds.duration(text)
        guard ttl >= .seconds(10), ttl <= .seconds(600) else { throw SettingProblem("'\(text)' is out of range; a hand-off code lives 10s to 10m") }
        return ttl
    }
        .documented("lifetime of a hand-off code, between `10s` and `10m`; needs `--handoff-clients`")

    public static let attestation = Setting<AttestationMode>(
        "attestation",
        "Device attestation for new accounts: off, monitor (verify and record, create anyway) or enforce (refuse a creation without a verified one).",
        value: "off|monitor|enforce", default: .off, shown: "off"
    ) { text throws(SettingProblem) in
        guard let mode = AttestationMode(rawValue: text.lowercased()) else { throw SettingProblem("'\(text)' is not off, monitor or enforce") }
        return mode
    }
        .documented("device attestation for new accounts: `off`, `monitor` (verify, record, create anyway) or `enforce` (see [Device attestation](#device-attestation)); `monitor` and `enforce` need App Attest or Play Integrity configured")
    public static let appAttestAppIDs: Setting<[String]?> = .list(
        "app-attest-app-ids", "App Attest: the apps that may attest, TEAMID.bundle.id (team id from the Apple developer account), comma-separated.",
        value: "ids", empty: "name at least one app id (TEAMID.bundle.id), comma-separated"
    ) { id in
        let parts = id.split(separator: ".", maxSplits: 1)
        let team = parts.first ?? ""
        return parts.count == 2 && team.count == 10 && team.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) })
            && parts[1].utf8.allSatisfy({ (0x21...0x7E).contains($0) })
            ? nil : "'\(id)' is not an app id (TEAMID.bundle.id: the 10-character team id, a dot, the bundle id)"
    }
        .documented("App Attest: `TEAMID.bundle.id` of each app that may attest, comma-separated")
    public static let appAttestEnvironment = Setting<String>(
        "app-attest-environment", "App Attest: which AAGUID is accepted, production or development (apps signed for development).",
        value: "production|development", default: "production", shown: "production"
    ) { text throws(SettingProblem) in
        guard ["production", "development"].contains(text.lowercased()) else { throw SettingProblem("'\(text)' is not production or development") }
        return text.lowercased()
    }
        .documented("App Attest: `development` accepts attestations of development-signed apps (AAGUID `appattestdevelop`) instead")
    public static let appAttestRootCA = Setting<PEMFile?>(
        "app-attest-root-ca", "App Attest: PATH of a PEM root CA that replaces Apple's App Attestation Root CA (a private staging CA; warned about at start).",
        value: "path", default: nil, shown: "Apple's, built in"
    ) { path throws(SettingProblem) in
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else { throw SettingProblem("cannot read '\(path)'") }
        return PEMFile(path: path, pem: pem)
    }
        .documented("App Attest: a PEM file whose root replaces Apple's App Attestation Root CA, for a private staging CA only (warned about at start)")
    public static let playIntegrityPackages: Setting<[String]?> = .list(
        "play-integrity-packages", "Play Integrity: the Android package names that may attest, comma-separated; needs both --play-integrity-*-key.",
        value: "names", empty: "name at least one Android package name, comma-separated"
    ) { name in
        name.utf8.count <= 255 && name.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) ? nil : "'\(name)' is not a package name"
    }
        .documented("Play Integrity: the Android package names that may attest, comma-separated; needs both keys below")
    public static let playIntegrityDecryptionKey = Setting<String?>(
        "play-integrity-decryption-key", "Play Integrity: the app's response decryption key from Play Console, base64 (AES-256).",
        value: "base64", default: nil, shown: "off", secret: true) { $0 }
        .documented("Play Integrity: the response decryption key from Play Console, base64")
    public static let playIntegrityVerificationKey = Setting<String?>(
        "play-integrity-verification-key", "Play Integrity: the app's response verification key from Play Console, base64 DER (EC P-256 public key).",
        value: "base64", default: nil, shown: "off") { $0 }
        .documented("Play Integrity: the response verification key from Play Console, base64 DER")

    /// All of the above, in the order `--help` lists them. A flag missing here is an unknown
    /// option on the command line (and a test says so).
    public static let all: [any SettingDescription] = [
        hostname, port, database, databasePoolSize, databasePooling, transferTTL, accessTokenTTL, refreshTokenTTL,
        idleTimeout, requestTimeout,
        argon2MemoryKiB, argon2Iterations, argon2Parallelism, hashWorkers, hashQueue,
        accountCreationLimit, claimLimit, setupLimit, nonceLimit, handoffLimit, ipv6Prefix, trustedProxy, maxAccountsPerDevice, auditRetention, inactiveAccountTTL, activityResolution, pruneInterval,
        signingKeyMaxAge, keyEncryptionKeyFile,
        webhookURL, webhookSecret,
        appleClientIDs, appleIssuer, appleJWKSURL, appleTokenURL, appleRevokeURL, appleTeamID, appleKeyID, applePrivateKey,
        handoffClients, handoffCodeTTL,
        deviceProof,
        attestation, appAttestAppIDs, appAttestEnvironment, appAttestRootCA, playIntegrityPackages, playIntegrityDecryptionKey,
        playIntegrityVerificationKey,
    ]
}

/// `--webhook-secret`: `whsec_` and the base64 of 24 to 64 bytes (Standard Webhooks' bounds).
public struct WebhookSecret: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public let bytes: Data
    public init?(_ text: String) {
        guard text.hasPrefix("whsec_"), let bytes = Data(base64Encoded: String(text.dropFirst(6))), (24...64).contains(bytes.count) else {
            return nil
        }
        self.bytes = bytes
    }
    /// Never the key.
    public var description: String { "WebhookSecret(<redacted>)" }
    public var debugDescription: String { description }
}

/// A file read for a flag that names it (`--apple-private-key PATH`).
public struct PEMFile: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public let path: String
    public let pem: String
    /// Never the key.
    public var description: String { "PEMFile(\(path))" }
    public var debugDescription: String { description }
}

extension SigningKeyAtRestError {
    /// One line for the operator (the server's start-up error, the CLI's), naming the flag that
    /// gives the key-encryption key and the ids of the keys involved; never a key.
    public var advice: String {
        let flag = ServerFlags.keyEncryptionKeyFile
        switch self {
        case .keyEncryptionKeyNeeded:
            return "\(description); give its file with \(flag.flag) (or \(flag.environmentName))"
        case .otherKeyEncryptionKey(let needed, _):
            return "\(flag.flag): \(description); give the file of \(needed) (transfer keys rotate-kek moves the keys to another)"
        case .doesNotOpen, .unreadable:
            return description
        }
    }
}
