-- v11: limits shared by every node (contract v1.2, "Limits that hold under attack").
--
-- One row per budget (kind) and client: an address (IPv4) or network (IPv6 /64), or an
-- account for the per-account limits. A window opens at its first event and ends at
-- window_end; the count is taken by one upsert that answers the window's count, so
-- concurrent requests on any node never overrun it. The pruner deletes ended windows.
CREATE TABLE rate_slots (
    kind       TEXT NOT NULL CHECK (kind IN ('account_creation', 'claim', 'setup', 'nonce', 'handoff')),
    client     TEXT NOT NULL,
    window_end BIGINT NOT NULL,
    used       BIGINT NOT NULL CHECK (used >= 0),
    PRIMARY KEY (kind, client)
);
CREATE INDEX rate_slots_by_end ON rate_slots(window_end);
