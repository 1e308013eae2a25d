-- v6: account deletion, and the outbox.
--
-- A deleted account keeps its row (its id, so its phone hears `410 account_deleted`) with
-- the time it was deleted; what said something about the user is erased then.
--
-- The outbox holds what must reach the outside world after a commit: events for the app
-- backend's webhook, and Apple refresh tokens to revoke. A row is written in the transaction
-- of the change it reports, delivered by a worker at least once, oldest first per kind and
-- account, and deleted when delivered; `failed` after three days of retries, until support
-- sends it again. `id` is the webhook's `webhook-id`, the same on every attempt; `seq` orders.
ALTER TABLE accounts ADD COLUMN deleted_at INTEGER;

-- The client id Apple issued the refresh token to: its revocation names it.
ALTER TABLE apple_links ADD COLUMN client_id TEXT;

CREATE TABLE outbox (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL CHECK (kind IN ('webhook', 'apple_revoke')),
    account_id      TEXT NOT NULL,
    type            TEXT NOT NULL,
    body            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at INTEGER NOT NULL,
    give_up_at      INTEGER NOT NULL,
    last_error      TEXT,
    failed_at       INTEGER,
    lease_id        TEXT,
    leased_until    INTEGER,
    CHECK ((state = 'failed') = (failed_at IS NOT NULL)),
    CHECK ((lease_id IS NULL) = (leased_until IS NULL))
);
-- What is due, and the per-account order it is delivered in.
CREATE INDEX outbox_due ON outbox(kind, next_attempt_at) WHERE state = 'pending';
CREATE INDEX outbox_by_account ON outbox(kind, account_id, seq) WHERE state = 'pending';
CREATE INDEX outbox_failed ON outbox(seq) WHERE state = 'failed';
