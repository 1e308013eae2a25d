extension SchemaMigration {
    /// Every schema change from v14 on, in order, applied by both stores after their own
    /// v1…v13. Adding one: a file `vN.swift` beside this one,
    ///
    ///     extension SchemaMigration {
    ///         static let v14 = SchemaMigration("v14", """
    ///             CREATE TABLE backup_keys (
    ///                 account_id TEXT PRIMARY KEY NOT NULL REFERENCES accounts(id),
    ///                 wrapped_key \(.blob) NOT NULL,
    ///                 created_at \(.integer) NOT NULL
    ///             );
    ///             """)
    ///     }
    ///
    /// and its name in this list. A test fails while a `vN.swift` here is not listed, and
    /// another until `schema.sql` and `schema.postgres.sql` are regenerated (`scripts/schema.sh`).
    public static let shared: [SchemaMigration] = checkedSequence([
        v14, v15, v16,
    ])
}
