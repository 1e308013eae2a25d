import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit

@Suite("Accounts and events")
struct AccountTests {
    struct LoginRefusal: Sendable, CustomTestStringConvertible {
        let status: Int
        let body: [String: String]
        let kind: TransferError.Kind
        let event: @Sendable (String) -> TransferEvent
        var testDescription: String { "\(status) \(kind.rawValue)" }
    }

    static let refusals: [LoginRefusal] = [
        LoginRefusal(
            status: 410, body: ["error": "device_transferred", "message": "Moved.", "transferredAt": "2026-11-21T13:00:00Z"],
            kind: .deviceTransferred,
            event: { .accountMoved(accountId: $0, transferredAt: Wire.parseDate("2026-11-21T13:00:00Z"), remainingAccounts: []) }),
        LoginRefusal(
            status: 403, body: ["error": "device_revoked", "message": "Revoked."], kind: .deviceRevoked,
            event: { _ in .deviceRevoked }),
        LoginRefusal(
            status: 410, body: ["error": "account_deleted", "message": "Deleted."], kind: .accountDeleted,
            event: { .accountDeleted(accountId: $0) }),
    ]

    @Test("a launch's login refusal maps to its event and error, and forgets the tokens", arguments: refusals)
    func loginRefusalOnLaunch(_ refusal: LoginRefusal) async throws {
        let phone = try await Launched()
        var body: [String: Any] = refusal.body
        if refusal.kind == .deviceTransferred { body["accounts"] = [[String: Any]]() }
        phone.server.script("POST /v1/devices/login", status: refusal.status, body)

        await #expect { try await phone.client.launch() } throws: { error in
            let error = error as? TransferError
            return error?.kind == refusal.kind && error?.status == refusal.status && error?.message == refusal.body["message"]
        }
        #expect(phone.events.all.contains(refusal.event(phone.accountId)), "the refusal's event: \(phone.events.all)")
        #expect(phone.storedSessions.isEmpty)
        if refusal.kind == .accountDeleted {
            // The phone's only account is gone for good and its device retired: TransferKit starts
            // over at once (documented), so that the next start is a fresh one, not the same error.
            #expect(phone.events.all.last == .startedOver, "\(phone.events.all)")
            #expect(phone.storedIdentity == nil, "the retired identity is forgotten")
        } else {
            #expect(phone.events.all.last == refusal.event(phone.accountId))
            #expect(phone.storedIdentity != nil)  // never discarded behind the app's back
        }
        #expect(phone.server.violations.isEmpty)
    }

    @Test("a move found by a request: 401, refresh refused, login 410 → accountMoved, no tokens kept")
    func movedDuringUse() async throws {
        let phone = try await Launched()
        let other = try await phone.client.addAccount()
        try await phone.client.switchAccount(to: phone.accountId)
        phone.server.scriptError("PUT /v1/me/push", status: 401, "invalid_token")
        phone.server.scriptError("POST /v1/tokens/refresh", status: 401, "invalid_refresh_token")
        phone.server.script("POST /v1/devices/login", status: 410, [
            "error": "device_transferred", "message": "Moved.", "transferredAt": "2026-11-21T13:00:00Z",
            "accounts": [["accountId": other.id, "userName": other.userName, "current": false]],
        ])

        await #expect { try await phone.client.setPushEnabled(false) } throws: {
            TransferError.kind(of: $0) == .deviceTransferred
        }
        let remaining = [Account(id: other.id, userName: other.userName, isCurrent: false)]
        #expect(phone.events.all.last == .accountMoved(
            accountId: phone.accountId, transferredAt: Wire.parseDate("2026-11-21T13:00:00Z"), remainingAccounts: remaining))
        #expect(phone.storedSessions[phone.accountId] == nil)
        #expect(phone.client.state.accounts == remaining)
        #expect(phone.client.currentAccountId == nil)

        // The app picks the remaining account.
        try await phone.client.switchAccount(to: other.id)
        #expect(phone.client.currentAccountId == other.id)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("accounts, add, switch")
    func accountsAddSwitch() async throws {
        let phone = try await Launched()
        let second = try await phone.client.addAccount()
        #expect(second.isCurrent)
        #expect(phone.server.requests("POST /v1/devices/login").last?.bodyKeys == ["deviceId", "deviceSecret", "newAccount"])
        #expect(phone.client.currentAccountId == second.id)

        try await phone.client.switchAccount(to: phone.accountId)
        let switchCall = try #require(phone.server.requests("PUT /v1/devices/current-account").last)
        #expect(switchCall.body["accountId"] as? String == phone.accountId)
        let accounts = try await phone.client.accounts()
        #expect(accounts.map(\.id) == [phone.accountId, second.id])
        #expect(accounts.first(where: \.isCurrent)?.id == phone.accountId)
        #expect(accounts.allSatisfy { $0.addedAt != nil && $0.pushEnabled == true })
        #expect(phone.events.all.contains(.switched(accountId: phone.accountId)))
        #expect(phone.server.violations.isEmpty)
    }

    @Test("remove: 409 account_would_be_lost is typed; abandon=true removes; the last one retires the identity")
    func removeAccount() async throws {
        let phone = try await Launched()
        let second = try await phone.client.addAccount()

        await #expect { try await phone.client.removeAccount(second.id) } throws: { error in
            let error = error as? TransferError
            return error?.kind == .accountWouldBeLost && error?.status == 409 && error?.code == "account_would_be_lost"
        }
        try await phone.client.removeAccount(second.id, abandon: true)
        let call = try #require(phone.server.requests("DELETE /v1/devices/accounts/{accountId}").last)
        #expect(call.request.url.path.hasSuffix("/v1/devices/accounts/\(second.id)"))
        #expect(call.query == ["abandon": "true"])
        #expect(phone.client.state.accounts.map(\.id) == [phone.accountId])
        #expect(phone.client.currentAccountId == phone.accountId)  // the server made it current again
        #expect(phone.storedSessions[second.id] == nil)
        #expect(phone.events.all.contains(.accountRemoved(accountId: second.id)))
        #expect(phone.events.all.last == .switched(accountId: phone.accountId))

        // With a pending transfer the service lets it go without abandon; the phone is then empty.
        try await phone.client.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        try await phone.client.removeAccount(phone.accountId)
        #expect(phone.server.requests("DELETE /v1/devices/accounts/{accountId}").last?.query == [:])
        #expect(phone.storedIdentity == nil)
        #expect(phone.client.state == DeviceState(deviceId: nil, accounts: []))
        #expect(phone.server.violations.isEmpty)
    }

    @Test("profile: GET /v1/me with the account's token, typed")
    func profile() async throws {
        let phone = try await Launched()
        let fresh = try await phone.client.profile()
        #expect(fresh.id == phone.accountId && fresh.userName == phone.client.state.deviceId)
        #expect(fresh.createdAt == Wire.parseDate("2026-11-21T12:00:00Z"))
        #expect(!fresh.migrationFlag && fresh.transfer == nil && fresh.transferId == nil && fresh.appleID == nil)
        #expect(fresh.devices.map(\.id) == [try #require(phone.client.state.deviceId)])
        #expect(fresh.devices.first?.isCurrent == true && fresh.devices.first?.lastLoginAt == nil)

        try await phone.client.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        let moving = try await phone.client.profile(of: phone.accountId.uppercased())
        #expect(moving.migrationFlag)
        #expect(moving.transfer == PendingTransfer(
            email: "ann@example.com", expiresAt: Wire.parseDate("2026-11-22T12:00:00Z")!,
            createdAt: Wire.parseDate("2026-11-21T12:00:00Z")))
        let call = try #require(phone.server.requests("GET /v1/me").last)
        #expect(call.bearer == phone.storedSessions[phone.accountId]?.accessToken && call.request.body == nil)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("delete: the account leaves the list with accountDeleted; the last one retires the identity")
    func deleteAccount() async throws {
        let phone = try await Launched()
        let second = try await phone.client.addAccount()  // current
        let token = try #require(phone.storedSessions[second.id]).accessToken

        try await phone.client.deleteAccount()
        #expect(phone.server.requests("DELETE /v1/me").map(\.bearer) == [token])
        #expect(phone.client.state.accounts.map(\.id) == [phone.accountId])
        #expect(phone.client.currentAccountId == phone.accountId)  // the service made it current
        #expect(phone.storedSessions[second.id] == nil)
        #expect(phone.events.meaningful.suffix(2) == [.accountDeleted(accountId: second.id), .switched(accountId: phone.accountId)])
        await #expect { try await phone.client.withAccessToken(of: second.id) { $0 } } throws: {
            TransferError.kind(of: $0) == .accountDeleted
        }

        try await phone.client.deleteAccount(phone.accountId)
        #expect(phone.events.all.contains(.accountDeleted(accountId: phone.accountId)))
        #expect(phone.storedIdentity == nil && phone.storedSessions.isEmpty)
        #expect(phone.client.state == DeviceState(deviceId: nil, accounts: []))
        guard case .signedIn(let next, true) = try await phone.client.launch() else { Issue.record("no new account"); return }
        #expect(next != phone.accountId)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("events: every subscription starts with the initial state")
    func eventStream() async throws {
        let phone = try await Launched()
        var iterator = phone.client.events.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first == .initialState(phone.client.state))
        #expect(phone.client.state.currentAccountId == phone.accountId)
        try await phone.client.signOut()
        #expect(await iterator.next() == .signedOut(accountId: phone.accountId))
    }
}
