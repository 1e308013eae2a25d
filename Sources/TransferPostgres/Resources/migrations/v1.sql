-- Migration v1: the first schema (PostgreSQL dialect). Migrations never change once
-- shipped; read schema.postgres.sql at the repository's root for the current schema.

CREATE TABLE accounts (
    id          TEXT PRIMARY KEY NOT NULL,
    user_name   TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    transfer_id TEXT
);

CREATE TABLE device_bindings (
    id            TEXT PRIMARY KEY NOT NULL,
    device_id     TEXT NOT NULL,
    account_id    TEXT NOT NULL REFERENCES accounts(id),
    secret_hash   BYTEA NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('active', 'moved', 'revoked', 'replaced')),
    bound_at      BIGINT NOT NULL,
    last_login_at BIGINT,
    ended_at      BIGINT,
    ended_reason  TEXT,
    CHECK ((state = 'active') = (ended_at IS NULL))
);
CREATE UNIQUE INDEX device_bindings_one_per_device
    ON device_bindings(device_id) WHERE state IN ('active', 'moved', 'revoked');
CREATE UNIQUE INDEX device_bindings_one_active_per_account
    ON device_bindings(account_id) WHERE state = 'active';
CREATE INDEX device_bindings_by_account ON device_bindings(account_id);
CREATE INDEX device_bindings_by_device ON device_bindings(device_id);

CREATE TABLE transfers (
    id                 TEXT PRIMARY KEY NOT NULL,
    account_id         TEXT NOT NULL REFERENCES accounts(id),
    email              TEXT NOT NULL,
    email_key          TEXT NOT NULL,
    password_hash      TEXT NOT NULL CHECK (password_hash LIKE '$argon2id$%'),
    state              TEXT NOT NULL CHECK (state IN ('pending', 'claimed', 'cancelled', 'replaced', 'expired', 'voided')),
    created_at         BIGINT NOT NULL,
    expires_at         BIGINT NOT NULL,
    failed_consecutive INTEGER NOT NULL DEFAULT 0 CHECK (failed_consecutive >= 0),
    failed_total       INTEGER NOT NULL DEFAULT 0 CHECK (failed_total >= 0),
    locked_until       BIGINT,
    ended_at           BIGINT,
    claimed_by_device  TEXT,
    issued_by          TEXT NOT NULL DEFAULT 'device',
    CHECK ((state = 'pending') = (ended_at IS NULL))
);
CREATE UNIQUE INDEX transfers_one_pending_per_email ON transfers(email_key) WHERE state = 'pending';
CREATE UNIQUE INDEX transfers_one_pending_per_account ON transfers(account_id) WHERE state = 'pending';
CREATE INDEX transfers_by_account ON transfers(account_id);
CREATE INDEX transfers_by_email ON transfers(email_key);

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    device_id  TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX sessions_by_device ON sessions(device_id, account_id);

CREATE TABLE refresh_tokens (
    token_hash BYTEA PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX refresh_tokens_by_session ON refresh_tokens(session_id);

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

CREATE TABLE signing_keys (
    kid         TEXT PRIMARY KEY NOT NULL,
    algorithm   TEXT NOT NULL,
    private_key TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    retired_at  BIGINT
);
