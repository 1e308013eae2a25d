import Foundation

extension TransferClient {
    // MARK: Backup keys

    /// On a new phone: brings the account of a backup key found in the user's synchronized store
    /// (``StartingPoint/backupsFound(_:)``), after the user confirmed ("Continue as Mia?"):
    /// `POST /v1/transfers/claim` with `backupKey`. The account moves as in any claim (its old
    /// phone hears ``TransferError/Code/deviceTransferred``), the key is used up, and this phone
    /// makes the account a new one (with the same display name).
    ///
    /// A key that no longer works (used by another phone, replaced, deleted, or its account
    /// deleted: the service answers `401` for all) is removed from the synchronized store, and
    /// ``TransferError/Code/invalidTransferCredentials`` is thrown: offer the next backup, if
    /// ``startingPoint()`` still finds one, else start fresh with ``launch()``.
    ///
    /// - Throws: ``TransferError/Code/invalidTransferCredentials``, ``TransferError/Code/rateLimited``,
    ///   and the claim's device errors (``TransferError/Code/deviceHasAccount``, …).
    @discardableResult
    public func claim(backup: AccountBackup, existingAccounts: ClaimChoice = .fail) async throws -> Account {
        do {
            return try await claim(.claimTransfer, choice: existingAccounts, backup: backup) { identity in
                ClaimRequest(
                    backupKey: backup.key, deviceId: identity.deviceId, deviceSecret: identity.deviceSecret,
                    replaceExistingAccount: existingAccounts.replaceExistingAccount, addAccount: existingAccounts.addAccount,
                    abandonExisting: existingAccounts.abandonExisting)
            }
        } catch let error as TransferError where error.code == .invalidTransferCredentials {
            try? backupShelf?.remove(backup.accountId, ifStill: backup.key)
            throw error
        }
    }

    /// The name a new phone shows for the account ("Continue as Mia?"), kept with its backup key
    /// in the synchronized store. TransferKit never asks the service for it: give what the user
    /// would recognise (their profile name in your app), and call again when it changes.
    ///
    /// - Parameter accountId: the account (the current one when nil).
    public func setDisplayName(_ name: String?, of accountId: String? = nil) throws {
        let id = try resolve(accountId)
        do {
            if let name {
                try credentials.write(Data(name.utf8), for: StoreKey.displayName(id))
            } else {
                try credentials.remove(StoreKey.displayName(id))
            }
        } catch {
            throw storageUnavailable(error)
        }
        guard backupKeysEnabled, let shelf = backupShelf, var stored = try? shelf.backup(of: id) else { return }
        stored.displayName = name
        try? shelf.write(stored)
    }

    /// Turns backup keys on or off for this phone's accounts (e.g. a switch in the app's
    /// settings): on makes the missing ones; off deletes the keys of this phone's accounts, on the
    /// service (`DELETE /v1/me/backup-key`, sent for every account whatever the synchronized store
    /// holds) and in the synchronized store. An item whose deletion on the service failed is kept,
    /// and deleted again at the next launch. Also a ``TransferClient`` initialiser's `backupKeys:`,
    /// applied at each launch. The switch is not stored: pass the app's saved value at every start.
    public func setBackupKeys(enabled: Bool) async {
        backupKeysEnabled = enabled
        await keepBackupKeys(deleteEverywhere: !enabled)
    }

    /// Whether TransferKit keeps backup keys (the app's switch).
    public var backupKeysAreEnabled: Bool { backupKeysEnabled }

    /// Brings the synchronized store in line with this phone's accounts and the app's switch:
    /// on, each account without a backup key gets one; off, each of this phone's accounts' keys
    /// is deleted (`deleteEverywhere`: on the service for every account, item or not). Failures
    /// (no network, a locked store) are left for the next launch.
    ///
    /// One run at a time: a run waits for the one before it, so that two callers (a launch and
    /// the app's switch) never make two keys for one account.
    func keepBackupKeys(deleteEverywhere: Bool = false) async {
        let previous = backupKeysRun
        let run = Task {
            await previous?.value
            await self.keepBackupKeysNow(deleteEverywhere: deleteEverywhere)
        }
        backupKeysRun = run
        await run.value
    }

    private func keepBackupKeysNow(deleteEverywhere: Bool) async {
        guard let shelf = backupShelf, identity != nil, let found = try? shelf.all() else { return }
        let here = accountList.map(\.id)
        if backupKeysEnabled {
            for id in here where !found.contains(where: { $0.accountId == id }) {
                try? await makeBackupKey(for: id)
            }
        } else {
            for id in here where deleteEverywhere || found.contains(where: { $0.accountId == id }) {
                try? await deleteBackupKey(of: id)
            }
        }
    }

    /// Makes the account's backup key on the service and keeps it in the synchronized store,
    /// with the display name the app gave. When the item cannot be written the key just made is
    /// deleted again: the service must not count a key as a way back that no phone holds.
    func makeBackupKey(for accountId: String) async throws {
        guard let shelf = backupShelf else { return }
        let response = try await request(
            .makeBackupKey, as: accountId, body: BackupKeyRequest(store: BackupShelf.wireStore))
        let body = try Wire.decode(BackupKeyBody.self, from: response)
        let name = (try? credentials.read(StoreKey.displayName(accountId))).flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) }
        do {
            try shelf.write(StoredBackup(
                accountId: accountId.lowercased(), key: body.backupKey, displayName: name, createdAt: body.createdAt))
        } catch {
            _ = try? await request(.deleteBackupKey, as: accountId, query: ["store": BackupShelf.wireStore])
            throw error
        }
    }

    /// Deletes the account's backup key on the service (while the account is on this phone) and
    /// in the synchronized store: the account leaves by the user's choice, or backups are off.
    ///
    /// The `DELETE` (idempotent) is sent whatever the synchronized store holds: its item may be
    /// gone (removed on another phone, a write that failed) while the service still counts the
    /// key. When the `DELETE` fails (no network, `429`, …) it is thrown and the item kept: the
    /// key still lives on the service, and the phone must still hold it.
    func deleteBackupKey(of accountId: String) async throws {
        guard let shelf = backupShelf else { return }
        _ = try await request(.deleteBackupKey, as: accountId, query: ["store": BackupShelf.wireStore])
        try? shelf.remove(accountId)
    }

    /// The backups a phone with nothing of its own offers; empty when backup keys are off.
    func offeredBackups() throws -> [AccountBackup] {
        guard backupKeysEnabled, let shelf = backupShelf else { return [] }
        return try shelf.all().map(\.backup)
    }

    // MARK: Claims in flight

    /// Keeps the claim about to be sent, so that a kill before its answer is repeated at the next launch.
    func recordClaimInFlight(_ body: Data, choice: ClaimChoice, backup: AccountBackup?) {
        let pending = ClaimInFlight(
            body: body, choice: choice.rawValue, backupAccountId: backup?.accountId, backupKey: backup?.key,
            displayName: backup?.displayName)
        // A failed write only loses the repeat: the next launch still finds an account the claim won.
        try? credentials.write(Wire.encode(pending), for: StoreKey.claimInFlight)
    }

    func claimLanded() {
        try? credentials.remove(StoreKey.claimInFlight)
    }

    /// Repeats a claim whose answer never came (the app killed, the network gone), before the
    /// launch logs in: the service answers the device that won it with the session for as long as
    /// the account is on the phone, so the launch that follows lands in the account. A claim that
    /// had not reached the service is made now (the user confirmed it).
    ///
    /// A network failure, `408`, `429` or `5xx` is thrown and the claim kept for the next launch.
    /// A refusal (`401`, `409`, …) forgets the claim (a backup key's item is removed); when the phone holds no account of its own it is
    /// thrown: ``startingPoint()`` then says what the phone holds, as before the claim.
    func resumeClaimInFlight() async throws {
        let pending: ClaimInFlight?
        do {
            pending = try credentials.read(ClaimInFlight.self, StoreKey.claimInFlight)
        } catch let error as StorageError where error.kind == .undecodable {
            try? credentials.remove(StoreKey.claimInFlight)
            return
        } catch {
            return  // the store cannot be read now: the launch reports it
        }
        // This process's own claim, still waiting for its answer: it is not repeated beside it.
        guard let pending, claimsInProgress == 0 else { return }
        let before: [Account]
        do {
            try restoreIfNeeded()
            before = accountList
        } catch {
            return  // the store cannot be read now: the launch reports it
        }
        claimsInProgress += 1
        defer { claimsInProgress -= 1 }
        let response = try await send(.claimTransfer, body: pending.body)
        // Not an answer to the claim (the service busy or limiting): it stays for the next launch.
        if !response.isSuccess, Self.claimAnswerDeferred(response.status) { throw TransferError(response: response) }
        claimLanded()
        let backup = pending.backupAccountId.flatMap { id in
            pending.backupKey.map { AccountBackup(accountId: id, displayName: pending.displayName, createdAt: now(), key: $0) }
        }
        if response.isSuccess, let session = try? Wire.decode(SessionBody.self, from: response) {
            // The same steps as a claim whose answer came at once, with the user's choice.
            let choice = pending.choice.flatMap(ClaimChoice.init(rawValue:)) ?? .fail
            _ = await claimWon(session, choice: choice, before: before, backup: backup)
            return
        }
        // Refused: a backup key's item is dead, not one to offer again.
        if let backup, response.status == 401 { try? backupShelf?.remove(backup.accountId, ifStill: backup.key) }
        let stored = try? readStores()
        let ownAccounts = stored.flatMap { state in
            state.list.flatMap { $0.deviceId == state.identity?.deviceId ? $0.accounts : nil }
        } ?? []
        if ownAccounts.isEmpty { throw TransferError(response: response) }
    }

    /// Whether a claim's answer with `status` says nothing about the claim (`408`, `429`, `5xx`):
    /// the claim is kept and repeated later. Every other answer (a session, `401`, `409`, …) settles it.
    static func claimAnswerDeferred(_ status: Int) -> Bool {
        status == 408 || status == 429 || status >= 500
    }

    /// Whether a claim waits to be repeated (``startingPoint()`` then answers `returning`).
    /// This process's own claim still running is not one: its answer is on the way.
    func hasClaimInFlight() -> Bool {
        claimsInProgress == 0 && ((try? credentials.read(StoreKey.claimInFlight)) ?? nil) != nil
    }
}
