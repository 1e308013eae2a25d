import Crypto
import Foundation
import Synchronization
import Testing
import TransferCore
@testable import TransferHTTP
import TransferSettings
@testable import TransferTestSupport

/// API.md "Security round 3", signing keys at rest: with `--key-encryption-key-file` the
/// signing keys are stored sealed (AES-256-GCM, the kid as associated data), plain ones are
/// sealed when a node starts, a node refuses to start on keys it cannot open, and `transfer
/// keys rotate-kek` moves them to another key-encryption key. On every store.
@Suite("Signing keys at rest")
struct KeyEncryptionTests {
    /// A key-encryption key and its file (base64 and a line break, as `openssl rand -base64 32 >FILE` writes it).

    /// The `signing_keys` rows as a backup holds them: kid and private_key, oldest first.
    static func rows(_ harness: Harness) async throws -> [(kid: String, privateKey: String)] {
        let raw = RawDatabase(location: harness.configuration.database)
        let kids = try await raw.strings("SELECT kid FROM signing_keys ORDER BY created_at, kid")
        let keys = try await raw.strings("SELECT private_key FROM signing_keys ORDER BY created_at, kid")
        return Array(zip(kids, keys))
    }

    /// A harness on `harness`'s database with `kek` (nil: none), as a node started again.
    static func restarted(_ harness: Harness, kek: KeyEncryptionKey?) -> Harness {
        Harness(location: harness.configuration.database, file: harness.database) {
            $0.keyEncryptionKey = kek
            KeyRotationTests.fastPolling(&$0)
        }
    }

    /// A node on `harness`'s database with `kek` (nil: none) rotates once, so that a retired
    /// key is published beside the current one, then logs `device` in: its access token, and the node's log.
    static func tokenAfterARotation(
        _ harness: Harness, kek: KeyEncryptionKey?, device: Device = Device()
    ) async throws -> (token: String, logs: LogCollector) {
        let node = restarted(harness, kek: kek)
        let token = Mutex<String?>(nil)
        try await node.run { api, parts in
            _ = try await parts.service.rotateSigningKey(replacing: nil, kek: kek, by: .system, reason: "a retired key beside the current")
            #expect(try await KeyRotationTests.eventually { try await KeyRotationTests.published(api).count == 2 })
            let issued = try await api.login(device).accessToken
            token.withLock { $0 = issued }
        }
        return (try #require(token.withLock { $0 }), node.logs)
    }

    /// The one-line start-up error of a node on `harness`'s database, or nil when it started.
    static func startFailure(_ harness: Harness) async -> String? {
        do {
            try await harness.run { _, _ in }
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test("a database backup holds no usable private key: every row is sealed under the key-encryption key, nothing secret in the log",
          arguments: StoreKind.available)
    func backupHoldsNoKey(kind: StoreKind) async throws {
        let kek = try KEKFile()
        defer { kek.remove() }
        try await withHarness(kind) { harness in
            let logs = try await Self.tokenAfterARotation(harness, kek: kek.key).logs.all
            let rows = try await Self.rows(harness)
            #expect(rows.count == 2)
            for row in rows {
                #expect(row.privateKey.hasPrefix("v1.aesgcm:\(kek.key.id):"), "\(row.kid) is stored as \(row.privateKey.prefix(12))…")
                #expect(Data(base64Encoded: row.privateKey) == nil, "the column is not a raw key")
                // What the key-encryption key opens is the key the kid names: the seal holds the key, and only it.
                let record = SigningKeyRecord(kid: row.kid, algorithm: "EdDSA", privateKey: row.privateKey, createdAt: Timestamp(milliseconds: 0))
                let key = try Curve25519.Signing.PrivateKey(rawRepresentation: try record.rawPrivateKey(kek.key))
                #expect(SigningKeyRecord.kid(for: key.publicKey) == row.kid)
                #expect(throws: SigningKeyAtRestError.keyEncryptionKeyNeeded(kekID: kek.key.id)) { try record.rawPrivateKey(nil) }
                #expect(!logs.contains(key.rawRepresentation.base64EncodedString()), "a private key was logged")
            }
            #expect(!logs.contains(kek.base64), "the key-encryption key was logged")
            #expect(!logs.contains("stored unencrypted"), "no warning with the flag")
        }
    }

    @Test("a node started with the flag on plain keys encrypts them all in one go, once; tokens issued before still verify",
          arguments: StoreKind.available)
    func plainKeysEncryptedAtStart(kind: StoreKind) async throws {
        let kek = try KEKFile()
        defer { kek.remove() }
        try await withHarness(kind) { plain in
            let device = Device()
            let (token, logs) = try await Self.tokenAfterARotation(plain, kek: nil, device: device)
            let warnings = logs.lines.withLock { $0.filter { $0.contains("stored unencrypted") } }
            #expect(warnings.count == 1 && warnings[0].hasPrefix("warning "), "one warning at start: \(warnings)")
            let plainRows = try await Self.rows(plain)
            #expect(plainRows.allSatisfy { Data(base64Encoded: $0.privateKey)?.count == 32 })

            // Two nodes start together with the flag: the keys are sealed once.
            let nodes = [Self.restarted(plain, kek: kek.key), Self.restarted(plain, kek: kek.key)]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for node in nodes {
                    group.addTask {
                        try await node.run { api, _ in
                            let me = try await api.me(token), signed = try await api.login(device).accessToken
                            #expect(me.status == .ok, "a token of the plain key verifies after it was sealed")
                            #expect(try TokenText.kid(signed) == TokenText.kid(token), "the same key signs")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let sealed = try await Self.rows(plain)
            #expect(sealed.map(\.kid) == plainRows.map(\.kid), "no key added or lost")
            #expect(sealed.allSatisfy { $0.privateKey.hasPrefix("v1.aesgcm:\(kek.key.id):") }, "the retired key too")
            let events = try await RawDatabase(location: plain.configuration.database).strings(
                "SELECT actor || ' ' || reason FROM audit_events WHERE kind = 'signing_key.encrypted'")
            #expect(events.count == 1 && events[0].hasPrefix("system 2 signing key(s) encrypted with key-encryption key \(kek.key.id)"), "\(events)")
            #expect(!events.joined().contains(kek.base64))
        }
    }

    @Test("a node refuses to start, in one line naming the flag, on keys under another key-encryption key or with none",
          arguments: StoreKind.available)
    func wrongKEKRefused(kind: StoreKind) async throws {
        let kek = try KEKFile(), other = try KEKFile()
        defer { kek.remove(); other.remove() }
        try await withHarness(kind, configure: { $0.keyEncryptionKey = kek.key }) { harness in
            try await harness.run { api, _ in _ = try await api.login(Device()) }
            let rows = try await Self.rows(harness)

            let wrong = try #require(await Self.startFailure(Self.restarted(harness, kek: other.key)), "started with another key-encryption key")
            #expect(wrong == "--key-encryption-key-file: the signing keys are encrypted with key-encryption key \(kek.key.id), not with the one given (\(other.key.id)); give the file of \(kek.key.id) (transfer keys rotate-kek moves the keys to another)")
            let none = try #require(await Self.startFailure(Self.restarted(harness, kek: nil)), "started without a key-encryption key")
            #expect(none == "the signing keys are encrypted with key-encryption key \(kek.key.id), and no key-encryption key was given; give its file with --key-encryption-key-file (or TRANSFER_KEY_ENCRYPTION_KEY_FILE)")
            for message in [wrong, none] {
                #expect(!message.contains("\n") && !message.contains(kek.base64) && !message.contains(other.base64))
            }
            #expect(try await Self.rows(harness).map(\.privateKey) == rows.map(\.privateKey), "a refused start changes nothing")
        }
    }

    @Test("transfer keys rotate-kek re-encrypts every key in one transaction, audited; the node then starts with the new file, not the old",
          arguments: StoreKind.available)
    func rotateKEK(kind: StoreKind) async throws {
        let old = try KEKFile(), new = try KEKFile()
        defer { old.remove(); new.remove() }
        try await withHarness(kind) { harness in
            let device = Device()
            let token = try await Self.tokenAfterARotation(harness, kek: old.key, device: device).token
            let database = harness.databaseArgument
            let unchanged = try await Self.rows(harness)

            // Without the old file the sealed keys cannot be opened: nothing changes.
            let blind = try CLI.transfer(["keys", "rotate-kek", "--new-key-file", new.path, "--reason", "yearly"], database: database)
            #expect(blind.code == 2 && blind.err.contains("--key-encryption-key-file") && lines(of: blind.err).count == 1, "\(blind)")
            let bad = try CLI.transfer(["keys", "rotate-kek", "--new-key-file", "/nonexistent", "--reason", "yearly"], database: database)
            #expect(bad.code == 2 && bad.err.contains("--new-key-file: cannot read '/nonexistent'"), "\(bad)")
            #expect(try await Self.rows(harness).map(\.privateKey) == unchanged.map(\.privateKey))

            let run = try CLI.transfer(
                ["keys", "rotate-kek", "--new-key-file", new.path, "--key-encryption-key-file", old.path, "--reason", "ticket 77", "--json"],
                database: database)
            #expect(run.code == 0, "\(run)")
            #expect(try run.json["reencrypted"] as? Int == 2 && run.json["keyEncryptionKey"] as? String == new.key.id, "\(run.out)")
            let rows = try await Self.rows(harness)
            #expect(rows.map(\.kid) == unchanged.map(\.kid))
            #expect(rows.allSatisfy { $0.privateKey.hasPrefix("v1.aesgcm:\(new.key.id):") }, "\(rows.map { $0.privateKey.prefix(24) })")
            let again = try CLI.transfer(
                ["keys", "rotate-kek", "--new-key-file", new.path, "--key-encryption-key-file", old.path, "--reason", "twice"], database: database)
            #expect(again.code == 0 && again.out.contains("already"), "\(again)")

            let listed = try CLI.transfer(["keys", "list", "--json"], database: database)
            let keys = try #require(try listed.json["keys"] as? [[String: Any]])
            #expect(keys.allSatisfy { $0["encryptedWith"] as? String == new.key.id }, "\(listed.out)")

            let events = try await RawDatabase(location: harness.configuration.database).strings(
                "SELECT actor || ' ' || reason FROM audit_events WHERE kind = 'signing_key.encrypted'")
            #expect(events.count == 1, "\(events)")
            #expect(events.first?.hasPrefix("operator:agent-smith 2 signing key(s) encrypted with key-encryption key \(new.key.id) (was: \(old.key.id)): ticket 77") == true, "\(events)")
            for secret in [old.base64, new.base64] + unchanged.map(\.privateKey) + rows.map(\.privateKey) {
                #expect(!(blind.out + blind.err + run.out + run.err + again.out + listed.out + events.joined()).contains(secret), "a key was printed")
            }

            #expect(await Self.startFailure(Self.restarted(harness, kek: old.key))?.contains("encrypted with key-encryption key \(new.key.id)") == true,
                    "the old file no longer starts a node")
            try await Self.restarted(harness, kek: new.key).run { api, _ in
                let me = try await api.me(token), signed = try await api.login(device).accessToken
                #expect(me.status == .ok, "a token signed before the re-encryption verifies")
                #expect(try TokenText.kid(signed) == TokenText.kid(token))
            }
        }
    }

    @Test("after rotate-kek a node still on the old file keeps signing with the keys it holds, says why once, and cannot add a key under the old file",
          arguments: StoreKind.available)
    func nodeOnTheOldFile(kind: StoreKind) async throws {
        let old = try KEKFile(), new = try KEKFile()
        defer { old.remove(); new.remove() }
        try await withHarness(kind, configure: { $0.keyEncryptionKey = old.key }) { harness in
            try await harness.run { _, parts in
                let logs = LogCollector()  // this watcher's own, apart from the node's
                let watcher = SigningKeyWatcher(
                    service: parts.service, tokenBox: TokenBox(), kek: old.key, issuer: "transfer-server", audience: "transfer-api",
                    accessTTL: .seconds(900), interval: .milliseconds(10), maxAge: nil, logger: logs.logger)
                watcher.tokenBox.set(try await TokenService.load(
                    store: parts.store, kek: old.key, issuer: "transfer-server", audience: "transfer-api", accessTTL: .seconds(900),
                    now: harness.clock.now()))
                let signing = try watcher.tokenBox.tokens.currentKid

                #expect(try await parts.service.reencryptSigningKeys(new: new.key, old: old.key, by: .system, reason: "yearly")
                    == .reencrypted(count: 1, of: 1))
                #expect(try await parts.service.rotateSigningKey(replacing: nil, kek: old.key, by: .system, reason: "on the old file")
                    == .refused(.otherKeyEncryptionKey(needed: new.key.id, given: old.key.id)), "no key under the old file beside the new")
                guard case .rotated = try await parts.service.rotateSigningKey(replacing: nil, kek: new.key, by: .system, reason: "on the new file") else {
                    Issue.record("no rotation with the new file")
                    return
                }
                let polling = Task { try await watcher.run() }
                func said() -> [String] { logs.lines.withLock { $0.filter { $0.contains("the signing keys cannot be read") } } }
                #expect(try await KeyRotationTests.eventually { !said().isEmpty }, "the node says why it keeps its keys")
                try await Task.sleep(for: .milliseconds(200))  // 20 more polls, or fewer under load
                polling.cancel()
                _ = try? await polling.value
                #expect(try watcher.tokenBox.tokens.currentKid == signing, "the node keeps the key it holds")
                #expect(said().count == 1 && said()[0].contains("encrypted with key-encryption key \(new.key.id)"), "once, not every poll: \(said())")
            }
        }
    }

    @Test("transfer keys rotate seals the new key with the flag, and makes no plain key beside sealed ones", arguments: StoreKind.available)
    func rotateWithKEK(kind: StoreKind) async throws {
        let kek = try KEKFile()
        defer { kek.remove() }
        try await withHarness(kind) { harness in
            try await harness.run { api, _ in _ = try await api.login(Device()) }
            let database = harness.databaseArgument
            // On plain keys with the flag: the new key is sealed, and so is the old one, in the same transaction.
            let rotated = try CLI.transfer(
                ["keys", "rotate", "--key-encryption-key-file", kek.path, "--reason", "encrypt from now on", "--json"], database: database)
            #expect(rotated.code == 0, "\(rotated)")
            let rows = try await Self.rows(harness)
            #expect(rows.count == 2 && rows.allSatisfy { $0.privateKey.hasPrefix("v1.aesgcm:\(kek.key.id):") }, "\(rows.map(\.kid))")

            let plain = try CLI.transfer(["keys", "rotate", "--reason", "no file"], database: database)
            #expect(plain.code == 2 && plain.err.contains("no key was made") && plain.err.contains("--key-encryption-key-file"), "\(plain)")
            #expect(try await Self.rows(harness).count == 2, "no plain key beside sealed ones")
            try await Self.restarted(harness, kek: kek.key).run { api, _ in _ = try await api.login(Device()) }
        }
    }

    @Test("the kid binds each sealed key to its row: keys swapped between rows do not decrypt, and a node refuses to start on them",
          arguments: StoreKind.available)
    func swappedRowsRefused(kind: StoreKind) async throws {
        let kek = try KEKFile()
        defer { kek.remove() }
        let a = SigningKeyRecord.generate(now: Timestamp(milliseconds: 0), kek: kek.key)
        let b = SigningKeyRecord.generate(now: Timestamp(milliseconds: 0), kek: kek.key)
        var swapped = a
        swapped.privateKey = b.privateKey
        #expect(throws: SigningKeyAtRestError.doesNotOpen(kid: a.kid, kekID: kek.key.id)) { try swapped.rawPrivateKey(kek.key) }
        #expect(try a.rawPrivateKey(kek.key).count == 32)

        try await withHarness(kind) { harness in
            _ = try await Self.tokenAfterARotation(harness, kek: kek.key)
            let rows = try await Self.rows(harness)
            try #require(rows.count == 2)
            try await RawDatabase(location: harness.configuration.database).run([
                ("UPDATE signing_keys SET private_key = ? WHERE kid = ?", [.text(rows[1].privateKey), .text(rows[0].kid)]),
                ("UPDATE signing_keys SET private_key = ? WHERE kid = ?", [.text(rows[0].privateKey), .text(rows[1].kid)]),
            ])
            let failure = await Self.startFailure(Self.restarted(harness, kek: kek.key))
            #expect(failure?.hasPrefix("signing key ") == true && failure?.contains("does not decrypt with key-encryption key \(kek.key.id)") == true,
                    "\(failure ?? "started")")
            let rotateKEK = try CLI.transfer(
                ["keys", "rotate-kek", "--new-key-file", try KEKFile().path, "--key-encryption-key-file", kek.path, "--reason", "r"],
                database: harness.databaseArgument)
            #expect(rotateKEK.code == 2 && rotateKEK.err.contains("does not decrypt"), "\(rotateKEK)")
        }
    }

    @Test("the stored forms: plain base64, v1.aesgcm with the key-encryption key's id, anything else unreadable; a key's id and description never show it")
    func storedForms() throws {
        let kek = try #require(KeyEncryptionKey(bytes: Data(repeating: 1, count: 32)))
        #expect(kek.id.count == 12 && kek.id == KeyEncryptionKey(base64: "  " + Data(repeating: 1, count: 32).base64EncodedString() + "\n")?.id)
        #expect("\(kek)" == "KeyEncryptionKey(\(kek.id))")
        #expect(KeyEncryptionKey(bytes: Data(repeating: 1, count: 31)) == nil && KeyEncryptionKey(base64: "not base64") == nil)
        let record = SigningKeyRecord.generate(now: Timestamp(milliseconds: 0), kek: nil)
        guard case .plain(let raw) = record.stored else { Issue.record("\(record.stored)"); return }
        #expect(raw.count == 32)
        let sealed = SigningKeyRecord.generate(now: Timestamp(milliseconds: 0), kek: kek)
        #expect(sealed.stored.kekID == kek.id)
        for text in ["v1.aesgcm:\(kek.id):***", "v2.other:x:y", "v1.aesgcm::AAAA", "a:b"] {
            #expect(StoredPrivateKey(text) == .unreadable, "\(text)")
        }
        let changed = try SigningKeysAtRest.bring([record, sealed], under: kek).get()
        #expect(changed.map(\.kid) == [record.kid], "only the plain key changes")
        #expect(try changed[0].rawPrivateKey(kek) == raw)
    }
}

/// `--key-encryption-key-file` as `ServerConfiguration` and `transfer-server` read it.
extension ConfigurationTests {
    @Test("--key-encryption-key-file: 32 bytes in base64, spaces and line breaks trimmed; anything else refused in one line that never shows the file")
    func keyEncryptionKeyFile() throws {
        let key = Data(RandomToken.randomBytes(32)).base64EncodedString()
        let good = try SecretFile.make("\n " + key + "\n\n")
        defer { try? FileManager.default.removeItem(at: good) }
        let expected = try #require(KeyEncryptionKey(base64: key))
        #expect(try Self.load(["--key-encryption-key-file", good.path]).keyEncryptionKey?.id == expected.id)
        #expect(try Self.load([], ["TRANSFER_KEY_ENCRYPTION_KEY_FILE": good.path]).keyEncryptionKey?.id == expected.id)
        #expect(try Self.load().keyEncryptionKey == nil)

        for content in [Data(RandomToken.randomBytes(16)).base64EncodedString(), Data(RandomToken.randomBytes(33)).base64EncodedString(),
                        "not base64 at all", key + "x", ""] {
            let bad = try SecretFile.make(content)
            defer { try? FileManager.default.removeItem(at: bad) }
            for (arguments, environment, source) in [
                (["--key-encryption-key-file", bad.path], [String: String](), "--key-encryption-key-file"),
                ([], ["TRANSFER_KEY_ENCRYPTION_KEY_FILE": bad.path], "TRANSFER_KEY_ENCRYPTION_KEY_FILE"),
            ] {
                do {
                    _ = try Self.load(arguments, environment)
                    Issue.record("accepted '\(content)'")
                } catch {
                    #expect("\(error)" == "\(source): '\(bad.path)' does not hold 32 bytes in base64 (make one with: openssl rand -base64 32)")
                    if !content.isEmpty { #expect(!"\(error)".contains(content)) }
                }
            }
        }
        #expect(throws: (any Error).self) { try Self.load(["--key-encryption-key-file", "/nonexistent/kek"]) }
    }
}

extension KeyEncryptionTests {
}
