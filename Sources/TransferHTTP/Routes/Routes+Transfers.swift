import Hummingbird
import TransferCore

// Transfers: set-up (email and password, or a code) and cancel on A, the recovery code, the
// backup keys, the claim on B with any of them (with the claim limit every claim counts against).
extension API {
    static var transferRoutes: [Route] {
        [
            Route(.put, "/v1/me/transfer", .deviceWithProof) { $0.setUpTransfer },
            Route(.delete, "/v1/me/transfer", .deviceWithProof) { $0.cancelTransfer },
            Route(.put, "/v1/me/recovery-code", .deviceWithProof) { $0.makeRecoveryCode },
            Route(.delete, "/v1/me/recovery-code", .deviceWithProof) { $0.deleteRecoveryCode },
            Route(.put, "/v1/me/backup-key", .deviceWithProof) { $0.makeBackupKey },
            Route(.delete, "/v1/me/backup-key", .deviceWithProof) { $0.deleteBackupKey },
            Route(.post, "/v1/transfers/claim") { $0.claim },
        ]
    }

    func setUpTransfer(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try context.caller
        let body = try await JSONBody.read(request, context: context)
        let method: TransferMethod = try body.optionalString("method").map { try JSONBody.choice($0, name: "method") } ?? .password
        if method == .code {
            guard !body.has("email"), !body.has("temporaryPassword") else {
                throw APIError.invalidRequest("method 'code' takes no email and no temporaryPassword.")
            }
            let result = try await service.setUpTransferCode(
                accountID: caller.accountID, clientAddress: clientAddress(request, context), deviceID: caller.deviceID)
            return try Self.json(TransferCodeBody(transferCode: result.code.grouped, expiresAt: result.expiresAt.rfc3339), status: .created)
        }
        let email = try FieldRules.email(try body.string("email"))
        let password = try FieldRules.temporaryPassword(try body.string("temporaryPassword"), email: email)
        let result = try await service.setUpTransfer(
            accountID: caller.accountID, email: email, password: password,
            clientAddress: clientAddress(request, context), deviceID: caller.deviceID)
        return try Self.json(TransferBody(email: result.email, expiresAt: result.expiresAt.rfc3339), status: .created)
    }

    func cancelTransfer(_ request: Request, _ context: Context) async throws -> Response {
        try await Self.readNoBody(request, context)
        let caller = try context.caller
        _ = try await service.cancelTransfer(accountID: caller.accountID, deviceID: caller.deviceID)
        return Response(status: .noContent)
    }

    /// `PUT /v1/me/recovery-code`: shown once; replaces the account's earlier code.
    func makeRecoveryCode(_ request: Request, _ context: Context) async throws -> Response {
        try await Self.readNoBody(request, context)
        let caller = try context.caller
        let made = try await service.makeRecoveryCode(accountID: caller.accountID, deviceID: caller.deviceID)
        return try Self.json(RecoveryCodeBody(recoveryCode: made.code.grouped, createdAt: made.createdAt.rfc3339), status: .created)
    }

    func deleteRecoveryCode(_ request: Request, _ context: Context) async throws -> Response {
        try await Self.readNoBody(request, context)
        let caller = try context.caller
        try await service.deleteRecoveryCode(accountID: caller.accountID, deviceID: caller.deviceID)
        return Response(status: .noContent)
    }

    /// `PUT /v1/me/backup-key` `{"store"}`: shown once; replaces the account's earlier key in that store.
    func makeBackupKey(_ request: Request, _ context: Context) async throws -> Response {
        let caller = try context.caller
        let body = try await JSONBody.read(request, context: context)
        let store: BackupKeyStore = try body.choice("store")
        let made = try await service.makeBackupKey(accountID: caller.accountID, store: store, deviceID: caller.deviceID)
        return try Self.json(BackupKeyBody(backupKey: made.key.value, store: store.rawValue, createdAt: made.createdAt.rfc3339), status: .created)
    }

    /// `DELETE /v1/me/backup-key?store=…`: `204` whether or not the store held one.
    func deleteBackupKey(_ request: Request, _ context: Context) async throws -> Response {
        try await Self.readNoBody(request, context)
        let caller = try context.caller
        guard let text = request.uri.queryParameters.get("store") else {
            throw APIError.invalidRequest("store is required: ?store=icloud-keychain or ?store=block-store.")
        }
        let store: BackupKeyStore = try JSONBody.choice(text, name: "store")
        try await service.deleteBackupKey(accountID: caller.accountID, store: store, deviceID: caller.deviceID)
        return Response(status: .noContent)
    }

    /// A claim with an email and temporary password, a transfer code, a recovery code or a backup key: one of them.
    func claim(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context)
        let given = ["email", "temporaryPassword", "transferCode", "recoveryCode", "backupKey"].filter { body.has($0) }
        var password: (email: String, password: String)?
        var code: ClaimRequest.Proof?
        if let typed = try body.optionalString("transferCode") {
            guard given == ["transferCode"] else { throw APIError.invalidRequest("transferCode goes alone, without \(Self.others(given, "transferCode")).") }
            code = .transferCode(typed)
        } else if let typed = try body.optionalString("recoveryCode") {
            guard given == ["recoveryCode"] else { throw APIError.invalidRequest("recoveryCode goes alone, without \(Self.others(given, "recoveryCode")).") }
            code = .recoveryCode(typed)
        } else if let key = try body.optionalString("backupKey") {
            guard given == ["backupKey"] else { throw APIError.invalidRequest("backupKey goes alone, without \(Self.others(given, "backupKey")).") }
            code = .backupKey(key)
        } else {
            password = (try body.string("email"), try body.string("temporaryPassword"))
        }
        let target = try ClaimTarget(body)
        var proof: ClaimRequest.Proof
        if let password {
            proof = .password(try FieldRules.email(password.email), try FieldRules.claimPassword(password.password))
        } else {
            proof = code ?? .transferCode("")
        }
        let address = clientAddress(request, context)
        let grant = try await service.claim(ClaimRequest(proof: proof, target: target), clientAddress: address)
        context.log.accountID = grant.account.accountID
        return try await session(grant, status: .ok)
    }

    static func others(_ given: [String], _ field: String) -> String {
        given.filter { $0 != field }.joined(separator: " and ")
    }
}

extension ClaimTarget {
    /// The device a claim (with a password, a code or Apple) binds, and its options, from the body.
    init(_ body: JSONBody) throws {
        let deviceID = try FieldRules.deviceID(try body.string("deviceId"))
        let secret = try FieldRules.deviceSecret(try body.string("deviceSecret"))
        let replace = try body.bool("replaceExistingAccount", default: false)
        let add = try body.bool("addAccount", default: false)
        let abandon = try body.bool("abandonExisting", default: false)
        self.init(deviceID: deviceID, deviceSecret: secret, replaceExistingAccount: replace, addAccount: add, abandonExisting: abandon)
        if replace && add { throw APIError.invalidRequest("replaceExistingAccount and addAccount cannot both be true.") }
        // Like addAccount with replaceExistingAccount: an option that could only be misread is refused.
        if abandon && !replace { throw APIError.invalidRequest("abandonExisting: true needs replaceExistingAccount: true.") }
    }
}

struct TransferBody: Encodable {
    var email: String
    var expiresAt: String
}

/// A code set-up's answer: the code, shown this once.
struct TransferCodeBody: Encodable {
    var transferCode: String
    var expiresAt: String
}

/// `PUT /v1/me/recovery-code`: the code, shown this once.
struct RecoveryCodeBody: Encodable {
    var recoveryCode: String
    var createdAt: String
}

/// `PUT /v1/me/backup-key`: the key, shown this once, for the app to keep in `store`.
struct BackupKeyBody: Encodable {
    var backupKey: String
    var store: String
    var createdAt: String
}
