import TransferCore

/// A result row, as both stores' rows can answer it (GRDB's `Row`, PostgresNIO's
/// `PostgresRandomAccessRow`). Every decoder below is written once against it.
public protocol SQLRow: SendableMetatype {
    func text(_ column: String) throws -> String
    func textOrNil(_ column: String) throws -> String?
    func integer(_ column: String) throws -> Int64
    func integerOrNil(_ column: String) throws -> Int64?
    func blob(_ column: String) throws -> [UInt8]
    func blobOrNil(_ column: String) throws -> [UInt8]?
    /// A boolean expression's value (PostgreSQL answers `boolean`, SQLite an integer).
    func bool(_ column: String) throws -> Bool
    /// By position, where a name lookup per column would cost more than the row.
    func text(at index: Int) throws -> String
    func textOrNil(at index: Int) throws -> String?
    func integer(at index: Int) throws -> Int64
}

extension SQLRow {
    public func int(_ column: String) throws -> Int { Int(try integer(column)) }
    public func time(_ column: String) throws -> Timestamp { Timestamp(milliseconds: try integer(column)) }
    public func timeOrNil(_ column: String) throws -> Timestamp? { try integerOrNil(column).map(Timestamp.init(milliseconds:)) }
    /// An integer column that holds a flag (0/1).
    public func flag(_ column: String) throws -> Bool { try integer(column) != 0 }
    public func flag(at index: Int) throws -> Bool { try integer(at: index) != 0 }
    public func hash(_ column: String) throws -> SecretHash { SecretHash(bytes: try blob(column)) }
    /// A stored enum value; one this version does not know fails loudly.
    public func value<Value: RawRepresentable>(_ column: String, table: String) throws -> Value where Value.RawValue == String {
        try UnknownStoredValue.decode(try text(column), column: "\(table).\(column)")
    }
}

/// How each table's rows become the domain's records: once, for both stores.
public enum Rows {
    /// A `device_accounts` row joined with its account (`user_name`, `deleted`, `flag`), as `Queries.pairs` reads it.
    public static func pair(_ row: some SQLRow) throws -> PairRecord {
        var session: PairSession?
        if let id = try row.textOrNil("session_id") {
            session = PairSession(
                sessionID: id, startedAt: try row.time("session_started_at"), generation: try row.int("refresh_generation"),
                refreshHash: try row.hash("refresh_hash"), expiresAt: try row.time("refresh_expires_at"),
                keyByDevice: try row.blobOrNil("key_by_device"), keyByToken: try row.blobOrNil("key_by_token"))
        }
        return PairRecord(
            account: try accountSummary(row), state: try row.value("state", table: "device_accounts"),
            addedAt: try row.time("added_at"), lastLoginAt: try row.timeOrNil("last_login_at"), endedAt: try row.timeOrNil("ended_at"),
            endedReason: try row.textOrNil("ended_reason"), session: session, pushEnabled: try row.flag("push_enabled"),
            accountDeleted: try row.bool("deleted"))
    }

    /// A `devices` row with the pairs read for it.
    public static func device(_ row: some SQLRow, accounts: [PairRecord]) throws -> DeviceRecord {
        DeviceRecord(
            id: try row.text("id"), secretHash: try row.hash("secret_hash"), createdAt: try row.time("created_at"),
            currentAccountID: try row.textOrNil("current_account_id"), retiredAt: try row.timeOrNil("retired_at"), accounts: accounts,
            pushMode: try row.value("push_mode", table: "devices"), attestation: try deviceAttestation(row))
    }

    /// The attestation columns of a `devices` row (v13); nil when it recorded none.
    static func deviceAttestation(_ row: some SQLRow) throws -> DeviceAttestation? {
        guard let outcome = try row.textOrNil("attestation_outcome"), let at = try row.timeOrNil("attested_at") else { return nil }
        var key: AttestedKey?
        if let keyID = try row.blobOrNil("attestation_key_id"), let publicKey = try row.blobOrNil("attestation_public_key") {
            key = AttestedKey(keyID: keyID, publicKey: publicKey, counter: try row.integerOrNil("attestation_counter") ?? 0)
        }
        let platform: AttestationPlatform? = try row.textOrNil("attestation_platform").map {
            try UnknownStoredValue.decode($0, column: "devices.attestation_platform")
        }
        return DeviceAttestation(platform: platform, outcome: try AttestationOutcome(stored: outcome), key: key, at: at)
    }

    /// An `accounts` row with its id as `account_id` and its migration flag as `flag`.
    public static func account(_ row: some SQLRow) throws -> AccountRecord {
        AccountRecord(
            summary: try accountSummary(row), createdAt: try row.time("created_at"), movedToDeviceID: try row.textOrNil("moved_to_device_id"),
            deletedAt: try row.timeOrNil("deleted_at"), protectedAt: try row.timeOrNil("protected_at"))
    }

    /// `account_id`, `user_name` and `flag` of a row.
    public static func accountSummary(_ row: some SQLRow) throws -> AccountSummary {
        AccountSummary(accountID: try row.text("account_id"), userName: try row.text("user_name"), migrationFlag: try row.bool("flag"))
    }

    /// A row of `Queries.pushRoutes`, by position (1 000 rows a request: on SQLite, GRDB
    /// lower-cases a name on every lookup by name, which cost 4 % of row 12's rate in an A/B
    /// run); nil when the routing rule sends this account's pushes elsewhere.
    public static func pushRoute(_ row: some SQLRow) throws -> PushRoute? {
        guard DeviceRecord.routesPushes(
            pushEnabled: try row.flag(at: 5), mode: try UnknownStoredValue.decode(try row.text(at: 6), column: "devices.push_mode"),
            isCurrent: try row.flag(at: 7))
        else { return nil }
        return PushRoute(
            provider: try UnknownStoredValue.decode(try row.text(at: 0), column: "push_tokens.provider"), token: try row.text(at: 1),
            environment: try row.textOrNil(at: 2).map { try UnknownStoredValue.decode($0, column: "push_tokens.environment") },
            deviceID: try row.text(at: 3), accountID: try row.text(at: 4))
    }

    public static func pushToken(_ row: some SQLRow) throws -> PushToken {
        PushToken(
            deviceID: try row.text("device_id"), provider: try row.value("provider", table: "push_tokens"), token: try row.text("token"),
            environment: try row.textOrNil("environment").map { try UnknownStoredValue.decode($0, column: "push_tokens.environment") },
            registeredAt: try row.time("registered_at"))
    }

    public static func siblingSession(_ row: some SQLRow) throws -> SiblingSession {
        SiblingSession(
            deviceID: try row.text("device_id"), accountID: try row.text("account_id"), clientID: try row.text("client_id"),
            sessionID: try row.text("session_id"), startedAt: try row.time("started_at"), generation: try row.int("refresh_generation"),
            refreshHash: try row.hash("refresh_hash"), expiresAt: try row.time("refresh_expires_at"))
    }

    public static func handoffCode(_ row: some SQLRow) throws -> HandoffCodeRecord {
        HandoffCodeRecord(
            codeHash: try row.hash("code_hash"), deviceID: try row.text("device_id"), accountID: try row.text("account_id"),
            hostSessionID: try row.text("host_session_id"), clientID: try row.text("client_id"), challenge: try row.text("challenge"),
            createdAt: try row.time("created_at"), expiresAt: try row.time("expires_at"), redeemedAt: try row.timeOrNil("redeemed_at"),
            siblingSessionID: try row.textOrNil("sibling_session_id"))
    }

    public static func appleLink(_ row: some SQLRow) throws -> AppleLink {
        AppleLink(
            accountID: try row.text("account_id"), sub: try row.text("sub"), email: try row.textOrNil("email"),
            isPrivateEmail: try row.integerOrNil("is_private_email").map { $0 != 0 }, linkedAt: try row.time("linked_at"),
            refreshToken: try row.textOrNil("refresh_token"), clientID: try row.textOrNil("client_id"),
            emailEnabled: try row.flag("email_enabled"), movedAt: try row.timeOrNil("moved_at"))
    }

    public static func serviceKey(_ row: some SQLRow) throws -> ServiceKeyRecord {
        ServiceKeyRecord(
            name: try row.text("name"), createdAt: try row.time("created_at"), createdBy: try row.text("created_by"),
            lastUsedAt: try row.timeOrNil("last_used_at"), revokedAt: try row.timeOrNil("revoked_at"), revokedBy: try row.textOrNil("revoked_by"))
    }

    public static func transfer(_ row: some SQLRow) throws -> TransferRecord {
        let proof: TransferProof
        switch try row.value("method", table: "transfers") as TransferMethod {
        case .password:
            proof = .password(email: try row.text("email"), emailKey: try row.text("email_key"), hash: try row.text("password_hash"))
        case .code:
            proof = .code(try row.hash("code_hash"))
        }
        return TransferRecord(
            id: try row.text("id"), accountID: try row.text("account_id"), proof: proof, state: try row.value("state", table: "transfers"),
            createdAt: try row.time("created_at"), expiresAt: try row.time("expires_at"), failedConsecutive: try row.int("failed_consecutive"),
            failedTotal: try row.int("failed_total"), lockedUntil: try row.timeOrNil("locked_until"),
            issuedBy: try Initiator(stored: try row.text("issued_by")), endedAt: try row.timeOrNil("ended_at"),
            claimedBy: try row.textOrNil("claimed_by_device"))
    }

    public static func backupKey(_ row: some SQLRow) throws -> BackupKeyRecord {
        BackupKeyRecord(
            accountID: try row.text("account_id"), store: try row.value("store", table: "backup_keys"), keyHash: try row.hash("key_hash"),
            createdAt: try row.time("created_at"), usedAt: try row.timeOrNil("used_at"), usedByDevice: try row.textOrNil("used_by_device"))
    }

    public static func recoveryCode(_ row: some SQLRow) throws -> RecoveryCodeRecord {
        RecoveryCodeRecord(
            accountID: try row.text("account_id"), codeHash: try row.hash("code_hash"), createdAt: try row.time("created_at"),
            usedAt: try row.timeOrNil("used_at"), usedByDevice: try row.textOrNil("used_by_device"))
    }

    public static func outboxMessage(_ row: some SQLRow) throws -> OutboxMessage {
        OutboxMessage(
            id: try row.text("id"), kind: try row.value("kind", table: "outbox"), accountID: try row.text("account_id"),
            type: try row.text("type"), body: try row.text("body"), createdAt: try row.time("created_at"),
            state: try row.value("state", table: "outbox"), attempts: try row.int("attempts"), nextAttemptAt: try row.time("next_attempt_at"),
            giveUpAt: try row.time("give_up_at"), lastError: try row.textOrNil("last_error"), leasedUntil: try row.timeOrNil("leased_until"),
            leaseID: try row.textOrNil("lease_id"))
    }

    public static func signingKey(_ row: some SQLRow) throws -> SigningKeyRecord {
        SigningKeyRecord(
            kid: try row.text("kid"), algorithm: try row.text("algorithm"), privateKey: try row.text("private_key"),
            createdAt: try row.time("created_at"), retiredAt: try row.timeOrNil("retired_at"))
    }

    public static func event(_ row: some SQLRow) throws -> AuditEvent {
        var event = AuditEvent(
            at: try row.time("at"), kind: try row.value("kind", table: "audit_events"), accountID: try row.textOrNil("account_id"),
            deviceID: try row.textOrNil("device_id"), transferID: try row.textOrNil("transfer_id"),
            actor: try Initiator(stored: try row.text("actor")), reason: try row.textOrNil("reason"),
            clientAddress: try row.textOrNil("client_address"))
        event.repeats = try row.int("repeats")
        event.lastAt = try row.timeOrNil("last_at")
        return event
    }

    public static func refreshTokenLookup(_ row: some SQLRow) throws -> RefreshTokenLookup {
        RefreshTokenLookup(
            deviceID: try row.text("device_id"), accountID: try row.text("account_id"), sessionID: try row.text("session_id"),
            clientID: try row.textOrNil("client_id"))
    }
}
