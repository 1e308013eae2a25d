-- v4: push routing and service keys.
--
-- A push token belongs to a device (one per provider; a token is on one device at most), and
-- an account reaches it through the device: while the account is active there, has its pushes
-- on there, and the device routes all its accounts or this one is current. Routing is therefore
-- never stored per account, and it stops in the transaction that takes the account off the
-- device. App backends call the service API with keys stored as SHA-256.

ALTER TABLE devices ADD COLUMN push_mode TEXT NOT NULL DEFAULT 'all' CHECK (push_mode IN ('all', 'current'));
ALTER TABLE device_accounts ADD COLUMN push_enabled INTEGER NOT NULL DEFAULT 1 CHECK (push_enabled IN (0, 1));

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
