-- v10: recovery codes (contract v1.2, "A way back for every account").
--
-- One per account: 20 Crockford base32 characters (100 random bits), shown once, stored only
-- as the SHA-256 of their canonical form. A new one replaces the old. Used once: the row
-- keeps when and by which device, so that the winning device may repeat its claim (a lost
-- answer) and no other may.
CREATE TABLE recovery_codes (
    account_id     TEXT PRIMARY KEY NOT NULL REFERENCES accounts(id),
    code_hash      BYTEA NOT NULL UNIQUE CHECK (length(code_hash) = 32),
    created_at     BIGINT NOT NULL,
    used_at        BIGINT,
    used_by_device TEXT,
    CHECK ((used_at IS NULL) = (used_by_device IS NULL))
);
-- A claim repeated by its winner is found by the email and the device.
CREATE INDEX transfers_claimed_by_device ON transfers(claimed_by_device) WHERE claimed_by_device IS NOT NULL;
