import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit
import TransferKitTesting

@Suite("Sign in with Apple")
struct AppleTests {
    /// Links the phone's current account to the Apple ID `sub`.
    @discardableResult
    private func link(_ phone: Launched, sub: String = "001234.apple") async throws -> AppleIDLink {
        let nonce = try await phone.client.appleNonce()
        return try await phone.client.linkAppleID(
            identityToken: FakeServer.identityToken(sub: sub, nonce: nonce), nonce: nonce, authorizationCode: "c0de")
    }

    @Test("a nonce comes from the service without a token; Apple gets its hex SHA-256")
    func nonce() async throws {
        let phone = try await Launched()
        let nonce = try await phone.client.appleNonce()
        #expect(!nonce.value.isEmpty && nonce.expiresIn == 300)
        let call = try #require(phone.server.requests("POST /v1/apple/nonce").last)
        #expect(call.bearer == nil && call.request.body == nil)
        #expect(AppleNonce(value: "abc", expiresIn: 300).sha256
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")

        phone.server.scriptError("POST /v1/apple/nonce", status: 501, "not_configured")
        await #expect { try await phone.client.appleNonce() } throws: { TransferError.kind(of: $0) == .notConfigured }
        #expect(phone.server.violations.isEmpty)
    }

    @Test("link, profile, unlink; refusals are typed")
    func linkAndUnlink() async throws {
        let phone = try await Launched()
        let nonce = try await phone.client.appleNonce()
        let token = FakeServer.identityToken(sub: "001234.apple", nonce: nonce)
        let linked = try await phone.client.linkAppleID(identityToken: token, nonce: nonce, authorizationCode: "c0de")
        #expect(linked == AppleIDLink(email: "001234.apple@privaterelay.appleid.com", isPrivateEmail: true))
        let call = try #require(phone.server.requests("PUT /v1/me/apple").last)
        #expect(call.bearer == phone.storedSessions[phone.accountId]?.accessToken)
        #expect(call.bodyKeys == ["identityToken", "nonce", "authorizationCode"])
        #expect(call.body["identityToken"] as? String == token && call.body["nonce"] as? String == nonce.value)
        #expect(call.body["authorizationCode"] as? String == "c0de")
        #expect(try await phone.client.profile().appleID?.linkedAt == Wire.parseDate("2026-11-21T12:30:00Z"))
        #expect(try await link(phone) == linked)  // 200: already this account's
        #expect(phone.server.requests("PUT /v1/me/apple").last?.bodyKeys.contains("authorizationCode") == true)

        // A used nonce; an Apple ID another account is linked to.
        await #expect { try await phone.client.linkAppleID(identityToken: token, nonce: nonce) } throws: { error in
            let error = try #require(error as? TransferError)
            return error.kind == .invalidIdentityToken && error.status == 401
        }
        #expect(phone.server.requests("PUT /v1/me/apple").last?.bodyKeys == ["identityToken", "nonce"])
        try await phone.client.addAccount()
        await #expect { try await link(phone) } throws: { error in
            let error = try #require(error as? TransferError)
            return error.kind == .appleIdInUse && error.status == 409
        }

        try await phone.client.unlinkAppleID(of: phone.accountId)
        let unlink = try #require(phone.server.requests("DELETE /v1/me/apple").last)
        #expect(unlink.bearer == phone.storedSessions[phone.accountId]?.accessToken && unlink.request.body == nil)
        #expect(try await phone.client.profile(of: phone.accountId).appleID == nil)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("claim with an Apple ID: fail / replace / abandonExisting / add send the claim's fields",
          arguments: [ClaimChoice.fail, .replace, .abandonExisting, .add])
    func claimChoice(_ choice: ClaimChoice) async throws {
        let old = try await Launched()
        try await link(old)
        let new = try await Launched(old.server)
        let identity = try #require(new.storedIdentity)
        let nonce = try await new.client.appleNonce()
        let token = FakeServer.identityToken(sub: "001234.apple", nonce: nonce)
        let claim = { try await new.client.claimWithAppleID(identityToken: token, nonce: nonce, existingAccounts: choice) }

        let base: Set<String> = ["identityToken", "nonce", "deviceId", "deviceSecret"]
        let sent = { try #require(new.server.requests("POST /v1/transfers/apple").last) }
        switch choice {
        case .deleteExisting:
            return  // not an argument here: NewPhoneTests
        case .fail:
            await #expect { try await claim() } throws: { TransferError.kind(of: $0) == .deviceHasAccount }
            #expect(try sent().bodyKeys == base)
            #expect(new.client.currentAccountId == new.accountId)
        case .replace:
            // The account the new phone made by itself has no way back: replacing it would strand it.
            await #expect { try await claim() } throws: { TransferError.kind(of: $0) == .accountWouldBeLost }
            #expect(try sent().bodyKeys == base.union(["replaceExistingAccount"]))
            #expect(new.client.currentAccountId == new.accountId, "nothing changed")
            #expect(old.server.violations.isEmpty)
            return
        case .abandonExisting:
            #expect(try await claim().id == old.accountId)
            #expect(try sent().bodyKeys == base.union(["replaceExistingAccount", "abandonExisting"]))
            #expect(new.client.state.accounts.map(\.id) == [old.accountId])
            #expect(new.storedSessions.keys.sorted() == [old.accountId])
            #expect(new.events.all.contains(.accountRemoved(accountId: new.accountId)))
        case .add:
            #expect(try await claim().id == old.accountId)
            #expect(try sent().bodyKeys == base.union(["addAccount"]))
            #expect(Set(new.client.state.accounts.map(\.id)) == [new.accountId, old.accountId])
        }
        let request = try sent()
        #expect(request.bearer == nil && request.body["nonce"] as? String == nonce.value)
        #expect(request.body["identityToken"] as? String == token)
        #expect(request.body["deviceId"] as? String == identity.deviceId)
        #expect(request.body["deviceSecret"] as? String == identity.deviceSecret)
        if choice != .fail {
            #expect(new.client.currentAccountId == old.accountId)
            #expect(new.events.all.suffix(2) == [.signedIn(accountId: old.accountId, created: false), .switched(accountId: old.accountId)])
            await #expect { try await old.client.launch() } throws: { TransferError.kind(of: $0) == .deviceTransferred }
        }
        #expect(old.server.violations.isEmpty)
    }

    @Test("claim with an Apple ID no account is linked to: apple_id_not_linked, nothing kept")
    func notLinked() async throws {
        let server = FakeServer()
        let keychain = MemoryCredentialStore()
        let client = server.client(keychain: keychain)
        let nonce = try await client.appleNonce()
        await #expect {
            try await client.claimWithAppleID(identityToken: FakeServer.identityToken(sub: "nobody", nonce: nonce), nonce: nonce)
        } throws: { error in
            let error = try #require(error as? TransferError)
            return error.kind == .appleIdNotLinked && error.status == 404
        }
        // The identity a claim needs, marked as a claim's until a session arrives; no tokens.
        #expect(keychain.items.keys.sorted() == [StoreKey.claimPending, StoreKey.identity])
        #expect(client.state.accounts.isEmpty)
        #expect(server.violations.isEmpty)
    }

    @Test("simulated phones: A links its Apple ID, B brings the account over with it, then deletes it")
    func simulatedPhones() async throws {
        let server = FakeServer()
        let a = SimulatedPhone("A") { server.client(keychain: $0, appFiles: $1) }
        let b = SimulatedPhone("B") { server.client(keychain: $0, appFiles: $1) }
        guard case .signedIn(let accountId, true) = try await a.launch() else { Issue.record("A has no account"); return }
        try await a.registerPushToken(apns: Data(repeating: 0xab, count: 32))
        let linkNonce = try await a.appleNonce()
        try await a.linkAppleID(identityToken: FakeServer.identityToken(sub: "ann", nonce: linkNonce), nonce: linkNonce)
        #expect(try await a.profile().appleID?.email == "ann@privaterelay.appleid.com")

        let claimNonce = try await b.appleNonce()
        let claimed = try await b.claimWithAppleID(identityToken: FakeServer.identityToken(sub: "ann", nonce: claimNonce), nonce: claimNonce)
        #expect(claimed.id == accountId && b.currentAccountId == accountId)
        try await b.registerPushToken(fcm: "eR3kT9x2QmW:APA91bH4n7Xc2Lp9Qs")
        try await b.unlinkAppleID()
        #expect(try await b.profile().appleID == nil)

        try await b.deleteAccount()
        #expect(b.saw(.accountDeleted) && b.deviceId == nil && b.currentAccountId == nil)
        let relaunchedA = a.relaunched()
        await #expect { try await relaunchedA.launch() } throws: { TransferError.kind(of: $0) == .deviceTransferred }
        #expect(server.requests("PUT /v1/devices/push-token").count == 2)
        #expect(server.violations.isEmpty)
    }
}
