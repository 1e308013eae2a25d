import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit
import TransferKitTesting

/// A new phone's situations 1–5, each against the fake service.
@Suite("New phones, lost answers, accounts that leave, ways back")
struct NewPhoneTests {
    static let claimRoute = "POST /v1/transfers/claim"

    /// 1. A phone restored from the old phone's backup claims; the claim wins but its answer is
    /// lost (app killed). The next launch must find the account on this phone, not report a restore.
    @Test("1: restored phone, claim answer lost, app killed: the next launch signs in, not restoredOntoNewPhone")
    func restoredThenLostAnswer() async throws {
        let server = FakeServer()
        let a = SimulatedPhone("A") { server.client(keychain: $0, appFiles: $1) }
        guard case .signedIn(let accountId, true) = try await a.launch() else { Issue.record("A has no account"); return }
        let b = a.restoredFromBackup(as: "B")
        #expect(try await b.launch() == .restoredOntoNewPhone(previousAccounts: a.client.state.accounts))

        let offer = try await a.setUpTransferCode()
        server.loseAnswers(to: Self.claimRoute, count: TransferClient.claimAttempts)  // every try: as if killed
        await #expect { try await b.claim(code: offer.code) } throws: { TransferError.kind(of: $0) == .network }

        let created = server.requests("POST /v1/devices/login").count
        let relaunched = b.relaunched()
        #expect(try await relaunched.launch() == .signedIn(accountId: accountId, created: false))
        #expect(relaunched.currentAccountId == accountId)
        #expect(!relaunched.saw(.restoredOntoNewPhone))
        // The repeated claim brought the session and rewrote the list for this phone: one plain
        // login follows, none that could create an account.
        let logins = server.requests("POST /v1/devices/login").dropFirst(created)
        #expect(logins.count == 1 && logins.first?.body["newAccount"] == nil)
        #expect(try await relaunched.relaunched().launch() == .signedIn(accountId: accountId, created: false))
        #expect(server.violations.isEmpty)
    }

    /// 2. A claim whose answer is lost is asked again: the service answers the winner's repeat.
    @Test("2: a lost claim answer is retried without the user: code, password and recovery code")
    func retriedClaim() async throws {
        let server = FakeServer()
        let old = server.client()
        guard case .signedIn(let accountId, _) = try await old.launch() else { return }

        let offer = try await old.setUpTransferCode()
        server.loseAnswers(to: Self.claimRoute)
        let new = server.client()
        let events = EventLog(new)
        #expect(try await new.claimTransfer(code: offer.code).id == accountId)
        #expect(server.count(Self.claimRoute) == 2)
        let (first, second) = (server.requests(Self.claimRoute)[0].body, server.requests(Self.claimRoute)[1].body)
        #expect(first["deviceId"] as? String == second["deviceId"] as? String)
        #expect(first["deviceSecret"] as? String == second["deviceSecret"] as? String)
        #expect(new.currentAccountId == accountId && events.all.contains(.switched(accountId: accountId)))

        // By password, from the new phone to a third one.
        try await new.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        server.loseAnswers(to: Self.claimRoute, count: 2)
        let third = server.client()
        #expect(try await third.claimTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42").id == accountId)

        // By recovery code, to a fourth.
        let recovery = try await third.makeRecoveryCode()
        server.loseAnswers(to: Self.claimRoute)
        let fourth = server.client()
        #expect(try await fourth.claim(recoveryCode: recovery.code).id == accountId)
        #expect(try await fourth.profile().devices.map(\.id) == [fourth.state.deviceId])
        #expect(server.violations.isEmpty)
    }

    @Test("2: the fake answers a repeat only to the winning device, with no time limit, while the account is on it by that claim")
    func repeatWindow() async throws {
        let server = FakeServer()
        let old = server.client()
        _ = try await old.launch()
        let offer = try await old.setUpTransferCode()
        let keychain = MemoryCredentialStore()
        let new = server.client(keychain: keychain)
        let claimed = try await new.claimTransfer(code: offer.code)
        // The same device again: the session again (the claim is sent as is).
        let again = server.client(keychain: keychain)
        try await again.claimTransfer(code: offer.code, existingAccounts: .add)
        // Another device: used up.
        await #expect { try await server.client().claimTransfer(code: offer.code) } throws: {
            TransferError.kind(of: $0) == .invalidTransferCredentials
        }
        // A month later: still the winner's session.
        server.clock.advance(by: 31 * 86_400)
        let later = server.client(keychain: keychain)
        #expect(try await later.claimTransfer(code: offer.code, existingAccounts: .add).id == claimed.id)
        // Once the account left the phone, the repeat moves nothing.
        _ = try await later.addAccount()
        try await later.removeAccount(claimed.id, abandon: true)
        await #expect { try await server.client(keychain: keychain).claimTransfer(code: offer.code, existingAccounts: .add) } throws: {
            TransferError.kind(of: $0) == .invalidTransferCredentials
        }
    }

    @Test("2: a claim answer lost on a fresh phone, app killed: the next start repeats the claim and lands in the account, nothing typed")
    func freshPhoneLostAnswer() async throws {
        let server = FakeServer()
        let old = server.client()
        guard case .signedIn(let accountId, _) = try await old.launch() else { return }
        let offer = try await old.setUpTransferCode()

        let b = SimulatedPhone("B") { server.client(keychain: $0, appFiles: $1) }
        #expect(await b.startingPoint() == .firstStart)
        server.loseAnswers(to: Self.claimRoute, count: TransferClient.claimAttempts)
        await #expect { try await b.claim(code: offer.code) } throws: { TransferError.kind(of: $0) == .network }

        let relaunched = b.relaunched()
        #expect(await relaunched.startingPoint() == .returning, "a claim in flight: the app launches, it does not ask again")
        #expect(try await relaunched.launch() == .signedIn(accountId: accountId, created: false), "the repeat lands in the account")
        #expect(server.requests(Self.claimRoute).count == TransferClient.claimAttempts + 1, "the claim was repeated once")
        #expect(await relaunched.relaunched().startingPoint() == .returning)
        #expect(try await relaunched.relaunched().launch() == .signedIn(accountId: accountId, created: false))
        #expect(server.requests(Self.claimRoute).count == TransferClient.claimAttempts + 1, "a claim is repeated once, not at every launch")
    }

    /// 3. A non-current account moved away: the old phone's launch must say so.
    @Test("3: a non-current account that moved away gets accountMoved at the next launch", arguments: [TransferMethod.code, .password])
    func nonCurrentMoved(_ method: TransferMethod) async throws {
        let phone = try await Launched()
        let second = try await phone.client.addAccount()  // now current
        if method == .code {
            let offer = try await phone.client.setUpTransferCode(of: phone.accountId)
            try await phone.server.client().claimTransfer(code: offer.code)
        } else {  // TransferKit 2's API only
            try await phone.client.setUpTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42", of: phone.accountId)
            try await phone.server.client().claimTransfer(email: "ann@example.com", temporaryPassword: "blue-harbor-42")
        }

        let relaunched = phone.server.client(keychain: phone.keychain, appFiles: phone.appFiles)
        let events = EventLog(relaunched)
        #expect(try await relaunched.launch() == .signedIn(accountId: second.id, created: false))
        #expect(relaunched.state.accounts.map(\.id) == [second.id])
        let moved = events.all.compactMap { event -> String?? in
            if case .accountMoved(let id, let at, let remaining) = event, at != nil, remaining.map(\.id) == [second.id] { return id }
            return nil
        }
        #expect(moved == [phone.accountId])
        #expect(phone.keychain.storedSessions[phone.accountId] == nil)  // its tokens are gone
        #expect(phone.server.violations.isEmpty)
    }

    @Test("3: deleted and removed accounts get their own events; accounts() tells too")
    func otherDepartures() async throws {
        let phone = try await Launched()
        let second = try await phone.client.addAccount()
        let third = try await phone.client.addAccount()
        try await phone.client.switchAccount(to: phone.accountId)
        // Elsewhere (another process of the same phone): the second is deleted, the third removed.
        let other = phone.server.client(keychain: phone.keychain, appFiles: MemoryCredentialStore())
        _ = try await other.launch()
        try await other.deleteAccount(second.id)
        try await other.removeAccount(third.id, abandon: true)

        let events = phone.events
        let accounts = try await phone.client.accounts()
        #expect(accounts.map(\.id) == [phone.accountId])
        #expect(events.all.contains(.accountDeleted(accountId: second.id)))
        #expect(events.all.contains(.accountRemoved(accountId: third.id)))
    }

    /// 4. A new phone: ask before the first launch; a claim needs no launch; an account the
    /// phone made by itself is deleted with the user's choice, not stranded.
    @Test("4: startingPoint before the first launch; claim before launching creates no account")
    func newPhoneFlow() async throws {
        let server = FakeServer()
        let old = server.client()
        guard case .signedIn(let accountId, _) = try await old.launch() else { return }
        let offer = try await old.setUpTransferCode()

        let keychain = MemoryCredentialStore(), appFiles = MemoryCredentialStore()
        let new = server.client(keychain: keychain, appFiles: appFiles)
        let sent = server.log.count
        #expect(await new.startingPoint() == .firstStart)
        #expect(server.log.count == sent)  // startingPoint sends nothing
        try await new.claimTransfer(code: offer.code)
        #expect(try await new.launch() == .signedIn(accountId: accountId, created: false))
        #expect(server.requests("POST /v1/devices/login").filter { $0.body["deviceId"] as? String == new.state.deviceId }.count == 1)

        // A reinstall (Keychain kept, app files gone) is a returning phone.
        let reinstalled = server.client(keychain: keychain, appFiles: MemoryCredentialStore())
        #expect(await reinstalled.startingPoint() == .returning)
        #expect(try await reinstalled.launch() == .signedIn(accountId: accountId, created: false))
        // A backup restore is reported as such before anything is sent.
        let restored = server.client(appFiles: MemoryCredentialStore(appFiles.items))
        #expect(await restored.startingPoint() == .restoredFromBackup(previousAccounts: new.state.accounts))
        let locked = MemoryCredentialStore()
        locked.isAvailable = false
        #expect(await server.client(keychain: locked).startingPoint() == .storageUnavailable(.memoryLocked))
    }

    @Test("4: an account the new phone made by itself is deleted after the claim with .deleteExisting")
    func deleteExisting() async throws {
        let old = try await Launched()
        let offer = try await old.client.setUpTransferCode()
        let new = try await Launched(old.server)  // launched before the user said "new phone"
        let claimed = try await new.client.claimTransfer(code: offer.code, existingAccounts: .deleteExisting)
        #expect(claimed.id == old.accountId)
        #expect(new.client.state.accounts.map(\.id) == [old.accountId])
        #expect(new.client.currentAccountId == old.accountId)
        #expect(new.events.all.contains(.accountDeleted(accountId: new.accountId)))
        let sent = try #require(new.server.requests(Self.claimRoute).last)
        #expect(sent.body["addAccount"] as? Bool == true && sent.body["replaceExistingAccount"] == nil)
        #expect(new.server.count("DELETE /v1/me") == 1)
        // Erased, not stranded: a login naming it hears account_deleted.
        let identity = try #require(new.storedIdentity)
        let body = try Wire.encode(LoginRequest(deviceId: identity.deviceId, deviceSecret: identity.deviceSecret, accountId: new.accountId))
        let answer = try await new.server.transport.send(.login, baseURL: FakeServer.baseURL, body: body)
        #expect(TransferError(response: answer).code == .accountDeleted)

        // A failed claim deletes nothing.
        let other = try await Launched(old.server)
        await #expect { try await other.client.claimTransfer(code: offer.code, existingAccounts: .deleteExisting) } throws: {
            TransferError.kind(of: $0) == .invalidTransferCredentials
        }
        #expect(other.client.state.accounts.map(\.id) == [other.accountId])
        #expect(old.server.count("DELETE /v1/me") == 1)
        #expect(old.server.violations.isEmpty)
    }

    /// 5. A lost phone with nothing set up is a lost account: the app must know in time.
    @Test("5: needsWayBack: only after a while, and not once a recovery code, transfer or Apple ID exists")
    func needsWayBack() async throws {
        let server = FakeServer()
        let phone = server.client()  // on the service's clock
        _ = try await phone.launch()
        #expect(try await phone.needsWayBack() == false)  // just installed
        server.clock.advance(by: 3 * 86_400)
        #expect(try await phone.needsWayBack() == true)
        #expect(try await phone.needsWayBack(usedFor: 4 * 86_400) == false)

        _ = try await phone.makeRecoveryCode()
        #expect(try await phone.needsWayBack() == false)
        try await phone.deleteRecoveryCode()
        #expect(try await phone.needsWayBack() == true)
        _ = try await phone.setUpTransferCode()
        #expect(try await phone.needsWayBack() == false)
        try await phone.cancelTransfer()
        let nonce = try await phone.appleNonce()
        try await phone.linkAppleID(identityToken: FakeServer.identityToken(sub: "001.apple", nonce: nonce), nonce: nonce)
        #expect(try await phone.needsWayBack() == false)
        #expect(try await phone.profile().waysBack == [.apple])
    }

    @Test("5: a server before v1.2 (no waysBack): a transfer or an Apple ID counts")
    func needsWayBackOldServer() async throws {
        let server = FakeServer()
        let phone = server.client()
        guard case .signedIn(let accountId, _) = try await phone.launch() else { return }
        server.clock.advance(by: 4 * 86_400)
        let me: [String: Any] = [
            "accountId": accountId, "userName": "u", "createdAt": "2026-11-21T12:00:00Z", "migrationFlag": false,
            "transferId": NSNull(), "transfer": NSNull(), "devices": [], "apple": NSNull(),
        ]
        server.script("GET /v1/me", status: 200, me)
        #expect(try await phone.profile().waysBack == nil)
        server.script("GET /v1/me", status: 200, me)
        #expect(try await phone.needsWayBack() == true)
        var linked = me
        linked["apple"] = ["email": NSNull(), "isPrivateEmail": NSNull()]
        server.script("GET /v1/me", status: 200, linked)
        #expect(try await phone.needsWayBack() == false)
    }

    @Test("TransferKitTesting: a phone's own lossy network, and a reinstall that keeps the Keychain only")
    func simulatedLostAnswerAndReinstall() async throws {
        let server = FakeServer()
        let network = LossyNetwork()
        let a = SimulatedPhone("A") { server.client(keychain: $0, appFiles: $1) }
        let b = SimulatedPhone("B", network: network) { server.client(keychain: $0, appFiles: $1, network: network) }
        guard case .signedIn(let accountId, _) = try await a.launch() else { return }
        let offer = try await a.setUpTransferCode()

        b.network.loseAnswers(to: Self.claimRoute, count: TransferClient.claimAttempts)
        await #expect { try await b.claim(code: offer.code) } throws: { TransferError.kind(of: $0) == .network }
        #expect(network.lostAnswers == TransferClient.claimAttempts)
        // The claim won on the service: A lost the account.
        await #expect { try await a.relaunched().launch() } throws: { TransferError.kind(of: $0) == .deviceTransferred }

        // B's app is deleted and installed again: the Keychain identity stays, the files go.
        let reinstalled = b.relaunched().reinstalled()
        #expect(reinstalled.keychain === b.keychain && reinstalled.appFiles.items.isEmpty)
        #expect(try await reinstalled.launch() == .signedIn(accountId: accountId, created: false))
        #expect(reinstalled.deviceId == b.keychain.items[StoreKey.identity].flatMap { try? Wire.decoder().decode(DeviceIdentity.self, from: $0) }?.deviceId)
        #expect(server.violations.isEmpty)
    }

    @Test("2: a lost answer on a phone that holds accounts (.add): the next launch signs in to the claimed one, with switched")
    func lostAnswerWithAccounts() async throws {
        let old = try await Launched()
        let offer = try await old.client.setUpTransferCode()
        let new = try await Launched(old.server)
        old.server.loseAnswers(to: Self.claimRoute, count: TransferClient.claimAttempts)
        await #expect { try await new.client.claimTransfer(code: offer.code, existingAccounts: .add) } throws: {
            TransferError.kind(of: $0) == .network
        }
        let relaunched = old.server.client(keychain: new.keychain, appFiles: new.appFiles)
        let events = EventLog(relaunched)
        #expect(try await relaunched.launch() == .signedIn(accountId: old.accountId, created: false))
        #expect(Set(relaunched.state.accounts.map(\.id)) == [new.accountId, old.accountId])
        #expect(events.all.contains(.switched(accountId: old.accountId)))
    }

    @Test("1: a restored phone whose probe is refused for another reason (429) throws instead of guessing")
    func restoreProbeRateLimited() async throws {
        let old = try await Launched()
        let keychain = MemoryCredentialStore()
        let restored = old.server.client(keychain: keychain, appFiles: MemoryCredentialStore(old.appFiles.items))
        // An identity of its own (a claim that failed), then a launch whose probe is rate limited.
        await #expect { try await restored.claimTransfer(code: TransferCode("0000-0000-0000-0000")!) } throws: {
            TransferError.kind(of: $0) == .invalidTransferCredentials
        }
        old.server.scriptError("POST /v1/devices/login", status: 429, "rate_limited")
        await #expect { try await restored.launch() } throws: { TransferError.kind(of: $0) == .rateLimited }
        #expect(try await restored.launch() == .restoredOntoNewPhone(previousAccounts: old.client.state.accounts))
    }

    @Test("the fake's transfers expire after 24 hours of its clock: no claim, no way back")
    func expiry() async throws {
        let server = FakeServer()
        let phone = server.client()
        _ = try await phone.launch()
        let offer = try await phone.setUpTransferCode()
        #expect(offer.expiresAt == server.clock.now.addingTimeInterval(86_400))
        server.clock.advance(by: 86_400)
        #expect(try await phone.profile().transfer == nil)
        #expect(try await phone.profile().waysBack == [])
        await #expect { try await server.client().claimTransfer(code: offer.code) } throws: {
            TransferError.kind(of: $0) == .invalidTransferCredentials
        }
    }

    @Test("2: an Apple move is not sent twice (its nonce is used up); a new sign-in's repeat brings the account")
    func appleMoveLostAnswer() async throws {
        let server = FakeServer()
        let old = server.client()
        guard case .signedIn(let accountId, _) = try await old.launch() else { return }
        let linkNonce = try await old.appleNonce()
        try await old.linkAppleID(identityToken: FakeServer.identityToken(sub: "001.apple", nonce: linkNonce), nonce: linkNonce)

        let keychain = MemoryCredentialStore(), appFiles = MemoryCredentialStore()
        let new = server.client(keychain: keychain, appFiles: appFiles)
        let nonce = try await new.appleNonce()
        server.loseAnswers(to: "POST /v1/transfers/apple")
        await #expect { try await new.claimWithAppleID(identityToken: FakeServer.identityToken(sub: "001.apple", nonce: nonce), nonce: nonce) } throws: {
            TransferError.kind(of: $0) == .network
        }
        #expect(server.count("POST /v1/transfers/apple") == 1)
        // The user signs in with Apple again: a fresh nonce, the same Apple ID, the same device.
        let again = server.client(keychain: keychain, appFiles: appFiles)
        #expect(await again.startingPoint() == .firstStart)
        let fresh = try await again.appleNonce()
        let account = try await again.claimWithAppleID(identityToken: FakeServer.identityToken(sub: "001.apple", nonce: fresh), nonce: fresh)
        #expect(account.id == accountId)
        #expect(server.violations.isEmpty)
    }
}
