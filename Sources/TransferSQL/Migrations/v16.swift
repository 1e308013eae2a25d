extension SchemaMigration {
    /// Backup keys (contract v1.3): a way back the app keeps in the platform's synchronised
    /// store (iCloud Keychain, Block Store), stored as its SHA-256, at most one per account and
    /// store (a new one replaces it; a used one stays, with when and by which device, until it
    /// is replaced, so its winner can repeat the claim) and unique by hash (a key leads to one
    /// account).
    ///
    /// `apple_links.moved_at`: when the account last arrived on a device by Sign in with Apple
    /// with this Apple ID, so that only the winning move counts as the proof of an Apple
    /// repeat (the pair's `added_at` is that time). Filled from the audit trail for moves made
    /// before this version (the `apple.moved` event at the pair's `added_at`).
    static let v16 = SchemaMigration("v16", """
        CREATE TABLE backup_keys (
            account_id     TEXT NOT NULL REFERENCES accounts(id),
            store          TEXT NOT NULL CHECK (store IN ('icloud-keychain', 'block-store')),
            key_hash       \(.blob) NOT NULL CHECK (length(key_hash) = 32),
            created_at     \(.integer) NOT NULL,
            used_at        \(.integer),
            used_by_device TEXT,
            CHECK ((used_at IS NULL) = (used_by_device IS NULL))
        );
        CREATE UNIQUE INDEX backup_keys_one_per_store ON backup_keys(account_id, store);
        CREATE UNIQUE INDEX backup_keys_by_hash ON backup_keys(key_hash);
        ALTER TABLE apple_links ADD COLUMN moved_at \(.integer);
        UPDATE apple_links SET moved_at = (SELECT MAX(p.added_at) FROM device_accounts p JOIN audit_events e ON e.account_id = p.account_id AND e.device_id = p.device_id AND e.at = p.added_at WHERE p.account_id = apple_links.account_id AND p.state = 'active' AND e.kind = 'apple.moved' AND e.at >= apple_links.linked_at);
        """)
}
