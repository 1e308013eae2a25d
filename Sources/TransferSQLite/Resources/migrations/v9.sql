-- v9: transfer codes (contract v1.2).
--
-- A transfer is proven either by an email and a temporary password (method 'password', as
-- before) or by a transfer code (method 'code'): 16 Crockford base32 characters the old phone
-- shows, stored only as the SHA-256 of their canonical form and looked up by it. A code
-- transfer has no email and no password hash, so those columns lose NOT NULL; the checks keep
-- each method's columns exact. SQLite cannot drop NOT NULL in place: the table is rebuilt and
-- its rows copied as password transfers (nothing references it).
CREATE TABLE transfers_v9 (
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
INSERT INTO transfers_v9 (id, account_id, method, email, email_key, password_hash, state, created_at, expires_at, failed_consecutive,
                          failed_total, locked_until, ended_at, claimed_by_device, issued_by)
SELECT id, account_id, 'password', email, email_key, password_hash, state, created_at, expires_at, failed_consecutive,
       failed_total, locked_until, ended_at, claimed_by_device, issued_by
FROM transfers;
DROP TABLE transfers;
ALTER TABLE transfers_v9 RENAME TO transfers;
-- At most one pending transfer per email, and per account (either kind); a code is found by its hash.
CREATE UNIQUE INDEX transfers_one_pending_per_email ON transfers(email_key) WHERE state = 'pending';
CREATE UNIQUE INDEX transfers_one_pending_per_account ON transfers(account_id) WHERE state = 'pending';
CREATE INDEX transfers_by_account ON transfers(account_id);
CREATE INDEX transfers_by_email ON transfers(email_key);
CREATE UNIQUE INDEX transfers_by_code ON transfers(code_hash) WHERE code_hash IS NOT NULL;
