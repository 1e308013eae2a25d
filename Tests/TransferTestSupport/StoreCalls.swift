import Foundation
import TransferCore

/// Store operations as the service runs them, with fixed, readable inputs: a device's secret
/// is `secret-<deviceId>` unless a test says otherwise.
struct StoreCalls {
    let store: any TransferStore

    static func secret(_ device: DeviceID) -> String { "secret-\(device.value)" }

    func login(
        _ device: DeviceID, secret: String? = nil, _ target: LoginTarget = .current, at now: Timestamp, newAccount id: String = Identifier.make(),
        address: String? = nil, creationSlot: RateSlot? = nil, maxAccounts: Int = 5
    ) async throws -> Result<SessionGrant, TransferError> {
        try await store.login(LoginCommand(
            deviceID: device, deviceSecret: secret ?? Self.secret(device), target: target, now: now, newAccountID: id,
            creationSlot: creationSlot, maxAccounts: maxAccounts,
            fresh: FreshSession(sessionID: Identifier.make(), key: .random(), expiresAt: now + .seconds(3600)), clientAddress: address))
    }

    /// The account of a login that must succeed.
    func account(_ device: DeviceID, _ target: LoginTarget = .current, at now: Timestamp) async throws -> String {
        let result = try await login(device, target, at: now)
        guard let grant = result.grant else { throw TestFailure("login of \(device) (\(target)) failed: \(result)") }
        return grant.account.accountID
    }

    func setUp(
        account: String, email: String = "mia@example.com", id: String = Identifier.make(), at now: Timestamp, by: Initiator = .device,
        reason: String? = nil
    ) async throws -> String {
        let hash = "$argon2id$v=19$m=256,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
        let result = try await store.execute(SetUpCommand(
            transfer: NewTransfer(
                id: id, accountID: account, email: try FieldRules.email(email), passwordHash: hash, createdAt: now,
                expiresAt: now + .seconds(3600), issuedBy: by),
            reason: reason))
        guard case .success = result else { throw TestFailure("set-up \(id) was refused: \(result)") }
        return id
    }

    func claim(
        transfer: String, account: String, device: DeviceID, secret: String? = nil, replace: Bool = false, add: Bool = false,
        at now: Timestamp, address: String? = nil, maxAccounts: Int = 5
    ) async throws -> Result<ClaimOutcome, TransferError> {
        try await store.execute(ClaimCommand(
            PasswordProof(transferID: transfer, accountID: account),
            target: ClaimTarget(deviceID: device, deviceSecret: secret ?? Self.secret(device), replaceExistingAccount: replace, addAccount: add),
            maxAccounts: maxAccounts, now: now, fresh: FreshSession(sessionID: Identifier.make(), key: .random(), expiresAt: now + .seconds(3600)),
            clientAddress: address))
    }

    func refresh(_ token: String, at now: Timestamp) async throws -> Result<SessionGrant, TransferError> {
        try await store.execute(RefreshCommand(token: token, now: now, expiresAt: now + .seconds(3600), fallbackKey: .random()))
    }
}

extension Result where Success == SessionGrant {
    var grant: SessionGrant? { try? get() }
}

extension Result where Success == ClaimOutcome {
    /// The session of a claim that was won (not refused, not a repeat).
    var grant: SessionGrant? {
        if case .success(.claimed(let grant)) = self { return grant }
        return nil
    }
}

extension Result where Failure == TransferError {
    /// The refusal; nil when the operation succeeded.
    var refusal: TransferError? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
