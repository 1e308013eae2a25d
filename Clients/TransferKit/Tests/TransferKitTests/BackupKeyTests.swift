import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit
import TransferKitTesting

/// Backup keys in iCloud Keychain, claims repeated after a kill, and an erased account: every
/// Keychain decision runs over the fake Keychain (SecItem semantics, synchronizable items shared
/// by the phones of one Apple account), every request against the fake service.
@Suite("Backup keys, claims in flight, erased accounts")
struct BackupKeyTests {
    static let claimRoute = "POST /v1/transfers/claim"
    static let group = "TEAM.com.example.app"
    static let location = KeychainLocation.app(bundleIdentifier: "com.example.app")

    /// A phone of `appleAccount` (nil: no Apple account) running the app against `server`: its
    /// identity and tokens in this-device-only items, its backup keys in synchronizable items.
    struct Phone {
        let device: FakeKeychain.Device
        let server: FakeServer
        let backupKeys: Bool
        let appFiles: MemoryCredentialStore
        let network: LossyNetwork

        init(
            _ server: FakeServer, device: FakeKeychain.Device, backupKeys: Bool = true,
            appFiles: MemoryCredentialStore = MemoryCredentialStore(), network: LossyNetwork = LossyNetwork()
        ) {
            self.server = server
            self.device = device
            self.backupKeys = backupKeys
            self.appFiles = appFiles
            self.network = network
        }

        var keychain: FakeKeychain { FakeKeychain(device: device, groups: [BackupKeyTests.group]) }
        var synchronized: KeychainSynchronizedItems { KeychainSynchronizedItems(location: BackupKeyTests.location, calls: keychain) }

        /// The app started (again): a new client on the phone's stores.
        func app() -> TransferClient {
            server.client(
                keychain: KeychainItems(location: BackupKeyTests.location, calls: keychain), appFiles: appFiles,
                network: network, iCloudKeychain: synchronized, backupKeys: backupKeys)
        }

        /// The backups this phone's iCloud Keychain holds, as a new phone would find them.
        var backups: [AccountBackup] { (try? BackupShelfView.backups(in: synchronized)) ?? [] }
    }

    func signedIn(_ result: LaunchResult) -> String? {
        if case .signedIn(let account, _) = result { return account }
        return nil
    }

    func found(_ point: StartingPoint) -> [AccountBackup] {
        if case .backupsFound(let backups) = point { return backups }
        return []
    }

    // MARK: The fake Keychain's synchronizable items

    @Test("a synchronizable item appears on another phone of the same Apple account and on one restored from backup; a this-device-only item does not")
    func synchronizableSemantics() throws {
        let mia = FakeKeychain.AppleAccount()
        let a = FakeKeychain(device: FakeKeychain.Device(appleAccount: mia), groups: [Self.group])
        let local = KeychainItems(location: Self.location, calls: a)
        let synced = KeychainSynchronizedItems(location: Self.location, calls: a)
        try local.write(Data("identity".utf8), for: "k")
        try synced.write(Data("backup".utf8), for: "k")
        #expect(try local.read("k") == Data("identity".utf8), "one key, two items: the this-device-only one")
        #expect(try synced.readAll() == ["k": Data("backup".utf8)], "and the synchronizable one")

        for other in [FakeKeychain.Device(appleAccount: mia), a.device.restoredFromBackup()] {
            let keychain = FakeKeychain(device: other, groups: [Self.group])
            #expect(try KeychainSynchronizedItems(location: Self.location, calls: keychain).readAll() == ["k": Data("backup".utf8)],
                    "the other phone of the Apple account sees the synchronizable item")
            #expect(try KeychainItems(location: Self.location, calls: keychain).read("k") == nil,
                    "the this-device-only item stays on its phone")
        }
        let stranger = FakeKeychain(device: FakeKeychain.Device(appleAccount: FakeKeychain.AppleAccount()), groups: [Self.group])
        #expect(try KeychainSynchronizedItems(location: Self.location, calls: stranger).readAll().isEmpty, "another Apple account sees nothing")

        // Removing it on one phone removes it on all; the this-device-only item is untouched.
        try KeychainSynchronizedItems(location: Self.location, calls: FakeKeychain(device: FakeKeychain.Device(appleAccount: mia), groups: [Self.group]))
            .remove("k")
        #expect(try synced.readAll().isEmpty)
        #expect(try local.read("k") == Data("identity".utf8))

        // Without an Apple account (or with Keychain sync off) the item stays on the phone.
        let alone = FakeKeychain(groups: [Self.group])
        try KeychainSynchronizedItems(location: Self.location, calls: alone).write(Data("b".utf8), for: "k")
        #expect(try KeychainSynchronizedItems(location: Self.location, calls: FakeKeychain(device: alone.device.restoredFromBackup(), groups: [Self.group])).readAll().isEmpty)
    }

    @Test("a backup item is synchronizable, readable after first unlock, in the data protection Keychain; a locked phone throws, an empty store reads empty")
    func synchronizedAttributes() throws {
        let keychain = FakeKeychain(device: FakeKeychain.Device(appleAccount: FakeKeychain.AppleAccount()), groups: [Self.group])
        let synced = KeychainSynchronizedItems(location: Self.location, calls: keychain)
        #expect(try synced.readAll().isEmpty)
        try synced.write(Data("one".utf8), for: "k")
        try synced.write(Data("two".utf8), for: "k")
        #expect(try synced.readAll() == ["k": Data("two".utf8)], "a write replaces")
        let item = try #require(keychain.items.first)
        #expect(Set(item.attributes) == [
            .genericPassword, .service("com.example.app"), .account("k"), .synchronizable, .dataProtectionKeychain,
            .accessibleAfterFirstUnlock,
        ])
        #expect(!item.attributes.contains(.accessibleAfterFirstUnlockThisDeviceOnly), "a synchronizable item cannot be this-device-only")
        keychain.device.locked = true
        #expect { try synced.readAll() } throws: { ($0 as? StorageError)?.kind == .locked }
        keychain.device.locked = false
        try synced.remove("k")
        try synced.remove("k")  // nothing stored is not an error
    }

    // MARK: The flow

    @Test("a signed-in account gets a backup key with the app's name; a new phone of the same Apple account finds it, claims it after one confirmation, and makes a fresh one")
    func lostPhone() async throws {
        let server = FakeServer()
        let mia = FakeKeychain.AppleAccount()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let old = a.app()
        let account = try #require(signedIn(try await old.launch()))
        try await old.setDisplayName("Mia")
        let made = try #require(a.backups.first, "the launch made a backup key")
        #expect(made.accountId == account && made.displayName == "Mia")
        #expect(try await old.profile().waysBack?.contains(.backupKey) == true, "the service counts it as a way back")
        #expect(try await old.profile().backupKeys?.keys.sorted() == ["icloud-keychain"], "and lists it by store")
        _ = try await a.app().launch()
        #expect(server.count("PUT /v1/me/backup-key") == 1, "a relaunch keeps the key it has")

        // A is lost. B: a new phone of the same Apple account, nothing of its own.
        let b = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let new = b.app()
        let sent = server.log.count
        let offered = found(await new.startingPoint())
        #expect(offered.map(\.accountId) == [account] && offered.first?.displayName == "Mia", "B offers Mia's account: \(offered)")
        #expect(server.log.count == sent, "nothing sent before the user answers")
        #expect(try await new.claim(backup: try #require(offered.first)).id == account)
        #expect(try await new.launch() == .signedIn(accountId: account, created: false))
        let fresh = try #require(b.backups.first)
        #expect(fresh.accountId == account && fresh.displayName == "Mia", "the new phone keeps the name")
        #expect(fresh.key != made.key, "the used key was replaced by a fresh one")
        await #expect { try await a.app().launch() } throws: { TransferError.kind(of: $0) == .deviceTransferred }
        #expect(server.violations.isEmpty, "\(server.violations)")
    }

    @Test("a phone restored from backup offers the backups before the restored list")
    func restoredPhone() async throws {
        let server = FakeServer()
        let mia = FakeKeychain.AppleAccount()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let account = try #require(signedIn(try await a.app().launch()))
        let b = Phone(server, device: a.device.restoredFromBackup(), appFiles: MemoryCredentialStore(a.appFiles.items))
        let new = b.app()
        let offered = found(await new.startingPoint())
        #expect(offered.map(\.accountId) == [account], "the backups are offered")
        #expect(try await new.claim(backup: offered[0]).id == account)
        #expect(try await b.app().launch() == .signedIn(accountId: account, created: false))
    }

    @Test("two accounts on the lost phone: both are offered, newest first; the user picks one, the other stays offered")
    func twoAccounts() async throws {
        let server = FakeServer()
        let mia = FakeKeychain.AppleAccount()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let old = a.app()
        let personal = try #require(signedIn(try await old.launch()))
        try await old.setDisplayName("Mia")
        server.clock.advance(by: 60)
        let work = try await old.addAccount()
        try await old.setDisplayName("Mia (work)", of: work.id)
        let offered = found(await Phone(server, device: FakeKeychain.Device(appleAccount: mia)).app().startingPoint())
        #expect(offered.map(\.accountId) == [work.id, personal], "\(offered)")
        #expect(offered.map(\.displayName) == ["Mia (work)", "Mia"])

        let b = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let new = b.app()
        #expect(try await new.claim(backup: offered[1]).id == personal)
        #expect(try await new.claim(backup: try #require(b.backups.first { $0.accountId == work.id }), existingAccounts: .add).id == work.id)
        #expect(Set(try await new.accounts().map(\.id)) == [personal, work.id])
    }

    @Test("a key that no longer works (the account deleted, or its key replaced) is removed quietly, and the app starts fresh")
    func deadKey() async throws {
        let server = FakeServer()
        let mia = FakeKeychain.AppleAccount()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let old = a.app()
        let account = try #require(signedIn(try await old.launch()))
        let stale = try #require(a.backups.first)
        // The key is replaced on the service (another phone's backups turned off then on).
        await old.setBackupKeys(enabled: false)
        await old.setBackupKeys(enabled: true)
        #expect(a.backups.first?.key != stale.key)

        let b = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let new = b.app()
        await #expect { try await new.claim(backup: stale) } throws: { TransferError.kind(of: $0) == .invalidTransferCredentials }
        #expect(a.backups.first?.accountId == account, "the item holding the newer key is not the stale one's to remove")

        // The account is erased: its key dies with it; the new phone removes it and starts fresh.
        try await old.deleteAccount()
        #expect(a.backups.isEmpty, "deleting the account removes its item")
        try a.synchronized.write(try Wire.encode(StoredBackup(accountId: account, key: stale.key, displayName: "Mia", createdAt: Date())),
                                 for: BackupShelf.key(account))
        let offered = found(await new.startingPoint())
        #expect(offered.count == 1)
        await #expect { try await new.claim(backup: offered[0]) } throws: { TransferError.kind(of: $0) == .invalidTransferCredentials }
        #expect(b.backups.isEmpty, "the dead key was removed")
        #expect(await new.startingPoint() == .firstStart, "nothing left to offer: the app shows its welcome")
        guard case .signedIn(let fresh, true) = try await new.launch() else { Issue.record("a fresh account"); return }
        #expect(fresh != account)
    }

    @Test("backup keys off: none is made, the ones made are deleted on the service and in iCloud Keychain, a new phone finds none")
    func turnedOff() async throws {
        let server = FakeServer()
        let mia = FakeKeychain.AppleAccount()
        let off = Phone(server, device: FakeKeychain.Device(appleAccount: mia), backupKeys: false)
        _ = try await off.app().launch()
        #expect(off.backups.isEmpty && server.count("PUT /v1/me/backup-key") == 0)

        let on = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let client = on.app()
        _ = try await client.launch()
        #expect(on.backups.count == 1)
        await client.setBackupKeys(enabled: false)
        #expect(on.backups.isEmpty, "turning off removes the item")
        #expect(server.count("DELETE /v1/me/backup-key") == 1)
        #expect(try await client.profile().waysBack?.contains(.backupKey) == false, "and the service's key")

        _ = try await client.launch()  // still off: nothing made
        #expect(on.backups.isEmpty)
        // Off by configuration: a launch deletes what an earlier version made.
        await client.setBackupKeys(enabled: true)
        #expect(on.backups.count == 1)
        _ = try await Phone(server, device: on.device, backupKeys: false, appFiles: on.appFiles).app().launch()
        #expect(on.backups.isEmpty, "a launch with backup keys off deletes them")
        #expect(await Phone(server, device: FakeKeychain.Device(appleAccount: mia), backupKeys: false).app().startingPoint() == .firstStart)
    }

    @Test("an account the user removes or deletes loses its backup key; one whose removal is refused keeps a key")
    func leavesByChoice() async throws {
        let server = FakeServer()
        let mia = FakeKeychain.AppleAccount()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let client = a.app()
        let first = try #require(signedIn(try await client.launch()))
        let second = try await client.addAccount()
        #expect(a.backups.count == 2)

        // The backup key was the first account's only way back: the removal is refused, the key stays.
        await #expect { try await client.removeAccount(first) } throws: { TransferError.kind(of: $0) == .accountWouldBeLost }
        #expect(a.backups.map(\.accountId).contains(first), "a refused removal leaves the account a backup key")
        #expect(try await client.profile(of: first).waysBack?.contains(.backupKey) == true)

        try await client.removeAccount(first, abandon: true)
        #expect(a.backups.map(\.accountId) == [second.id], "the removed account's item is gone")
        try await client.deleteAccount(second.id)
        #expect(a.backups.isEmpty, "the deleted account's item is gone")
    }

    /// A synchronized store whose writes fail while `failWrites` (reads and removals still work).
    final class BrokenWrites: SynchronizedStore, @unchecked Sendable {
        let base: MemorySynchronizedStore
        private let lock = NSLock()
        private var failing = false
        init(_ base: MemorySynchronizedStore = MemorySynchronizedStore()) { self.base = base }
        var failWrites: Bool {
            get { lock.withLock { failing } }
            set { lock.withLock { failing = newValue } }
        }
        func readAll() throws -> [String: Data] { try base.readAll() }
        func write(_ data: Data, for key: String) throws {
            if failWrites { throw StorageError(.locked, reason: "write failed") }
            try base.write(data, for: key)
        }
        func remove(_ key: String) throws { try base.remove(key) }
    }

    @Test("a backup key whose item is gone is still deleted on the service before a removal: the removal is refused as the account's last way back")
    func removalDeletesKeyWithoutItem() async throws {
        let server = FakeServer()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: FakeKeychain.AppleAccount()))
        let client = a.app()
        let first = try #require(signedIn(try await client.launch()))
        _ = try await client.addAccount()
        // The item went (removed on another phone of the Apple account); the service still has the key.
        try a.synchronized.remove(BackupShelf.key(first))
        #expect(try await client.profile(of: first).waysBack?.contains(.backupKey) == true)
        await #expect { try await client.removeAccount(first) } throws: { TransferError.kind(of: $0) == .accountWouldBeLost }
        #expect(server.count("DELETE /v1/me/backup-key") == 1, "the DELETE went whatever the store held")
        #expect(try await client.accounts().map(\.id).contains(first), "no way back: the account stays")
    }

    @Test("a backup key the service will not delete (429, no network) keeps the account and its item: the removal throws", arguments: [false, true])
    func removalWhenDeleteFails(network lost: Bool) async throws {
        let server = FakeServer()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: FakeKeychain.AppleAccount()))
        let client = a.app()
        let first = try #require(signedIn(try await client.launch()))
        _ = try await client.addAccount()
        let key = try #require(a.backups.first { $0.accountId == first }?.key)
        if lost {
            a.network.loseAnswers(to: "DELETE /v1/me/backup-key")
            server.scriptError("DELETE /v1/me/backup-key", status: 503, "overloaded")
        } else {
            server.scriptError("DELETE /v1/me/backup-key", status: 429, "rate_limited")
        }
        await #expect { try await client.removeAccount(first, abandon: true) } throws: {
            [.rateLimited, .network].contains(TransferError.kind(of: $0))
        }
        #expect(a.backups.first { $0.accountId == first }?.key == key, "the item stays: the key still lives on the service")
        #expect(try await client.accounts().map(\.id).contains(first), "the account was not removed")
        #expect(try await client.profile(of: first).waysBack?.contains(.backupKey) == true)
    }

    @Test("a backup key made on the service whose item cannot be written is deleted again")
    func unwrittenKeyIsDeleted() async throws {
        let server = FakeServer()
        let store = BrokenWrites()
        store.failWrites = true
        let client = server.client(iCloudKeychain: store)
        _ = try await client.launch()
        #expect(server.count("PUT /v1/me/backup-key") == 1)
        #expect(try await client.profile().waysBack?.contains(.backupKey) == false, "no phone holds it: the service keeps none")
        store.failWrites = false
        _ = try await client.launch()
        #expect(try await client.profile().waysBack?.contains(.backupKey) == true, "the next launch makes one that is kept")
        #expect(store.base.items.count == 1)
    }

    @Test("backup keys off deletes every account's key on the service, even one whose item is gone")
    func offDeletesOnService() async throws {
        let server = FakeServer()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: FakeKeychain.AppleAccount()))
        let client = a.app()
        let account = try #require(signedIn(try await client.launch()))
        try a.synchronized.remove(BackupShelf.key(account))
        await client.setBackupKeys(enabled: false)
        #expect(try await client.profile().waysBack?.contains(.backupKey) == false)
    }

    // MARK: Claims in flight

    @Test("killed during a backup claim: the next start repeats it and lands in the account, with a fresh key", arguments: [false, true])
    func killedDuringBackupClaim(reachedService: Bool) async throws {
        let server = FakeServer()
        let mia = FakeKeychain.AppleAccount()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let old = a.app()
        let account = try #require(signedIn(try await old.launch()))
        try await old.setDisplayName("Mia")

        let b = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let offered = try #require(found(await b.app().startingPoint()).first)
        if reachedService {
            server.loseAnswers(to: Self.claimRoute, count: TransferClient.claimAttempts)
        } else {
            for _ in 0..<TransferClient.claimAttempts { server.scriptError(Self.claimRoute, status: 503, "overloaded") }
            b.network.loseAnswers(to: Self.claimRoute, count: TransferClient.claimAttempts)
        }
        await #expect { try await b.app().claim(backup: offered) } throws: { TransferError.kind(of: $0) == .network }

        server.clock.advance(by: 3 * 86_400)  // the user comes back days later
        let relaunched = b.app()
        #expect(await relaunched.startingPoint() == .returning, "a claim in flight: launch, do not ask")
        #expect(try await relaunched.launch() == .signedIn(accountId: account, created: false), "in the account, nothing typed")
        let fresh = try #require(b.backups.first)
        #expect(fresh.key != offered.key && fresh.displayName == "Mia", "the used key was replaced, with the name")
        #expect(server.violations.isEmpty, "\(server.violations)")
    }

    @Test("a claim in flight that the service refuses is forgotten: the phone with nothing of its own is where it was before the claim")
    func refusedClaimInFlight() async throws {
        let server = FakeServer()
        let old = server.client()
        _ = try await old.launch()
        let offer = try await old.setUpTransferCode()
        let keychain = MemoryCredentialStore()
        let network = LossyNetwork()
        network.loseAnswers(to: Self.claimRoute, count: TransferClient.claimAttempts)
        for _ in 0..<TransferClient.claimAttempts { server.scriptError(Self.claimRoute, status: 503, "overloaded") }
        await #expect { try await server.client(keychain: keychain, network: network).claimTransfer(code: offer.code) } throws: {
            TransferError.kind(of: $0) == .network
        }
        try await old.cancelTransfer()  // the code no longer works
        let relaunched = server.client(keychain: keychain)
        await #expect { try await relaunched.launch() } throws: { TransferError.kind(of: $0) == .invalidTransferCredentials }
        #expect(await server.client(keychain: keychain).startingPoint() == .firstStart, "ask the user again")
        #expect(server.count("POST /v1/devices/login") == 1, "no account was created behind the user's back")
    }

    @Test("a claim in flight answered 429 or 5xx is kept: the launch throws, and the next one repeats it and lands in the account",
          arguments: [(429, "rate_limited"), (503, "overloaded"), (500, "internal")])
    func busyClaimInFlightIsKept(status: Int, code: String) async throws {
        let server = FakeServer()
        let old = server.client()
        let account = try #require(signedIn(try await old.launch()))
        let offer = try await old.setUpTransferCode()
        let keychain = MemoryCredentialStore()
        server.loseAnswers(to: Self.claimRoute, count: TransferClient.claimAttempts)
        await #expect { try await server.client(keychain: keychain).claimTransfer(code: offer.code) } throws: {
            TransferError.kind(of: $0) == .network
        }
        server.scriptError(Self.claimRoute, status: status, code)
        await #expect { try await server.client(keychain: keychain).launch() } throws: { _ in true }
        #expect(await server.client(keychain: keychain).startingPoint() == .returning, "the claim is still in flight")
        #expect(try await server.client(keychain: keychain).launch() == .signedIn(accountId: account, created: false))
        #expect(server.count("POST /v1/devices/login") == 2, "no account was created behind the user's back: \(server.log)")
    }

    @Test("a repeated claim keeps the user's choice for the phone's own account and lands in the claimed one",
          arguments: [ClaimChoice.add, .deleteExisting, .replace])
    func resumedClaimKeepsChoice(choice: ClaimChoice) async throws {
        let server = FakeServer()
        let old = server.client()
        let moving = try #require(signedIn(try await old.launch()))
        _ = try await old.makeRecoveryCode()  // a way back for the moving account
        let offer = try await old.setUpTransferCode()

        let keychain = MemoryCredentialStore()
        let appFiles = MemoryCredentialStore()
        let own = try #require(signedIn(try await server.client(keychain: keychain, appFiles: appFiles).launch()))
        if choice == .replace {  // the own account needs a way back to leave the phone
            _ = try await server.client(keychain: keychain, appFiles: appFiles).makeRecoveryCode(of: own)
        }
        server.loseAnswers(to: Self.claimRoute, count: TransferClient.claimAttempts)
        await #expect {
            try await server.client(keychain: keychain, appFiles: appFiles).claimTransfer(code: offer.code, existingAccounts: choice)
        } throws: { TransferError.kind(of: $0) == .network }

        let relaunched = server.client(keychain: keychain, appFiles: appFiles)
        #expect(try await relaunched.launch() == .signedIn(accountId: moving, created: false), "the launch lands in the claimed account")
        let here = Set(try await relaunched.accounts().map(\.id))
        switch choice {
        case .add: #expect(here == [moving, own])
        default: #expect(here == [moving], "the phone's own account left it: \(here)")
        }
        if choice == .deleteExisting {
            #expect(server.count("DELETE /v1/me") == 1, "the own account was deleted, as the user chose")
        }
    }

    @Test("a launch while this process's own claim still waits for its answer does not send the claim again")
    func launchDuringRunningClaim() async throws {
        let server = FakeServer()
        let old = server.client()
        let account = try #require(signedIn(try await old.launch()))
        let offer = try await old.setUpTransferCode()
        let gate = Gate()
        let transport = Transport { request in
            if request.url?.path.hasSuffix("/v1/transfers/claim") == true { await gate.pass() }
            return try await server.transport.answer(request)
        }
        let client = TransferClient(
            baseURL: FakeServer.baseURL, credentials: MemoryCredentialStore(), accountList: MemoryCredentialStore(),
            transport: transport, clock: { server.clock.now })
        let claim = Task { try await client.claimTransfer(code: offer.code) }
        try await gate.waitForArrival()
        #expect(await client.startingPoint() != .returning, "the claim under way is not one to repeat")
        let resumed = Task { try await client.resumeClaimInFlight() }
        try await Task.sleep(nanoseconds: 50_000_000)
        gate.open()
        try await resumed.value
        #expect(try await claim.value.id == account)
        #expect(server.count(Self.claimRoute) == 1, "the claim went once")
    }

    @Test("two callers keeping backup keys at once make one key per account")
    func backupKeysOneAtATime() async throws {
        let server = FakeServer()
        let gate = Gate()
        let transport = Transport { request in
            if request.httpMethod == "PUT", request.url?.path.hasSuffix("/v1/me/backup-key") == true { await gate.pass() }
            return try await server.transport.answer(request)
        }
        let store = MemorySynchronizedStore()
        let client = TransferClient(
            baseURL: FakeServer.baseURL, credentials: MemoryCredentialStore(), accountList: MemoryCredentialStore(),
            transport: transport, clock: { server.clock.now }, synchronizedStore: store, backupKeys: false)
        _ = try await client.launch()
        let first = Task { await client.setBackupKeys(enabled: true) }
        try await gate.waitForArrival()
        let second = Task { await client.setBackupKeys(enabled: true) }
        try await Task.sleep(nanoseconds: 50_000_000)
        gate.open()
        await first.value
        await second.value
        #expect(server.count("PUT /v1/me/backup-key") == 1, "one PUT for the account")
        #expect(store.items.count == 1)
    }

    // MARK: Erased accounts

    @Test("an account erased on the service: the launch throws account_deleted once, its key goes, and the next start is a fresh one")
    func erasedAccount() async throws {
        let server = FakeServer()
        let mia = FakeKeychain.AppleAccount()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: mia))
        let account = try #require(signedIn(try await a.app().launch()))
        // Erased elsewhere (support, or the inactive-account rule): the login answers 410 account_deleted.
        server.scriptError("POST /v1/devices/login", status: 410, "account_deleted")
        let back = a.app()
        await #expect { try await back.launch() } throws: { TransferError.kind(of: $0) == .accountDeleted }
        #expect(a.backups.isEmpty, "the erased account's key is not offered anywhere")
        #expect(await a.app().startingPoint() == .firstStart, "the app shows its welcome, as on a new phone")
        guard case .signedIn(let fresh, true) = try await a.app().launch() else { Issue.record("a fresh account"); return }
        #expect(fresh != account)
    }

    @Test("an account erased on the service loses its item wherever the phone hears account_deleted: a request for it, or the account list")
    func erasedAccountHeardElsewhere() async throws {
        let server = FakeServer()
        let a = Phone(server, device: FakeKeychain.Device(appleAccount: FakeKeychain.AppleAccount()))
        let client = a.app()
        let first = try #require(signedIn(try await client.launch()))
        let second = try await client.addAccount()
        _ = try await client.addAccount()
        #expect(a.backups.count == 3)

        // A request for the second account logs in (its token gone) and hears account_deleted.
        let other = a.app()
        _ = try await other.launch()
        try await other.signOut(of: second.id)
        server.scriptError("POST /v1/devices/login", status: 410, "account_deleted")
        await #expect { try await other.profile(of: second.id) } throws: { TransferError.kind(of: $0) == .accountDeleted }
        #expect(!a.backups.map(\.accountId).contains(second.id), "the item of the account heard erased is gone")

        // The first one is erased (not the current one); the list no longer names it, and the login naming it says account_deleted.
        try await server.client(
            keychain: KeychainItems(location: Self.location, calls: a.keychain), appFiles: MemoryCredentialStore(a.appFiles.items)
        ).deleteAccount(first)
        try a.synchronized.write(
            try Wire.encode(StoredBackup(accountId: first, key: "stale", displayName: nil, createdAt: Date())), for: BackupShelf.key(first))
        _ = try await client.accounts()
        #expect(!a.backups.map(\.accountId).contains(first), "the departed account's item is gone: \(a.backups)")
    }

    @Test("an item written by an earlier version (with the device id that made it) is still offered; new items name no device")
    func olderItemsDecode() async throws {
        let store = MemorySynchronizedStore()
        let old = #"{"accountId":"00000000-0000-4000-8000-000000000001","key":"k","displayName":"Mia","createdAt":"2026-11-21T12:00:00Z","madeBy":"d"}"#
        try store.write(Data(old.utf8), for: BackupShelf.key("00000000-0000-4000-8000-000000000001"))
        #expect(try BackupShelfView.backups(in: store).map(\.displayName) == ["Mia"])

        let server = FakeServer()
        let fresh = MemorySynchronizedStore()
        _ = try await server.client(iCloudKeychain: fresh).launch()
        let item = try #require(fresh.items.values.first)
        #expect(!String(decoding: item, as: UTF8.self).contains("madeBy"))
    }
}
