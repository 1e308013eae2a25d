// Service keys: how app backends authenticate to the service API. Support makes them
// (`transfer service-key create`), the key is shown once and stored as SHA-256.

/// A service key as stored, without its hash.
public struct ServiceKeyRecord: Sendable, Equatable {
    public var name: String
    public var createdAt: Timestamp
    /// As the audit trail writes an initiator: `operator:NAME`.
    public var createdBy: String
    public var lastUsedAt: Timestamp?
    public var revokedAt: Timestamp?
    public var revokedBy: String?

    public init(
        name: String, createdAt: Timestamp, createdBy: String, lastUsedAt: Timestamp? = nil, revokedAt: Timestamp? = nil,
        revokedBy: String? = nil
    ) {
        self.name = name
        self.createdAt = createdAt
        self.createdBy = createdBy
        self.lastUsedAt = lastUsedAt
        self.revokedAt = revokedAt
        self.revokedBy = revokedBy
    }
}

/// An app backend that presented a valid service key.
public struct ServiceCaller: Sendable, Equatable {
    public var keyName: String
    public init(keyName: String) { self.keyName = keyName }
}

public enum ServiceKeys {
    /// `tsk_` and 256 random bits: the prefix lets secret scanners and people tell it from other tokens.
    public static func make() -> String { prefix + RandomToken.make(byteCount: 32) }
    public static let prefix = "tsk_"

    /// A name support can type: 1–64 of `[A-Za-z0-9._-]`.
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 45 || $0 == 46 || $0 == 95 }
    }

    public struct InvalidName: Error, CustomStringConvertible {
        public var description: String { "a service key's name is 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-'" }
    }

    /// A use is recorded when the last one recorded is older than this.
    public static let usageResolution = Duration.seconds(60)
}

extension TransferService {
    /// The caller of a service endpoint. Looked up on every call, so a revoked key stops
    /// working at once on every node.
    public func authenticateService(key: String) async throws -> ServiceCaller {
        guard key.hasPrefix(ServiceKeys.prefix), key.utf8.count <= 128 else { throw TransferError.invalidServiceKey }
        let now = clock.now()
        guard let record = try await store.serviceKey(hash: SecretHash(of: key)), record.revokedAt == nil else {
            throw TransferError.invalidServiceKey
        }
        if record.lastUsedAt.map({ $0 + ServiceKeys.usageResolution <= now }) ?? true {
            // Bookkeeping: a busy or failing write must not fail the backend's call.
            _ = try? await store.execute(TouchServiceKeyCommand(name: record.name, now: now))
        }
        return ServiceCaller(keyName: record.name)
    }

    /// Makes a key; nil when the name is taken (also by a revoked key: names stay unique in the trail).
    public func createServiceKey(name: String, by initiator: Initiator, reason: String) async throws -> (key: String, record: ServiceKeyRecord)? {
        guard ServiceKeys.isValidName(name) else { throw ServiceKeys.InvalidName() }
        let key = ServiceKeys.make()
        let command = CreateServiceKeyCommand(name: name, keyHash: SecretHash(of: key), now: clock.now(), by: initiator, reason: reason)
        guard let record = try await store.execute(command).get() else { return nil }
        return (key, record)
    }

    /// Revokes a key at once; returns it as it was before (nil when there is none by that name).
    public func revokeServiceKey(name: String, by initiator: Initiator, reason: String) async throws -> ServiceKeyRecord? {
        try await store.execute(RevokeServiceKeyCommand(name: name, now: clock.now(), by: initiator, reason: reason)).get()
    }
}

public struct CreateServiceKeyCommand: StoreOperation {
    public var name: String
    public var keyHash: SecretHash
    public var now: Timestamp
    public var by: Initiator
    public var reason: String
    public init(name: String, keyHash: SecretHash, now: Timestamp, by: Initiator, reason: String) {
        self.name = name
        self.keyHash = keyHash
        self.now = now
        self.by = by
        self.reason = reason
    }

    public var reads: [FactKey] { [.serviceKey(name: name)] }

    public func plan(_ facts: Facts) throws -> Plan<ServiceKeyRecord?> {
        guard try facts.serviceKey(name: name) == nil else { return Plan(nil) }
        return Plan(ServiceKeyRecord(name: name, createdAt: now, createdBy: by.description), [
            .createServiceKey(name: name, keyHash: keyHash, at: now, by: by),
            .audit(AuditEvent(at: now, kind: .serviceKeyCreated, accountID: nil, actor: by, reason: "service key \(name): \(reason)")),
        ])
    }
}

public struct RevokeServiceKeyCommand: StoreOperation {
    public var name: String
    public var now: Timestamp
    public var by: Initiator
    public var reason: String
    public init(name: String, now: Timestamp, by: Initiator, reason: String) {
        self.name = name
        self.now = now
        self.by = by
        self.reason = reason
    }

    public var reads: [FactKey] { [.serviceKey(name: name)] }

    public func plan(_ facts: Facts) throws -> Plan<ServiceKeyRecord?> {
        guard let key = try facts.serviceKey(name: name) else { return Plan(nil) }
        guard key.revokedAt == nil else { return Plan(key) }
        return Plan(key, [
            .revokeServiceKey(name: name, at: now, by: by),
            .audit(AuditEvent(at: now, kind: .serviceKeyRevoked, accountID: nil, actor: by, reason: "service key \(name): \(reason)")),
        ])
    }
}

public struct TouchServiceKeyCommand: StoreOperation {
    public var name: String
    public var now: Timestamp
    public init(name: String, now: Timestamp) {
        self.name = name
        self.now = now
    }

    public var reads: [FactKey] { [] }

    /// Concurrent calls of one key all get here; the statement's condition keeps it to one write a minute.
    public func plan(_ facts: Facts) throws -> Plan<Void> {
        Plan((), [.touchServiceKey(name: name, at: now, olderThan: now - ServiceKeys.usageResolution)])
    }
}
