import Foundation
import TransferCore

/// Human output: aligned sections and tables, times absolute and relative.
enum Text {
    /// "in 3 h (2026-11-22T01:00:00Z)" / "12 min ago (…)".
    static func time(_ t: Timestamp, now: Timestamp) -> String {
        "\(relative(t, now: now)) (\(t.rfc3339))"
    }

    static func relative(_ t: Timestamp, now: Timestamp) -> String {
        let seconds = (t.milliseconds - now.milliseconds) / 1000
        let span = abs(seconds)
        let amount: String
        switch span {
        case ..<60: amount = "\(span) s"
        case ..<3600: amount = "\(span / 60) min"
        case ..<(48 * 3600): amount = "\(span / 3600) h"
        default: amount = "\(span / 86400) d"
        }
        if span < 1 { return "now" }
        return seconds > 0 ? "in \(amount)" : "\(amount) ago"
    }

    /// `label   value` lines with the values aligned.
    static func section(_ title: String, _ rows: [(String, String)]) -> String {
        let width = rows.map(\.0.count).max() ?? 0
        let lines = rows.map { "  " + $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }
        return ([title] + lines).joined(separator: "\n")
    }

    /// A table with a header row; columns padded to their widest cell.
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { i in all.map { $0[i].count }.max() ?? 0 }
        return all.map { row in
            "  " + row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    static func state(_ s: PairState) -> String {
        switch s {
        case .active: "active"
        case .moved: "moved away"
        case .revoked: "revoked"
        case .replaced: "taken over"
        case .removed: "removed by the app"
        }
    }
}

enum JSON {
    static func print(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        Swift.print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }
}

/// JSON shapes of the commands.
/// A device the account is or was on: the account's state there, and the device's other accounts.
struct DeviceJSON: Encodable {
    var deviceId: String
    var state: String
    var current: Bool
    var boundAt: String
    var lastLoginAt: String?
    var endedAt: String?
    var endedReason: String?
    /// The other accounts the device holds now.
    var otherAccounts: [ListedAccount]
    /// Which accounts the device's push tokens reach (`all` or `current`), and this account's pushes there.
    var pushMode: String
    var pushEnabled: Bool
    /// What the device recorded of its attestation; null when it recorded none (attestation off).
    var attestation: AttestationJSON?

    init?(_ device: DeviceRecord, account: String) {
        attestation = device.attestation.map(AttestationJSON.init)
        guard let pair = device.account(account) else { return nil }
        deviceId = device.id
        state = pair.state.rawValue
        current = device.currentAccountID == account
        boundAt = pair.addedAt.rfc3339
        lastLoginAt = pair.lastLoginAt?.rfc3339
        endedAt = pair.endedAt?.rfc3339
        endedReason = pair.endedReason
        pushMode = device.pushMode.rawValue
        pushEnabled = pair.pushEnabled
        otherAccounts = device.summaries.filter { $0.accountID != account }
    }
}

/// A device's attestation: platform, outcome and when; the App Attest key's id and counter (public values).
struct AttestationJSON: Encodable {
    var platform: String?
    /// `verified`, `missing` or `failed: <check>`.
    var outcome: String
    var at: String
    var keyId: String?
    var counter: Int64?

    init(_ a: DeviceAttestation) {
        platform = a.platform?.rawValue
        outcome = a.outcome.description
        at = a.at.rfc3339
        keyId = a.key.map { Data($0.keyID).base64EncodedString() }
        counter = a.key?.counter
    }

    /// The devices table's column: `verified (apple)`, `failed: nonce (android)`, `missing`, or `-` when none was recorded.
    static func words(_ a: DeviceAttestation?) -> String {
        guard let a else { return "-" }
        return a.outcome.description + (a.platform.map { " (\($0.rawValue))" } ?? "")
    }
}

/// A push token on the account's device: only its last 8 characters, and whether it reaches the account.
struct PushTokenJSON: Encodable {
    var deviceId: String
    var provider: String
    var environment: String?
    var tokenEnding: String
    var registeredAt: String
    var reachesAccount: Bool
    /// Why it does not, when it does not.
    var why: String?

    init?(_ token: PushToken, report: AccountReport) {
        guard let device = report.devices.first(where: { $0.id == token.deviceID }) else { return nil }
        deviceId = token.deviceID
        provider = token.provider.rawValue
        environment = token.environment?.rawValue
        tokenEnding = token.ending
        registeredAt = token.registeredAt.rfc3339
        why = Self.unreached(device, account: report.accountID)
        reachesAccount = why == nil
    }

    /// Why the device's tokens do not reach the account; nil when they do.
    static func unreached(_ device: DeviceRecord, account: String) -> String? {
        if device.routesPushes(to: account) { return nil }
        guard let pair = device.account(account), pair.state == .active else { return "the account is not on this device" }
        if !pair.pushEnabled { return "the account turned its pushes off on this device" }
        return "the device routes only its current account"
    }
}

/// The account's Apple ID link: never Apple's user id or tokens.
struct AppleJSON: Encodable {
    var linkedAt: String
    var email: String?
    var isPrivateEmail: Bool?
    /// False after Apple said the user stopped forwarding to the private relay address.
    var emailForwarding: Bool
    init(_ link: AppleLink) {
        linkedAt = link.linkedAt.rfc3339
        email = link.email
        isPrivateEmail = link.isPrivateEmail
        emailForwarding = link.emailEnabled
    }
}

/// A sibling app's open session: never its token or its hash.
struct SiblingSessionJSON: Encodable {
    var clientId: String
    var deviceId: String
    var startedAt: String
    var expiresAt: String
    init(_ s: SiblingSession) {
        clientId = s.clientID
        deviceId = s.deviceID
        startedAt = s.startedAt.rfc3339
        expiresAt = s.expiresAt.rfc3339
    }
}

struct TransferJSON: Encodable {
    var transferId: String
    var method: String
    /// A password transfer's; a code transfer has none (and its code is never shown again).
    var email: String?
    var createdAt: String
    var expiresAt: String
    var expired: Bool
    var failedAttemptsInARow: Int
    var failedAttemptsTotal: Int
    var lockedUntil: String?

    init(_ t: TransferRecord, now: Timestamp) {
        transferId = t.id
        method = t.method.rawValue
        email = t.email
        createdAt = t.createdAt.rfc3339
        expiresAt = t.expiresAt.rfc3339
        expired = !t.isOpen(at: now)
        failedAttemptsInARow = t.failedConsecutive
        failedAttemptsTotal = t.failedTotal
        lockedUntil = t.lock(at: now)?.rfc3339
    }
}

struct EventJSON: Encodable {
    var at: String
    var kind: String
    var deviceId: String?
    var transferId: String?
    var actor: String
    var reason: String?
    var clientAddress: String?
    /// How many identical events within the hour the row stands for; the last one's time.
    var repeats: Int
    var lastAt: String?

    init(_ e: AuditEvent) {
        at = e.at.rfc3339
        kind = e.kind.rawValue
        deviceId = e.deviceID
        transferId = e.transferID
        actor = e.actor.description
        reason = e.reason
        clientAddress = e.clientAddress
        repeats = e.repeats
        lastAt = e.lastAt?.rfc3339
    }
}

extension Array where Element == AuditEvent {
    func table(now: Timestamp) -> String {
        guard !isEmpty else { return "  (none)" }
        return Text.table(
            ["WHEN", "EVENT", "DEVICE", "BY", "REASON"],
            map {
                let kind = $0.repeats > 1 ? "\($0.kind.rawValue) ×\($0.repeats)" : $0.kind.rawValue
                return [Text.time($0.at, now: now), kind, $0.deviceID ?? "-", $0.actor.description, $0.reason ?? ""]
            })
    }
}

/// A recovery code as support sees it: when it was made and used, by which device; never the code.
struct RecoveryCodeJSON: Encodable {
    var createdAt: String
    var usedAt: String?
    var usedByDeviceId: String?

    init(_ code: RecoveryCodeRecord) {
        createdAt = code.createdAt.rfc3339
        usedAt = code.usedAt?.rfc3339
        usedByDeviceId = code.usedByDevice
    }
}

/// A backup key as support sees it: its store, when it was made and used, by which device; never the key.
struct BackupKeyJSON: Encodable {
    var store: String
    var createdAt: String
    var usedAt: String?
    var usedByDeviceId: String?

    init(_ key: BackupKeyRecord) {
        store = key.store.rawValue
        createdAt = key.createdAt.rfc3339
        usedAt = key.usedAt?.rfc3339
        usedByDeviceId = key.usedByDevice
    }
}
