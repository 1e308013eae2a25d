import Hummingbird
import TransferCore

// Devices & accounts: the account's profile and deletion, the device's accounts and its current one.
extension API {
    static var deviceRoutes: [Route] {
        [
            Route(.get, "/v1/me", .deviceOrSiblingInOneRead) { $0.me },
            Route(.delete, "/v1/me", .deviceWithProof) { $0.deleteAccount },
            Route(.get, "/v1/devices/accounts", .device) { $0.deviceAccounts },
            Route(.put, "/v1/devices/current-account", .device) { $0.setCurrentAccount },
            Route(.delete, "/v1/devices/accounts/:accountId", .device) { $0.removeAccount },
        ]
    }

    func me(_ request: Request, _ context: Context) async throws -> Response {
        let token = try context.unchecked
        let (caller, profile) = try await service.profile(
            accountID: token.accountID, deviceID: token.deviceID, sessionID: token.sessionID, clientID: token.clientID)
        context.log.accountID = caller.accountID
        return Self.json(bytes: MeBody(profile, current: caller.deviceID).json(), status: .ok)
    }

    /// `DELETE /v1/me`: the account is erased (App Store guideline 5.1.1(v)).
    func deleteAccount(_ request: Request, _ context: Context) async throws -> Response {
        try await Self.readNoBody(request, context)
        try await service.deleteAccount(try context.caller)
        return Response(status: .noContent)
    }

    func deviceAccounts(_ request: Request, _ context: Context) async throws -> Response {
        let device = try await service.deviceAccounts(try context.caller)
        return try Self.json(DeviceAccountsBody(device), status: .ok)
    }

    func setCurrentAccount(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await JSONBody.read(request, context: context)
        let account = try Self.accountID(try body.string("accountId"), field: "accountId")
        try await service.setCurrentAccount(try context.caller, accountID: account)
        return Response(status: .noContent)
    }

    func removeAccount(_ request: Request, _ context: Context) async throws -> Response {
        try await Self.readNoBody(request, context)
        let account = try Self.accountID(context.parameters.get("accountId") ?? "", field: "accountId")
        let abandon: Bool
        switch request.uri.queryParameters.get("abandon") {
        case nil, "false": abandon = false
        case "true": abandon = true
        default: throw APIError.invalidRequest("abandon must be true or false.")
        }
        try await service.removeAccount(try context.caller, accountID: account, abandon: abandon)
        return Response(status: .noContent)
    }
}

/// `/v1/me`; `transferId` and `transfer` are written as `null` when absent. Apps read it at
/// launch, so it is written by hand (`json()`) as the session answer is; `Encodable` stays as
/// the reference a test holds it to, byte for byte.
struct MeBody: Encodable {
    /// `email` only for a password transfer: a code is never shown again.
    struct Transfer: Encodable { var method: String; var email: String?; var createdAt: String; var expiresAt: String }
    struct Device: Encodable { var deviceId: String; var boundAt: String; var lastLoginAt: String?; var current: Bool }

    var accountId: String
    var userName: String
    var createdAt: String
    var migrationFlag: Bool
    @Nullable var transferId: String?
    @Nullable var transfer: Transfer?
    var devices: [Device]
    @Nullable var apple: AppleLinkBody?
    /// What would bring the account back if its phone were lost; empty: nothing would.
    var waysBack: [WayBack]
    /// The unused backup keys, by store (never a key).
    var backupKeys: [BackupKey]
    struct BackupKey: Encodable { var store: String; var createdAt: String }

    init(_ profile: AccountProfile, current: String) {
        accountId = profile.accountID
        userName = profile.userName
        createdAt = profile.createdAt.rfc3339
        migrationFlag = profile.migrationFlag
        transferId = profile.movedToDeviceID
        transfer = profile.transfer.map {
            Transfer(method: $0.method.rawValue, email: $0.email, createdAt: $0.createdAt.rfc3339, expiresAt: $0.expiresAt.rfc3339)
        }
        waysBack = profile.waysBack
        backupKeys = profile.backupKeys.map { BackupKey(store: $0.store.rawValue, createdAt: $0.createdAt.rfc3339) }
        devices = profile.activeDevices.map {
            Device(deviceId: $0.deviceID, boundAt: $0.boundAt.rfc3339, lastLoginAt: $0.lastLoginAt?.rfc3339, current: $0.deviceID == current)
        }
        apple = profile.apple.map { AppleLinkBody($0, withLinkedAt: true) }
    }
}

extension MeBody {
    /// What `API.json` writes for this body (keys sorted, slashes not escaped; a plain optional
    /// left out when absent, a `@Nullable` one written as `null`), written directly.
    func json() -> [UInt8] {
        var out = JSONOut()
        out.raw("{")
        out.member("accountId", accountId, first: true)
        out.key("apple")
        if let apple {
            out.raw("{")
            out.key("email", first: true)
            out.nullable(apple.email) { $0.string($1) }
            out.key("isPrivateEmail")
            out.nullable(apple.isPrivateEmail) { $0.bool($1) }
            if let linkedAt = apple.linkedAt {
                out.member("linkedAt", linkedAt)
            }
            out.raw("}")
        } else {
            out.raw("null")
        }
        out.key("backupKeys")
        out.array(backupKeys) { out, key in
            out.member("createdAt", key.createdAt, first: true)
            out.member("store", key.store)
        }
        out.member("createdAt", createdAt)
        out.key("devices")
        out.array(devices) { out, device in
            out.member("boundAt", device.boundAt, first: true)
            out.member("current", device.current)
            out.member("deviceId", device.deviceId)
            if let lastLoginAt = device.lastLoginAt {
                out.member("lastLoginAt", lastLoginAt)
            }
        }
        out.member("migrationFlag", migrationFlag)
        out.key("transfer")
        if let transfer {
            out.raw("{")
            out.member("createdAt", transfer.createdAt, first: true)
            if let email = transfer.email {
                out.member("email", email)
            }
            out.member("expiresAt", transfer.expiresAt)
            out.member("method", transfer.method)
            out.raw("}")
        } else {
            out.raw("null")
        }
        out.key("transferId")
        out.nullable(transferId) { $0.string($1) }
        out.member("userName", userName)
        out.key("waysBack")
        out.raw("[")
        for (index, way) in waysBack.enumerated() {
            if index > 0 { out.raw(",") }
            out.string(way.rawValue)
        }
        out.raw("]")
        out.raw("}")
        return out.bytes
    }
}

/// `GET /v1/devices/accounts`.
struct DeviceAccountsBody: Encodable {
    struct Account: Encodable {
        var accountId: String
        var userName: String
        var current: Bool
        var addedAt: String
        @Nullable var lastLoginAt: String?
        var pushEnabled: Bool
    }
    var deviceId: String
    var accounts: [Account]

    init(_ device: DeviceRecord) {
        deviceId = device.id
        accounts = device.active.map {
            Account(
                accountId: $0.account.accountID, userName: $0.account.userName, current: $0.account.accountID == device.currentAccountID,
                addedAt: $0.addedAt.rfc3339, lastLoginAt: $0.lastLoginAt?.rfc3339, pushEnabled: $0.pushEnabled)
        }
    }
}
