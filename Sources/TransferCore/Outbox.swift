import Foundation

// The transactional outbox: what must reach the outside world (the app backend's webhook,
// Apple's revocation endpoint) is written as a row in the same transaction as the change it
// reports, and delivered after the commit by a worker, at least once. Nothing is sent for a
// change that rolled back, and nothing is lost by a crash between the commit and the send.

/// What an outbox row is for.
public enum OutboxKind: String, Sendable, CaseIterable {
    /// An event for the app backend's webhook.
    case webhook
    /// Apple's refresh token to revoke (unlink, deletion).
    case appleRevoke = "apple_revoke"
}

/// A row to write into the outbox.
public struct OutboxEntry: Sendable, Equatable {
    public var kind: OutboxKind
    /// Rows of one kind and account are delivered oldest first, one at a time.
    public var accountID: String
    /// The event type (`transfer.claimed`), or the kind's name.
    public var type: String
    /// What is sent: the webhook's JSON body, fixed at the change so every retry sends the same bytes.
    public var body: String
    public var at: Timestamp
    public init(kind: OutboxKind, accountID: String, type: String, body: String, at: Timestamp) {
        self.kind = kind
        self.accountID = accountID
        self.type = type
        self.body = body
        self.at = at
    }

    /// Retried until then; failed after.
    public var giveUpAt: Timestamp { at + OutboxPolicy.retryFor }
}

/// An event for the app backend: ids and times only, never a secret, token, hash or email.
public struct WebhookEvent: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case accountCreated = "account.created"
        case transferSetUp = "transfer.set_up"
        case transferCancelled = "transfer.cancelled"
        case transferClaimed = "transfer.claimed"
        case transferLocked = "transfer.locked"
        case transferVoided = "transfer.voided"
        case deviceRevoked = "device.revoked"
        case accountRemovedFromDevice = "account.removed_from_device"
        case accountDeleted = "account.deleted"
        case appleLinked = "apple.linked"
        case appleUnlinked = "apple.unlinked"
        case waysBackChanged = "account.ways_back_changed"
        case pushTokenMoved = "push.token_moved"
    }

    /// What an `account.ways_back_changed` event says changed.
    public enum WayBackChange: String, Sendable, CaseIterable {
        /// A transfer was set up, or replaced the one pending.
        case transferSetUp = "transfer.set_up"
        case transferCancelled = "transfer.cancelled"
        case recoveryCodeCreated = "recovery_code.created"
        case recoveryCodeReplaced = "recovery_code.replaced"
        case recoveryCodeDeleted = "recovery_code.deleted"
        case backupKeyCreated = "backup_key.created"
        case backupKeyReplaced = "backup_key.replaced"
        case backupKeyDeleted = "backup_key.deleted"
        case appleLinked = "apple.linked"
        case appleUnlinked = "apple.unlinked"
    }

    /// How a `transfer.claimed` account reached its new device.
    public enum ClaimMethod: String, Sendable {
        /// The transfer's temporary password, set up on the old phone.
        case password
        /// Sign in with Apple.
        case apple
        /// A transfer code, set up on the old phone.
        case code
        /// The account's recovery code.
        case recoveryCode = "recovery_code"
        /// One of the account's backup keys (from iCloud Keychain or Block Store).
        case backupKey = "backup_key"
        /// The temporary password or code of a transfer support issued.
        case support
    }

    public var kind: Kind
    public var accountID: String
    public var at: Timestamp
    /// The `data` object besides `accountId`; nil values are sent as JSON null.
    public var data: [String: String?]

    public init(_ kind: Kind, accountID: String, at: Timestamp, data: [String: String?] = [:]) {
        self.kind = kind
        self.accountID = accountID
        self.at = at
        self.data = data
    }

    /// `{"type", "timestamp", "data": {"accountId", …}}`, keys sorted: the bytes signed and sent.
    public var body: String {
        struct Body: Encodable {
            var type: String
            var timestamp: String
            var data: [String: String?]
        }
        var data = data
        data["accountId"] = accountID
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding strings into JSON cannot fail.
        let bytes = (try? encoder.encode(Body(type: kind.rawValue, timestamp: at.rfc3339, data: data))) ?? Data()
        return String(decoding: bytes, as: UTF8.self)
    }

    public var entry: OutboxEntry {
        OutboxEntry(kind: .webhook, accountID: accountID, type: kind.rawValue, body: body, at: at)
    }
}

extension Effect {
    /// The event is written to the outbox with the change.
    public static func webhook(_ kind: WebhookEvent.Kind, accountID: String, at: Timestamp, _ data: [String: String?] = [:]) -> Effect {
        .enqueue(WebhookEvent(kind, accountID: accountID, at: at, data: data).entry)
    }

    /// `account.ways_back_changed`, so the app backend can tell the user that a way back changed
    /// (a takeover changes one). `deviceID`: the device that made the change; nil for support's.
    /// `store` names a backup key's store (its `data` has `store` then).
    public static func waysBackChanged(
        _ change: WebhookEvent.WayBackChange, accountID: String, deviceID: String?, at: Timestamp, store: BackupKeyStore? = nil
    ) -> Effect {
        var data: [String: String?] = ["deviceId": deviceID, "change": change.rawValue]
        if let store { data["store"] = store.rawValue }
        return .webhook(.waysBackChanged, accountID: accountID, at: at, data)
    }
}

/// An outbox row as the worker and support see it.
public struct OutboxMessage: Sendable, Equatable {
    public enum State: String, Sendable {
        case pending
        case failed
    }

    /// The webhook's `webhook-id`: the same on every attempt.
    public var id: String
    public var kind: OutboxKind
    public var accountID: String
    public var type: String
    public var body: String
    public var createdAt: Timestamp
    public var state: State
    public var attempts: Int
    public var nextAttemptAt: Timestamp
    /// After this time a failed attempt fails the message (three days after it was written or retried).
    public var giveUpAt: Timestamp
    public var lastError: String?
    /// Set while a worker is delivering it: another worker leaves it alone until then.
    public var leasedUntil: Timestamp?
    public var leaseID: String?

    public init(
        id: String, kind: OutboxKind, accountID: String, type: String, body: String, createdAt: Timestamp, state: State,
        attempts: Int, nextAttemptAt: Timestamp, giveUpAt: Timestamp, lastError: String?, leasedUntil: Timestamp?, leaseID: String?
    ) {
        self.id = id
        self.kind = kind
        self.accountID = accountID
        self.type = type
        self.body = body
        self.createdAt = createdAt
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.giveUpAt = giveUpAt
        self.lastError = lastError
        self.leasedUntil = leasedUntil
        self.leaseID = leaseID
    }
}

/// The retry rule of the contract: the first retry within 5 s, each wait double the last,
/// capped at one hour, for three days; then the message is failed.
public struct OutboxPolicy: Sendable, Equatable {
    public var firstRetry: Duration
    public var maxWait: Duration
    /// The contract's three days. Not a setting: a row's give-up time is fixed when the row is
    /// written (by a plan, which knows no configuration), so every node and the CLI agree on it.
    public static let retryFor: Duration = .seconds(3 * 24 * 3600)
    /// How long a worker holds a message it is delivering (longer than a delivery may take).
    public var lease: Duration

    public init(
        firstRetry: Duration = .seconds(5), maxWait: Duration = .seconds(3600), lease: Duration = .seconds(60)
    ) {
        self.firstRetry = firstRetry
        self.maxWait = maxWait
        self.lease = lease
    }

    public static let standard = OutboxPolicy()

    /// The wait after the `attempts`-th failed attempt (1 for the first).
    public func wait(afterAttempts attempts: Int) -> Duration {
        let doublings = min(max(attempts - 1, 0), 20)
        return min(firstRetry * (1 << doublings), maxWait)
    }
}

/// What happened when a worker sent a message.
public enum DeliveryOutcome: Sendable, Equatable {
    case delivered
    /// Why it failed, for support (`HTTP 503`, `timed out`): never the receiver's body.
    case failed(String)
}

// MARK: Operations

/// Takes up to `limit` messages of one kind that are due, the oldest of their (kind, account) each, and
/// leases them to this worker until `now + lease`. On PostgreSQL, rows another node is
/// taking are skipped, so several nodes deliver without sending one message twice at once.
public struct LeaseOutboxCommand: StoreOperation {
    public var now: Timestamp
    public var limit: Int
    public var kind: OutboxKind
    public var leaseID: String
    public var policy: OutboxPolicy
    public init(now: Timestamp, limit: Int, kind: OutboxKind, leaseID: String, policy: OutboxPolicy = .standard) {
        self.now = now
        self.limit = limit
        self.kind = kind
        self.leaseID = leaseID
        self.policy = policy
    }

    var query: DueOutboxQuery { DueOutboxQuery(limit: limit, kind: kind) }
    public var reads: [FactKey] { [.dueOutbox(query)] }

    public func plan(_ facts: Facts) throws -> Plan<[OutboxMessage]> {
        let until = now + policy.lease
        let leased = try facts.dueOutbox(query).map {
            var message = $0
            message.leasedUntil = until
            message.leaseID = leaseID
            return message
        }
        return Plan(leased, leased.map { .leaseOutbox(id: $0.id, leaseID: leaseID, until: until) })
    }
}

public struct DueOutboxQuery: Sendable, Hashable {
    public var limit: Int
    public var kind: OutboxKind
    public init(limit: Int, kind: OutboxKind) {
        self.limit = limit
        self.kind = kind
    }
}

/// Records what a delivery did: a delivered message goes; a failed one waits for its next
/// attempt, or is failed once its three days are over. Nothing happens when the lease was
/// lost meanwhile (another worker took the message after the lease ran out).
public struct RecordDeliveryCommand: StoreOperation {
    public var message: OutboxMessage
    public var outcome: DeliveryOutcome
    public var now: Timestamp
    public var policy: OutboxPolicy
    public init(message: OutboxMessage, outcome: DeliveryOutcome, now: Timestamp, policy: OutboxPolicy = .standard) {
        self.message = message
        self.outcome = outcome
        self.now = now
        self.policy = policy
    }

    public var reads: [FactKey] { [.outboxMessage(id: message.id)] }

    public func plan(_ facts: Facts) throws -> Plan<OutboxMessage.State?> {
        guard let stored = try facts.outboxMessage(message.id), stored.state == .pending, stored.leaseID == message.leaseID, stored.leaseID != nil
        else { return Plan(nil) }
        switch outcome {
        case .delivered:
            return Plan(nil, [.deleteOutbox(id: stored.id)])
        case .failed(let error):
            let attempts = stored.attempts + 1
            let next = now + policy.wait(afterAttempts: attempts)
            if next > stored.giveUpAt {
                return Plan(.failed, [.failOutbox(id: stored.id, attempts: attempts, error: error, at: now)])
            }
            return Plan(.pending, [.rescheduleOutbox(id: stored.id, attempts: attempts, next: next, error: error)])
        }
    }
}

/// Support: failed messages (one, or all) are sent again, with three more days of retries.
public struct RetryOutboxCommand: StoreOperation {
    /// nil: every failed message.
    public var id: String?
    public var now: Timestamp
    public var by: Initiator
    public var reason: String
    public init(id: String?, now: Timestamp, by: Initiator, reason: String) {
        self.id = id
        self.now = now
        self.by = by
        self.reason = reason
    }

    public var reads: [FactKey] { [id.map { .outboxMessage(id: $0) } ?? .failedOutbox] }

    /// The messages sent again; empty when the asked one is not failed.
    public func plan(_ facts: Facts) throws -> Plan<[OutboxMessage]> {
        let failed = try (id.map { [try facts.outboxMessage($0)].compactMap { $0 } } ?? facts.failedOutbox()).filter { $0.state == .failed }
        guard !failed.isEmpty else { return Plan([]) }
        return Plan(failed, failed.map { .retryOutbox(id: $0.id, at: now, giveUpAt: now + OutboxPolicy.retryFor) } + [
            .audit(AuditEvent(
                at: now, kind: .outboxRetried, accountID: failed.count == 1 ? failed[0].accountID : nil, actor: by,
                reason: "\(failed.count == 1 ? failed[0].id : "\(failed.count) messages"): \(reason)"))
        ])
    }
}
