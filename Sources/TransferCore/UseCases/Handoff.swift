import Crypto

// Sibling apps: a signed-in host app hands its account to a sibling app of the same family
// with a one-time code bound to the sibling's client id and a PKCE S256 challenge (RFC 7636).
// The sibling's session lives on the host's (device, account) pair and dies with it.

/// The hand-off settings (`--handoff-clients`, `--handoff-code-ttl`); nil in `ServicePolicy` while off.
public struct HandoffPolicy: Sendable, Equatable {
    /// The sibling client ids a code may be issued to.
    public var clients: Set<String>
    public var codeTTL: Duration
    public init(clients: Set<String>, codeTTL: Duration = .seconds(60)) {
        self.clients = clients
        self.codeTTL = codeTTL
    }
}

/// A hand-off code as stored: only its SHA-256, what it is bound to, and its redemption.
public struct HandoffCodeRecord: Sendable, Equatable {
    public var codeHash: SecretHash
    public var deviceID: String
    public var accountID: String
    /// The host session that asked for the code: it must still be open at redemption.
    public var hostSessionID: String
    public var clientID: String
    /// base64url(SHA-256(verifier)), 43 characters.
    public var challenge: String
    public var createdAt: Timestamp
    public var expiresAt: Timestamp
    public var redeemedAt: Timestamp?
    /// The sibling session the redemption opened.
    public var siblingSessionID: String?

    public init(
        codeHash: SecretHash, deviceID: String, accountID: String, hostSessionID: String, clientID: String, challenge: String,
        createdAt: Timestamp, expiresAt: Timestamp, redeemedAt: Timestamp? = nil, siblingSessionID: String? = nil
    ) {
        self.codeHash = codeHash
        self.deviceID = deviceID
        self.accountID = accountID
        self.hostSessionID = hostSessionID
        self.clientID = clientID
        self.challenge = challenge
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.redeemedAt = redeemedAt
        self.siblingSessionID = siblingSessionID
    }
}

/// A sibling app's session on the host's (device, account) pair: one per client id. Its refresh
/// token is random and kept only as a SHA-256 (nothing ever has to hand the current one back).
public struct SiblingSession: Sendable, Equatable {
    public var deviceID: String
    public var accountID: String
    public var clientID: String
    public var sessionID: String
    public var startedAt: Timestamp
    public var generation: Int
    public var refreshHash: SecretHash
    public var expiresAt: Timestamp

    public init(
        deviceID: String, accountID: String, clientID: String, sessionID: String, startedAt: Timestamp, generation: Int,
        refreshHash: SecretHash, expiresAt: Timestamp
    ) {
        self.deviceID = deviceID
        self.accountID = accountID
        self.clientID = clientID
        self.sessionID = sessionID
        self.startedAt = startedAt
        self.generation = generation
        self.refreshHash = refreshHash
        self.expiresAt = expiresAt
    }
}

/// PKCE S256 (RFC 7636 §4).
public enum PKCE {
    /// A challenge is base64url(SHA-256) without padding: exactly 43 characters.
    public static func isChallenge(_ text: String) -> Bool {
        text.utf8.count == 43 && text.utf8.allSatisfy(isBase64URL)
    }

    /// A verifier is 43 to 128 characters of `[A-Za-z0-9-._~]`.
    public static func isVerifier(_ text: String) -> Bool {
        (43...128).contains(text.utf8.count) && text.utf8.allSatisfy { isBase64URL($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "~") }
    }

    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array(verifier.utf8))))
    }

    /// True when `verifier` is well formed and hashes to `challenge` (compared in constant time).
    public static func verify(_ verifier: String, challenge: String) -> Bool {
        guard isVerifier(verifier) else { return false }
        let a = Array(Self.challenge(for: verifier).utf8)
        let b = Array(challenge.utf8)
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private static func isBase64URL(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }
}

extension TransferService {
    /// The hand-off settings, or `501 not_configured` (the HTTP layer asks first, so that a
    /// deployment without the feature says so before it looks at the request).
    public func handoffPolicy() throws -> HandoffPolicy {
        guard let handoff = policy.handoff else { throw TransferError.notConfigured("Sibling-app hand-off") }
        return handoff
    }

    /// `POST /v1/handoff/codes`: a one-time code for the sibling `clientID`, bound to the host's
    /// session and the sibling's challenge. The code exists in clear only in the answer.
    public func createHandoffCode(_ caller: Caller, clientID: String, challenge: String) async throws -> (code: String, expiresIn: Duration) {
        let handoff = try handoffPolicy()
        guard caller.clientID == nil else { throw TransferError.insufficientScope }
        guard handoff.clients.contains(clientID) else { throw TransferError.unknownClient }
        let code = RandomToken.make()
        let now = clock.now()
        // Refused (`invalidToken`) when the session ended between the token check and the transaction (a logout, a claim).
        try await store.execute(
            CreateHandoffCodeCommand(
                caller: caller,
                code: HandoffCodeRecord(
                    codeHash: SecretHash(of: code), deviceID: caller.deviceID, accountID: caller.accountID, hostSessionID: caller.sessionID,
                    clientID: clientID, challenge: challenge, createdAt: now, expiresAt: now + handoff.codeTTL),
                slot: policy.limits.slot(.handoff, account: caller.accountID, now: now))
        ).get()
        return (code, handoff.codeTTL)
    }

    /// `POST /v1/handoff/token`: the sibling redeems its code with its verifier; a session on the
    /// host's (device, account) pair for `clientID`. Every failure is `invalidGrant`.
    public func redeemHandoffCode(code: String, verifier: String, clientID: String, clientAddress: String?) async throws -> SessionGrant {
        let handoff = try handoffPolicy()
        guard !code.isEmpty, code.utf8.count <= 128, handoff.clients.contains(clientID) else { throw TransferError.invalidGrant }
        let now = clock.now()
        let token = RandomToken.make()
        return try await store.execute(
            RedeemHandoffCommand(
                codeHash: SecretHash(of: code), verifier: verifier, clientID: clientID, now: now, sessionID: Identifier.make(),
                refreshToken: token, expiresAt: now + policy.refreshTokenTTL, clientAddress: clientAddress,
                activityResolution: policy.activityResolution)
        ).get()
    }
}

/// Stores a hand-off code while the caller's session is still its pair's open session.
public struct CreateHandoffCodeCommand: StoreOperation {
    public var caller: Caller
    public var code: HandoffCodeRecord
    /// `--handoff-limit`'s slot for the account, taken with the code; nil while the limit is off.
    public var slot: RateSlot?
    public var now: Timestamp { code.createdAt }
    public init(caller: Caller, code: HandoffCodeRecord, slot: RateSlot? = nil) {
        self.caller = caller
        self.code = code
        self.slot = slot
    }

    public var reads: [FactKey] { [.device(caller.deviceID)] }

    public func plan(_ facts: Facts) throws -> Plan<Void> {
        // The token was checked a moment ago; this holds it against a concurrent logout or claim.
        guard let pair = try facts.device(caller.deviceID)?.account(caller.accountID), pair.state == .active, pair.session?.sessionID == caller.sessionID else {
            return Plan(refusing: .invalidToken)
        }
        return Plan((), (slot.map { [.takeSlot($0)] } ?? []) + [.addHandoffCode(code)])
    }
}

/// Redeems a code at most once: the code row is locked, checked, and marked used in one
/// transaction, so of concurrent redemptions exactly one opens a session.
public struct RedeemHandoffCommand: StoreOperation {
    public var codeHash: SecretHash
    public var verifier: String
    public var clientID: String
    public var now: Timestamp
    /// The sibling session to open, chosen outside the pure plan.
    public var sessionID: String
    public var refreshToken: String
    public var expiresAt: Timestamp
    public var clientAddress: String?
    /// Opening a sibling session is a use of the pair: recorded at this resolution.
    public var activityResolution: ActivityResolution

    public init(
        codeHash: SecretHash, verifier: String, clientID: String, now: Timestamp, sessionID: String, refreshToken: String,
        expiresAt: Timestamp, clientAddress: String?, activityResolution: ActivityResolution = .standard
    ) {
        self.activityResolution = activityResolution
        self.codeHash = codeHash
        self.verifier = verifier
        self.clientID = clientID
        self.now = now
        self.sessionID = sessionID
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.clientAddress = clientAddress
    }

    /// The code's device, then the code (the lock order).
    public var reads: [FactKey] { [.handoffCodeDevice(codeHash), .handoffCode(codeHash)] }

    /// Every refusal is `invalidGrant`, one answer for all.
    public func plan(_ facts: Facts) throws -> Plan<SessionGrant> {
        // A wrong client or verifier leaves the code as it is: the verifier has 256 bits, and
        // someone who intercepted only the code must not be able to spend or revoke anything.
        guard let code = try facts.handoffCode(codeHash), code.clientID == clientID, PKCE.verify(verifier, challenge: code.challenge) else {
            return Plan(refusing: .invalidGrant)
        }
        if let redeemed = code.siblingSessionID {
            // Presented again with its verifier (RFC 6749 §4.1.2): whoever redeemed it first may
            // not be the sibling; end the session that redemption opened.
            return Plan(refusing: .invalidGrant, [
                .closeSiblingSession(sessionID: redeemed),
                .audit(AuditEvent(
                    at: now, kind: .handoffReuse, accountID: code.accountID, deviceID: code.deviceID, reason: clientID, clientAddress: clientAddress)),
            ])
        }
        guard now < code.expiresAt, let device = try facts.handoffCodeDevice(codeHash), let pair = device.account(code.accountID), pair.state == .active,
            pair.session?.sessionID == code.hostSessionID
        else { return Plan(refusing: .invalidGrant) }
        let session = SiblingSession(
            deviceID: device.id, accountID: code.accountID, clientID: clientID, sessionID: sessionID, startedAt: now, generation: 0,
            refreshHash: SecretHash(of: refreshToken), expiresAt: expiresAt)
        let grant = SessionGrant.sibling(pair.account, deviceID: device.id, sessionID: sessionID, refreshToken: refreshToken, clientID: clientID)
        return Plan(grant, [
            .redeemHandoffCode(hash: codeHash, at: now, siblingSessionID: sessionID),
            .openSiblingSession(session),
            .audit(AuditEvent(at: now, kind: .handoff, accountID: code.accountID, deviceID: device.id, reason: clientID, clientAddress: clientAddress)),
        ] + activityResolution.record(pair, deviceID: device.id, at: now))
    }
}

extension SessionGrant {
    /// A sibling app's session: it holds the one account it was handed, shown as its current one.
    static func sibling(_ account: AccountSummary, deviceID: String, sessionID: String, refreshToken: String, clientID: String) -> SessionGrant {
        SessionGrant(
            account: account, deviceID: deviceID, sessionID: sessionID, refreshToken: refreshToken, created: false,
            accounts: [ListedAccount(accountID: account.accountID, userName: account.userName, current: true)], clientID: clientID)
    }
}
