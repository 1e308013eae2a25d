import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit
import TransferKitTesting

@Suite("Transfers")
struct TransferTests {
    static let email = "ann@example.com"
    static let password = "blue-harbor-42"

    @Test("claim with fail / replace / abandonExisting / add sends the right fields", arguments: [ClaimChoice.fail, .replace, .abandonExisting, .add])
    func claimChoice(_ choice: ClaimChoice) async throws {
        let old = try await Launched()
        let pending = try await old.client.setUpTransfer(email: Self.email, temporaryPassword: Self.password)
        #expect(pending == PendingTransfer(email: Self.email, expiresAt: Wire.parseDate("2026-11-22T12:00:00Z")!))
        let setUp = try #require(old.server.requests("PUT /v1/me/transfer").last)
        #expect(setUp.bodyKeys == ["email", "temporaryPassword"])

        let new = try await Launched(old.server)  // the new phone made its own account at first launch
        let identity = try #require(new.storedIdentity)
        let claim = { try await new.client.claimTransfer(email: Self.email, temporaryPassword: Self.password, existingAccounts: choice) }

        let base: Set<String> = ["email", "temporaryPassword", "deviceId", "deviceSecret"]
        switch choice {
        case .deleteExisting:
            return  // not an argument here: NewPhoneTests
        case .fail:
            await #expect { try await claim() } throws: { TransferError.kind(of: $0) == .deviceHasAccount }
            #expect(new.server.requests("POST /v1/transfers/claim").last?.bodyKeys == base)
            #expect(new.client.currentAccountId == new.accountId)
        case .replace:
            // The account the new phone made by itself has no way back: replacing it would strand it.
            await #expect { try await claim() } throws: { TransferError.kind(of: $0) == .accountWouldBeLost }
            #expect(new.client.state.accounts.map(\.id) == [new.accountId], "nothing changed")
            _ = try await new.client.makeRecoveryCode()
            let account = try await claim()
            let sent = try #require(new.server.requests("POST /v1/transfers/claim").last)
            #expect(sent.bodyKeys == base.union(["replaceExistingAccount"]))
            #expect(sent.body["replaceExistingAccount"] as? Bool == true)
            #expect(account.id == old.accountId)
            #expect(new.client.state.accounts.map(\.id) == [old.accountId])
            #expect(new.storedSessions.keys.sorted() == [old.accountId])
            #expect(new.events.all.contains(.accountRemoved(accountId: new.accountId)))
        case .abandonExisting:
            let account = try await claim()
            let sent = try #require(new.server.requests("POST /v1/transfers/claim").last)
            #expect(sent.bodyKeys == base.union(["replaceExistingAccount", "abandonExisting"]))
            #expect(sent.body["replaceExistingAccount"] as? Bool == true && sent.body["abandonExisting"] as? Bool == true)
            #expect(account.id == old.accountId)
            #expect(new.client.state.accounts.map(\.id) == [old.accountId])
            #expect(new.storedSessions.keys.sorted() == [old.accountId])
            #expect(new.events.all.contains(.accountRemoved(accountId: new.accountId)))
        case .add:
            let account = try await claim()
            let sent = try #require(new.server.requests("POST /v1/transfers/claim").last)
            #expect(sent.bodyKeys == base.union(["addAccount"]))
            #expect(sent.body["addAccount"] as? Bool == true)
            #expect(account.id == old.accountId)
            #expect(Set(new.client.state.accounts.map(\.id)) == [new.accountId, old.accountId])
        }
        if choice != .fail {
            let sent = try #require(new.server.requests("POST /v1/transfers/claim").last)
            #expect(sent.body["deviceId"] as? String == identity.deviceId)
            #expect(sent.body["deviceSecret"] as? String == identity.deviceSecret)
            #expect(sent.bearer == nil)
            #expect(new.client.currentAccountId == old.accountId)
            #expect(new.events.all.suffix(2) == [.signedIn(accountId: old.accountId, created: false), .switched(accountId: old.accountId)])
        }
        #expect(old.server.violations.isEmpty)
    }

    @Test("cancel sends DELETE /v1/me/transfer with the account's token")
    func cancel() async throws {
        let phone = try await Launched()
        try await phone.client.setUpTransfer(email: Self.email, temporaryPassword: Self.password)
        try await phone.client.cancelTransfer()
        let call = try #require(phone.server.requests("DELETE /v1/me/transfer").last)
        #expect(call.bearer == phone.storedSessions[phone.accountId]?.accessToken)
        #expect(call.request.body == nil)
    }

    @Test("A → B with simulated phones: B gets the account, A hears it moved")
    func simulatedPhones() async throws {
        let server = FakeServer()
        let a = SimulatedPhone("A") { server.client(keychain: $0, appFiles: $1) }
        let b = SimulatedPhone("B") { server.client(keychain: $0, appFiles: $1) }

        guard case .signedIn(let accountId, true) = try await a.launch() else { Issue.record("A has no account"); return }
        try await a.setUpTransfer(email: Self.email, password: Self.password)
        let claimed = try await b.claim(email: Self.email, password: Self.password)  // B never launched before
        #expect(claimed.id == accountId)
        #expect(try await b.accounts().map(\.id) == [accountId])
        #expect(b.saw(.signedIn) && b.saw(.switched))
        #expect(b.deviceId != nil && b.deviceId != a.deviceId)

        // A's next start: 410 device_transferred, nothing left on A.
        let relaunchedA = a.relaunched()
        await #expect { try await relaunchedA.launch() } throws: { TransferError.kind(of: $0) == .deviceTransferred }
        #expect(relaunchedA.saw(.accountMoved))
        guard case .accountMoved(let moved, _, let remaining) = relaunchedA.events.last else { Issue.record("no move"); return }
        #expect(moved == accountId && remaining.isEmpty)

        // B's app data restored onto a third phone: offered the transfer, nothing created.
        let c = b.restoredFromBackup(as: "C")
        guard case .restoredOntoNewPhone(let previous) = try await c.launch() else { Issue.record("C was not offered the transfer"); return }
        #expect(previous.map(\.id) == [accountId])
        #expect(c.saw(.restoredOntoNewPhone) && c.deviceId == nil)

        // A locked phone does nothing.
        let d = SimulatedPhone("D") { server.client(keychain: $0, appFiles: $1) }
        d.setLockedBeforeFirstUnlock(true)
        #expect(try await d.launch() == .storageUnavailable(.memoryLocked))
        #expect(d.saw(.storageUnavailable) && d.deviceId == nil)
        #expect(server.violations.isEmpty)
    }
}

@Suite("Push")
struct PushTests {
    @Test("tokens, mode, mute, and which account a notification is for")
    func push() async throws {
        let phone = try await Launched()
        try await phone.client.registerPushToken(apns: Data((0..<32).map { UInt8($0 * 7 % 256) }), environment: .sandbox)
        try await phone.client.registerPushToken(fcm: "eR3kT9x2QmW:APA91bH4n7Xc2Lp9Qs-1vZk_8YtR0uJ.wE5")
        try await phone.client.removePushToken(provider: .fcm)
        try await phone.client.setPushMode(.current)
        try await phone.client.setPushEnabled(false)

        let tokens = phone.server.requests("PUT /v1/devices/push-token")
        let apns = try #require(tokens.first).body
        #expect(apns["provider"] as? String == "apns")
        #expect(apns["environment"] as? String == "sandbox")
        let hex = try #require(apns["token"] as? String)
        #expect(hex.count == 64 && hex == hex.lowercased() && hex.hasPrefix("00070e15"))
        #expect(tokens.last?.bodyKeys == ["provider", "token"])  // fcm: no environment
        #expect(phone.server.requests("DELETE /v1/devices/push-token").last?.query == ["provider": "fcm"])
        #expect(phone.server.requests("PUT /v1/devices/push-preferences").last?.body["mode"] as? String == "current")
        #expect(phone.server.requests("PUT /v1/me/push").last?.body["enabled"] as? Bool == false)

        #expect(TransferClient.notificationAccountKey == "accountId")
        #expect(phone.client.account(forNotification: ["aps": [:], "accountId": phone.accountId.uppercased()])?.id == phone.accountId)
        #expect(phone.client.account(forNotification: ["accountId": UUID().uuidString]) == nil)
        #expect(phone.client.account(forNotification: ["aps": [:]]) == nil)
        #expect(phone.server.violations.isEmpty)
    }
}
