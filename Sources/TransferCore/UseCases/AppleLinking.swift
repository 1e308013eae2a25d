// Sign in with Apple: our nonces (`POST /v1/apple/nonce`), and linking an account to the
// user's Apple ID (`PUT` and `DELETE /v1/me/apple`). The identity token is verified before
// these run; what is left is the nonce (single use) and who holds the Apple ID.

extension TransferService {
    /// `POST /v1/apple/nonce` (a nonce for one sign-in) and `POST /v1/attestation/challenge` (a
    /// challenge for one attestation): 256 random bits, good once for five minutes. Only its
    /// SHA-256 is kept. Counted by `--nonce-limit` for the client, in the same transaction.
    public func issueNonce(_ purpose: IssueNonceCommand.Purpose, clientAddress: String?) async throws -> (value: String, expiresIn: Duration) {
        let value = AppleNonces.make()
        let now = clock.now()
        try await store.execute(IssueNonceCommand(
            purpose, hash: SecretHash(of: value), now: now, expiresAt: now + AppleNonces.lifetime,
            slot: policy.limits.slot(.nonce, client: clientAddress, now: now))
        ).get()
        return (value, AppleNonces.lifetime)
    }

    /// `PUT /v1/me/apple` with a verified identity: links the caller's account. `created` is
    /// false when the Apple ID was already this account's. `grant` is what Apple gave for the
    /// authorization code, when the exchange is configured and the app sent one: kept, to be
    /// revoked when the Apple ID leaves (unlink, replacement, deletion).
    public func linkApple(
        _ caller: Caller, identity: AppleIdentity, nonce: String, grant: AppleGrant? = nil
    ) async throws -> AppleLinked {
        try await store.execute(LinkAppleCommand(
            accountID: caller.accountID, identity: identity, nonceHash: SecretHash(of: nonce), grant: grant, now: clock.now(),
            deviceID: caller.deviceID)
        ).get()
    }

    /// `DELETE /v1/me/apple`: returns the link that was removed (its refresh token is to be
    /// revoked at Apple), nil when there was none.
    public func unlinkApple(_ caller: Caller) async throws -> AppleLink? {
        try await store.execute(UnlinkAppleCommand(accountID: caller.accountID, now: clock.now(), deviceID: caller.deviceID)).get()
    }
}

/// A single-use value the service hands out: a Sign in with Apple nonce or an attestation
/// challenge. Only its SHA-256 is stored, until it expires; `--nonce-limit` counts both.
public struct IssueNonceCommand: StoreOperation {
    public enum Purpose: Sendable {
        case appleSignIn
        case attestation
    }
    public var purpose: Purpose
    public var hash: SecretHash
    public var now: Timestamp
    public var expiresAt: Timestamp
    /// `--nonce-limit`'s slot for the client; nil while the limit is off.
    public var slot: RateSlot?
    public init(_ purpose: Purpose, hash: SecretHash, now: Timestamp, expiresAt: Timestamp, slot: RateSlot? = nil) {
        self.purpose = purpose
        self.hash = hash
        self.now = now
        self.expiresAt = expiresAt
        self.slot = slot
    }

    public var reads: [FactKey] { [] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        let stored: Effect =
            switch purpose {
            case .appleSignIn: .addAppleNonce(hash: hash, expiresAt: expiresAt, now: now)
            case .attestation: .addAttestationChallenge(hash: hash, expiresAt: expiresAt)
            }
        return Plan((), (slot.map { [.takeSlot($0)] } ?? []) + [stored])
    }
}

/// An account linked to an Apple ID: the link as it is now, and whether this made it (false:
/// the Apple ID was already the account's, signed in again).
public struct AppleLinked: Sendable, Equatable {
    public var link: AppleLink
    public var created: Bool
    public init(_ link: AppleLink, created: Bool) {
        self.link = link
        self.created = created
    }
}

/// Links an account to an Apple ID. The nonce is used up whatever the outcome: a token
/// presented once with it is never good again.
public struct LinkAppleCommand: StoreOperation {
    public var accountID: String
    public var identity: AppleIdentity
    public var nonceHash: SecretHash
    /// Apple's refresh token from the code exchange, when there was one.
    public var grant: AppleGrant?
    public var now: Timestamp
    /// The device that linked it (for `account.ways_back_changed`).
    public var deviceID: String?
    public init(
        accountID: String, identity: AppleIdentity, nonceHash: SecretHash, grant: AppleGrant? = nil, now: Timestamp, deviceID: String? = nil
    ) {
        self.deviceID = deviceID
        self.accountID = accountID
        self.identity = identity
        self.nonceHash = nonceHash
        self.grant = grant
        self.now = now
    }

    public var reads: [FactKey] { [.account(.id(accountID)), .appleNonce(nonceHash), .appleLinkBySub(identity.sub), .appleLink(.id(accountID))] }

    public func plan(_ facts: Facts) throws -> Plan<AppleLinked> {
        // Revoking a refresh token at Apple ends the user's whole authorization of the app
        // (Apple then sends consent-revoked), so a grant is revoked only when its Apple ID
        // leaves this service. A grant that is not kept is just dropped.
        if let refusal = try facts.appleNonceRefusal(nonceHash, at: now) { return Plan(refusing: refusal) }
        var effects: [Effect] = [.consumeAppleNonce(hash: nonceHash)]
        // A code of another sign-in: its grant is not this Apple ID's to keep.
        if let grant, grant.sub != identity.sub {
            return Plan(refusing: .invalidAuthorizationCode("it was issued for another Apple ID"), effects)
        }
        // Deleted while the token was being verified: nothing is linked to a tombstone.
        guard let account = try facts.account(accountID), account.deletedAt == nil else { return Plan(refusing: .invalidToken, effects) }
        if let holder = try facts.appleLink(sub: identity.sub) {
            guard holder.accountID == accountID else { return Plan(refusing: .appleIDInUse, effects) }
            // Signed in again: Apple sends the email on the first sign-in only; what it sends is kept.
            var link = holder
            link.email = identity.email ?? link.email
            link.isPrivateEmail = identity.isPrivateEmail ?? link.isPrivateEmail
            if let grant, grant.refreshToken != holder.refreshToken {
                // The newest grant is kept; the one before is dropped, not revoked (the same Apple ID stays).
                link.refreshToken = grant.refreshToken
                link.clientID = grant.clientID
                effects.append(.linkApple(link))
            } else if identity.email != nil || identity.isPrivateEmail != nil {
                effects.append(.updateAppleEmail(accountID: accountID, email: identity.email, isPrivateEmail: identity.isPrivateEmail))
            }
            return Plan(AppleLinked(link, created: false), effects)
        }
        // A different Apple ID linked before is replaced (the account follows the one the user
        // signs in with now); the one replaced leaves the service, so its grant is revoked.
        let link = AppleLink(
            accountID: accountID, sub: identity.sub, email: identity.email, isPrivateEmail: identity.isPrivateEmail, linkedAt: now,
            refreshToken: grant?.refreshToken, clientID: grant?.clientID)
        let replaced = try facts.appleLink(accountID)
        effects += (replaced?.revocation(at: now) ?? []) + [
            .linkApple(link),
            .audit(AuditEvent(
                at: now, kind: .appleLinked, accountID: accountID, reason: replaced == nil ? nil : "replaced the Apple ID linked before")),
            .webhook(.appleLinked, accountID: accountID, at: now),
            .waysBackChanged(.appleLinked, accountID: accountID, deviceID: deviceID, at: now),
        ]
        return Plan(AppleLinked(link, created: true), effects)
    }
}

public struct UnlinkAppleCommand: StoreOperation {
    public var accountID: String
    public var now: Timestamp
    public var by: Initiator
    public var reason: String?
    public var deviceID: String?
    public init(accountID: String, now: Timestamp, by: Initiator = .device, reason: String? = nil, deviceID: String? = nil) {
        self.accountID = accountID
        self.now = now
        self.by = by
        self.reason = reason
        self.deviceID = deviceID
    }

    public var reads: [FactKey] { [.appleLink(.id(accountID))] }

    public func plan(_ facts: Facts) throws -> Plan<AppleLink?> {
        guard let link = try facts.appleLink(accountID) else { return Plan(nil) }
        return Plan(link, link.revocation(at: now) + [
            .unlinkApple(accountID: accountID),
            .audit(AuditEvent(at: now, kind: .appleUnlinked, accountID: accountID, actor: by, reason: reason)),
            .webhook(.appleUnlinked, accountID: accountID, at: now),
            .waysBackChanged(.appleUnlinked, accountID: accountID, deviceID: deviceID, at: now),
        ])
    }
}

extension Facts {
    /// Why the read nonce cannot be used at `now` (never issued, used already, or expired); nil when it can.
    func appleNonceRefusal(_ hash: SecretHash, at now: Timestamp) throws -> TransferError? {
        guard let expiresAt = try appleNonceExpiry(hash), now < expiresAt else {
            return .invalidIdentityToken("the nonce was not issued by this service, was used already or expired")
        }
        return nil
    }
}
