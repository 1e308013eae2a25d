extension SchemaMigration {
    /// The device an account was created on (its first login there, or `newAccount`), so that
    /// a login can count the accounts a device created in the last day (contract v1.3, security
    /// round 3: one device must not mint accounts without end). Not the first pair: a claim that
    /// brings an account back onto a device rewrites that pair's `added_at`. Accounts created
    /// before this version have none, and so are not counted (for at most the day they would be).
    static let v15 = SchemaMigration("v15", """
        ALTER TABLE accounts ADD COLUMN created_on_device_id TEXT;
        CREATE INDEX accounts_by_creating_device ON accounts(created_on_device_id, created_at);
        """)
}
