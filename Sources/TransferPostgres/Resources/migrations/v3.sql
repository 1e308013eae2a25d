-- v3: a device holds several accounts, and a launch costs one row.
--
-- device_bindings (one row per binding, one account per device) becomes `devices` (one row
-- per app install: its secret, its current account) and `device_accounts` (one row per
-- account a device ever held, with the pair's one app session in place). Sessions and
-- refresh_tokens, which grew with every launch, become those session columns plus
-- `rotated_refresh_tokens`, which only remembers rotated tokens until they expire.
--
-- What survives the upgrade: every account, device (with its history per account), transfer
-- and audit event; per (device, account), the newest open session with its current refresh
-- token and its rotated ones (older sessions of the same pair were replaced on the phone by
-- the newest one: an app keeps the refresh token of its last login).

CREATE TABLE devices (
    id                 TEXT PRIMARY KEY NOT NULL,
    secret_hash        BYTEA NOT NULL,
    created_at         BIGINT NOT NULL,
    current_account_id TEXT,
    retired_at         BIGINT
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
    expires_at BIGINT NOT NULL
);

-- The device's current binding (never a replaced one) gives its secret, current account and retirement.
INSERT INTO devices (id, secret_hash, created_at, retired_at)
SELECT b.device_id, b.secret_hash,
       (SELECT MIN(o.bound_at) FROM device_bindings o WHERE o.device_id = b.device_id),
       b.ended_at
FROM device_bindings b WHERE b.state IN ('active', 'moved', 'revoked');

-- The newest binding of each (device, account).
INSERT INTO device_accounts (device_id, account_id, state, added_at, last_login_at, ended_at, ended_reason)
SELECT b.device_id, b.account_id, b.state, b.bound_at, b.last_login_at, b.ended_at, b.ended_reason
FROM device_bindings b
WHERE b.id = (SELECT o.id FROM device_bindings o WHERE o.device_id = b.device_id AND o.account_id = b.account_id
              ORDER BY o.bound_at DESC, (o.state IN ('active', 'moved', 'revoked')) DESC LIMIT 1);

UPDATE devices SET current_account_id = (
    SELECT b.account_id FROM device_bindings b WHERE b.device_id = devices.id AND b.state IN ('active', 'moved', 'revoked'));

-- The newest open session of each active pair, with its current refresh token.
UPDATE device_accounts SET (session_id, session_started_at, refresh_hash, refresh_generation, refresh_expires_at) = (
    SELECT s.id, s.created_at, r.token_hash, 0, r.expires_at
    FROM sessions s JOIN refresh_tokens r ON r.session_id = s.id
    WHERE s.device_id = device_accounts.device_id AND s.account_id = device_accounts.account_id
      AND s.revoked_at IS NULL AND r.used_at IS NULL
    ORDER BY s.created_at DESC, r.created_at DESC LIMIT 1)
WHERE state = 'active';

INSERT INTO rotated_refresh_tokens (token_hash, device_id, account_id, session_id, expires_at)
SELECT r.token_hash, p.device_id, p.account_id, p.session_id, r.expires_at
FROM device_accounts p JOIN refresh_tokens r ON r.session_id = p.session_id
WHERE r.used_at IS NOT NULL;

DROP TABLE refresh_tokens;
DROP TABLE sessions;
DROP TABLE device_bindings;

-- The pruner removes audit events by age.
CREATE INDEX audit_events_by_time ON audit_events(at);
