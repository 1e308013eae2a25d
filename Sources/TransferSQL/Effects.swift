import TransferCore

extension Effect {
    /// The statements that make this effect true, in order, for either store. (PostgreSQL
    /// writes `enqueue` effects last, under per-account locks: see `PostgresStore.execute`.)
    public var statements: [SQLText] {
        switch self {
        case .createAccount(let id, let userName, let device, let at):
            return ["INSERT INTO accounts (id, user_name, created_at, created_on_device_id) VALUES (\(id), \(userName), \(at), \(device))"]
        case .createDevice(let id, let secretHash, let at):
            return ["INSERT INTO devices (id, secret_hash, created_at) VALUES (\(id), \(secretHash), \(at))"]
        case .addAccount(let device, let account, let at):
            return [
                """
                INSERT INTO device_accounts (device_id, account_id, state, added_at) VALUES (\(device), \(account), 'active', \(at))
                ON CONFLICT (device_id, account_id) DO UPDATE
                SET state = 'active', added_at = excluded.added_at, ended_at = NULL, ended_reason = NULL, push_enabled = 1
                """
            ]
        case .setCurrentAccount(let device, let account):
            return ["UPDATE devices SET current_account_id = \(account) WHERE id = \(device)"]
        case .endPair(let device, let account, let state, let reason, let at):
            return [
                "DELETE FROM sibling_sessions WHERE device_id = \(device) AND account_id = \(account)",
                """
                UPDATE device_accounts SET state = \(state), ended_at = \(at), ended_reason = \(reason), \(SQLText.noSession)
                WHERE device_id = \(device) AND account_id = \(account) AND state = 'active'
                """,
            ]
        case .retireDevice(let id, let at):
            return [
                "UPDATE devices SET retired_at = \(at) WHERE id = \(id) AND retired_at IS NULL",
                "DELETE FROM push_tokens WHERE device_id = \(id)",
            ]
        case .setMovedTo(let account, let device):
            return ["UPDATE accounts SET moved_to_device_id = \(device) WHERE id = \(account)"]
        case .openSession(let device, let account, let s, let at, let address):
            return [
                """
                UPDATE device_accounts SET session_id = \(s.sessionID), session_started_at = \(s.startedAt), refresh_hash = \(s.refreshHash),
                    refresh_generation = \(s.generation), refresh_expires_at = \(s.expiresAt), key_by_device = \(s.keyByDevice),
                    key_by_token = \(s.keyByToken), last_login_at = \(at), last_address = \(address)
                WHERE device_id = \(device) AND account_id = \(account)
                """
            ]
        case .renewSession(let device, let account, let expiresAt, let at, let address):
            return [
                """
                UPDATE device_accounts SET refresh_expires_at = \(expiresAt), last_login_at = \(at), last_address = \(address)
                WHERE device_id = \(device) AND account_id = \(account)
                """
            ]
        case .recordActivity(let device, let account, let at):
            return ["UPDATE device_accounts SET last_login_at = \(at) WHERE device_id = \(device) AND account_id = \(account)"]
        case .rotateSession(let device, let account, let s, let used, let usedExpiresAt):
            return [
                """
                UPDATE device_accounts SET refresh_hash = \(s.refreshHash), refresh_generation = \(s.generation),
                    refresh_expires_at = \(s.expiresAt), key_by_device = \(s.keyByDevice), key_by_token = \(s.keyByToken)
                WHERE device_id = \(device) AND account_id = \(account) AND session_id = \(s.sessionID)
                """,
                """
                INSERT INTO rotated_refresh_tokens (token_hash, device_id, account_id, session_id, expires_at)
                VALUES (\(used), \(device), \(account), \(s.sessionID), \(usedExpiresAt))
                """,
            ]
        case .closeSession(let device, let account):
            return [
                "UPDATE device_accounts SET \(SQLText.noSession) WHERE device_id = \(device) AND account_id = \(account)",
                "DELETE FROM sibling_sessions WHERE device_id = \(device) AND account_id = \(account)",
            ]
        case .addHandoffCode(let c):
            return [
                """
                INSERT INTO handoff_codes (code_hash, device_id, account_id, host_session_id, client_id, challenge, created_at, expires_at)
                VALUES (\(c.codeHash), \(c.deviceID), \(c.accountID), \(c.hostSessionID), \(c.clientID), \(c.challenge), \(c.createdAt),
                        \(c.expiresAt))
                """
            ]
        case .redeemHandoffCode(let hash, let at, let session):
            return [
                """
                UPDATE handoff_codes SET redeemed_at = \(at), sibling_session_id = \(session)
                WHERE code_hash = \(hash) AND redeemed_at IS NULL
                """
            ]
        case .openSiblingSession(let s):
            return [
                """
                INSERT INTO sibling_sessions (device_id, account_id, client_id, session_id, started_at, refresh_hash, refresh_generation,
                                              refresh_expires_at)
                VALUES (\(s.deviceID), \(s.accountID), \(s.clientID), \(s.sessionID), \(s.startedAt), \(s.refreshHash), \(s.generation),
                        \(s.expiresAt))
                ON CONFLICT (device_id, account_id, client_id) DO UPDATE SET session_id = excluded.session_id, started_at = excluded.started_at,
                    refresh_hash = excluded.refresh_hash, refresh_generation = excluded.refresh_generation,
                    refresh_expires_at = excluded.refresh_expires_at
                """
            ]
        case .rotateSiblingSession(let s, let used, let usedExpiresAt):
            return [
                """
                UPDATE sibling_sessions SET refresh_hash = \(s.refreshHash), refresh_generation = \(s.generation),
                    refresh_expires_at = \(s.expiresAt)
                WHERE session_id = \(s.sessionID)
                """,
                """
                INSERT INTO rotated_refresh_tokens (token_hash, device_id, account_id, session_id, expires_at, client_id)
                VALUES (\(used), \(s.deviceID), \(s.accountID), \(s.sessionID), \(usedExpiresAt), \(s.clientID))
                """,
            ]
        case .closeSiblingSession(let session):
            return ["DELETE FROM sibling_sessions WHERE session_id = \(session)"]
        case .createTransfer(let t):
            var passwordHash: String?, codeHash: [UInt8]?
            switch t.proof {
            case .password(_, _, let hash): passwordHash = hash
            case .code(let hash): codeHash = hash.bytes
            }
            return [
                """
                INSERT INTO transfers (id, account_id, method, email, email_key, password_hash, code_hash, state, created_at, expires_at,
                                       issued_by)
                VALUES (\(t.id), \(t.accountID), \(t.method), \(t.proof.email), \(t.proof.emailKey), \(passwordHash), \(codeHash), 'pending',
                        \(t.createdAt), \(t.expiresAt), \(t.issuedBy))
                """
            ]
        case .endTransfer(let id, let state, let at, let claimedBy):
            return [
                """
                UPDATE transfers SET state = \(state), ended_at = \(at), claimed_by_device = \(claimedBy)
                WHERE id = \(id) AND state = 'pending'
                """
            ]
        case .countFailures(let id, let consecutive, let total, let lockedUntil):
            return [
                """
                UPDATE transfers SET failed_consecutive = \(consecutive), failed_total = \(total), locked_until = \(lockedUntil)
                WHERE id = \(id)
                """
            ]
        case .unlockTransfer(let id):
            return ["UPDATE transfers SET locked_until = NULL, failed_consecutive = 0 WHERE id = \(id)"]
        case .retireSigningKey(let kid, let at):
            return ["UPDATE signing_keys SET retired_at = \(at) WHERE kid = \(kid) AND retired_at IS NULL"]
        case .setSigningKeyPrivateKey(let kid, let privateKey):
            return ["UPDATE signing_keys SET private_key = \(privateKey) WHERE kid = \(kid)"]
        case .addSigningKey(let key):
            return [
                """
                INSERT INTO signing_keys (kid, algorithm, private_key, created_at)
                VALUES (\(key.kid), \(key.algorithm), \(key.privateKey), \(key.createdAt))
                """
            ]
        case .audit(let e):
            guard let key = e.aggregateKey else {
                return [
                    """
                    INSERT INTO audit_events (at, kind, account_id, device_id, transfer_id, actor, reason, client_address)
                    VALUES (\(e.at), \(e.kind), \(e.accountID), \(e.deviceID), \(e.transferID), \(e.actor), \(e.reason), \(e.clientAddress))
                    """
                ]
            }
            // The hour's first such event makes the row; the others count in it.
            return [
                """
                INSERT INTO audit_events (at, kind, account_id, device_id, transfer_id, actor, reason, client_address, aggregate_key)
                VALUES (\(e.at), \(e.kind), \(e.accountID), \(e.deviceID), \(e.transferID), \(e.actor), \(e.reason), \(e.clientAddress), \(key))
                ON CONFLICT (aggregate_key) WHERE aggregate_key IS NOT NULL
                DO UPDATE SET repeats = audit_events.repeats + 1, last_at = excluded.at
                """
            ]
        case .setPushToken(let t):
            // Under the device's lock: its old token for the provider goes, then the token is
            // upserted on its own key, so a token another device holds moves here. Two devices
            // registering one token at once: the second waits for the first's row and moves it.
            return [
                "DELETE FROM push_tokens WHERE device_id = \(t.deviceID) AND provider = \(t.provider) AND token_hash <> \(t.tokenHash)",
                """
                INSERT INTO push_tokens (device_id, provider, token, token_hash, environment, registered_at)
                VALUES (\(t.deviceID), \(t.provider), \(t.token), \(t.tokenHash), \(t.environment), \(t.registeredAt))
                ON CONFLICT (provider, token_hash) DO UPDATE
                SET device_id = excluded.device_id, token = excluded.token, environment = excluded.environment,
                    registered_at = excluded.registered_at
                """,
            ]
        case .removePushToken(let device, let provider):
            return ["DELETE FROM push_tokens WHERE device_id = \(device) AND provider = \(provider)"]
        case .dropPushToken(let provider, let hash, let reportedAt):
            return ["DELETE FROM push_tokens WHERE provider = \(provider) AND token_hash = \(hash) AND registered_at <= \(reportedAt)"]
        case .setPushMode(let device, let mode):
            return ["UPDATE devices SET push_mode = \(mode) WHERE id = \(device)"]
        case .setAccountPush(let device, let account, let enabled):
            return ["UPDATE device_accounts SET push_enabled = \(enabled) WHERE device_id = \(device) AND account_id = \(account)"]
        case .createServiceKey(let name, let hash, let at, let by):
            return ["INSERT INTO service_keys (name, key_hash, created_at, created_by) VALUES (\(name), \(hash), \(at), \(by))"]
        case .revokeServiceKey(let name, let at, let by):
            return ["UPDATE service_keys SET revoked_at = \(at), revoked_by = \(by) WHERE name = \(name) AND revoked_at IS NULL"]
        case .touchServiceKey(let name, let at, let olderThan):
            return [
                """
                UPDATE service_keys SET last_used_at = \(at)
                WHERE name = \(name) AND (last_used_at IS NULL OR last_used_at <= \(olderThan))
                """
            ]
        case .addAppleNonce(let hash, let expiresAt, let now):
            return [
                "DELETE FROM apple_nonces WHERE expires_at <= \(now)",
                "INSERT INTO apple_nonces (nonce_hash, expires_at) VALUES (\(hash), \(expiresAt))",
            ]
        case .consumeAppleNonce(let hash):
            return ["DELETE FROM apple_nonces WHERE nonce_hash = \(hash)"]
        case .addAttestationChallenge(let hash, let expiresAt):
            // Expired ones are left to the pruner: this insert is the whole request.
            return ["INSERT INTO attestation_challenges (challenge_hash, expires_at) VALUES (\(hash), \(expiresAt))"]
        case .consumeAttestationChallenge(let hash):
            return ["DELETE FROM attestation_challenges WHERE challenge_hash = \(hash)"]
        case .recordDeviceAttestation(let device, let a):
            return [
                """
                UPDATE devices SET attestation_platform = \(a.platform), attestation_outcome = \(a.outcome.description),
                    attestation_key_id = \(a.key?.keyID), attestation_public_key = \(a.key?.publicKey), attestation_counter = \(a.key?.counter),
                    attested_at = \(a.at)
                WHERE id = \(device)
                """
            ]
        case .linkApple(let l):
            return [
                """
                INSERT INTO apple_links (account_id, sub, email, is_private_email, linked_at, refresh_token, client_id, email_enabled)
                VALUES (\(l.accountID), \(l.sub), \(l.email), \(l.isPrivateEmail), \(l.linkedAt), \(l.refreshToken), \(l.clientID),
                        \(l.emailEnabled))
                ON CONFLICT (account_id) DO UPDATE SET sub = excluded.sub, email = excluded.email, is_private_email = excluded.is_private_email,
                    linked_at = excluded.linked_at, refresh_token = excluded.refresh_token, client_id = excluded.client_id,
                    email_enabled = excluded.email_enabled,
                    moved_at = CASE WHEN apple_links.sub = excluded.sub THEN apple_links.moved_at ELSE NULL END
                """
            ]
        case .updateAppleEmail(let account, let email, let isPrivate):
            return [
                """
                UPDATE apple_links SET email = COALESCE(\(email), email), is_private_email = COALESCE(\(isPrivate), is_private_email)
                WHERE account_id = \(account)
                """
            ]
        case .unlinkApple(let account):
            return ["DELETE FROM apple_links WHERE account_id = \(account)"]
        case .recordAppleMove(let sub, let at):
            return ["UPDATE apple_links SET moved_at = \(at) WHERE sub = \(sub)"]
        case .setAppleEmailEnabled(let account, let enabled):
            return ["UPDATE apple_links SET email_enabled = \(enabled) WHERE account_id = \(account)"]
        case .recordAppleNotification(let jti, let at):
            // Two deliveries of one jti at once (PostgreSQL): the second meets the primary key,
            // is retried, and finds it handled.
            return ["INSERT INTO apple_notifications (jti, received_at) VALUES (\(jti), \(at))"]
        case .eraseAccount(let id, let at):
            return [
                "UPDATE accounts SET deleted_at = \(at) WHERE id = \(id) AND deleted_at IS NULL",
                "DELETE FROM transfers WHERE account_id = \(id)",
                "DELETE FROM rotated_refresh_tokens WHERE account_id = \(id)",
                "DELETE FROM handoff_codes WHERE account_id = \(id)",
                "DELETE FROM apple_links WHERE account_id = \(id)",
                "DELETE FROM recovery_codes WHERE account_id = \(id)",
                "DELETE FROM backup_keys WHERE account_id = \(id)",
                "UPDATE device_accounts SET last_address = NULL WHERE account_id = \(id)",
                "DELETE FROM audit_events WHERE account_id = \(id)",
            ]
        case .setProtection(let account, let since):
            return ["UPDATE accounts SET protected_at = \(since) WHERE id = \(account)"]
        case .setRecoveryCode(let account, let hash, let at):
            return [
                """
                INSERT INTO recovery_codes (account_id, code_hash, created_at) VALUES (\(account), \(hash), \(at))
                ON CONFLICT (account_id) DO UPDATE
                SET code_hash = excluded.code_hash, created_at = excluded.created_at, used_at = NULL, used_by_device = NULL
                """
            ]
        case .deleteRecoveryCode(let account):
            return ["DELETE FROM recovery_codes WHERE account_id = \(account)"]
        case .useRecoveryCode(let account, let device, let at):
            return ["UPDATE recovery_codes SET used_at = \(at), used_by_device = \(device) WHERE account_id = \(account) AND used_at IS NULL"]
        case .setBackupKey(let account, let store, let hash, let at):
            return [
                """
                INSERT INTO backup_keys (account_id, store, key_hash, created_at) VALUES (\(account), \(store), \(hash), \(at))
                ON CONFLICT (account_id, store) DO UPDATE
                SET key_hash = excluded.key_hash, created_at = excluded.created_at, used_at = NULL, used_by_device = NULL
                """
            ]
        case .deleteBackupKey(let account, let store):
            return ["DELETE FROM backup_keys WHERE account_id = \(account) AND store = \(store)"]
        case .useBackupKey(let account, let store, let device, let at):
            return [
                """
                UPDATE backup_keys SET used_at = \(at), used_by_device = \(device)
                WHERE account_id = \(account) AND store = \(store) AND used_at IS NULL
                """
            ]
        case .takeSlot(let slot):
            return [slot.take]
        case .requireNoOpenTransfer(let accountID, let at):
            return [Queries.openTransferCount(accountID: accountID, at: at)]
        case .giveBackSlot(let slot):
            // The interval the slot took goes back; a budget that refilled since has nothing to give back.
            return [
                """
                UPDATE rate_slots SET window_end = window_end - \(slot.interval.milliseconds), used = used - 1
                WHERE kind = \(slot.kind.rawValue) AND client = \(slot.key) AND used > 0 AND window_end > \(slot.at)
                """
            ]
        case .enqueue(let e):
            return [
                """
                INSERT INTO outbox (id, kind, account_id, type, body, created_at, next_attempt_at, give_up_at)
                VALUES (\(Identifier.make()), \(e.kind), \(e.accountID), \(e.type), \(e.body), \(e.at), \(e.at), \(e.giveUpAt))
                """
            ]
        case .leaseOutbox(let id, let leaseID, let until):
            return ["UPDATE outbox SET lease_id = \(leaseID), leased_until = \(until) WHERE id = \(id)"]
        case .deleteOutbox(let id):
            return ["DELETE FROM outbox WHERE id = \(id)"]
        case .rescheduleOutbox(let id, let attempts, let next, let error):
            return [
                """
                UPDATE outbox SET attempts = \(attempts), next_attempt_at = \(next), last_error = \(error), lease_id = NULL, leased_until = NULL
                WHERE id = \(id)
                """
            ]
        case .failOutbox(let id, let attempts, let error, let at):
            return [
                """
                UPDATE outbox SET state = 'failed', attempts = \(attempts), last_error = \(error), failed_at = \(at), lease_id = NULL,
                    leased_until = NULL
                WHERE id = \(id)
                """
            ]
        case .retryOutbox(let id, let at, let giveUpAt):
            return [
                """
                UPDATE outbox SET state = 'pending', failed_at = NULL, attempts = 0, next_attempt_at = \(at), give_up_at = \(giveUpAt)
                WHERE id = \(id) AND state = 'failed'
                """
            ]
        }
    }
}

extension RateSlot {
    /// Takes one interval of the key's budget (GCRA: `window_end` is the key's theoretical
    /// arrival time, pushed one interval past now or past itself, whichever is later) and
    /// answers the slots in use with this one and the time: one statement, atomic on both
    /// stores, so concurrent requests on any node never count past the limit unseen. Over the
    /// limit the time stays where it was: a refused request takes nothing, also where the
    /// statement runs outside a transaction.
    var take: SQLText {
        let interval = interval.milliseconds
        let next: SQLText = "(CASE WHEN rate_slots.window_end > \(at) THEN rate_slots.window_end ELSE \(at) END + \(interval))"
        // Rounded to the nearest interval: requests that nodes stamped a few milliseconds out of
        // order (each takes its time before its statement runs) still fit a burst of `count`.
        let used: SQLText = "((\(next) - \(at) + \(interval / 2)) / \(interval))"
        return """
            INSERT INTO rate_slots (kind, client, window_end, used) VALUES (\(kind.rawValue), \(key), \(windowEnd), 1)
            ON CONFLICT (kind, client) DO UPDATE SET
                window_end = CASE WHEN \(used) <= \(limit.count) THEN \(next) ELSE rate_slots.window_end END,
                used = \(used)
            RETURNING used, window_end
            """
    }
}

extension Effect {
    /// The statement of an effect whose answer decides whether the transaction goes on
    /// (`takeSlot`): the store runs it instead of `statements` and hands its rows to `check`.
    public var checkedStatement: SQLText? {
        switch self {
        case .takeSlot(let slot): slot.take
        case .requireNoOpenTransfer(let accountID, let at): Queries.openTransferCount(accountID: accountID, at: at)
        default: nil
        }
    }

    /// The effect's statement when it is one (and no outbox message, which PostgreSQL writes
    /// under its per-account lock).
    public var single: SQLText? {
        if case .enqueue = self { return nil }
        let statements = statements
        return statements.count == 1 ? statements[0] : nil
    }

    /// Throws (and so rolls the transaction back) when the answer of `checkedStatement` says
    /// no: a slot over its limit is `rateLimited`.
    public func check<Row: SQLRow>(_ rows: [Row]) throws {
        guard let row = rows.first else { return }
        switch self {
        case .takeSlot(let slot):
            if let refusal = slot.refusal(used: try row.int("used"), windowEnd: try row.time("window_end")) { throw refusal }
        case .requireNoOpenTransfer:
            if try row.int("open") > 0 { throw TransferSetUpMeanwhile() }
        default:
            return
        }
    }
}
