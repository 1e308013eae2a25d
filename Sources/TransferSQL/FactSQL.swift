import TransferCore

// Each fact of `FactKey` (TransferCore's `Facts.swift`) as SQL, declared once here, in three
// parts the compiler keeps complete: its rank in the lock order, its statements, and how
// their rows become its value. `FactsPlan` reads any list of facts with them.

extension FactKey {
    /// The lock order, written once: an operation reads (and locks) its facts by rank, so
    /// concurrent operations lock rows in the same order and never wait on each other in a cycle.
    var rank: Int {
        switch self {
        case .transfer, .transferByCode: 0
        case .pendingTransfers: 1
        case .refreshToken: 2
        case .refreshTokenDevice: 3
        case .refreshTokenSiblingSession: 4
        // The code's device first, as every other operation locks it (deletion erases codes
        // after locking it); then the code: of concurrent redemptions, the second waits and
        // then sees the code used.
        case .handoffCodeDevice: 5
        case .handoffCode: 6
        case .device: 7
        case .accountDevices: 8
        case .account: 9
        // After the device (7): its lock holds back concurrent creations on it, so what this
        // reads, unlocked, is every creation committed before this one may happen.
        case .accountsCreated: 9
        case .signingKeys: 10
        case .serviceKey: 11
        case .appleNonce: 12
        case .appleLinkBySub: 13
        case .appleLink: 14
        case .appleNotificationSeen: 15
        case .dueOutbox: 16
        case .outboxMessage: 17
        case .failedOutbox: 18
        case .recoveryCode: 19
        case .backupKeys: 20
        case .attestationChallenge: 21
        // After the registering device (7): a device's own token row is locked only after the device.
        case .pushTokenHolder: 22
        // Read only outside operations, never locked.
        case .boundDevices, .devicesEver, .recentEvents, .pushTokens, .siblingSessions: 23
        }
    }

    /// The fact whose value this one's statements need: read first, listed or not.
    var source: FactKey? {
        switch self {
        case .refreshTokenDevice(let hash), .refreshTokenSiblingSession(let hash): .refreshToken(hash)
        default: nil
        }
    }
}

extension AccountRef {
    /// The account's id in a statement: bound, or looked up by the code that leads to it.
    var sql: SQLText {
        switch self {
        case .id(let id): "\(id)"
        case .ofTransferCode(let hash): "(SELECT account_id FROM transfers WHERE code_hash = \(hash))"
        case .ofRecoveryCode(let hash): "(SELECT account_id FROM recovery_codes WHERE code_hash = \(hash))"
        case .ofAppleID(let sub): "(SELECT account_id FROM apple_links WHERE sub = \(sub))"
        case .ofBackupKey(let hash): "(SELECT account_id FROM backup_keys WHERE key_hash = \(hash))"
        }
    }
}

/// One fact being read: its statements one after another, then its value.
struct FactReading: Sendable {
    let key: FactKey
    let now: Timestamp
    /// Inside an operation's transaction the rows read are locked (`FOR UPDATE` on PostgreSQL).
    let lock: Bool
    /// Which of the fact's statements comes next.
    var stage = 0
    /// Facts made of devices read them here (two statements a device).
    var devices: DeviceReads
    private(set) var done = false
    private(set) var value: any Sendable = ()

    init(_ key: FactKey, now: Timestamp, lock: Bool) {
        self.key = key
        self.now = now
        self.lock = lock
        devices = DeviceReads(now: now, lock: lock)
    }

    private var forUpdate: SQLText { lock ? SQLText.forUpdate : "" }

    /// The fact's next statement, or nil once its value is read. `facts` holds the facts read
    /// before it (a chained fact's source).
    mutating func next(after facts: Facts, dialect: SQLDialect) -> SQLText? {
        guard !done else { return nil }
        switch key {
        case .transfer(let id):
            return "SELECT * FROM transfers WHERE id = \(id)\(forUpdate)"
        case .transferByCode(let hash):
            return "SELECT * FROM transfers WHERE code_hash = \(hash)\(forUpdate)"
        case .pendingTransfers(let q):
            return """
                SELECT * FROM transfers WHERE state = 'pending' AND (account_id = \(q.account.sql) OR email_key = \(q.emailKey))
                ORDER BY created_at, id\(forUpdate)
                """
        case .refreshToken(let hash):
            return """
                SELECT device_id, account_id, session_id, \(SQLText.nullText) AS client_id FROM device_accounts WHERE refresh_hash = \(hash)
                UNION ALL
                SELECT device_id, account_id, session_id, client_id FROM sibling_sessions WHERE refresh_hash = \(hash)
                UNION ALL
                SELECT device_id, account_id, session_id, client_id FROM rotated_refresh_tokens WHERE token_hash = \(hash)
                LIMIT 1
                """
        case .refreshTokenDevice(let hash):
            if stage == 0 {
                stage = 1
                if let lookup = try? facts.refreshToken(hash) { devices.add(lookup.deviceID) }
            }
            return devicesNext()
        case .refreshTokenSiblingSession(let hash):
            guard let lookup = try? facts.refreshToken(hash), let client = lookup.clientID else {
                finish(SiblingSession?.none)
                return nil
            }
            return """
                SELECT * FROM sibling_sessions
                WHERE device_id = \(lookup.deviceID) AND account_id = \(lookup.accountID) AND client_id = \(client)\(forUpdate)
                """
        case .handoffCodeDevice(let hash):
            if stage == 0 { return "SELECT device_id FROM handoff_codes WHERE code_hash = \(hash)" }
            return devicesNext()
        case .handoffCode(let hash):
            return "SELECT * FROM handoff_codes WHERE code_hash = \(hash)\(forUpdate)"
        case .device(let id):
            if stage == 0 {
                stage = 1
                devices.add(id)
            }
            return devicesNext()
        case .accountDevices(let account):
            if stage == 0 { return "SELECT device_id FROM device_accounts WHERE account_id = \(account.sql) AND state = 'active'" }
            return devicesNext()
        case .account(let account):
            return """
                SELECT a.id AS account_id, a.user_name, a.created_at, a.moved_to_device_id, a.deleted_at, a.protected_at,
                       \(SQLText.migrationFlag(at: now)) AS flag
                FROM accounts a WHERE a.id = \(account.sql)\(forUpdate)
                """
        case .accountsCreated(let device, let since):
            return "SELECT created_at FROM accounts WHERE created_on_device_id = \(device) AND created_at > \(since) ORDER BY created_at"
        case .signingKeys:
            if stage == 0 {
                // Nodes starting together on an empty table serialise here: one inserts the key
                // and the others then read it (SQLite's writer is alone already).
                if lock, dialect == .postgres { return Queries.signingKeysLock }
                stage = 1
            }
            return "SELECT kid, algorithm, private_key, created_at, retired_at FROM signing_keys ORDER BY created_at, kid"
        case .serviceKey(let name):
            return "SELECT * FROM service_keys WHERE name = \(name)\(forUpdate)"
        case .appleNonce(let hash):
            return "SELECT expires_at FROM apple_nonces WHERE nonce_hash = \(hash)\(forUpdate)"
        case .appleLinkBySub(let sub):
            return "SELECT * FROM apple_links WHERE sub = \(sub)\(forUpdate)"
        case .appleLink(let account):
            return "SELECT * FROM apple_links WHERE account_id = \(account.sql)\(forUpdate)"
        case .appleNotificationSeen(let jti):
            return "SELECT 1 AS seen FROM apple_notifications WHERE jti = \(jti)"
        case .dueOutbox(let q):
            // A later message of an account is not due while an earlier one is pending; rows
            // another node is leasing right now are skipped, not waited for.
            return """
                SELECT * FROM outbox o
                WHERE o.kind = \(q.kind) AND o.state = 'pending' AND o.next_attempt_at <= \(now)
                  AND (o.leased_until IS NULL OR o.leased_until <= \(now))
                  AND NOT EXISTS (
                    SELECT 1 FROM outbox p WHERE p.kind = o.kind AND p.account_id = o.account_id AND p.state = 'pending' AND p.seq < o.seq)
                ORDER BY o.seq LIMIT \(q.limit)\(lock ? SQLText.forUpdateSkipLocked : "")
                """
        case .outboxMessage(let id):
            return "SELECT * FROM outbox WHERE id = \(id)\(forUpdate)"
        case .failedOutbox:
            return "SELECT * FROM outbox WHERE state = 'failed' ORDER BY seq\(forUpdate)"
        case .recoveryCode(let account):
            return "SELECT * FROM recovery_codes WHERE account_id = \(account.sql)\(forUpdate)"
        case .backupKeys(let account):
            return "SELECT * FROM backup_keys WHERE account_id = \(account.sql) ORDER BY store\(forUpdate)"
        case .attestationChallenge(let hash):
            return "SELECT expires_at FROM attestation_challenges WHERE challenge_hash = \(hash)\(forUpdate)"
        case .pushTokenHolder(let provider, let hash):
            return """
                SELECT t.device_id, p.account_id FROM push_tokens t
                LEFT JOIN device_accounts p ON p.device_id = t.device_id AND p.state = 'active'
                WHERE t.provider = \(provider) AND t.token_hash = \(hash) ORDER BY p.added_at\(lock ? SQLText.forUpdateOfTokens : "")
                """
        case .boundDevices(let account):
            return """
                SELECT device_id, added_at, last_login_at FROM device_accounts
                WHERE account_id = \(account) AND state = 'active' ORDER BY added_at
                """
        case .devicesEver(let account):
            if stage == 0 { return "SELECT device_id FROM device_accounts WHERE account_id = \(account) ORDER BY added_at, device_id" }
            return devicesNext()
        case .recentEvents(let account, let limit):
            return "SELECT * FROM (SELECT * FROM audit_events WHERE account_id = \(account) ORDER BY id DESC LIMIT \(limit)) e ORDER BY id"
        case .pushTokens(let account):
            return """
                SELECT t.* FROM push_tokens t JOIN device_accounts p ON p.device_id = t.device_id
                WHERE p.account_id = \(account) AND p.state = 'active' ORDER BY t.device_id, t.provider
                """
        case .siblingSessions(let account):
            return "SELECT * FROM sibling_sessions WHERE account_id = \(account) ORDER BY device_id, client_id"
        }
    }

    /// Takes the rows of the statement `next` gave: the fact's value, or what its next statement needs.
    mutating func take<Row: SQLRow>(_ rows: [Row]) throws {
        defer { stage += 1 }
        switch key {
        case .transfer, .transferByCode: finish(try rows.first.map(Rows.transfer))
        case .pendingTransfers: finish(try rows.map(Rows.transfer))
        case .refreshToken: finish(try rows.first.map(Rows.refreshTokenLookup))
        case .refreshTokenSiblingSession: finish(try rows.first.map(Rows.siblingSession))
        case .handoffCode: finish(try rows.first.map(Rows.handoffCode))
        case .refreshTokenDevice, .device: try devices.take(rows)
        case .accountDevices, .devicesEver, .handoffCodeDevice:
            if stage == 0 {
                for row in rows { devices.add(try row.text("device_id")) }
            } else {
                try devices.take(rows)
            }
        case .account: finish(try rows.first.map(Rows.account))
        case .accountsCreated: finish(try rows.map { try $0.time("created_at") })
        case .signingKeys: if stage == 1 { finish(try rows.map(Rows.signingKey)) }
        case .serviceKey: finish(try rows.first.map(Rows.serviceKey))
        case .appleNonce, .attestationChallenge: finish(try rows.first.map { try $0.time("expires_at") })
        case .appleLinkBySub, .appleLink: finish(try rows.first.map(Rows.appleLink))
        case .appleNotificationSeen: finish(!rows.isEmpty)
        case .dueOutbox, .failedOutbox: finish(try rows.map(Rows.outboxMessage))
        case .outboxMessage: finish(try rows.first.map(Rows.outboxMessage))
        case .recoveryCode: finish(try rows.first.map(Rows.recoveryCode))
        case .backupKeys: finish(try rows.map(Rows.backupKey))
        case .pushTokenHolder:
            finish(
                try rows.first.map { first in
                    PushTokenHolder(deviceID: try first.text("device_id"), accountIDs: try rows.compactMap { try $0.textOrNil("account_id") })
                })
        case .boundDevices:
            finish(
                try rows.map {
                    AccountProfile.Device(
                        deviceID: try $0.text("device_id"), boundAt: try $0.time("added_at"), lastLoginAt: try $0.timeOrNil("last_login_at"))
                })
        case .recentEvents: finish(try rows.map(Rows.event))
        case .pushTokens: finish(try rows.map(Rows.pushToken))
        case .siblingSessions: finish(try rows.map(Rows.siblingSession))
        }
    }

    private mutating func finish(_ value: any Sendable) {
        self.value = value
        done = true
    }

    /// The devices' statements; once every device is read, the fact's value.
    private mutating func devicesNext() -> SQLText? {
        if let sql = devices.next() { return sql }
        switch key {
        case .accountDevices, .devicesEver: finish(devices.devices)
        default: finish(devices.devices.first)
        }
        return nil
    }
}
