-- v9: transfer codes (contract v1.2).
--
-- A transfer is proven either by an email and a temporary password (method 'password', as
-- before) or by a transfer code (method 'code'): 16 Crockford base32 characters the old phone
-- shows, stored only as the SHA-256 of their canonical form and looked up by it. A code
-- transfer has no email and no password hash, so those columns lose NOT NULL; the checks keep
-- each method's columns exact. Existing rows are password transfers.
ALTER TABLE transfers ADD COLUMN method TEXT NOT NULL DEFAULT 'password' CHECK (method IN ('password', 'code'));
ALTER TABLE transfers ADD COLUMN code_hash BYTEA CHECK (length(code_hash) = 32);
ALTER TABLE transfers ALTER COLUMN email DROP NOT NULL;
ALTER TABLE transfers ALTER COLUMN email_key DROP NOT NULL;
ALTER TABLE transfers ALTER COLUMN password_hash DROP NOT NULL;
ALTER TABLE transfers ADD CHECK (CASE method
               WHEN 'password' THEN email IS NOT NULL AND email_key IS NOT NULL AND password_hash IS NOT NULL AND code_hash IS NULL
               ELSE email IS NULL AND email_key IS NULL AND password_hash IS NULL AND code_hash IS NOT NULL END);
-- A code is found by its hash.
CREATE UNIQUE INDEX transfers_by_code ON transfers(code_hash) WHERE code_hash IS NOT NULL;
