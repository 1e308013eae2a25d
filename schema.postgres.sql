-- The current schema (schema.sql) in PostgreSQL's dialect: the same tables, columns,
-- checks and indexes; only the types differ (BIGINT times, BYTEA hashes, BIGSERIAL ids).
-- What Sources/TransferPostgres/Resources/migrations/v*.sql add up to, applied in order
-- under an advisory lock. Tests keep this file equal to a freshly migrated database and
-- to schema.sql.

CREATE TABLE accounts (
    id          TEXT PRIMARY KEY NOT NULL,
    user_name   TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    moved_to_device_id TEXT,
    deleted_at  BIGINT,
    protected_at BIGINT
);

CREATE TABLE devices (
    id                 TEXT PRIMARY KEY NOT NULL,
    secret_hash        BYTEA NOT NULL,
    created_at         BIGINT NOT NULL,
    current_account_id TEXT,
    retired_at         BIGINT,
    push_mode          TEXT NOT NULL DEFAULT 'all' CHECK (push_mode IN ('all', 'current')),
    attestation_platform TEXT CHECK (attestation_platform IN ('apple', 'android')),
    attestation_outcome TEXT CHECK (attestation_outcome IN ('verified', 'missing') OR attestation_outcome LIKE 'failed: %'),
    attestation_key_id BYTEA,
    attestation_public_key BYTEA,
    attestation_counter BIGINT,
    attested_at BIGINT
);

CREATE TABLE device_accounts (
    device_id          TEXT NOT NULL REFERENCES devices(id),
    account_id         TEXT NOT NULL REFERENCES accounts(id),
    state              TEXT NOT NULL CHECK (state IN ('active', 'moved', 'revoked', 'replaced', 'removed')),
    added_at           BIGINT NOT NULL,
    last_login_at      BIGINT,
    last_address       TEXT,
    ended_at           BIGINT,
    ended_reason       TEXT,
    session_id         TEXT,
    session_started_at BIGINT,
    refresh_hash       BYTEA,
    refresh_generation BIGINT,
    refresh_expires_at BIGINT,
    key_by_device      BYTEA,
    key_by_token       BYTEA,
    push_enabled       INTEGER NOT NULL DEFAULT 1 CHECK (push_enabled IN (0, 1)),
    PRIMARY KEY (device_id, account_id),
    CHECK ((state = 'active') = (ended_at IS NULL)),
    CHECK (state = 'active' OR session_id IS NULL),
    CHECK ((session_id IS NULL) = (refresh_hash IS NULL)),
    CHECK ((session_id IS NULL) = (refresh_expires_at IS NULL)),
    CHECK ((session_id IS NULL) = (refresh_generation IS NULL))
);
CREATE UNIQUE INDEX device_accounts_one_active_per_account ON device_accounts(account_id) WHERE state = 'active';
CREATE INDEX device_accounts_by_account ON device_accounts(account_id);
CREATE UNIQUE INDEX device_accounts_by_refresh_token ON device_accounts(refresh_hash);

ALTER TABLE devices ADD FOREIGN KEY (id, current_account_id) REFERENCES device_accounts(device_id, account_id);

CREATE FUNCTION devices_stay_retired() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF OLD.retired_at IS NOT NULL AND NEW.retired_at IS DISTINCT FROM OLD.retired_at THEN RAISE EXCEPTION 'a retired device is never bound again'; END IF; IF NEW.retired_at IS NOT NULL AND EXISTS (SELECT 1 FROM device_accounts WHERE device_id = NEW.id AND state = 'active') THEN RAISE EXCEPTION 'a device that holds accounts is not retired'; END IF; RETURN NEW; END $$;
CREATE TRIGGER devices_stay_retired BEFORE UPDATE OF retired_at ON devices FOR EACH ROW EXECUTE FUNCTION devices_stay_retired();

CREATE FUNCTION device_accounts_not_on_retired() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.state = 'active' AND EXISTS (SELECT 1 FROM devices WHERE id = NEW.device_id AND retired_at IS NOT NULL) THEN RAISE EXCEPTION 'a retired device is never bound again'; END IF; RETURN NEW; END $$;
CREATE TRIGGER device_accounts_not_on_retired BEFORE INSERT OR UPDATE OF state ON device_accounts FOR EACH ROW EXECUTE FUNCTION device_accounts_not_on_retired();

CREATE TABLE rotated_refresh_tokens (
    token_hash BYTEA PRIMARY KEY NOT NULL,
    device_id  TEXT NOT NULL,
    account_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    client_id  TEXT                            -- set for a sibling app's session
);

CREATE TABLE transfers (
    id                 TEXT PRIMARY KEY NOT NULL,
    account_id         TEXT NOT NULL REFERENCES accounts(id),
    method             TEXT NOT NULL DEFAULT 'password' CHECK (method IN ('password', 'code')),
    email              TEXT,
    email_key          TEXT,
    password_hash      TEXT CHECK (password_hash LIKE '$argon2id$%'),
    code_hash          BYTEA CHECK (length(code_hash) = 32),
    state              TEXT NOT NULL CHECK (state IN ('pending', 'claimed', 'cancelled', 'replaced', 'expired', 'voided')),
    created_at         BIGINT NOT NULL,
    expires_at         BIGINT NOT NULL,
    failed_consecutive INTEGER NOT NULL DEFAULT 0 CHECK (failed_consecutive >= 0),
    failed_total       INTEGER NOT NULL DEFAULT 0 CHECK (failed_total >= 0),
    locked_until       BIGINT,
    ended_at           BIGINT,
    claimed_by_device  TEXT,
    issued_by          TEXT NOT NULL DEFAULT 'device',
    CHECK ((state = 'pending') = (ended_at IS NULL)),
    CHECK (CASE method
               WHEN 'password' THEN email IS NOT NULL AND email_key IS NOT NULL AND password_hash IS NOT NULL AND code_hash IS NULL
               ELSE email IS NULL AND email_key IS NULL AND password_hash IS NULL AND code_hash IS NOT NULL END)
);
CREATE UNIQUE INDEX transfers_one_pending_per_email ON transfers(email_key) WHERE state = 'pending';
CREATE UNIQUE INDEX transfers_one_pending_per_account ON transfers(account_id) WHERE state = 'pending';
CREATE INDEX transfers_by_account ON transfers(account_id);
CREATE INDEX transfers_by_email ON transfers(email_key);
CREATE UNIQUE INDEX transfers_by_code ON transfers(code_hash) WHERE code_hash IS NOT NULL;
CREATE INDEX transfers_claimed_by_device ON transfers(claimed_by_device) WHERE claimed_by_device IS NOT NULL;

CREATE TABLE audit_events (
    id             BIGSERIAL PRIMARY KEY,
    at             BIGINT NOT NULL,
    kind           TEXT NOT NULL,
    account_id     TEXT,
    device_id      TEXT,
    transfer_id    TEXT,
    actor          TEXT NOT NULL,
    reason         TEXT,
    client_address TEXT
);
CREATE INDEX audit_events_by_account ON audit_events(account_id, id);
CREATE INDEX audit_events_by_time ON audit_events(at);

CREATE TABLE signing_keys (
    kid         TEXT PRIMARY KEY NOT NULL,
    algorithm   TEXT NOT NULL,
    private_key TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    retired_at  BIGINT
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
    token_hash    BYTEA NOT NULL,
    environment   TEXT CHECK (environment IN ('production', 'sandbox')),
    registered_at BIGINT NOT NULL,
    PRIMARY KEY (device_id, provider),
    CHECK ((provider = 'apns') = (environment IS NOT NULL))
);
CREATE UNIQUE INDEX push_tokens_by_token ON push_tokens(provider, token_hash);

-- Keys of app backends for the service API: only their SHA-256 is stored.
CREATE TABLE service_keys (
    name         TEXT PRIMARY KEY NOT NULL,
    key_hash     BYTEA NOT NULL,
    created_at   BIGINT NOT NULL,
    created_by   TEXT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT,
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
    linked_at        BIGINT NOT NULL,
    refresh_token    TEXT,
    client_id        TEXT
);
CREATE UNIQUE INDEX apple_links_by_sub ON apple_links(sub);

CREATE TABLE apple_nonces (
    nonce_hash BYTEA PRIMARY KEY NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX apple_nonces_by_expiry ON apple_nonces(expires_at);

-- Server-to-server notifications already handled, by `jti`: a repeated one is answered 200 and ignored.
CREATE TABLE apple_notifications (
    jti         TEXT PRIMARY KEY NOT NULL,
    received_at BIGINT NOT NULL
);

CREATE TABLE outbox (
    seq             BIGSERIAL PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL CHECK (kind IN ('webhook', 'apple_revoke')),
    account_id      TEXT NOT NULL,
    type            TEXT NOT NULL,
    body            TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at BIGINT NOT NULL,
    give_up_at      BIGINT NOT NULL,
    last_error      TEXT,
    failed_at       BIGINT,
    lease_id        TEXT,
    leased_until    BIGINT,
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
    code_hash          BYTEA PRIMARY KEY NOT NULL,
    device_id          TEXT NOT NULL,
    account_id         TEXT NOT NULL,
    host_session_id    TEXT NOT NULL,
    client_id          TEXT NOT NULL,
    challenge          TEXT NOT NULL CHECK (length(challenge) = 43),
    created_at         BIGINT NOT NULL,
    expires_at         BIGINT NOT NULL,
    redeemed_at        BIGINT,
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
    started_at         BIGINT NOT NULL,
    refresh_hash       BYTEA NOT NULL UNIQUE,
    refresh_generation INTEGER NOT NULL CHECK (refresh_generation >= 0),
    refresh_expires_at BIGINT NOT NULL,
    PRIMARY KEY (device_id, account_id, client_id),
    FOREIGN KEY (device_id, account_id) REFERENCES device_accounts(device_id, account_id)
);
CREATE INDEX sibling_sessions_by_expiry ON sibling_sessions(refresh_expires_at);

CREATE FUNCTION sibling_sessions_on_active_pair() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NOT EXISTS (SELECT 1 FROM device_accounts WHERE device_id = NEW.device_id AND account_id = NEW.account_id AND state = 'active') THEN RAISE EXCEPTION 'a sibling session lives on an active pair'; END IF; RETURN NEW; END $$;
CREATE TRIGGER sibling_sessions_on_active_pair BEFORE INSERT ON sibling_sessions FOR EACH ROW EXECUTE FUNCTION sibling_sessions_on_active_pair();

CREATE FUNCTION device_accounts_end_without_siblings() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.state <> 'active' AND EXISTS (SELECT 1 FROM sibling_sessions WHERE device_id = NEW.device_id AND account_id = NEW.account_id) THEN RAISE EXCEPTION 'a pair ends with its sibling sessions'; END IF; RETURN NEW; END $$;
CREATE TRIGGER device_accounts_end_without_siblings BEFORE UPDATE OF state ON device_accounts FOR EACH ROW EXECUTE FUNCTION device_accounts_end_without_siblings();

-- Recovery codes: one per account, shown once, stored as SHA-256; a used one keeps its winner.
CREATE TABLE recovery_codes (
    account_id     TEXT PRIMARY KEY NOT NULL REFERENCES accounts(id),
    code_hash      BYTEA NOT NULL UNIQUE CHECK (length(code_hash) = 32),
    created_at     BIGINT NOT NULL,
    used_at        BIGINT,
    used_by_device TEXT,
    CHECK ((used_at IS NULL) = (used_by_device IS NULL))
);

-- Limits shared by every node: one window per budget and client (address, /64, or account).
CREATE TABLE rate_slots (
    kind       TEXT NOT NULL CHECK (kind IN ('account_creation', 'claim', 'setup', 'nonce', 'handoff')),
    client     TEXT NOT NULL,
    window_end BIGINT NOT NULL,
    used       BIGINT NOT NULL CHECK (used >= 0),
    PRIMARY KEY (kind, client)
);
CREATE INDEX rate_slots_by_end ON rate_slots(window_end);

-- Device attestation challenges: only their SHA-256, good once for five minutes (v13).
CREATE TABLE attestation_challenges (
    challenge_hash BYTEA PRIMARY KEY NOT NULL,
    expires_at     BIGINT NOT NULL
);
CREATE INDEX attestation_challenges_by_expiry ON attestation_challenges(expires_at);
