import Foundation
import GRDB
import Synchronization
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Contract v1.3, "A launch that changes nothing writes nothing": a login of an open session
/// within `--activity-resolution` of the pair's last recorded activity writes nothing and
/// answers as before; it still sees every committed change at once; and "Activity is any use
/// of a session": a refresh (the host's or a sibling app's) keeps an account, a recovery code does not.
@Suite("Activity resolution")
struct ActivityTests {
    let t0 = Timestamp(milliseconds: 1_795_000_000_000)
    static let hour = Duration.seconds(3600)
    static let day = Duration.seconds(86_400)

    static func device() -> DeviceID { DeviceID(UUID().uuidString)! }

    static func deleted(_ store: any SupportStore, _ account: String) async throws -> Bool {
        try #require(try await store.report(accountID: account, at: Timestamp(Date()), recentEvents: 1)).deletedAt != nil
    }

    /// What says whether anything was written: on SQLite, `PRAGMA data_version` of a connection
    /// of its own (it changes when any other connection commits) and every table's rows; on
    /// PostgreSQL, each row's version (`ctid`, `xmin`: an UPDATE makes a new one, an INSERT or
    /// a DELETE changes the list), which, unlike `pg_stat_user_tables`, is never late.
    final class WriteWatch: Sendable {
        let location: DatabaseLocation
        let queue: DatabaseQueue?

        init(_ location: DatabaseLocation) throws {
            self.location = location
            if case .sqlite(let path) = location { queue = try DatabaseQueue(path: path) } else { queue = nil }
        }

        func close() throws { try queue?.close() }

        func mark() async throws -> [String] {
            if let queue {
                return try await queue.read { db in
                    let version = try Int.fetchOne(db, sql: "PRAGMA data_version") ?? -1
                    let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                    return try ["data_version \(version)"] + tables.map { table in
                        "\(table): \(try Row.fetchAll(db, sql: "SELECT * FROM \"\(table)\""))"
                    }
                }
            }
            let raw = RawDatabase(location: location)
            var marks: [String] = []
            for table in try await raw.strings("SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename") {
                marks += try await raw.strings(
                    "SELECT '\(table): ' || COALESCE(string_agg(ctid::text || '@' || xmin::text, ',' ORDER BY ctid), '') FROM \(table)")
            }
            return marks
        }
    }

    @Test("500 launches within the resolution write nothing and answer as the first did: the same session and refresh token, created false",
          arguments: StoreKind.available)
    func launchesWriteNothing(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation { location, _ in
            try await InactiveAccountTests.withStore(location) { store in
                let calls = StoreCalls(store: store)
                let phone = Self.device()
                let first = try #require(try await calls.login(phone, at: t0).grant)
                let second = try #require(try await calls.login(phone, at: t0 + .seconds(1)).grant)
                #expect(!second.wrote, "a launch a second later writes nothing")
                let watch = try WriteWatch(location)
                defer { try? watch.close() }
                // The checkpointer copies the first commits into the file a moment after them: let it.
                try await Task.sleep(for: .milliseconds(200))
                let before = try await watch.mark()
                try await withThrowingTaskGroup(of: SessionGrant?.self) { group in
                    for i in 0..<500 {
                        group.addTask { try await calls.login(phone, at: t0 + .milliseconds(2000 + Int64(i) * 7000)).grant }
                    }
                    for try await grant in group {
                        let grant = try #require(grant)
                        #expect(!grant.wrote && !grant.created)
                        #expect(grant.sessionID == first.sessionID && grant.refreshToken == first.refreshToken)
                        #expect(grant.account == first.account && grant.accounts == first.accounts)
                    }
                }
                let after = try await watch.mark()
                #expect(before == after, "500 launches within the hour changed no row")
                let pair = try #require(try await store.device(phone.value, at: t0)?.active.first)
                #expect(pair.lastLoginAt == t0, "the recorded activity is still the first launch's")
                // The watch does see a write: a launch past the resolution.
                #expect(try await calls.login(phone, at: t0 + Self.hour).grant?.wrote == true)
                #expect(try await watch.mark() != after, "a launch that writes shows")
            }
        }
    }

    @Test("a launch past the resolution writes: lastLoginAt moves and the session is extended, with the same refresh token",
          arguments: StoreKind.available)
    func launchPastResolution(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let phone = Self.device()
            // Sessions of the default 30 days (StoreCalls' live an hour).
            let login = { (at: Timestamp) in
                try await store.login(LoginCommand(
                    deviceID: phone, deviceSecret: "s", now: at, newAccountID: Identifier.make(),
                    fresh: FreshSession(sessionID: Identifier.make(), key: .random(), expiresAt: at + Self.day * 30), clientAddress: nil)).grant
            }
            let first = try #require(try await login(t0))
            #expect(first.wrote && first.created)
            #expect(try await login(t0 + Self.hour - .milliseconds(1))?.wrote == false)
            #expect(try await store.device(phone.value, at: t0)?.active.first?.lastLoginAt == t0)
            let later = try #require(try await login(t0 + Self.hour))
            #expect(later.wrote && later.refreshToken == first.refreshToken && later.sessionID == first.sessionID)
            #expect(try await store.device(phone.value, at: t0)?.active.first?.lastLoginAt == t0 + Self.hour)
            #expect(try await login(t0 + Self.day * 30 + .seconds(1))?.sessionID == first.sessionID, "the session was extended")
        }
    }

    @Test("a session whose expiry falls within the resolution of the refresh lifetime is extended even when activity was recorded since")
    func expiryDue() {
        let fresh = FreshSession(sessionID: "s", key: .random(), expiresAt: t0 + Self.day * 30)
        let login = LoginCommand(deviceID: Self.device(), deviceSecret: "x", now: t0, newAccountID: "a", fresh: fresh, clientAddress: nil)
        #expect(!login.writes(lastLoginAt: t0 - .seconds(10), sessionExpiresAt: t0 + Self.day * 30 - .seconds(10)))
        #expect(login.writes(lastLoginAt: t0 - Self.hour, sessionExpiresAt: t0 + Self.day * 30 - .seconds(10)), "activity due")
        #expect(login.writes(lastLoginAt: nil, sessionExpiresAt: t0 + Self.day * 30), "no activity recorded")
        #expect(login.writes(lastLoginAt: t0 - .seconds(10), sessionExpiresAt: t0 + Self.day * 29), "a sibling's refresh recorded activity; the session was not extended")
    }

    @Test("a launch right after a claim, a revocation, a removal or a deletion hears its refusal at once, within the resolution",
          arguments: StoreKind.available)
    func refusalsAtOnce(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            // Each phone has launched twice, the second writing nothing.
            func launched() async throws -> (DeviceID, String) {
                let phone = Self.device()
                let account = try await calls.account(phone, at: t0)
                #expect(try await calls.login(phone, at: t0 + .seconds(1)).grant?.wrote == false)
                return (phone, account)
            }
            let (old, moved) = try await launched()
            let transfer = try await calls.setUp(account: moved, at: t0 + .seconds(2))
            #expect(try await calls.claim(transfer: transfer, account: moved, device: Self.device(), at: t0 + .seconds(3)).grant != nil)
            guard case .failure(.deviceTransferred) = try await calls.login(old, at: t0 + .seconds(3)) else {
                Issue.record("the old phone did not hear device_transferred")
                return
            }

            let (revoked, _) = try await launched()
            #expect(try await store.execute(RevokeDeviceCommand(deviceID: revoked.value, now: t0 + .seconds(2), by: .support(operator: "test"), reason: "stolen")).refusal == nil)
            #expect(try await calls.login(revoked, at: t0 + .seconds(2)) == .failure(.deviceRevoked))

            let (shared, removed) = try await launched()
            _ = try await calls.account(shared, .newAccount, at: t0 + .seconds(2))
            #expect(try await calls.login(shared, .account(removed), at: t0 + .seconds(2)).grant?.wrote == false)
            #expect(try await store.execute(RemoveAccountCommand(deviceID: shared.value, accountID: removed, abandon: true, now: t0 + .seconds(3))).refusal == nil)
            #expect(try await calls.login(shared, .account(removed), at: t0 + .seconds(3)) == .failure(.accountNotOnDevice))

            let (erased, deleted) = try await launched()
            #expect(try await store.execute(
                DeleteAccountCommand(accountID: deleted, now: t0 + .seconds(2), by: .device, reason: nil, cause: .requested)).refusal == nil)
            #expect(try await calls.login(erased, at: t0 + .seconds(2)) == .failure(.accountDeleted))
        }
    }

    @Test("launches racing a revocation: every launch asked after the revocation was answered hears device_revoked, whichever snapshot it shares",
          arguments: StoreKind.available)
    func launchesRacingRevocation(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let phone = Self.device()
            _ = try await calls.account(phone, at: t0)
            #expect(try await calls.login(phone, at: t0 + .seconds(1)).grant?.wrote == false)
            final class Race: Sendable {
                let revoked = Atomic<Bool>(false)
                let counts = Mutex((before: 0, after: 0))
            }
            let race = Race()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        // Until each task has launched a few times after the revocation was answered,
                        // however fast launches are, yielding between them as requests waiting for
                        // their network do, so that the revocation's task gets its turn; for 20 s at most.
                        var launchesAfter = 0
                        let deadline = ContinuousClock.now + .seconds(20)
                        while launchesAfter < 5 && ContinuousClock.now < deadline {
                            await Task.yield()
                            let askedAfter = race.revoked.load(ordering: .acquiring)
                            if askedAfter { launchesAfter += 1 }
                            let result = try await calls.login(phone, at: t0 + .seconds(2))
                            if askedAfter {
                                #expect(result == .failure(.deviceRevoked), "a launch asked after the revocation was answered got \(result)")
                                race.counts.withLock { $0.after += 1 }
                            } else if result.grant == nil {
                                #expect(result == .failure(.deviceRevoked), "a launch racing the revocation got \(result)")
                            } else {
                                race.counts.withLock { $0.before += 1 }
                            }
                        }
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(20))
                    #expect(try await store.execute(RevokeDeviceCommand(
                        deviceID: phone.value, now: t0 + .seconds(2), by: .support(operator: "test"), reason: "stolen")).refusal == nil)
                    race.revoked.store(true, ordering: .releasing)
                }
                try await group.waitForAll()
            }
            let seen = race.counts.withLock { $0 }
            #expect(seen.after > 0, "no launch was asked after the revocation: the race was not run (\(seen))")
        }
    }

    @Test("concurrent launches of many phones, which share reads, each hear what a lone launch hears: their account, the one they named, or their refusal",
          arguments: StoreKind.available)
    func concurrentLaunchesHearTheirOwnAnswers(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            // 30 phones; every third also holds a second account (then its current one); every
            // fifth is revoked. Each asks for its current account, its first account by name,
            // another phone's account, and with a wrong secret.
            var phones: [(phone: DeviceID, first: String)] = []
            for i in 0..<30 {
                let phone = Self.device()
                phones.append((phone, try await calls.account(phone, at: t0)))
                if i % 3 == 0 { _ = try await calls.account(phone, .newAccount, at: t0) }
            }
            for (i, p) in phones.enumerated() where i % 5 == 0 {
                #expect(try await store.execute(RevokeDeviceCommand(
                    deviceID: p.phone.value, now: t0, by: .support(operator: "test"), reason: nil)).refusal == nil)
            }
            struct Launch: Sendable {
                let phone: DeviceID
                let secret: String?
                let target: LoginTarget
            }
            var launches: [Launch] = []
            for (i, p) in phones.enumerated() {
                launches += [
                    Launch(phone: p.phone, secret: nil, target: .current),
                    Launch(phone: p.phone, secret: nil, target: .account(p.first)),
                    Launch(phone: p.phone, secret: nil, target: .account(phones[(i + 1) % phones.count].first)),
                    Launch(phone: p.phone, secret: "wrong-\(i)", target: .current),
                ]
            }
            let at = t0 + .seconds(2)
            var alone: [Result<SessionGrant, TransferError>] = []
            for l in launches { alone.append(try await calls.login(l.phone, secret: l.secret, l.target, at: at)) }
            #expect(alone.contains { $0.grant != nil } && alone.contains { $0 == .failure(.deviceRevoked) }
                && alone.contains { $0 == .failure(.invalidDeviceCredentials) } && alone.contains { $0 == .failure(.accountNotOnDevice) },
                "the launches cover grants and each refusal: \(alone)")

            for round in 0..<3 {
                let together = try await withThrowingTaskGroup(of: (Int, Result<SessionGrant, TransferError>).self) { group in
                    for (n, l) in launches.enumerated() {
                        group.addTask { (n, try await calls.login(l.phone, secret: l.secret, l.target, at: at)) }
                    }
                    return try await group.reduce(into: [Int: Result<SessionGrant, TransferError>]()) { $0[$1.0] = $1.1 }
                }
                for (n, expected) in alone.enumerated() {
                    #expect(together[n] == expected, "round \(round), launch \(n) (\(launches[n].target)) heard another answer than alone")
                }
            }
        }
    }

    @Test("a refresh records activity at the resolution: an account whose phone only refreshes stays; one unused is erased",
          arguments: StoreKind.available)
    func refreshKeepsAccount(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let calls = StoreCalls(store: store)
            let busy = Self.device(), idle = Self.device()
            let session = FreshSession(sessionID: Identifier.make(), key: .random(), expiresAt: t0 + Self.day * 60)
            let first = try #require(try await store.login(LoginCommand(
                deviceID: busy, deviceSecret: StoreCalls.secret(busy), now: t0, newAccountID: Identifier.make(), fresh: session,
                clientAddress: nil)).grant)
            let gone = try await calls.account(idle, at: t0)
            let refresh = { (token: String, at: Timestamp) in
                try await store.execute(RefreshCommand(token: token, now: at, expiresAt: at + Self.day * 60, fallbackKey: .random()))
            }
            let soon = try #require(try await refresh(first.refreshToken, t0 + .seconds(30)).grant)
            #expect(try await store.device(busy.value, at: t0)?.active.first?.lastLoginAt == t0, "a refresh within the resolution records nothing")
            _ = try #require(try await refresh(soon.refreshToken, t0 + Self.day * 20).grant)
            #expect(try await store.device(busy.value, at: t0)?.active.first?.lastLoginAt == t0 + Self.day * 20)

            let now = t0 + Self.day * 45
            let counts = try #require(try await store.prune(
                PruneCutoffs(now: now, retainedSince: t0 - .seconds(1), inactiveBefore: now - Self.day * 30), batchSize: 500))
            #expect(counts.inactiveAccounts == 1, "\(counts)")
            #expect(try await Self.deleted(store, gone), "the unused account is erased")
            #expect(try await !Self.deleted(store, first.account.accountID), "the refreshed account stays")
        }
    }
}

extension ActivityTests {
    @Test("a sibling app's refresh keeps its account, a recovery code does not", arguments: StoreKind.available)
    func siblingKeepsAccount(kind: StoreKind) async throws {
        try await withHarness(kind, configure: HandoffTests.configure) { harness in
            try await harness.run { api, parts in
                let (_, host, sibling) = try await HandoffTests.handedOff(api)
                let kept = try host.accountID
                let phone = Device()
                let lone = try await api.login(phone)
                let gone = try lone.accountID
                let code = try await api.call(.put, "/v1/me/recovery-code", token: try lone.accessToken)
                #expect(code.status == .created || code.status == .ok, "\(code.text)")

                harness.clock.advance(Self.day * 20)
                let refreshed = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": try sibling.refreshToken])
                #expect(refreshed.status == .ok, "\(refreshed.text)")
                harness.clock.advance(Self.day * 25)

                let now = harness.clock.now()
                let counts = try #require(try await parts.store.prune(
                    PruneCutoffs(now: now, retainedSince: now - Self.day * 400, inactiveBefore: now - Self.day * 30), batchSize: 500))
                #expect(counts.inactiveAccounts == 1, "\(counts)")
                #expect(try await Self.deleted(parts.store, gone), "the account with only a recovery code is erased")
                #expect(try await !Self.deleted(parts.store, kept), "the sibling app's use kept its account")
            }
        }
    }

    @Test("a launch within a third of the access token's lifetime gets the same token, expiresIn what is left of it; later, after a logout or on another phone, a new one",
          arguments: StoreKind.available)
    func accessTokenReused(kind: StoreKind) async throws {
        try await withServer(kind) { api, harness in
            let phone = Device()
            let first = try await api.login(phone)
            let token = try first.accessToken
            #expect(first["expiresIn"] as? Int == 900)
            harness.clock.advance(.seconds(299))
            let again = try await api.login(phone)
            #expect(try again.accessToken == token, "a launch 299 s later hands out the same token")
            #expect(again["expiresIn"] as? Int == 601, "what is left of the token's 15 minutes")
            #expect(try await api.me(token).status == .ok)
            harness.clock.advance(.seconds(2))
            let later = try await api.login(phone)
            #expect(try later.accessToken != token, "past a third of its lifetime a launch gets a new token")
            #expect(later["expiresIn"] as? Int == 900)

            let other = Device()
            #expect(try await api.login(other).accessToken != (try later.accessToken))
            #expect(try await api.call(.post, "/v1/logout", token: try later.accessToken).status == .noContent)
            let afterLogout = try await api.login(phone)
            #expect(try afterLogout.accessToken != (try later.accessToken), "a token of the ended session is never handed out again")
            #expect(try await api.me(try later.accessToken).status == .unauthorized)
            #expect(try await api.me(try afterLogout.accessToken).status == .ok)
        }
    }

    @Test("a token verified before is still refused once it expires or its session ends")
    func verifiedTokenChecksAgain() async throws {
        try await withServer { api, harness in
            let phone = Device()
            let token = try await api.login(phone).accessToken
            #expect(try await api.me(token).status == .ok)
            #expect(try await api.me(token).status == .ok)
            harness.clock.advance(.seconds(901))
            #expect(try await api.me(token).status == .unauthorized, "expired, though its signature was verified before")
            let fresh = try await api.login(phone).accessToken
            #expect(try await api.me(fresh).status == .ok)
            #expect(try await api.call(.post, "/v1/logout", token: fresh).status == .noContent)
            #expect(try await api.me(fresh).status == .unauthorized, "its session ended")
        }
    }

    @Test("/metrics counts logins by whether they wrote")
    func metrics() async throws {
        try await withServer { api, harness in
            let phone = Device()
            #expect(try await api.login(phone).status == .created)
            #expect(try await api.login(phone).status == .ok)
            #expect(try await api.login(phone).status == .ok)
            harness.clock.advance(Self.hour)
            #expect(try await api.login(phone).status == .ok)
            let metrics = try await api.call(.get, "/metrics").text
            #expect(metrics.contains(#"transfer_logins_total{wrote="true"} 2"#), "\(metrics)")
            #expect(metrics.contains(#"transfer_logins_total{wrote="false"} 2"#), "\(metrics)")
            #expect(metrics.contains("transfer_accounts_created_total 1"), "\(metrics)")
        }
    }

    @Test("--activity-resolution is 1h by default, 1m to 1d and shorter than --refresh-token-ttl: else refused at start in one line")
    func flag() throws {
        #expect(try ServerConfiguration.load(arguments: [], environment: [:]).activityResolution == ActivityResolution(Self.hour))
        #expect(try ServerConfiguration.load(arguments: ["--activity-resolution", "1m"], environment: [:]).activityResolution.duration == .seconds(60))
        #expect(try ServerConfiguration.load(arguments: [], environment: ["TRANSFER_ACTIVITY_RESOLUTION": "1d"]).activityResolution.duration == Self.day)
        for (arguments, environment, words) in [
            (["--activity-resolution", "59s"], [String: String](), ["--activity-resolution", "1m", "1d"]),
            (["--activity-resolution", "25h"], [:], ["--activity-resolution", "1d"]),
            ([], ["TRANSFER_ACTIVITY_RESOLUTION": "2d"], ["TRANSFER_ACTIVITY_RESOLUTION"]),
            (["--activity-resolution", "often"], [:], ["--activity-resolution"]),
            (["--activity-resolution", "1h", "--refresh-token-ttl", "1h"], [:], ["--activity-resolution", "--refresh-token-ttl"]),
        ] {
            do {
                _ = try ServerConfiguration.load(arguments: arguments, environment: environment)
                Issue.record("\(arguments) \(environment) was accepted")
            } catch {
                let text = "\(error)"
                #expect(words.allSatisfy(text.contains) && !text.contains("\n"), "one line naming the flag: \(text)")
            }
        }
    }
}
