import Foundation
import TransferCore

/// A read of one or more statements, written once for both stores as a small state machine:
/// the store asks for the `next()` statement, runs it on its connection (inside the
/// operation's transaction, or one read snapshot), hands the rows to `take`, and repeats
/// until there is none; then `finish()` answers. A statement may depend on the rows before
/// it (a refresh token names the device to read next), so SQLite's synchronous transactions
/// and PostgreSQL's asynchronous ones run the same plan.
public protocol ReadPlan: Sendable {
    associatedtype Output: Sendable
    mutating func next() -> SQL?
    mutating func take<Row: SQLRow>(_ rows: [Row]) throws
    func finish() throws -> Output
}

/// One statement; its rows decoded one by one.
public struct AllRows<Value: Sendable>: ReadPlan {
    let sql: SQL
    let decode: @Sendable (any SQLRow) throws -> Value
    var sent = false
    var values: [Value] = []

    public init(_ sql: SQL, _ decode: @escaping @Sendable (any SQLRow) throws -> Value) {
        self.sql = sql
        self.decode = decode
    }

    public mutating func next() -> SQL? {
        if sent { return nil }
        sent = true
        return sql
    }

    public mutating func take<Row: SQLRow>(_ rows: [Row]) throws {
        values.reserveCapacity(rows.count)
        for row in rows { values.append(try decode(row)) }
    }

    public func finish() -> [Value] { values }
}

/// One statement; its first row decoded, if any.
public struct FirstRow<Value: Sendable>: ReadPlan {
    var all: AllRows<Value>
    public init(_ sql: SQL, _ decode: @escaping @Sendable (any SQLRow) throws -> Value) { all = AllRows(sql, decode) }
    public mutating func next() -> SQL? { all.next() }
    public mutating func take<Row: SQLRow>(_ rows: [Row]) throws { try all.take(rows.prefix(1).map { $0 }) }
    public func finish() -> Value? { all.values.first }
}

/// Devices by id, each with every account it holds or held: two statements a device.
struct DeviceReads: Sendable {
    enum Step: Sendable {
        case row(String)
        /// The device's row was read; its accounts come next.
        case pairs(DeviceRecord)
    }
    let now: Timestamp
    let lock: Bool
    var steps: [Step] = []
    var devices: [DeviceRecord] = []

    init(now: Timestamp, lock: Bool) {
        self.now = now
        self.lock = lock
    }

    mutating func add(_ id: String) { steps.append(.row(id)) }

    func next() -> SQL? {
        switch steps.first {
        case .row(let id): Queries.device(id, lock: lock)
        case .pairs(let device): Queries.pairs(ofDevice: device.id, at: now, lock: lock)
        case nil: nil
        }
    }

    mutating func take<Row: SQLRow>(_ rows: [Row]) throws {
        switch steps.removeFirst() {
        case .row:
            guard let row = rows.first else { return }
            steps.insert(.pairs(try Rows.device(row, accounts: [])), at: 0)
        case .pairs(var device):
            device.accounts = try rows.map(Rows.pair)
            devices.append(device)
        }
    }
}

/// A device with every account it holds or held, read without locking.
public struct DevicePlan: ReadPlan {
    var reads: DeviceReads
    public init(_ id: String, at now: Timestamp) {
        reads = DeviceReads(now: now, lock: false)
        reads.add(id)
    }
    public mutating func next() -> SQL? { reads.next() }
    public mutating func take<Row: SQLRow>(_ rows: [Row]) throws { try reads.take(rows) }
    public func finish() -> DeviceRecord? { reads.devices.first }
}

/// What an operation reads before it decides (`Reads` → `Facts`), in the fixed order that
/// makes concurrent operations lock rows in the same order: transfer, pending transfers,
/// refresh token (its device, its sibling session), hand-off code (its device, then the
/// code), device, account devices, account, signing keys, service key, Apple nonce, Apple
/// links, Apple notification, outbox, recovery code, attestation challenge.
public struct FactsPlan: ReadPlan {
    enum Step: Sendable {
        case transfer(String)
        case pendingTransfers(PendingTransferQuery)
        case refreshToken(SecretHash)
        case siblingSession(RefreshTokenLookup, client: String)
        case handoffCodeDevice(SecretHash)
        case handoffCode(SecretHash)
        /// Devices, read into `facts.device` (a refresh token's, a hand-off code's, the asked
        /// one) or `facts.accountDevices`.
        case devices([String], into: DeviceTarget)
        case accountDeviceIDs(String)
        case account(String)
        case signingKeysLock
        case signingKeys
        case serviceKey(String)
        case appleNonce(SecretHash)
        case appleSub(String)
        case appleLink(String)
        case appleNotification(String)
        case dueOutbox(DueOutboxQuery)
        case outboxMessage(String)
        case failedOutbox
        case recoveryCode(String)
        case attestationChallenge(SecretHash)
    }

    enum DeviceTarget: Sendable { case device, accountDevices }

    let now: Timestamp
    var steps: [Step] = []
    var devices: DeviceReads
    /// Whether the first `devices` step's ids are handed to `devices`.
    var devicesStarted = false
    var facts = Facts()

    public init(_ reads: Reads, at now: Timestamp, dialect: SQLDialect) {
        self.now = now
        devices = DeviceReads(now: now, lock: true)
        if let id = reads.transfer { steps.append(.transfer(id)) }
        if let q = reads.pendingTransfers { steps.append(.pendingTransfers(q)) }
        if let hash = reads.refreshToken { steps.append(.refreshToken(hash)) }
        if let hash = reads.handoffCode { steps.append(.handoffCodeDevice(hash)) }
        if let id = reads.device { steps.append(.devices([id], into: .device)) }
        if let account = reads.accountDevices { steps.append(.accountDeviceIDs(account)) }
        if let account = reads.account { steps.append(.account(account)) }
        if reads.signingKeys {
            // The one read that differs by dialect: nodes starting together on an empty table
            // serialise here (SQLite's writer is alone already).
            if dialect == .postgres { steps.append(.signingKeysLock) }
            steps.append(.signingKeys)
        }
        if let name = reads.serviceKey { steps.append(.serviceKey(name)) }
        if let hash = reads.appleNonce { steps.append(.appleNonce(hash)) }
        if let sub = reads.appleSub { steps.append(.appleSub(sub)) }
        if let account = reads.appleLink { steps.append(.appleLink(account)) }
        if let jti = reads.appleNotification { steps.append(.appleNotification(jti)) }
        if let q = reads.dueOutbox { steps.append(.dueOutbox(q)) }
        if let id = reads.outboxMessage { steps.append(.outboxMessage(id)) }
        if reads.failedOutbox { steps.append(.failedOutbox) }
        if let account = reads.recoveryCode { steps.append(.recoveryCode(account)) }
        if let hash = reads.attestationChallenge { steps.append(.attestationChallenge(hash)) }
    }

    public mutating func next() -> SQL? {
        while let step = steps.first {
            switch step {
            case .transfer(let id): return Queries.transfer(id: id)
            case .pendingTransfers(let q): return Queries.pendingTransfers(q)
            case .refreshToken(let hash): return Queries.refreshToken(hash)
            case .siblingSession(let lookup, let client): return Queries.siblingSession(lookup, client: client)
            case .handoffCodeDevice(let hash): return Queries.handoffCodeDevice(hash)
            case .handoffCode(let hash): return Queries.handoffCode(hash)
            case .devices(let ids, let target):
                if !devicesStarted {
                    for id in ids { devices.add(id) }
                    devicesStarted = true
                }
                if let sql = devices.next() { return sql }
                // Every device of this step is read: file them.
                switch target {
                case .device: facts.device = devices.devices.last
                case .accountDevices: facts.accountDevices = devices.devices
                }
                devices.devices = []
                devicesStarted = false
                steps.removeFirst()
            case .accountDeviceIDs(let account): return Queries.activeDevices(ofAccount: account)
            case .account(let id): return Queries.account(id, at: now)
            case .signingKeysLock: return Queries.signingKeysLock
            case .signingKeys: return Queries.signingKeys
            case .serviceKey(let name): return Queries.serviceKey(name: name)
            case .appleNonce(let hash): return Queries.appleNonce(hash)
            case .appleSub(let sub): return Queries.appleLink(sub: sub, lock: true)
            case .appleLink(let account): return Queries.appleLink(account: account, lock: true)
            case .appleNotification(let jti): return Queries.appleNotification(jti: jti)
            case .dueOutbox(let q): return Queries.dueOutbox(q, at: now)
            case .outboxMessage(let id): return Queries.outboxMessage(id: id)
            case .failedOutbox: return Queries.failedOutbox
            case .recoveryCode(let account): return Queries.recoveryCode(ofAccount: account, lock: true)
            case .attestationChallenge(let hash): return Queries.attestationChallenge(hash)
            }
        }
        return nil
    }

    public mutating func take<Row: SQLRow>(_ rows: [Row]) throws {
        guard let step = steps.first else { return }
        if case .devices = step {
            // Rows of a device statement: the step stays until every device is read.
            try devices.take(rows)
            return
        }
        steps.removeFirst()
        switch step {
        case .transfer: facts.transfer = try rows.first.map(Rows.transfer)
        case .pendingTransfers: facts.pendingTransfers = try rows.map(Rows.transfer)
        case .refreshToken:
            facts.refreshToken = try rows.first.map(Rows.refreshTokenLookup)
            if let lookup = facts.refreshToken {
                var then: [Step] = [.devices([lookup.deviceID], into: .device)]
                if let client = lookup.clientID { then.append(.siblingSession(lookup, client: client)) }
                steps.insert(contentsOf: then, at: 0)
            }
        case .siblingSession: facts.siblingSession = try rows.first.map(Rows.siblingSession)
        case .handoffCodeDevice(let hash):
            // The device first, as every other operation locks it (deletion erases codes after
            // locking it); then the code, locked: of concurrent redemptions, the second waits
            // and then sees the code used.
            if let row = rows.first {
                steps.insert(contentsOf: [.devices([try row.text("device_id")], into: .device), .handoffCode(hash)], at: 0)
            }
        case .handoffCode: facts.handoffCode = try rows.first.map(Rows.handoffCode)
        case .devices: break
        case .accountDeviceIDs:
            steps.insert(.devices(try rows.map { try $0.text("device_id") }, into: .accountDevices), at: 0)
        case .account:
            if let row = rows.first {
                facts.account = try Rows.accountSummary(row)
                facts.accountDeletedAt = try row.timeOrNil("deleted_at")
                facts.accountProtectedAt = try row.timeOrNil("protected_at")
            }
        case .signingKeysLock: break
        case .signingKeys: facts.signingKeys = try rows.map(Rows.signingKey)
        case .serviceKey: facts.serviceKey = try rows.first.map(Rows.serviceKey)
        case .appleNonce: facts.appleNonceExpiresAt = try rows.first.map { try $0.time("expires_at") }
        case .appleSub: facts.appleLinkBySub = try rows.first.map(Rows.appleLink)
        case .appleLink: facts.appleLink = try rows.first.map(Rows.appleLink)
        case .appleNotification: facts.appleNotificationSeen = !rows.isEmpty
        case .dueOutbox: facts.dueOutbox = try rows.map(Rows.outboxMessage)
        case .outboxMessage: facts.outboxMessage = try rows.first.map(Rows.outboxMessage)
        case .failedOutbox: facts.failedOutbox = try rows.map(Rows.outboxMessage)
        case .recoveryCode: facts.recoveryCode = try rows.first.map(Rows.recoveryCode)
        case .attestationChallenge: facts.attestationChallengeExpiresAt = try rows.first.map { try $0.time("expires_at") }
        }
    }

    public func finish() -> Facts { facts }
}

/// `GET /v1/me`: the account, its open transfer, the devices it is on, its Apple link, its recovery code.
public struct ProfilePlan: ReadPlan {
    let id: String
    let now: Timestamp
    var step = 0
    var account: (userName: String, createdAt: Timestamp, movedTo: String?)?
    var transfer: AccountProfile.PendingTransfer?
    var devices: [AccountProfile.Device] = []
    var apple: AppleLink?
    var recoveryCode: RecoveryCodeRecord?

    public init(accountID: String, at now: Timestamp) {
        id = accountID
        self.now = now
    }

    public mutating func next() -> SQL? {
        switch step {
        case 0: Queries.accountSummary(id)
        case 1 where account != nil: Queries.openTransfer(ofAccount: id, at: now)
        case 2: Queries.boundDevices(ofAccount: id)
        case 3: Queries.appleLink(account: id, lock: false)
        case 4: Queries.recoveryCode(ofAccount: id, lock: false)
        default: nil
        }
    }

    public mutating func take<Row: SQLRow>(_ rows: [Row]) throws {
        defer { step += 1 }
        switch step {
        case 0:
            account = try rows.first.map { (try $0.text("user_name"), try $0.time("created_at"), try $0.textOrNil("moved_to_device_id")) }
        case 1:
            transfer = try rows.first.map {
                AccountProfile.PendingTransfer(
                    method: try $0.value("method", table: "transfers"), email: try $0.textOrNil("email"), createdAt: try $0.time("created_at"),
                    expiresAt: try $0.time("expires_at"))
            }
        case 2:
            devices = try rows.map {
                AccountProfile.Device(deviceID: try $0.text("device_id"), boundAt: try $0.time("added_at"), lastLoginAt: try $0.timeOrNil("last_login_at"))
            }
        case 3:
            apple = try rows.first.map(Rows.appleLink)
        default:
            recoveryCode = try rows.first.map(Rows.recoveryCode)
        }
    }

    public func finish() -> AccountProfile? {
        account.map {
            AccountProfile(
                accountID: id, userName: $0.userName, createdAt: $0.createdAt, movedToDeviceID: $0.movedTo, transfer: transfer,
                activeDevices: devices, apple: apple, recoveryCodeCreatedAt: recoveryCode.flatMap { $0.isUsable ? $0.createdAt : nil })
        }
    }
}

/// `transfer account`: the account's whole story.
public struct ReportPlan: ReadPlan {
    let id: String
    let recentEvents: Int
    var step = 0
    var account: (userName: String, createdAt: Timestamp, movedTo: String?, deletedAt: Timestamp?, protectedAt: Timestamp?)?
    var devices: DeviceReads
    var transfer: TransferRecord?
    var events: [AuditEvent] = []
    var tokens: [PushToken] = []
    var apple: AppleLink?
    var siblings: [SiblingSession] = []
    var recoveryCode: RecoveryCodeRecord?

    public init(accountID: String, at now: Timestamp, recentEvents: Int) {
        id = accountID
        self.recentEvents = recentEvents
        devices = DeviceReads(now: now, lock: false)
    }

    public mutating func next() -> SQL? {
        switch step {
        case 0: return Queries.accountRow(id)
        case _ where account == nil: return nil
        case 1: return Queries.devicesEver(ofAccount: id)
        case 2:
            if let sql = devices.next() { return sql }
            step += 1
            return next()
        case 3: return Queries.pendingTransfer(ofAccount: id)
        case 4: return Queries.recentEvents(ofAccount: id, limit: recentEvents)
        case 5: return Queries.pushTokens(ofAccount: id)
        case 6: return Queries.appleLink(account: id, lock: false)
        case 7: return Queries.siblingSessions(ofAccount: id)
        case 8: return Queries.recoveryCode(ofAccount: id, lock: false)
        default: return nil
        }
    }

    public mutating func take<Row: SQLRow>(_ rows: [Row]) throws {
        switch step {
        case 0:
            account = try rows.first.map {
                (try $0.text("user_name"), try $0.time("created_at"), try $0.textOrNil("moved_to_device_id"), try $0.timeOrNil("deleted_at"),
                 try $0.timeOrNil("protected_at"))
            }
        case 1: for row in rows { devices.add(try row.text("device_id")) }
        case 2:
            try devices.take(rows)
            return  // the step moves on once every device is read
        case 3: transfer = try rows.first.map(Rows.transfer)
        case 4: events = try rows.map(Rows.event)
        case 5: tokens = try rows.map(Rows.pushToken)
        case 6: apple = try rows.first.map(Rows.appleLink)
        case 7: siblings = try rows.map(Rows.siblingSession)
        default: recoveryCode = try rows.first.map(Rows.recoveryCode)
        }
        step += 1
    }

    public func finish() -> AccountReport? {
        account.map {
            AccountReport(
                accountID: id, userName: $0.userName, createdAt: $0.createdAt, movedToDeviceID: $0.movedTo, devices: devices.devices,
                transfer: transfer, recentEvents: events, pushTokens: tokens, apple: apple, deletedAt: $0.deletedAt, siblingSessions: siblings,
                recoveryCode: recoveryCode, protectedAt: $0.protectedAt)
        }
    }
}
