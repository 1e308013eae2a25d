-- v13: device attestation for new accounts (contract v1.2, "Device attestation for new
-- accounts"). Self-contained: it touches only the new table and the new columns of devices.
--
-- Challenges (POST /v1/attestation/challenge): only their SHA-256 is kept, good once for five
-- minutes; the login that presents one deletes it, the pruner deletes the expired ones.
CREATE TABLE attestation_challenges (
    challenge_hash BYTEA PRIMARY KEY NOT NULL,
    expires_at     BIGINT NOT NULL
);
CREATE INDEX attestation_challenges_by_expiry ON attestation_challenges(expires_at);

-- What a device recorded when it created an account while attestation was on: the platform
-- (NULL when the attestation was missing), the outcome ('verified', 'missing' or
-- 'failed: <check>'), the App Attest key it certified (keyId, X9.62 public key, signature
-- counter) and when. A verified device adds accounts without a new attestation.
ALTER TABLE devices ADD COLUMN attestation_platform TEXT CHECK (attestation_platform IN ('apple', 'android'));
ALTER TABLE devices ADD COLUMN attestation_outcome TEXT CHECK (attestation_outcome IN ('verified', 'missing') OR attestation_outcome LIKE 'failed: %');
ALTER TABLE devices ADD COLUMN attestation_key_id BYTEA;
ALTER TABLE devices ADD COLUMN attestation_public_key BYTEA;
ALTER TABLE devices ADD COLUMN attestation_counter BIGINT;
ALTER TABLE devices ADD COLUMN attested_at BIGINT;
