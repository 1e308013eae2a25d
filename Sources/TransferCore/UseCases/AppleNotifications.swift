// Apple's server-to-server notifications (`POST /v1/apple/notifications`), verified before
// they get here: the user revoked the app's consent or deleted the Apple ID (the link goes),
// or turned forwarding to the private relay address off or on (the stored flag follows).

/// What handling one of Apple's notifications came to (none is refused: Apple is told 200 for each).
public enum AppleNotificationHandling: Sendable, Equatable {
    case handled
    /// This `jti` was handled before: nothing changes.
    case repeated
    /// No account is linked to the Apple ID: recorded, nothing else changes.
    case notLinked
    /// Signed longer ago than `AppleEvent.replayWindow` (its `jti` may be pruned): nothing changes.
    case stale
}

extension TransferService {
    public func handleAppleNotification(_ event: AppleEvent) async throws -> AppleNotificationHandling {
        try await store.execute(AppleNotificationCommand(event: event, now: clock.now())).get()
    }
}

public struct AppleNotificationCommand: StoreOperation {
    public var event: AppleEvent
    public var now: Timestamp
    public init(event: AppleEvent, now: Timestamp) {
        self.event = event
        self.now = now
    }

    public var reads: [FactKey] { [.appleLinkBySub(event.sub), .appleNotificationSeen(jti: event.jti)] }

    public func plan(_ facts: Facts) throws -> Plan<AppleNotificationHandling> {
        guard try !facts.appleNotificationSeen(jti: event.jti) else { return Plan(.repeated) }
        guard now < event.issuedAt + AppleEvent.replayWindow else { return Plan(.stale) }
        var effects: [Effect] = [.recordAppleNotification(jti: event.jti, at: now)]
        guard let link = try facts.appleLink(sub: event.sub) else { return Plan(.notLinked, effects) }
        let account = link.accountID
        switch event.kind {
        case .consentRevoked, .accountDeleted:
            let why = event.kind == .consentRevoked ? "Apple: the user revoked consent" : "Apple: the Apple ID was deleted"
            effects += [
                .unlinkApple(accountID: account),
                .audit(AuditEvent(at: now, kind: .appleUnlinked, accountID: account, actor: .system, reason: why)),
                .webhook(.appleUnlinked, accountID: account, at: now),
            ]
        case .emailDisabled, .emailEnabled:
            let enabled = event.kind == .emailEnabled
            effects.append(.setAppleEmailEnabled(accountID: account, enabled))
            if event.email != nil || event.isPrivateEmail != nil {
                effects.append(.updateAppleEmail(accountID: account, email: event.email, isPrivateEmail: event.isPrivateEmail))
            }
            effects.append(.audit(AuditEvent(
                at: now, kind: .appleEmailChanged, accountID: account, actor: .system,
                reason: enabled ? "Apple: email forwarding enabled" : "Apple: email forwarding disabled")))
        case .other:
            break
        }
        return Plan(.handled, effects)
    }
}
