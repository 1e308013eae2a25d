-- Migration v1: the first schema (SQLite dialect). Migrations never change once shipped;
-- read schema.sql at the repository's root for the current schema.
-- Times are milliseconds since 1970 UTC; ids are lower-case UUID strings.

CREATE TABLE accounts (
    id          TEXT PRIMARY KEY NOT NULL,
    user_name   TEXT NOT NULL UNIQUE,          -- the first device's UUID
    created_at  INTEGER NOT NULL,
    transfer_id TEXT                           -- the device UUID the account was last moved to
);

-- One row per binding of a device UUID to an account. A binding ends as
-- 'moved' (claimed away), 'revoked' (support) or 'replaced' (taken over by
-- another account through replaceExistingAccount; kept for support).
CREATE TABLE device_bindings (
    id            TEXT PRIMARY KEY NOT NULL,
    device_id     TEXT NOT NULL,
    account_id    TEXT NOT NULL REFERENCES accounts(id),
    secret_hash   BLOB NOT NULL,               -- SHA-256 of the device secret
    state         TEXT NOT NULL CHECK (state IN ('active', 'moved', 'revoked', 'replaced')),
    bound_at      INTEGER NOT NULL,
    last_login_at INTEGER,
    ended_at      INTEGER,
    ended_reason  TEXT,
    CHECK ((state = 'active') = (ended_at IS NULL))
);
-- A device UUID resolves to at most one account, and a retired UUID is never bound again.
CREATE UNIQUE INDEX device_bindings_one_per_device
    ON device_bindings(device_id) WHERE state IN ('active', 'moved', 'revoked');
-- An account has at most one active device.
CREATE UNIQUE INDEX device_bindings_one_active_per_account
    ON device_bindings(account_id) WHERE state = 'active';
CREATE INDEX device_bindings_by_account ON device_bindings(account_id);
CREATE INDEX device_bindings_by_device ON device_bindings(device_id);

CREATE TABLE transfers (
    id                 TEXT PRIMARY KEY NOT NULL,
    account_id         TEXT NOT NULL REFERENCES accounts(id),
    email              TEXT NOT NULL,          -- as typed, trimmed
    email_key          TEXT NOT NULL,          -- NFC, lower-case: what emails are compared by
    password_hash      TEXT NOT NULL CHECK (password_hash LIKE '$argon2id$%'),
    state              TEXT NOT NULL CHECK (state IN ('pending', 'claimed', 'cancelled', 'replaced', 'expired', 'voided')),
    created_at         INTEGER NOT NULL,
    expires_at         INTEGER NOT NULL,
    failed_consecutive INTEGER NOT NULL DEFAULT 0 CHECK (failed_consecutive >= 0),
    failed_total       INTEGER NOT NULL DEFAULT 0 CHECK (failed_total >= 0),
    locked_until       INTEGER,
    ended_at           INTEGER,
    claimed_by_device  TEXT,
    issued_by          TEXT NOT NULL DEFAULT 'device',
    CHECK ((state = 'pending') = (ended_at IS NULL))
);
-- At most one pending transfer per email, and per account.
CREATE UNIQUE INDEX transfers_one_pending_per_email ON transfers(email_key) WHERE state = 'pending';
CREATE UNIQUE INDEX transfers_one_pending_per_account ON transfers(account_id) WHERE state = 'pending';
CREATE INDEX transfers_by_account ON transfers(account_id);
CREATE INDEX transfers_by_email ON transfers(email_key);

-- A session family: opened by a login or claim, carried on by refresh rotation.
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    device_id  TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX sessions_by_device ON sessions(device_id, account_id);

CREATE TABLE refresh_tokens (
    token_hash BLOB PRIMARY KEY NOT NULL,      -- SHA-256 of the token; the token itself is never stored
    session_id TEXT NOT NULL REFERENCES sessions(id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER                         -- set when rotated; a second use revokes the session
);
CREATE INDEX refresh_tokens_by_session ON refresh_tokens(session_id);

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

-- JWT signing keys (Ed25519). Shared through the database so restarts and other nodes
-- keep accepting issued tokens.
CREATE TABLE signing_keys (
    kid         TEXT PRIMARY KEY NOT NULL,
    algorithm   TEXT NOT NULL,
    private_key TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    retired_at  INTEGER
);
