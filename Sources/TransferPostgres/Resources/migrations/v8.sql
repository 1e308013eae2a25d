-- v8: sibling-app hand-off.
--
-- A host app hands its account to a sibling app of the same family with a one-time code:
-- stored only as its SHA-256, bound to the host's (device, account) pair and session, the
-- sibling's client id and its PKCE S256 challenge; kept after its use until it expires, so
-- that a second redemption is recognised.
CREATE TABLE handoff_codes (
    code_hash          BYTEA PRIMARY KEY NOT NULL,
    device_id          TEXT NOT NULL,
    account_id         TEXT NOT NULL,
    host_session_id    TEXT NOT NULL,
    client_id          TEXT NOT NULL,
    challenge          TEXT NOT NULL CHECK (length(challenge) = 43),
    created_at         BIGINT NOT NULL,
    expires_at         BIGINT NOT NULL,
    redeemed_at        BIGINT,
    sibling_session_id TEXT,                   -- the session the redemption opened
    FOREIGN KEY (device_id, account_id) REFERENCES device_accounts(device_id, account_id),
    CHECK ((redeemed_at IS NULL) = (sibling_session_id IS NULL))
);
CREATE INDEX handoff_codes_by_expiry ON handoff_codes(expires_at);
CREATE INDEX handoff_codes_by_account ON handoff_codes(account_id);

-- A sibling app's session on the host's (device, account) pair, one per client id. Its
-- refresh token is random and stored only as its SHA-256. It exists only while the pair is
-- active: ending the pair deletes it first (the triggers refuse anything else).
CREATE TABLE sibling_sessions (
    device_id          TEXT NOT NULL,
    account_id         TEXT NOT NULL,
    client_id          TEXT NOT NULL,
    session_id         TEXT NOT NULL UNIQUE,
    started_at         BIGINT NOT NULL,
    refresh_hash       BYTEA NOT NULL UNIQUE,
    refresh_generation INTEGER NOT NULL CHECK (refresh_generation >= 0),
    refresh_expires_at BIGINT NOT NULL,
    PRIMARY KEY (device_id, account_id, client_id),
    FOREIGN KEY (device_id, account_id) REFERENCES device_accounts(device_id, account_id)
);
CREATE INDEX sibling_sessions_by_expiry ON sibling_sessions(refresh_expires_at);

CREATE FUNCTION sibling_sessions_on_active_pair() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NOT EXISTS (SELECT 1 FROM device_accounts WHERE device_id = NEW.device_id AND account_id = NEW.account_id AND state = 'active') THEN RAISE EXCEPTION 'a sibling session lives on an active pair'; END IF; RETURN NEW; END $$;
CREATE TRIGGER sibling_sessions_on_active_pair BEFORE INSERT ON sibling_sessions FOR EACH ROW EXECUTE FUNCTION sibling_sessions_on_active_pair();

CREATE FUNCTION device_accounts_end_without_siblings() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.state <> 'active' AND EXISTS (SELECT 1 FROM sibling_sessions WHERE device_id = NEW.device_id AND account_id = NEW.account_id) THEN RAISE EXCEPTION 'a pair ends with its sibling sessions'; END IF; RETURN NEW; END $$;
CREATE TRIGGER device_accounts_end_without_siblings BEFORE UPDATE OF state ON device_accounts FOR EACH ROW EXECUTE FUNCTION device_accounts_end_without_siblings();

-- A rotated token of a sibling session names its client id.
ALTER TABLE rotated_refresh_tokens ADD COLUMN client_id TEXT;
