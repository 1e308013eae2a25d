import ArgumentParser
import Foundation
import TransferCore
import TransferSettings

struct Account: AccountCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show an account: its devices, the pending transfer and the last 10 events.",
        discussion: "Start here for any ticket: it tells which phone is active, which moved away, and whether a transfer is waiting or locked.")

    @OptionGroup var common: CommonOptions
    @Argument(help: .account) var account: String

    func run(_ store: any SupportStore, account match: AccountMatch) async throws {
        let now = SystemWallClock().now()
        guard let report = try await store.report(accountID: match.accountID, at: now, recentEvents: 10) else {
            throw Failure.notFound("account \(match.accountID) disappeared while reading it.")
        }
        if common.json {
            struct Out: Encodable {
                var matchedBy: String
                var accountId: String
                var userName: String
                var createdAt: String
                var migrationFlag: Bool
                var transferId: String?
                var devices: [DeviceJSON]
                var pushTokens: [PushTokenJSON]
                var apple: AppleJSON?
                /// Whether it has a recovery code and when it was made (never the code).
                var recoveryCode: RecoveryCodeJSON?
                /// Its backup keys by store, when each was made and used (never a key).
                var backupKeys: [BackupKeyJSON]
                var siblingSessions: [SiblingSessionJSON]
                var deletedAt: String?
                /// Whether the app backend protects it from erasure as inactive, and since when.
                var protected: Bool
                var protectedAt: String?
                var transfer: TransferJSON?
                var recentEvents: [EventJSON]
            }
            try JSON.print(Out(
                matchedBy: match.matchedBy.rawValue, accountId: report.accountID, userName: report.userName,
                createdAt: report.createdAt.rfc3339, migrationFlag: report.migrationFlag(at: now), transferId: report.movedToDeviceID,
                devices: report.devices.compactMap { DeviceJSON($0, account: report.accountID) },
                pushTokens: report.pushTokens.compactMap { PushTokenJSON($0, report: report) },
                apple: report.apple.map(AppleJSON.init), recoveryCode: report.recoveryCode.map(RecoveryCodeJSON.init),
                backupKeys: report.backupKeys.map(BackupKeyJSON.init), siblingSessions: report.siblingSessions.map(SiblingSessionJSON.init),
                deletedAt: report.deletedAt?.rfc3339,
                protected: report.protectedAt != nil, protectedAt: report.protectedAt?.rfc3339,
                transfer: report.transfer.map { TransferJSON($0, now: now) },
                recentEvents: report.recentEvents.map(EventJSON.init)))
            return
        }
        print(Text.section("Account \(report.accountID) (matched by \(match.matchedBy.words))", [
            ("user name", report.userName),
            ("created", Text.time(report.createdAt, now: now)),
            ("migration flag", report.migrationFlag(at: now) ? "raised (a transfer is waiting)" : "lowered"),
            ("moved to device", report.movedToDeviceID ?? "never moved"),
            ("protected", report.protectedAt.map { "yes, since \(Text.time($0, now: now)) (never erased as inactive)" } ?? "no"),
        ] + (report.deletedAt.map { [("deleted", Text.time($0, now: now))] } ?? [])))
        print("\nDevices")
        let devices = report.devices.compactMap { device in device.account(report.accountID).map { (device, $0) } }
        print(Text.table(["DEVICE", "STATE", "BOUND", "LAST LOGIN", "ENDED", "WHY", "ATTESTATION"], devices.map { device, pair in
            [device.id + (device.currentAccountID == report.accountID ? " (current)" : ""), Text.state(pair.state),
             Text.time(pair.addedAt, now: now), pair.lastLoginAt.map { Text.relative($0, now: now) } ?? "-",
             pair.endedAt.map { Text.relative($0, now: now) } ?? "-", pair.endedReason ?? "",
             AttestationJSON.words(device.attestation)]
        }))
        for (device, _) in devices {
            let others = device.summaries.filter { $0.accountID != report.accountID }
            guard !others.isEmpty else { continue }
            print("  other accounts on \(device.id): " + others.map { other in
                let name = other.userName == other.accountID ? "" : " user \(other.userName)"
                return other.accountID + name + (other.current ? " (current)" : "")
            }.joined(separator: "; "))
        }
        print("\nPush tokens on its device")
        if report.pushTokens.isEmpty {
            print("  none registered")
        } else {
            print(Text.table(["DEVICE", "PROVIDER", "ENVIRONMENT", "TOKEN", "REGISTERED", "REACHES THIS ACCOUNT"], report.pushTokens.map { token in
                let device = report.devices.first { $0.id == token.deviceID }
                return [token.deviceID, token.provider.rawValue, token.environment?.rawValue ?? "-", "…" + token.ending,
                        Text.relative(token.registeredAt, now: now),
                        device.map { PushTokenJSON.unreached($0, account: report.accountID).map { "no: " + $0 } ?? "yes" } ?? "no"]
            }))
        }
        print("")
        if let apple = report.apple {
            print(Text.section("Apple ID", [
                ("linked", Text.time(apple.linkedAt, now: now)),
                ("email", apple.email ?? "(Apple sent none)"),
                ("private relay", apple.isPrivateEmail.map { $0 ? "yes" : "no" } ?? "unknown"),
                ("email forwarding", apple.emailEnabled ? "on" : "off (the user turned it off at Apple)"),
            ]))
        } else {
            print("Apple ID\n  not linked")
        }
        print("")
        print(Text.section("Recovery code", [
            ("state", report.recoveryCode.map {
                let made = "made \(Text.time($0.createdAt, now: now))"
                return $0.usedAt.map { "\(made), used \(Text.time($0, now: now))" } ?? "\(made), not used (a way back)"
            } ?? "none"),
        ]))
        print("\nBackup keys (kept by the app in the platform's store)")
        if report.backupKeys.isEmpty {
            print("  none")
        } else {
            print(Text.table(["STORE", "MADE", "STATE"], report.backupKeys.map { key in
                [key.store.rawValue, Text.time(key.createdAt, now: now),
                 key.usedAt.map { "used \(Text.time($0, now: now)) by device \(key.usedByDevice ?? "?")" } ?? "not used (a way back)"]
            }))
        }
        print("\nSibling apps signed in through a hand-off")
        if report.siblingSessions.isEmpty {
            print("  none")
        } else {
            print(Text.table(["CLIENT ID", "DEVICE", "STARTED", "EXPIRES"], report.siblingSessions.map {
                [$0.clientID, $0.deviceID, Text.time($0.startedAt, now: now), Text.relative($0.expiresAt, now: now)]
            }))
        }
        print("")
        print(transferSection(report.transfer, now: now))
        print("\nLast 10 events")
        print(report.recentEvents.table(now: now))
    }

    func transferSection(_ transfer: TransferRecord?, now: Timestamp) -> String {
        guard let t = transfer else { return "Pending transfer\n  none" }
        let expiry = t.expiresAt > now ? "expires \(Text.time(t.expiresAt, now: now))" : "expired \(Text.time(t.expiresAt, now: now))"
        let lock = t.lock(at: now).map { "locked until \($0.rfc3339) (\(Text.relative($0, now: now).replacingOccurrences(of: "in ", with: "")) left)" } ?? "not locked"
        return Text.section("Pending transfer \(t.id)", [
            ("method", t.method == .code ? "transfer code (never shown again)" : "email and temporary password"),
            ("email", t.email ?? "none"),
            ("created", Text.time(t.createdAt, now: now)),
            ("expiry", expiry),
            ("failed attempts", "\(t.failedConsecutive) in a row, \(t.failedTotal) in total (void at \(LockPolicy.standard.totalFailures))"),
            ("lock", lock),
        ])
    }
}

struct History: AccountCommand {
    static let configuration = CommandConfiguration(abstract: "Show the account's full audit trail, oldest first.")

    @OptionGroup var common: CommonOptions
    @Argument(help: .account) var account: String

    func run(_ store: any SupportStore, account match: AccountMatch) async throws {
        let events = try await store.history(accountID: match.accountID)
        struct Out: Encodable { var accountId: String; var matchedBy: String; var events: [EventJSON] }
        try common.output(
            json: Out(accountId: match.accountID, matchedBy: match.matchedBy.rawValue, events: events.map(EventJSON.init)),
            text: "History of account \(match.accountID) (matched by \(match.matchedBy.words)), \(events.count) events\n"
                + events.table(now: SystemWallClock().now()))
    }
}

struct Cancel: AccountCommand {
    static let configuration = CommandConfiguration(
        abstract: "Cancel the account's pending transfer and lower its migration flag.",
        discussion: "For a user who set up a transfer by mistake, or whose email or password may have leaked.")

    @OptionGroup var common: CommonOptions
    @OptionGroup var change: ChangeOptions
    @Argument(help: .account) var account: String

    func run(_ store: any SupportStore, account match: AccountMatch) async throws {
        let now = SystemWallClock().now()
        guard let pending = try await store.report(accountID: match.accountID, at: now, recentEvents: 0)?.transfer else {
            throw Failure.noPendingTransfer(match.accountID)
        }
        let service = try await store.service()
        guard try await service.cancelTransfer(accountID: match.accountID, by: change.initiator, reason: change.trimmedReason) else {
            throw Failure.noPendingTransfer(match.accountID)
        }
        struct Out: Encodable { var accountId: String; var cancelled: TransferJSON }
        try common.output(
            json: Out(accountId: match.accountID, cancelled: TransferJSON(pending, now: now)),
            text: "Cancelled transfer \(pending.id) of account \(match.accountID) (\(pending.email.map { "email \($0)" } ?? "a transfer code")); the migration flag is lowered.")
    }
}

struct Unlock: AccountCommand {
    static let configuration = CommandConfiguration(
        abstract: "Clear the lock and the count of wrong passwords in a row of the pending transfer.",
        discussion: "For \"it says too many attempts\" once you are sure the user is the owner. The total count (void at \(LockPolicy.standard.totalFailures)) stays.")

    @OptionGroup var common: CommonOptions
    @OptionGroup var change: ChangeOptions
    @Argument(help: .account) var account: String

    func run(_ store: any SupportStore, account match: AccountMatch) async throws {
        let now = SystemWallClock().now()
        let service = try await store.service()
        guard let before = try await service.unlockTransfer(accountID: match.accountID, by: change.initiator, reason: change.trimmedReason) else {
            throw Failure.noPendingTransfer(match.accountID)
        }
        let wasLockedUntil = before.isLocked(at: now) ? before.lockedUntil : nil
        struct Out: Encodable {
            var accountId: String; var transferId: String; var wasLockedUntil: String?; var failedInARowWas: Int; var failedTotal: Int
        }
        try common.output(
            json: Out(
                accountId: match.accountID, transferId: before.id, wasLockedUntil: wasLockedUntil?.rfc3339,
                failedInARowWas: before.failedConsecutive, failedTotal: before.failedTotal),
            text: "Unlocked transfer \(before.id) of account \(match.accountID): \(wasLockedUntil.map { "was locked until \($0.rfc3339)" } ?? "was not locked"); wrong passwords in a row \(before.failedConsecutive) → 0 (total stays \(before.failedTotal)).")
    }
}

struct Issue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a transfer with a generated temporary password (or a transfer code), for a user who lost the old phone.",
        discussion: "Only after the user proved ownership another way. The password or code is printed once; give it to the user and enter it nowhere else. It replaces any pending transfer of the account.")

    @OptionGroup var common: CommonOptions
    @OptionGroup var change: ChangeOptions
    @Option(help: "The email the user will type on the new phone (not with --code).") var email: String?
    @Flag(help: "Issue a transfer code instead of an email and temporary password.") var code = false
    @Option(server: ServerFlags.transferTTL, "decides when the transfer expires")
    var transferTTL: String?
    @Argument(help: .account) var account: String

    func validate() throws {
        if code && email != nil { throw ValidationError("--code issues a transfer code: it takes no --email.") }
        if !code && email == nil { throw ValidationError("give --email for a password transfer, or --code for a transfer code.") }
    }

    func run() async throws {
        var typed: Email?
        if let email {
            do { typed = try FieldRules.email(email) } catch {
                throw Failure.usage("--email is not a valid email address.")
            }
        }
        let parsed = typed
        let policy = ServicePolicy(transferTTL: try ServerFlags.transferTTL.read(flag: transferTTL))
        try await common.withStore { store in
            let match = try await store.resolve(account)
            let service = try await store.service(policy: policy)
            let now = SystemWallClock().now()
            do {
                if let parsed {
                    let issued = try await service.issueTransfer(
                        accountID: match.accountID, email: parsed, by: change.initiator, reason: change.trimmedReason)
                    struct Out: Encodable { var accountId: String; var email: String; var expiresAt: String; var temporaryPassword: String }
                    try common.output(
                        json: Out(accountId: match.accountID, email: issued.email, expiresAt: issued.expiresAt.rfc3339, temporaryPassword: issued.password),
                        text: Text.section("Issued a transfer for account \(match.accountID)", [
                            ("email", issued.email),
                            ("temporary password", issued.password + "   (shown once)"),
                            ("expires", Text.time(issued.expiresAt, now: now)),
                        ]))
                } else {
                    let issued = try await service.setUpTransferCode(
                        accountID: match.accountID, by: change.initiator, reason: change.trimmedReason)
                    struct Out: Encodable { var accountId: String; var expiresAt: String; var transferCode: String }
                    try common.output(
                        json: Out(accountId: match.accountID, expiresAt: issued.expiresAt.rfc3339, transferCode: issued.code.grouped),
                        text: Text.section("Issued a transfer code for account \(match.accountID)", [
                            ("transfer code", issued.code.grouped + "   (shown once)"),
                            ("expires", Text.time(issued.expiresAt, now: now)),
                        ]))
                }
            } catch TransferError.emailInUse {
                throw Failure.conflict("another account has a pending transfer with \(parsed?.display ?? ""); use another email or cancel that one.")
            } catch TransferError.accountDeleted {
                throw Failure.conflict("account \(match.accountID) was deleted; it cannot be moved to a phone again.")
            }
        }
    }
}

struct RevokeDevice: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke-device",
        abstract: "Revoke a device (stolen phone): its tokens stop working at once and it can never log in again.",
        discussion: "The account stays; the owner moves it to a new phone with `transfer issue`.")

    @OptionGroup var common: CommonOptions
    @OptionGroup var change: ChangeOptions
    @Argument(help: "The device's UUID.") var deviceId: String

    func run() async throws {
        guard let device = DeviceID(deviceId) else { throw Failure.usage("'\(deviceId)' is not a device UUID.") }
        try await common.withStore { store in
            let service = try await store.service()
            let accounts = try await service.revokeDevice(device, by: change.initiator, reason: change.trimmedReason)
            guard let account = accounts.first else {
                if try await store.findAccounts(device.value).isEmpty {
                    throw Failure.notFound("no account has device \(device.value).")
                }
                throw Failure.conflict("device \(device.value) holds no account any more (moved away, revoked or removed).")
            }
            let which = accounts.count == 1 ? "account \(account)" : "accounts \(accounts.joined(separator: ", "))"
            struct Out: Encodable { var deviceId: String; var accountId: String; var accountIds: [String]; var state: String }
            try common.output(
                json: Out(deviceId: device.value, accountId: account, accountIds: accounts, state: PairState.revoked.rawValue),
                text: "Revoked device \(device.value) of \(which): active → revoked; its sessions are closed.")
        }
    }
}

struct Stats: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Count accounts, devices, transfers by state, locks, and the last 24 h's claims and account creations (by attestation).")

    @OptionGroup var common: CommonOptions

    func run(_ store: any SupportStore) async throws {
        let s = try await store.stats(at: SystemWallClock().now())
        let created = s.accountsCreatedLast24h
        try common.output(json: s, text: [
            Text.section("Accounts", [("accounts", "\(s.accounts)"), ("active devices", "\(s.activeDevices)")]),
            Text.section("Transfers", [
                ("pending", "\(s.transfersPending)"), ("claimed", "\(s.transfersClaimed)"), ("expired", "\(s.transfersExpired)"),
                ("cancelled", "\(s.transfersCancelled)"), ("voided", "\(s.transfersVoided)"), ("locked now", "\(s.lockedNow)"),
            ]),
            Text.section("Last 24 h", [
                ("claims won", "\(s.claimsWonLast24h)"), ("claims failed", "\(s.claimsFailedLast24h)"),
                ("accounts created, attestation verified", "\(created.verified)"),
                ("accounts created, attestation missing", "\(created.missing)"),
                ("accounts created, attestation failed", "\(created.failed)"),
                ("accounts created, attestation off", "\(created.unchecked)"),
            ]),
        ].joined(separator: "\n"))
    }
}
