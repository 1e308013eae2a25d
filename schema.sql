-- The current schema of the device-transfer service (SQLite dialect): what to read.
-- The database is built by the migrations Sources/TransferSQLite/Resources/migrations/v*.sql,
-- applied in order at start-up; each schema change is a new one. Tests keep this file equal
-- to a freshly migrated database, and schema.postgres.sql to it.
-- Times are milliseconds since 1970 UTC; ids are lower-case UUID strings.

CREATE TABLE accounts (
    id          TEXT PRIMARY KEY NOT NULL,
    user_name   TEXT NOT NULL UNIQUE,          -- the first device's UUID
    created_at  INTEGER NOT NULL,
    moved_to_device_id TEXT,                   -- the device UUID the account was last moved to (API: transferId)
    deleted_at  INTEGER,                       -- deleted: the row stays as a tombstone, everything else about it is erased
    protected_at INTEGER                       -- since when the app backend protects it: never erased as inactive
);

-- One app install: its deviceId, the SHA-256 of its secret, and the account the app shows.
-- A device whose last account left is retired and never holds an account again (triggers below).
CREATE TABLE devices (
    id                 TEXT PRIMARY KEY NOT NULL,  -- the deviceId
    secret_hash        BLOB NOT NULL,
    created_at         INTEGER NOT NULL,
    current_account_id TEXT,                       -- may name an account moved away, until the app picks another
    retired_at         INTEGER,
    push_mode          TEXT NOT NULL DEFAULT 'all' CHECK (push_mode IN ('all', 'current')),  -- which accounts its push tokens reach
    -- Its attestation, recorded when it created an account while attestation was on (v13):
    attestation_platform TEXT CHECK (attestation_platform IN ('apple', 'android')),  -- NULL: missing
    attestation_outcome TEXT CHECK (attestation_outcome IN ('verified', 'missing') OR attestation_outcome LIKE 'failed: %'),
    attestation_key_id BLOB,                        -- App Attest: SHA-256 of the certified key
    attestation_public_key BLOB,                    -- App Attest: X9.62 uncompressed point
    attestation_counter INTEGER,                    -- App Attest: the signature counter
    attested_at INTEGER,
    FOREIGN KEY (id, current_account_id) REFERENCES device_accounts(device_id, account_id)
);

-- One row per account a device holds or held ('active', or how it left: 'moved' by a claim,
-- 'revoked' by support, 'replaced' by replaceExistingAccount, 'removed' by the app), with the
-- pair's one app session kept in place: a login renews it (one row written), a refresh
-- rotates its token, a logout clears it. The refresh token is never stored: it is derived from
-- the session key, which is stored only wrapped by the device secret and by the current
-- token (see SessionKey.swift).
CREATE TABLE device_accounts (
    device_id          TEXT NOT NULL REFERENCES devices(id),
    account_id         TEXT NOT NULL REFERENCES accounts(id),
    state              TEXT NOT NULL CHECK (state IN ('active', 'moved', 'revoked', 'replaced', 'removed')),
    added_at           INTEGER NOT NULL,
    last_login_at      INTEGER,
    last_address       TEXT,
    ended_at           INTEGER,
    ended_reason       TEXT,
    session_id         TEXT,
    session_started_at INTEGER,
    refresh_hash       BLOB,
    refresh_generation INTEGER,
    refresh_expires_at INTEGER,
    key_by_device      BLOB,
    key_by_token       BLOB,
    push_enabled       INTEGER NOT NULL DEFAULT 1 CHECK (push_enabled IN (0, 1)),
    PRIMARY KEY (device_id, account_id),
    CHECK ((state = 'active') = (ended_at IS NULL)),
    CHECK (state = 'active' OR session_id IS NULL),
    CHECK ((session_id IS NULL) = (refresh_hash IS NULL)),
    CHECK ((session_id IS NULL) = (refresh_expires_at IS NULL)),
    CHECK ((session_id IS NULL) = (refresh_generation IS NULL))
);
-- An account is active on at most one device.
CREATE UNIQUE INDEX device_accounts_one_active_per_account ON device_accounts(account_id) WHERE state = 'active';
CREATE INDEX device_accounts_by_account ON device_accounts(account_id);
CREATE UNIQUE INDEX device_accounts_by_refresh_token ON device_accounts(refresh_hash);

CREATE TRIGGER devices_stay_retired BEFORE UPDATE OF retired_at ON devices
WHEN OLD.retired_at IS NOT NULL AND NEW.retired_at IS NOT OLD.retired_at
BEGIN SELECT RAISE(ABORT, 'a retired device is never bound again'); END;

CREATE TRIGGER devices_retire_empty_only BEFORE UPDATE OF retired_at ON devices
WHEN NEW.retired_at IS NOT NULL
 AND EXISTS (SELECT 1 FROM device_accounts WHERE device_id = NEW.id AND state = 'active')
BEGIN SELECT RAISE(ABORT, 'a device that holds accounts is not retired'); END;

CREATE TRIGGER device_accounts_not_on_retired_insert BEFORE INSERT ON device_accounts
WHEN NEW.state = 'active' AND (SELECT retired_at FROM devices WHERE id = NEW.device_id) IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'a retired device is never bound again'); END;

CREATE TRIGGER device_accounts_not_on_retired_update BEFORE UPDATE OF state ON device_accounts
WHEN NEW.state = 'active' AND (SELECT retired_at FROM devices WHERE id = NEW.device_id) IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'a retired device is never bound again'); END;

-- Refresh tokens a refresh replaced, until they expire: presenting one again revokes its session.
CREATE TABLE rotated_refresh_tokens (
    token_hash BLOB PRIMARY KEY NOT NULL,
    device_id  TEXT NOT NULL,
    account_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    client_id  TEXT                            -- set for a sibling app's session
);

CREATE TABLE transfers (
    id                 TEXT PRIMARY KEY NOT NULL,
    account_id         TEXT NOT NULL REFERENCES accounts(id),
    method             TEXT NOT NULL DEFAULT 'password' CHECK (method IN ('password', 'code')),
    email              TEXT,                   -- as typed, trimmed
    email_key          TEXT,                   -- NFC, lower-case: what emails are compared by
    password_hash      TEXT CHECK (password_hash LIKE '$argon2id$%'),
    code_hash          BLOB CHECK (length(code_hash) = 32),
    state              TEXT NOT NULL CHECK (state IN ('pending', 'claimed', 'cancelled', 'replaced', 'expired', 'voided')),
    created_at         INTEGER NOT NULL,
    expires_at         INTEGER NOT NULL,
    failed_consecutive INTEGER NOT NULL DEFAULT 0 CHECK (failed_consecutive >= 0),
    failed_total       INTEGER NOT NULL DEFAULT 0 CHECK (failed_total >= 0),
    locked_until       INTEGER,
    ended_at           INTEGER,
    claimed_by_device  TEXT,
    issued_by          TEXT NOT NULL DEFAULT 'device',
    CHECK ((state = 'pending') = (ended_at IS NULL)),
    CHECK (CASE method
               WHEN 'password' THEN email IS NOT NULL AND email_key IS NOT NULL AND password_hash IS NOT NULL AND code_hash IS NULL
               ELSE email IS NULL AND email_key IS NULL AND password_hash IS NULL AND code_hash IS NOT NULL END)
);
-- At most one pending transfer per email, and per account (either kind); a code is found by its hash.
CREATE UNIQUE INDEX transfers_one_pending_per_email ON transfers(email_key) WHERE state = 'pending';
CREATE UNIQUE INDEX transfers_one_pending_per_account ON transfers(account_id) WHERE state = 'pending';
CREATE INDEX transfers_by_account ON transfers(account_id);
CREATE INDEX transfers_by_email ON transfers(email_key);
CREATE UNIQUE INDEX transfers_by_code ON transfers(code_hash) WHERE code_hash IS NOT NULL;
CREATE INDEX transfers_claimed_by_device ON transfers(claimed_by_device) WHERE claimed_by_device IS NOT NULL;

CREATE TABLE audit_events (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    at             INTEGER NOT NULL,
    kind           TEXT NOT NULL,
    account_id     TEXT,
    device_id      TEXT,
    transfer_id    TEXT,
    actor          TEXT NOT NULL,              -- 'device' or 'operator:NAME'
    reason         TEXT,
    client_address TEXT
);
CREATE INDEX audit_events_by_account ON audit_events(account_id, id);
CREATE INDEX audit_events_by_time ON audit_events(at);

-- JWT signing keys (Ed25519). Shared through the database so restarts and other nodes
-- keep accepting issued tokens.
CREATE TABLE signing_keys (
    kid         TEXT PRIMARY KEY NOT NULL,
    algorithm   TEXT NOT NULL,
    private_key TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    retired_at  INTEGER
);
-- Exactly one key is current (signs); a rotation retires it and adds the next in one transaction.
CREATE UNIQUE INDEX signing_keys_one_current ON signing_keys ((retired_at IS NULL)) WHERE retired_at IS NULL;

-- A device's push token per provider (a token is on one device at most; the SHA-256 makes it
-- indexable at any length). An account reaches it while it is active on the device, its pushes
-- are on there, and the device's push_mode is 'all' or it is the current account.
CREATE TABLE push_tokens (
    device_id     TEXT NOT NULL REFERENCES devices(id),
    provider      TEXT NOT NULL CHECK (provider IN ('apns', 'fcm')),
    token         TEXT NOT NULL,
    token_hash    BLOB NOT NULL,
    environment   TEXT CHECK (environment IN ('production', 'sandbox')),
    registered_at INTEGER NOT NULL,
    PRIMARY KEY (device_id, provider),
    CHECK ((provider = 'apns') = (environment IS NOT NULL))
) WITHOUT ROWID;
CREATE UNIQUE INDEX push_tokens_by_token ON push_tokens(provider, token_hash);

-- Keys of app backends for the service API: only their SHA-256 is stored.
CREATE TABLE service_keys (
    name         TEXT PRIMARY KEY NOT NULL,
    key_hash     BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    created_by   TEXT NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER,
    revoked_by   TEXT
);
CREATE UNIQUE INDEX service_keys_by_hash ON service_keys(key_hash);

-- Sign in with Apple: an account's Apple ID (by `sub` only, never by email), our single-use
-- nonces (SHA-256, until they expire), and the notifications already handled.
CREATE TABLE apple_links (
    account_id       TEXT PRIMARY KEY NOT NULL REFERENCES accounts(id),
    sub              TEXT NOT NULL,
    email            TEXT,
    is_private_email INTEGER CHECK (is_private_email IN (0, 1)),
    email_enabled    INTEGER NOT NULL DEFAULT 1 CHECK (email_enabled IN (0, 1)),
    linked_at        INTEGER NOT NULL,
    refresh_token    TEXT,
    client_id        TEXT                      -- the client id the refresh token was issued to (its revocation names it)
);
CREATE UNIQUE INDEX apple_links_by_sub ON apple_links(sub);

CREATE TABLE apple_nonces (
    nonce_hash BLOB PRIMARY KEY NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX apple_nonces_by_expiry ON apple_nonces(expires_at);

-- Server-to-server notifications already handled, by `jti`: a repeated one is answered 200 and ignored.
CREATE TABLE apple_notifications (
    jti         TEXT PRIMARY KEY NOT NULL,
    received_at INTEGER NOT NULL
);

-- The outbox: what must reach the outside world after a commit (webhook events, Apple
-- refresh tokens to revoke), written with the change, delivered at least once, oldest first
-- per kind and account, deleted when delivered, 'failed' after three days of retries.
CREATE TABLE outbox (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL CHECK (kind IN ('webhook', 'apple_revoke')),
    account_id      TEXT NOT NULL,
    type            TEXT NOT NULL,
    body            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at INTEGER NOT NULL,
    give_up_at      INTEGER NOT NULL,
    last_error      TEXT,
    failed_at       INTEGER,
    lease_id        TEXT,
    leased_until    INTEGER,
    CHECK ((state = 'failed') = (failed_at IS NOT NULL)),
    CHECK ((lease_id IS NULL) = (leased_until IS NULL))
);
-- What is due, and the per-account order it is delivered in.
CREATE INDEX outbox_due ON outbox(kind, next_attempt_at) WHERE state = 'pending';
CREATE INDEX outbox_by_account ON outbox(kind, account_id, seq) WHERE state = 'pending';
CREATE INDEX outbox_failed ON outbox(seq) WHERE state = 'failed';

-- Sibling-app hand-off. A one-time code, stored only as its SHA-256, bound to the host's
-- (device, account) pair and session, the sibling's client id and its PKCE S256 challenge;
-- kept after its use until it expires, so that a second redemption is recognised.
CREATE TABLE handoff_codes (
    code_hash          BLOB PRIMARY KEY NOT NULL,
    device_id          TEXT NOT NULL,
    account_id         TEXT NOT NULL,
    host_session_id    TEXT NOT NULL,
    client_id          TEXT NOT NULL,
    challenge          TEXT NOT NULL CHECK (length(challenge) = 43),
    created_at         INTEGER NOT NULL,
    expires_at         INTEGER NOT NULL,
    redeemed_at        INTEGER,
    sibling_session_id TEXT,                   -- the session the redemption opened
    FOREIGN KEY (device_id, account_id) REFERENCES device_accounts(device_id, account_id),
    CHECK ((redeemed_at IS NULL) = (sibling_session_id IS NULL))
);
CREATE INDEX handoff_codes_by_expiry ON handoff_codes(expires_at);
CREATE INDEX handoff_codes_by_account ON handoff_codes(account_id);

-- A sibling app's session on the host's (device, account) pair, one per client id. Its
-- refresh token is random and stored only as its SHA-256. It exists only while the pair is
-- active: ending the pair deletes it first (the triggers refuse anything else).
CREATE TABLE sibling_sessions (
    device_id          TEXT NOT NULL,
    account_id         TEXT NOT NULL,
    client_id          TEXT NOT NULL,
    session_id         TEXT NOT NULL UNIQUE,
    started_at         INTEGER NOT NULL,
    refresh_hash       BLOB NOT NULL UNIQUE,
    refresh_generation INTEGER NOT NULL CHECK (refresh_generation >= 0),
    refresh_expires_at INTEGER NOT NULL,
    PRIMARY KEY (device_id, account_id, client_id),
    FOREIGN KEY (device_id, account_id) REFERENCES device_accounts(device_id, account_id)
);
CREATE INDEX sibling_sessions_by_expiry ON sibling_sessions(refresh_expires_at);

CREATE TRIGGER sibling_sessions_on_active_pair BEFORE INSERT ON sibling_sessions
WHEN (SELECT state FROM device_accounts WHERE device_id = NEW.device_id AND account_id = NEW.account_id) IS NOT 'active'
BEGIN SELECT RAISE(ABORT, 'a sibling session lives on an active pair'); END;

CREATE TRIGGER device_accounts_end_without_siblings BEFORE UPDATE OF state ON device_accounts
WHEN NEW.state <> 'active'
 AND EXISTS (SELECT 1 FROM sibling_sessions WHERE device_id = NEW.device_id AND account_id = NEW.account_id)
BEGIN SELECT RAISE(ABORT, 'a pair ends with its sibling sessions'); END;

-- Recovery codes: one per account, shown once, stored as SHA-256; a used one keeps its winner.
CREATE TABLE recovery_codes (
    account_id     TEXT PRIMARY KEY NOT NULL REFERENCES accounts(id),
    code_hash      BLOB NOT NULL UNIQUE CHECK (length(code_hash) = 32),
    created_at     INTEGER NOT NULL,
    used_at        INTEGER,
    used_by_device TEXT,
    CHECK ((used_at IS NULL) = (used_by_device IS NULL))
);

-- Limits shared by every node: one window per budget and client (address, /64, or account).
CREATE TABLE rate_slots (
    kind       TEXT NOT NULL CHECK (kind IN ('account_creation', 'claim', 'setup', 'nonce', 'handoff')),
    client     TEXT NOT NULL,
    window_end INTEGER NOT NULL,
    used       INTEGER NOT NULL CHECK (used >= 0),
    PRIMARY KEY (kind, client)
);
CREATE INDEX rate_slots_by_end ON rate_slots(window_end);

-- Device attestation challenges: only their SHA-256, good once for five minutes (v13).
CREATE TABLE attestation_challenges (
    challenge_hash BLOB PRIMARY KEY NOT NULL,
    expires_at     INTEGER NOT NULL
);
CREATE INDEX attestation_challenges_by_expiry ON attestation_challenges(expires_at);
