-- v5: Sign in with Apple.
--
-- An account may be linked to one Apple ID (Apple's `sub`, unique), looked up by `sub` only,
-- never by email (private relay addresses change and collide). The email and its flag are
-- kept as Apple last sent them (Apple sends the email on the first sign-in only). Apple's
-- refresh token, when the code exchange is configured, is kept to revoke it on unlink and
-- deletion. Nonces are ours, single use, kept as SHA-256 until they expire.

CREATE TABLE apple_links (
    account_id       TEXT PRIMARY KEY NOT NULL REFERENCES accounts(id),
    sub              TEXT NOT NULL,
    email            TEXT,
    is_private_email INTEGER CHECK (is_private_email IN (0, 1)),
    email_enabled    INTEGER NOT NULL DEFAULT 1 CHECK (email_enabled IN (0, 1)),
    linked_at        BIGINT NOT NULL,
    refresh_token    TEXT
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
