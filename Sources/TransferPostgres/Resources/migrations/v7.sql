-- v7: signing-key rotation.
--
-- A rotation retires the current key (`retired_at`) and adds a new one in one transaction;
-- exactly one key is current, the one that signs. Retired keys stay published until the
-- tokens they signed have expired, then the pruner deletes them.
CREATE UNIQUE INDEX signing_keys_one_current ON signing_keys ((retired_at IS NULL)) WHERE retired_at IS NULL;
