import Foundation
import TransferCore

/// A store that speaks SQL: it runs read plans on one snapshot of its database, and all
/// reads outside operations follow from that, written once here. Each store keeps only what
/// truly differs: connections, transactions and retries, locking, its fast paths, pruning.
public protocol SQLStore: SupportStore {
    /// Runs `plan` on one snapshot (SQLite: one read transaction; PostgreSQL: one connection).
    func read<Plan: ReadPlan>(_ plan: Plan) async throws -> Plan.Output
    /// The same for a plan of a few index lookups on a request's path (a session's check, a
    /// profile, facts by key): SQLite runs it on a snapshot shared with other requests'
    /// lookups (`GroupRead`), where a long read (push targets, reports) would hold them up.
    func lookup<Plan: ReadPlan>(_ plan: Plan) async throws -> Plan.Output
    /// The dialect its statements are rendered in.
    var dialect: SQLDialect { get }
}

extension SQLStore {
    public func lookup<Plan: ReadPlan>(_ plan: Plan) async throws -> Plan.Output {
        try await read(plan)
    }

    public func isSessionValid(sessionID: String, accountID: String, deviceID: String, clientID: String?) async throws -> Bool {
        try await lookup(
            FirstRow(Queries.openSession(sessionID: sessionID, accountID: accountID, deviceID: deviceID, clientID: clientID)) { _ in true }
        ) ?? false
    }

    public func read(_ keys: [FactKey], at now: Timestamp) async throws -> Facts {
        try await lookup(FactsPlan(keys, at: now, lock: false, dialect: dialect))
    }

    public func device(_ id: String, at now: Timestamp) async throws -> DeviceRecord? {
        try await read([.device(id)], at: now).device(id)
    }

    public func profile(accountID id: String, whileOpen session: OpenSession?, at now: Timestamp) async throws -> AccountProfile? {
        let facts = FactsPlan(
            [.account(.id(id)), .pendingTransfers(PendingTransferQuery(emailKey: nil, accountID: id)), .boundDevices(account: id),
             .appleLink(.id(id)), .recoveryCode(.id(id)), .backupKeys(.id(id))], at: now, lock: false, dialect: dialect)
        let read: Facts?
        if let session {
            read = try await lookup(
                OnlyIf(Queries.openSession(sessionID: session.sessionID, accountID: id, deviceID: session.deviceID, clientID: session.clientID),
                       then: facts))
        } else {
            read = try await lookup(facts)
        }
        guard let facts = read, let account = try facts.account(id) else { return nil }
        let open = try facts.pendingTransfers(PendingTransferQuery(emailKey: nil, accountID: id)).first { $0.accountID == id && $0.isOpen(at: now) }
        return AccountProfile(
            accountID: id, userName: account.summary.userName, createdAt: account.createdAt, movedToDeviceID: account.movedToDeviceID,
            transfer: open.map {
                AccountProfile.PendingTransfer(method: $0.method, email: $0.proof.email, createdAt: $0.createdAt, expiresAt: $0.expiresAt)
            },
            activeDevices: try facts.boundDevices(account: id), apple: try facts.appleLink(id),
            recoveryCodeCreatedAt: try facts.recoveryCode(id).flatMap { $0.isUsable ? $0.createdAt : nil },
            backupKeys: try facts.backupKeys(id).filter(\.isUsable))
    }

    public func pushRoutes(accountIDs: [String]) async throws -> [PushRoute] {
        try await read(AllRows(Queries.pushRoutes(accountIDs: accountIDs)) { try Rows.pushRoute($0) }).compactMap { $0 }
    }

    public func outboxStats(kind: OutboxKind) async throws -> OutboxStats {
        try await read(
            FirstRow(Queries.outboxStats(kind: kind)) {
                OutboxStats(pending: try $0.int("pending"), failed: try $0.int("failed"), oldestPendingAt: try $0.timeOrNil("oldest"))
            }) ?? OutboxStats(pending: 0, failed: 0, oldestPendingAt: nil)
    }

    public func signingKeys() async throws -> [SigningKeyRecord] {
        try await read([.signingKeys], at: Timestamp(milliseconds: 0)).signingKeys()
    }

    public func appleLink(sub: String) async throws -> AppleLink? {
        try await read([.appleLinkBySub(sub)], at: Timestamp(milliseconds: 0)).appleLink(sub: sub)
    }

    public func serviceKey(hash: SecretHash) async throws -> ServiceKeyRecord? {
        try await read(FirstRow(Queries.serviceKey(hash: hash)) { try Rows.serviceKey($0) })
    }

    public func pendingTransfer(emailKey: String) async throws -> TransferRecord? {
        try await read(FirstRow(Queries.pendingTransfer(emailKey: emailKey)) { try Rows.transfer($0) })
    }

    public func attestationChallengeExpiry(hash: SecretHash) async throws -> Timestamp? {
        try await read([.attestationChallenge(hash)], at: Timestamp(milliseconds: 0)).attestationChallengeExpiry(hash)
    }

    public func claimedTransfer(emailKey: String, by device: String) async throws -> TransferRecord? {
        try await read(FirstRow(Queries.claimedTransfer(emailKey: emailKey, by: device)) { try Rows.transfer($0) })
    }

    // SupportStore

    public func findAccounts(_ query: String) async throws -> [AccountMatch] {
        let q = query.trimmingCharacters(in: .whitespacesAndNewlines)
        let rows = try await read(
            AllRows(Queries.findAccounts(lower: q.lowercased(), emailKey: q.precomposedStringWithCanonicalMapping.lowercased())) {
                AccountMatch(
                    accountID: try $0.text("account_id"), userName: try $0.text("user_name"),
                    matchedBy: try UnknownStoredValue.decode(try $0.text("field"), column: "field"))
            })
        // One line per account: the first way it matched, in the query's order.
        var matches: [AccountMatch] = []
        for match in rows where !matches.contains(where: { $0.accountID == match.accountID }) { matches.append(match) }
        return matches
    }

    public func report(accountID id: String, at now: Timestamp, recentEvents: Int) async throws -> AccountReport? {
        let pending = PendingTransferQuery(emailKey: nil, accountID: id)
        let facts = try await read(
            [.account(.id(id)), .devicesEver(account: id), .pendingTransfers(pending), .recentEvents(account: id, limit: recentEvents),
             .pushTokens(account: id), .appleLink(.id(id)), .siblingSessions(account: id), .recoveryCode(.id(id)),
             .backupKeys(.id(id))], at: now)
        guard let account = try facts.account(id) else { return nil }
        return AccountReport(
            accountID: id, userName: account.summary.userName, createdAt: account.createdAt, movedToDeviceID: account.movedToDeviceID,
            devices: try facts.devicesEver(account: id), transfer: try facts.pendingTransfers(pending).first { $0.accountID == id },
            recentEvents: try facts.recentEvents(account: id, limit: recentEvents), pushTokens: try facts.pushTokens(account: id),
            apple: try facts.appleLink(id), deletedAt: account.deletedAt, siblingSessions: try facts.siblingSessions(account: id),
            recoveryCode: try facts.recoveryCode(id), backupKeys: try facts.backupKeys(id), protectedAt: account.protectedAt)
    }

    public func history(accountID: String) async throws -> [AuditEvent] {
        try await read(AllRows(Queries.history(ofAccount: accountID)) { try Rows.event($0) })
    }

    public func stats(at now: Timestamp) async throws -> SupportStats {
        let stats = try await read(
            FirstRow(Queries.stats(at: now)) {
                SupportStats(
                    accounts: try $0.int("accounts"), activeDevices: try $0.int("active_devices"), transfersPending: try $0.int("pending"),
                    transfersClaimed: try $0.int("claimed"), transfersExpired: try $0.int("expired"),
                    transfersCancelled: try $0.int("cancelled"), transfersVoided: try $0.int("voided"), lockedNow: try $0.int("locked"),
                    claimsWonLast24h: try $0.int("won"), claimsFailedLast24h: try $0.int("failed"),
                    accountsCreatedLast24h: CreationsByAttestation(
                        verified: try $0.int("created_verified"), missing: try $0.int("created_missing"),
                        failed: try $0.int("created_failed"), unchecked: try $0.int("created_unchecked")))
            })
        guard let stats else { throw MissingRow(query: "stats") }
        return stats
    }

    public func serviceKeys() async throws -> [ServiceKeyRecord] {
        try await read(AllRows(Queries.serviceKeys) { try Rows.serviceKey($0) })
    }

    public func outbox(limit: Int) async throws -> [OutboxMessage] {
        try await read(AllRows(Queries.outbox(limit: limit)) { try Rows.outboxMessage($0) })
    }

    public func inactiveCounts(before inactiveBefore: Timestamp, at now: Timestamp) async throws -> InactiveCounts {
        let counts = try await read(
            FirstRow(Queries.inactiveCounts(before: inactiveBefore, at: now)) {
                InactiveCounts(erasable: try $0.int("erasable"), protectedInactive: try $0.int("protected_inactive"), protected: try $0.int("protected"))
            })
        guard let counts else { throw MissingRow(query: "inactive counts") }
        return counts
    }

    // The pruner's share that is the same on every store.

    /// Erases the inactive accounts of `cutoffs.inactiveBefore` (none when nil): accounts are
    /// read in windows of `batchSize` ids, without locking; each inactive one is then erased by `erase`
    /// in a transaction of its own that checks the rule again under lock (a login racing with
    /// the round wins; an account another node erased first is left alone). Up to `parallel`
    /// erasures are in flight at once: one at a time, a round under load would erase one
    /// account per group commit (SQLite) or per round trips of one connection (PostgreSQL).
    /// `batchDone` runs after each batch that erased something. Returns how many were erased.
    public func eraseInactiveAccounts(
        _ cutoffs: PruneCutoffs, batchSize: Int, parallel: Int = 1,
        erase: @escaping @Sendable (EraseInactiveAccountCommand) async throws -> Erasure, batchDone: () async -> Void = {}
    ) async throws -> Int {
        guard let before = cutoffs.inactiveBefore else { return 0 }
        var after = "", erased = 0
        while true {
            let window = try await read(
                AllRows(Queries.inactiveWindow(before: before, at: cutoffs.now, after: after, limit: batchSize)) {
                    (id: try $0.text("id"), inactive: try $0.bool("inactive"))
                })
            let commands = window.filter(\.inactive).map {
                EraseInactiveAccountCommand(accountID: $0.id, now: cutoffs.now, inactiveBefore: before)
            }
            let erasedNow = try await withThrowingTaskGroup(of: Bool.self) { group in
                var next = commands.makeIterator(), count = 0
                // A transfer set up while an erasure waited rolls that erasure back: kept.
                @Sendable func erased(_ command: EraseInactiveAccountCommand) async throws -> Bool {
                    do { return try await erase(command) == .erased } catch is TransferSetUpMeanwhile { return false }
                }
                for _ in 0..<max(1, parallel) {
                    guard let command = next.next() else { break }
                    group.addTask { try await erased(command) }
                }
                while let done = try await group.next() {
                    if done { count += 1 }
                    if let command = next.next() { group.addTask { try await erased(command) } }
                }
                return count
            }
            if erasedNow > 0 { await batchDone() }
            erased += erasedNow
            guard window.count == batchSize, let last = window.last else { return erased }
            after = last.id
        }
    }
}

/// A query that always answers a row answered none: the schema is not what this version expects.
public struct MissingRow: Error, CustomStringConvertible {
    public let query: String
    public var description: String { "the \(query) query answered no row" }
}
