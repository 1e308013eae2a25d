import Foundation
import GRDB
import Logging
import PostgresNIO
import Testing
import TransferArgon2
import TransferCore
@testable import TransferPostgres
import TransferSQL
import TransferSQLite
import TransferStorage
@testable import TransferTestSupport

/// Databases written by an earlier version upgrade in place. (That `schema.sql` and
/// `schema.postgres.sql` are what the migrations build is `SchemaParityTests`' part.)
@Suite("Migrations")
struct MigrationTests {
    @Test(
        "a database of schema v1 or v2 with moved, active and revoked devices, a pending transfer and sessions upgrades and keeps working",
        arguments: StoreKind.available, [1, 2])
    func upgrade(kind: StoreKind, from version: Int) async throws {
        try await kind.withDatabaseLocation(empty: true) { location, file in
            let a = Device(), b = Device(), c = Device(), d = Device(), stolen = Device(), e = Device()
            let eliID = "e1100000-0000-4000-8000-000000000001", foxID = "f0000000-0000-4000-8000-000000000002"
            let now = Timestamp(Date()).milliseconds
            let day: Int64 = 86_400_000
            let password = "plum-harbor-71-sail"
            let phc = try Argon2Hasher.hashNow(password, parameters: Argon2Parameters(memoryKiB: 256, iterations: 1, parallelism: 1))
            let raw = RawDatabase(location: location)
            try await raw.migrate(through: version)
            // v2 renamed the column that names the device an account moved to.
            let movedTo = version == 1 ? "transfer_id" : "moved_to_device_id"
            let binding = "INSERT INTO device_bindings (id, device_id, account_id, secret_hash, state, bound_at, last_login_at, ended_at, ended_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            func hash(_ s: String) -> Value { .blob(SecretHash(of: s).bytes) }
            try await raw.run([
                // Mia moved from A to B; B has a session.
                ("INSERT INTO accounts (id, user_name, created_at, \(movedTo)) VALUES (?, ?, ?, ?)", [.text("acct-mia"), .text(a.id), .int(now - 3 * day), .text(b.id)]),
                (binding, [.text("b1"), .text(a.id), .text("acct-mia"), hash(a.secret), .text("moved"), .int(now - 3 * day), .int(now - 2 * day), .int(now - day), .text("moved to device \(b.id)")]),
                (binding, [.text("b2"), .text(b.id), .text("acct-mia"), hash(b.secret), .text("active"), .int(now - day), .int(now - day), .null, .null]),
                ("INSERT INTO sessions (id, account_id, device_id, created_at) VALUES (?, ?, ?, ?)", [.text("s1"), .text("acct-mia"), .text(b.id), .int(now - day)]),
                ("INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at) VALUES (?, ?, ?, ?)", [hash("refresh-b"), .text("s1"), .int(now - day), .int(now + day)]),
                ("INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at, used_at) VALUES (?, ?, ?, ?, ?)", [hash("refresh-b-used"), .text("s1"), .int(now - day - 60_000), .int(now + day), .int(now - day)]),
                // An older session of the same pair, whose token the app replaced with the newer one.
                ("INSERT INTO sessions (id, account_id, device_id, created_at) VALUES (?, ?, ?, ?)", [.text("s0"), .text("acct-mia"), .text(b.id), .int(now - day - 120_000)]),
                ("INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at) VALUES (?, ?, ?, ?)", [hash("refresh-old"), .text("s0"), .int(now - day - 120_000), .int(now + day)]),
                // Phone E went back and forth: Eli, taken over by Fox (replaceExistingAccount), then Eli
                // claimed back with the same flag: two bindings of (E, Eli), the newer active.
                ("INSERT INTO accounts (id, user_name, created_at, \(movedTo)) VALUES (?, ?, ?, ?)", [.text(eliID), .text(e.id), .int(now - 3 * day), .text(e.id)]),
                ("INSERT INTO accounts (id, user_name, created_at, \(movedTo)) VALUES (?, ?, ?, ?)", [.text(foxID), .text(Device().id), .int(now - 3 * day), .text(e.id)]),
                (binding, [.text("b5"), .text(e.id), .text(eliID), hash(e.secret), .text("replaced"), .int(now - 3 * day), .null, .int(now - 2 * day), .text("taken over by account \(foxID)")]),
                (binding, [.text("b6"), .text(e.id), .text(foxID), hash(e.secret), .text("replaced"), .int(now - 2 * day), .null, .int(now - day), .text("taken over by account \(eliID)")]),
                (binding, [.text("b7"), .text(e.id), .text(eliID), hash(e.secret), .text("active"), .int(now - day), .null, .null, .null]),
                // Yara on C has a pending transfer.
                ("INSERT INTO accounts (id, user_name, created_at, \(movedTo)) VALUES (?, ?, ?, ?)", [.text("acct-yara"), .text(c.id), .int(now - day), .null]),
                (binding, [.text("b3"), .text(c.id), .text("acct-yara"), hash(c.secret), .text("active"), .int(now - day), .null, .null, .null]),
                ("INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at, failed_consecutive, failed_total, issued_by) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)",
                 [.text("t1"), .text("acct-yara"), .text("Yara@example.com"), .text("yara@example.com"), .text(phc), .int(now - 60_000), .int(now + day), .int(2), .int(3), .text("operator:sam")]),
                // Support revoked a stolen phone.
                ("INSERT INTO accounts (id, user_name, created_at, \(movedTo)) VALUES (?, ?, ?, ?)", [.text("acct-zoe"), .text(stolen.id), .int(now - day), .null]),
                (binding, [.text("b4"), .text(stolen.id), .text("acct-zoe"), hash(stolen.secret), .text("revoked"), .int(now - day), .null, .int(now - 60_000), .text("ticket 3")]),
                ("INSERT INTO audit_events (at, kind, account_id, device_id, transfer_id, actor, reason, client_address) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 [.int(now - 60_000), .text("transfer.issued"), .text("acct-yara"), .null, .text("t1"), .text("operator:sam"), .text("ticket 2"), .null]),
            ])

            // The current server opens it, migrates it, and every story goes on.
            let harness = Harness(location: location, file: file)
            try await harness.run { api, parts in
                // The app's refresh token from before the upgrade still refreshes (its first login
                // after the upgrade would open a new session instead, and hand out its token).
                let refreshed = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": "refresh-b"])
                #expect(refreshed.status == .ok, "a v1 refresh token after the upgrade: \(refreshed.text)")
                #expect(try await api.me(try refreshed.accessToken).status == .ok)
                func refresh(_ token: String) async throws -> Reply { try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": token]) }
                #expect(try await refresh("refresh-old").error == "invalid_refresh_token", "the pair's older session ended with the upgrade")
                // A token rotated before the upgrade still counts as reuse: it ends the session.
                #expect(try await refresh("refresh-b-used").error == "invalid_refresh_token")
                #expect(try await refresh(try refreshed.refreshToken).error == "invalid_refresh_token")
                let mia = try await api.login(b)
                #expect(mia.status == .ok, "B's login after the upgrade: \(mia.text)")
                #expect(mia["accountId"] as? String == "acct-mia")
                let me = try await api.me(try mia.accessToken)
                #expect(me["transferId"] as? String == b.id, "the device Mia moved to survives as transferId: \(me.text)")
                #expect(try await api.login(a).error == "device_transferred")
                let again = try await api.login(b)
                #expect(try again.refreshToken == mia.refreshToken, "from then on a login renews the session in place")
                #expect(try await api.login(stolen).error == "device_revoked")
                let eli = try await api.login(e)
                #expect(eli["accountId"] as? String == eliID, "the newer of two bindings of one pair survives: \(eli.text)")
                #expect(try eli.accountIDs == [eliID])
                #expect(try await api.login(e, account: foxID).error == "account_not_on_device", "Fox was taken off E")

                let claimed = try await api.claim(email: "yara@example.com", password: password, device: d)
                #expect(claimed.status == .ok, "the pending v1 transfer is claimable: \(claimed.text)")
                #expect(claimed["accountId"] as? String == "acct-yara")
                #expect(try await api.login(c).error == "device_transferred")

                let history = try await parts.store.history(accountID: "acct-yara")
                #expect(history.first?.actor == .support(operator: "sam"))
                #expect(history.map(\.kind) == [.transferIssued, .deviceMoved, .transferClaimed])
                #expect(history.allSatisfy { $0.repeats == 1 && $0.lastAt == nil }, "a row from before v14 is one event")
            }
        }
    }

    @Test("a v3 database of a phone with two accounts upgrades to v4: every pair routes pushes, the device routes all", arguments: StoreKind.available)
    func upgradeFromV3(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation(empty: true) { location, file in
            let phone = Device()
            let now = Timestamp(Date()).milliseconds
            let raw = RawDatabase(location: location)
            try await raw.migrate(through: 3)
            let personal = "a1000000-0000-4000-8000-000000000001", work = "a1000000-0000-4000-8000-000000000002"
            try await raw.run([
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(personal), .text(phone.id), .int(now - 60_000)]),
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(work), .text(work), .int(now - 30_000)]),
                ("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)", [.text(phone.id), .blob(SecretHash(of: phone.secret).bytes), .int(now - 60_000)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)", [.text(phone.id), .text(personal), .int(now - 60_000)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)", [.text(phone.id), .text(work), .int(now - 30_000)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(work), .text(phone.id)]),
            ])
            try await Harness(location: location, file: file).run { api, parts in
                let session = try await api.login(phone)
                #expect(session.status == .ok, "the v3 phone logs in after the upgrade: \(session.text)")
                #expect(try session.accountIDs == [personal, work])
                let listed = try await api.accounts(try session.accessToken)
                #expect((try listed.json["accounts"] as? [[String: Any]])?.map { $0["pushEnabled"] as? Bool } == [true, true], "\(listed.text)")
                let token = String(repeating: "ab", count: 32)
                #expect(try await api.registerPush(try session.accessToken, token: token).status == .noContent)
                let key = try #require(try await parts.service.createServiceKey(name: "backend", by: .support(operator: "test"), reason: "t")).key
                let targets = try await api.call(.post, "/v1/service/push-targets", json: ["accountIds": [personal, work]], token: key)
                let list = try targets.json["targets"] as? [[String: Any]]
                #expect(list?.first?["accountIds"] as? [String] == [personal, work], "mode all and pushes on for both: \(targets.text)")
            }
        }
    }

    @Test("a v5 database of a phone with an Apple-linked account and a pending transfer upgrades to v6: deletion and events work",
          arguments: StoreKind.available)
    func upgradeFromV5(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation(empty: true) { location, file in
            let phone = Device()
            let now = Timestamp(Date()).milliseconds
            let raw = RawDatabase(location: location)
            try await raw.migrate(through: 5)
            let personal = "a5000000-0000-4000-8000-000000000001", work = "a5000000-0000-4000-8000-000000000002"
            let phc = try Argon2Hasher.hashNow("plum-harbor-71-sail", parameters: Argon2Parameters(memoryKiB: 256, iterations: 1, parallelism: 1))
            try await raw.run([
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(personal), .text(phone.id), .int(now - 60_000)]),
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(work), .text(work), .int(now - 30_000)]),
                ("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)", [.text(phone.id), .blob(SecretHash(of: phone.secret).bytes), .int(now - 60_000)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at, last_address) VALUES (?, ?, 'active', ?, ?)",
                 [.text(phone.id), .text(personal), .int(now - 60_000), .text("198.51.100.9")]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)", [.text(phone.id), .text(work), .int(now - 30_000)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(personal), .text(phone.id)]),
                ("INSERT INTO apple_links (account_id, sub, email, is_private_email, linked_at) VALUES (?, ?, ?, ?, ?)",
                 [.text(personal), .text("001234.apple-sub"), .text("mia@privaterelay.appleid.com"), .int(1), .int(now - 20_000)]),
                ("INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
                 [.text("t5"), .text(personal), .text("mia@example.com"), .text("mia@example.com"), .text(phc), .int(now - 10_000), .int(now + 86_400_000)]),
            ])
            try await Harness(location: location, file: file).run { api, parts in
                let session = try await api.login(phone)
                #expect(session.status == .ok, "the v5 phone logs in after the upgrade: \(session.text)")
                #expect(try session.accountID == personal)
                let me = try await api.me(try session.accessToken)
                #expect((me["apple"] as? [String: Any])?["email"] as? String == "mia@privaterelay.appleid.com", "the Apple link survives: \(me.text)")
                #expect(try await api.call(.delete, "/v1/me", token: try session.accessToken).status == .noContent)
                let after = try await api.login(phone)
                #expect(try after.accountID == work, "the other account stays and becomes current: \(after.text)")
                #expect(try await api.login(phone, account: personal).error == "account_deleted")
                #expect(try await api.claim(email: "mia@example.com", password: "plum-harbor-71-sail", device: Device()).error == "invalid_transfer_credentials")
                let report = try #require(try await parts.store.report(accountID: personal, at: Timestamp(Date()), recentEvents: 10))
                #expect(report.apple == nil && report.transfer == nil && report.deletedAt != nil)
                let pair = report.devices.first?.account(personal)
                #expect(pair?.state == .removed)
                #expect(try await parts.store.outbox(limit: 10).map(\.type) == ["account.deleted"])
            }
        }
    }

    @Test("a v6 database with its signing key and a phone upgrades to v7: the key keeps signing, a rotation works, two current keys cannot be",
          arguments: StoreKind.available)
    func upgradeFromV6(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation(empty: true) { location, file in
            let phone = Device()
            let now = Timestamp(Date())
            let raw = RawDatabase(location: location)
            try await raw.migrate(through: 6)
            let key = SigningKeyRecord.generate(now: now - .seconds(86_400), kek: nil)
            let account = "a6000000-0000-4000-8000-000000000001"
            try await raw.run([
                ("INSERT INTO signing_keys (kid, algorithm, private_key, created_at) VALUES (?, ?, ?, ?)",
                 [.text(key.kid), .text(key.algorithm), .text(key.privateKey), .int(key.createdAt.milliseconds)]),
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(account), .text(phone.id), .int(now.milliseconds - 60_000)]),
                ("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)",
                 [.text(phone.id), .blob(SecretHash(of: phone.secret).bytes), .int(now.milliseconds - 60_000)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)",
                 [.text(phone.id), .text(account), .int(now.milliseconds - 60_000)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(account), .text(phone.id)]),
            ])
            try await Harness(location: location, file: file).run { api, parts in
                let session = try await api.login(phone)
                #expect(try session.accountID == account, "the v6 phone logs in after the upgrade: \(session.text)")
                #expect(try TokenText.kid(try session.accessToken) == key.kid, "the v6 key still signs")
                let rotated = try await parts.service.rotateSigningKey(replacing: key.kid, kek: nil, by: .system, reason: "after the upgrade")
                guard case .rotated(let retired, _) = rotated else {
                    Issue.record("\(rotated)")
                    return
                }
                #expect(retired?.kid == key.kid)
            }
            let second = SigningKeyRecord.generate(now: now, kek: nil)
            await #expect(throws: (any Error).self, "the schema allows one current key") {
                try await raw.run([("INSERT INTO signing_keys (kid, algorithm, private_key, created_at) VALUES (?, ?, ?, ?)",
                                    [.text(second.kid), .text(second.algorithm), .text(second.privateKey), .int(now.milliseconds)])])
            }
        }
    }

    @Test("a v7 database with a signed-in phone and a rotated token upgrades to v8: the phone hands off to a sibling, the old token is still refused, a sibling only on an active pair",
          arguments: StoreKind.available)
    func upgradeFromV7(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation(empty: true) { location, file in
            let phone = Device()
            let now = Timestamp(Date()).milliseconds
            let raw = RawDatabase(location: location)
            try await raw.migrate(through: 7)
            let account = "a7000000-0000-4000-8000-000000000001", gone = "a7000000-0000-4000-8000-000000000002"
            try await raw.run([
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(account), .text(phone.id), .int(now - 60_000)]),
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(gone), .text(gone), .int(now - 60_000)]),
                ("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)", [.text(phone.id), .blob(SecretHash(of: phone.secret).bytes), .int(now - 60_000)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)", [.text(phone.id), .text(account), .int(now - 60_000)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at, ended_at) VALUES (?, ?, 'removed', ?, ?)",
                 [.text(phone.id), .text(gone), .int(now - 60_000), .int(now - 30_000)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(account), .text(phone.id)]),
                ("INSERT INTO rotated_refresh_tokens (token_hash, device_id, account_id, session_id, expires_at) VALUES (?, ?, ?, ?, ?)",
                 [.blob(SecretHash(of: "rotated-before-v8").bytes), .text(phone.id), .text(account), .text("s-old"), .int(now + 86_400_000)]),
            ])
            try await Harness(location: location, file: file, configure: HandoffTests.configure).run { api, _ in
                let session = try await api.login(phone)
                #expect(try session.accountID == account, "the v7 phone logs in after the upgrade: \(session.text)")
                let refused = try await api.call(.post, "/v1/tokens/refresh", json: ["refreshToken": "rotated-before-v8"])
                #expect(refused.error == "invalid_refresh_token", "\(refused.text)")
                #expect(try await api.me(try session.accessToken).status == .ok, "a v7 rotated token of an older session revokes nothing")
                let pkce = Handoff.PKCEPair()
                let code = try await HandoffTests.code(api, host: try session.accessToken, pkce: pkce)
                let sibling = try await HandoffTests.redeem(api, code: code, verifier: pkce.verifier)
                #expect(sibling.status == .ok, "\(sibling.text)")
            }
            await #expect(throws: (any Error).self, "the schema keeps sibling sessions on active pairs") {
                try await raw.run([(
                    "INSERT INTO sibling_sessions (device_id, account_id, client_id, session_id, started_at, refresh_hash, refresh_generation, refresh_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [.text(phone.id), .text(gone), .text(HandoffTests.news), .text("s-sib"), .int(now), .blob(SecretHash(of: "t").bytes), .int(0), .int(now + 60_000)])])
            }
            await #expect(throws: (any Error).self, "the schema refuses to end a pair that still has sibling sessions") {
                // Without the pair's own session, so that only the sibling's stands in the way.
                try await raw.run([(
                    """
                    UPDATE device_accounts SET state = 'removed', ended_at = ?, session_id = NULL, session_started_at = NULL, refresh_hash = NULL,
                        refresh_generation = NULL, refresh_expires_at = NULL, key_by_device = NULL, key_by_token = NULL
                    WHERE account_id = ?
                    """, [.int(now), .text(account)])])
            }
        }
    }

    @Test("a v8 database with a pending password transfer and a claimed one upgrades to v9: the transfer is still claimed by its password, codes work, the schema keeps each method's columns",
          arguments: StoreKind.available)
    func upgradeFromV8(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation(empty: true) { location, file in
            let old = Device(), new = Device()
            let now = Timestamp(Date()).milliseconds
            let raw = RawDatabase(location: location)
            try await raw.migrate(through: 8)
            let account = "a8000000-0000-4000-8000-000000000001"
            let password = "plum-harbor-71-sail"
            let hasher = Argon2Hasher(parameters: Argon2Parameters(memoryKiB: 256, iterations: 1, parallelism: 1), workers: 1, queueDepth: 4)
            let hash = try await hasher.hash(password)
            try await raw.run([
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(account), .text(old.id), .int(now - 60_000)]),
                ("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)", [.text(old.id), .blob(SecretHash(of: old.secret).bytes), .int(now - 60_000)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)", [.text(old.id), .text(account), .int(now - 60_000)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(account), .text(old.id)]),
                ("""
                 INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at, ended_at, claimed_by_device)
                 VALUES (?, ?, ?, ?, ?, 'claimed', ?, ?, ?, ?)
                 """, [.text("t-old"), .text(account), .text("Old@Example.com"), .text("old@example.com"), .text(hash), .int(now - 50_000),
                       .int(now + 3_600_000), .int(now - 40_000), .text(old.id)]),
                ("""
                 INSERT INTO transfers (id, account_id, email, email_key, password_hash, state, created_at, expires_at)
                 VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)
                 """, [.text("t-pending"), .text(account), .text("Mia@Example.com"), .text("mia@example.com"), .text(hash), .int(now - 30_000),
                       .int(now + 3_600_000)]),
            ])
            try await Harness(location: location, file: file).run { api, _ in
                let onOld = try await api.login(old)
                #expect(onOld["migrationFlag"] as? Bool == true, "the v8 transfer is still pending: \(onOld.text)")
                let pending = try #require(try await api.me(try onOld.accessToken)["transfer"] as? [String: Any])
                #expect(pending["method"] as? String == "password" && pending["email"] as? String == "Mia@Example.com", "\(pending)")
                let claimed = try await api.claim(email: "mia@example.com", password: password, device: new)
                #expect(claimed.status == .ok, "the v8 transfer is claimed with its password: \(claimed.text)")
                let onNew = try await api.login(new)
                let code = try await api.call(.put, "/v1/me/transfer", json: ["method": "code"], token: try onNew.accessToken)
                #expect(code.status == .created, "\(code.text)")
                #expect(try await api.call(.post, "/v1/transfers/claim", json: [
                    "transferCode": try code.string("transferCode"), "deviceId": old.id, "deviceSecret": old.secret,
                ]).error == "device_retired", "the code reaches the claim's device checks")
            }
            // The same row as a valid code transfer is accepted: the refusals below are the method checks.
            try await raw.run([(
                "INSERT INTO transfers (id, account_id, method, code_hash, state, created_at, expires_at, ended_at) VALUES (?, ?, 'code', ?, 'cancelled', ?, ?, ?)",
                [.text("t-good"), .text(account), .blob(SecretHash(of: "c").bytes), .int(now), .int(now), .int(now)])])
            await #expect(throws: (any Error).self, "a code transfer has no email") {
                try await raw.run([(
                    "INSERT INTO transfers (id, account_id, method, email, email_key, code_hash, state, created_at, expires_at, ended_at) VALUES (?, ?, 'code', ?, ?, ?, 'cancelled', ?, ?, ?)",
                    [.text("t-bad"), .text(account), .text("x@example.com"), .text("x@example.com"), .blob(SecretHash(of: "c2").bytes), .int(now), .int(now), .int(now)])])
            }
            await #expect(throws: (any Error).self, "a password transfer has a password hash") {
                try await raw.run([(
                    "INSERT INTO transfers (id, account_id, email, email_key, state, created_at, expires_at, ended_at) VALUES (?, ?, ?, ?, 'cancelled', ?, ?, ?)",
                    [.text("t-bad2"), .text(account), .text("x@example.com"), .text("x@example.com"), .int(now), .int(now), .int(now)])])
            }
        }
    }

    @Test("a v13 database whose phone created accounts an hour ago upgrades to v15: they name no creating device and are not counted; new ones are",
          arguments: StoreKind.available)
    func upgradeFromV13(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation(empty: true) { location, file in
            let phone = Device()
            let hourAgo = Timestamp(Date()).milliseconds - 3_600_000
            let raw = RawDatabase(location: location)
            try await raw.migrate(through: 13)
            let ids = (1...10).map { String(format: "a1300000-0000-4000-8000-%012d", $0) }
            var rows: [(String, [Value])] = [
                ("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)", [.text(phone.id), .blob(SecretHash(of: phone.secret).bytes), .int(hourAgo)])
            ]
            for (i, id) in ids.enumerated() {
                let at = Value.int(hourAgo + Int64(i))
                rows += [
                    ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(id), .text(i == 0 ? phone.id : id), at]),
                    i == 0
                        ? ("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)", [.text(phone.id), .text(id), at])
                        : ("INSERT INTO device_accounts (device_id, account_id, state, added_at, ended_at) VALUES (?, ?, 'removed', ?, ?)",
                           [.text(phone.id), .text(id), at, at]),
                ]
            }
            rows.append(("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(ids[0]), .text(phone.id)]))
            try await raw.run(rows)
            try await Harness(location: location, file: file).run { api, _ in
                #expect(try await api.login(phone).accountID == ids[0])
                let made = try await api.login(phone, newAccount: true)
                #expect(made.status == .created, "the ten creations of v13 are not counted: \(made.text)")
                let creators = try await raw.strings(
                    "SELECT COALESCE(created_on_device_id, 'none') FROM accounts ORDER BY created_at, id")
                #expect(creators == Array(repeating: "none", count: 10) + [phone.id], "\(creators)")
            }
        }
    }

    @Test("a v15 database with an account moved by Sign in with Apple and one linked on its own phone upgrades to v16: the Apple move is remembered, backup keys work, one per account and store, unique by hash",
          arguments: StoreKind.available)
    func upgradeFromV15(kind: StoreKind) async throws {
        try await kind.withDatabaseLocation(empty: true) { location, file in
            let raw = RawDatabase(location: location)
            try await raw.migrate(through: 15)
            let moved = "a1500000-0000-4000-8000-000000000001", own = "a1500000-0000-4000-8000-000000000002"
            let oldPhone = Device(), newPhone = Device(), ownPhone = Device()
            let t0 = Timestamp(Date()).milliseconds - 3_600_000
            let linked = t0 + 1, movedAt = t0 + 2
            func device(_ d: Device) -> (String, [Value]) {
                ("INSERT INTO devices (id, secret_hash, created_at) VALUES (?, ?, ?)", [.text(d.id), .blob(SecretHash(of: d.secret).bytes), .int(t0)])
            }
            try await raw.run([
                device(oldPhone), device(newPhone), device(ownPhone),
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(moved), .text(oldPhone.id), .int(t0)]),
                ("INSERT INTO accounts (id, user_name, created_at) VALUES (?, ?, ?)", [.text(own), .text(ownPhone.id), .int(t0)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at, ended_at) VALUES (?, ?, 'moved', ?, ?)",
                 [.text(oldPhone.id), .text(moved), .int(t0), .int(movedAt)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)", [.text(newPhone.id), .text(moved), .int(movedAt)]),
                ("INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (?, ?, 'active', ?)", [.text(ownPhone.id), .text(own), .int(t0)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(moved), .text(oldPhone.id)]),
                ("UPDATE devices SET retired_at = ? WHERE id = ?", [.int(movedAt), .text(oldPhone.id)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(moved), .text(newPhone.id)]),
                ("UPDATE devices SET current_account_id = ? WHERE id = ?", [.text(own), .text(ownPhone.id)]),
                ("INSERT INTO apple_links (account_id, sub, linked_at) VALUES (?, ?, ?)", [.text(moved), .text("001500.moved.0101"), .int(linked)]),
                ("INSERT INTO apple_links (account_id, sub, linked_at) VALUES (?, ?, ?)", [.text(own), .text("001500.own.0101"), .int(linked)]),
                ("INSERT INTO audit_events (at, kind, account_id, device_id, actor) VALUES (?, 'apple.moved', ?, ?, 'device')",
                 [.int(movedAt), .text(moved), .text(newPhone.id)]),
            ])
            try await Harness(location: location, file: file).run { api, parts in
                let links = try await raw.strings(
                    "SELECT account_id || ' ' || COALESCE(CAST(moved_at AS TEXT), 'none') FROM apple_links ORDER BY account_id")
                #expect(links == ["\(moved) \(movedAt)", "\(own) none"], "the Apple move is read back from the audit trail: \(links)")
                let link = try await parts.store.appleLink(sub: "001500.moved.0101")
                #expect(link?.movedAt == Timestamp(milliseconds: movedAt))

                let session = try await api.login(ownPhone)
                #expect(try session.accountID == own)
                let made = try await api.call(.put, "/v1/me/backup-key", json: ["store": "block-store"], token: try session.accessToken)
                #expect(made.status == .created, "\(made.text)")
                let me = try await api.me(try session.accessToken)
                #expect(me["waysBack"] as? [String] == ["apple", "backupKey"], "\(me.text)")
                let b = Device()
                let claimed = try await api.call(
                    .post, "/v1/transfers/claim", json: ["backupKey": try made.string("backupKey"), "deviceId": b.id, "deviceSecret": b.secret])
                #expect(claimed.status == .ok && (try? claimed.accountID) == own, "\(claimed.text)")
            }
            // The invariants hold in the schema itself, whatever the code does.
            let hash = Value.blob(SecretHash(of: "a key").bytes)
            let insert = "INSERT INTO backup_keys (account_id, store, key_hash, created_at) VALUES (?, ?, ?, ?)"
            try await raw.run([(insert, [.text(moved), .text("icloud-keychain"), hash, .int(t0)])])
            await #expect(throws: (any Error).self, "one key per account and store") {
                try await raw.run([(insert, [.text(moved), .text("icloud-keychain"), .blob(SecretHash(of: "another").bytes), .int(t0)])])
            }
            await #expect(throws: (any Error).self, "a hash leads to one account") {
                try await raw.run([(insert, [.text(own), .text("icloud-keychain"), hash, .int(t0)])])
            }
            await #expect(throws: (any Error).self, "only the two stores") {
                try await raw.run([(insert, [.text(own), .text("dropbox"), .blob(SecretHash(of: "third").bytes), .int(t0)])])
            }
            await #expect(throws: (any Error).self, "a SHA-256, 32 bytes") {
                try await raw.run([(insert, [.text(own), .text("icloud-keychain"), .blob([1, 2, 3]), .int(t0)])])
            }
            await #expect(throws: (any Error).self, "used with its device, or neither") {
                try await raw.run([(
                    "INSERT INTO backup_keys (account_id, store, key_hash, created_at, used_at) VALUES (?, ?, ?, ?, ?)",
                    [.text(own), .text("icloud-keychain"), .blob(SecretHash(of: "fourth").bytes), .int(t0), .int(t0)])])
            }
        }
    }
}
