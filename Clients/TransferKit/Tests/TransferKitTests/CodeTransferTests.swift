import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit
import TransferKitTesting

@Suite("Transfer codes and recovery codes against the fake (contract v1.2)")
struct CodeTransferTests {
    @Test("set up by code: {\"method\":\"code\"} only; the profile shows method code and no email")
    func setUp() async throws {
        let old = try await Launched()
        let offer = try await old.client.setUpTransferCode()
        let sent = try #require(old.server.requests("PUT /v1/me/transfer").last)
        #expect(sent.body as? [String: String] == ["method": "code"])
        #expect(offer.code.grouped.count == 19 && offer.expiresAt > old.server.clock.now)

        let profile = try await old.client.profile()
        let pending = try #require(profile.transfer)
        #expect(pending.method == .code && pending.email == nil)
        #expect(profile.migrationFlag && profile.waysBack == [.transfer])

        // A password set-up replaces it, and still sends what a v1 server takes (no method).
        try await old.client.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        #expect(old.server.requests("PUT /v1/me/transfer").last?.bodyKeys == ["email", "temporaryPassword"])
        #expect(try await old.client.profile().transfer?.method == .password)
        let other = try await Launched(old.server)
        await #expect { try await other.client.claimTransfer(code: offer.code, existingAccounts: .replace) } throws: {
            TransferError.kind(of: $0) == .invalidTransferCredentials
        }
        #expect(old.server.violations.isEmpty)
    }

    @Test("claim by code before any launch: what the user typed, read as the service reads it")
    func claim() async throws {
        let old = try await Launched()
        let offer = try await old.client.setUpTransferCode()
        let typed = try #require(TransferCode(offer.code.grouped.lowercased().replacingOccurrences(of: "-", with: " ")))

        let server = old.server
        let new = server.client()
        let account = try await new.claimTransfer(code: typed)
        #expect(account.id == old.accountId && new.currentAccountId == old.accountId)
        let sent = try #require(server.requests("POST /v1/transfers/claim").last)
        #expect(sent.bodyKeys == ["transferCode", "deviceId", "deviceSecret"])
        #expect(sent.body["transferCode"] as? String == offer.code.value)
        #expect(server.requests("POST /v1/devices/login").allSatisfy { $0.body["deviceId"] as? String != new.state.deviceId })

        // The old phone hears it moved; the code is used up for anyone else.
        await #expect { try await old.client.launch() } throws: { TransferError.kind(of: $0) == .deviceTransferred }
        let third = server.client()
        await #expect { try await third.claimTransfer(code: offer.code) } throws: {
            let error = try #require($0 as? TransferError)
            return error.code == .invalidTransferCredentials && error.status == 401
        }
        #expect(server.violations.isEmpty)
    }

    @Test("recovery code: made, shown once, a way back; claimed on a new phone, then used up")
    func recoveryCode() async throws {
        let server = FakeServer()
        let phone = server.client()
        guard case .signedIn(let accountId, true) = try await phone.launch() else { Issue.record("no account"); return }
        #expect(try await phone.profile().waysBack == [])

        let issued = try await phone.makeRecoveryCode()
        #expect(issued.code.grouped.count == 24)
        #expect(server.requests("PUT /v1/me/recovery-code").last?.request.body == nil)
        let profile = try await phone.profile()
        #expect(profile.waysBack == [.recoveryCode] && !profile.migrationFlag)  // no migration flag

        // A transfer pending when the phone is lost is cancelled by the recovery claim.
        _ = try await phone.setUpTransferCode()
        let typed = try #require(RecoveryCode(" " + issued.code.grouped.lowercased() + " "))
        let new = server.client()
        let account = try await new.claim(recoveryCode: typed)
        #expect(account.id == accountId)
        let sent = try #require(server.requests("POST /v1/transfers/claim").last)
        #expect(sent.bodyKeys == ["recoveryCode", "deviceId", "deviceSecret"])
        #expect(sent.body["recoveryCode"] as? String == issued.code.value)
        #expect(try await new.profile().waysBack == [])  // used up, and the transfer cancelled

        await #expect { try await server.client().claim(recoveryCode: issued.code) } throws: {
            TransferError.kind(of: $0) == .invalidTransferCredentials
        }
        // A new one, then deleted.
        _ = try await new.makeRecoveryCode()
        try await new.deleteRecoveryCode()
        #expect(server.count("DELETE /v1/me/recovery-code") == 1)
        #expect(try await new.profile().waysBack == [])
        #expect(server.violations.isEmpty)
    }

    @Test("a recovery code lets the account leave a phone without abandon")
    func recoveryCodeIsAWayBack() async throws {
        let phone = try await Launched()
        await #expect { try await phone.client.removeAccount(phone.accountId) } throws: {
            TransferError.kind(of: $0) == .accountWouldBeLost
        }
        _ = try await phone.client.makeRecoveryCode()
        try await phone.client.removeAccount(phone.accountId)
        #expect(phone.client.state.accounts.isEmpty)
    }

    @Test("A → B by code with simulated phones (TransferKitTesting)")
    func simulatedPhones() async throws {
        let server = FakeServer()
        let a = SimulatedPhone("A") { server.client(keychain: $0, appFiles: $1) }
        let b = SimulatedPhone("B") { server.client(keychain: $0, appFiles: $1) }

        guard case .signedIn(let accountId, true) = try await a.launch() else { Issue.record("A has no account"); return }
        let offer = try await a.setUpTransferCode()
        // B scans A's QR code.
        let scanned = offer.code.url(base: URL(string: "yourapp://transfer")!)
        #expect(await b.startingPoint() == .firstStart)
        let code = try #require(TransferCode(url: scanned, base: URL(string: "yourapp://transfer")!))
        let claimed = try await b.claim(code: code)
        #expect(claimed.id == accountId && b.saw(.signedIn) && b.saw(.switched))
        #expect(await b.startingPoint() == .returning)

        let relaunchedA = a.relaunched()
        await #expect { try await relaunchedA.launch() } throws: { TransferError.kind(of: $0) == .deviceTransferred }
        #expect(relaunchedA.saw(.accountMoved))
        #expect(try await b.relaunched().launch() == .signedIn(accountId: accountId, created: false))
        #expect(server.violations.isEmpty)
    }

    @Test("the fake limits set-ups to 10 an hour per account (--setup-limit), with Retry-After")
    func setUpLimit() async throws {
        let server = FakeServer()
        let phone = server.client()
        _ = try await phone.launch()
        for _ in 0..<10 { _ = try await phone.setUpTransferCode() }
        await #expect { try await phone.setUpTransferCode() } throws: {
            let error = try #require($0 as? TransferError)
            return error.code == .rateLimited && error.retryAfter == 3600
        }
        server.clock.advance(by: 3600)
        _ = try await phone.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
    }
}
