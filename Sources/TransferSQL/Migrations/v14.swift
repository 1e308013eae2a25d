extension SchemaMigration {
    /// Repeated identical audit events (a logout after every login, a failed guess from one
    /// client) share one row per hour: `repeats` counts them and `last_at` is the latest, so a
    /// client cannot grow the audit table at will. `aggregate_key` (SHA-256 of the event's
    /// fields and hour) is set only for the kinds that aggregate.
    static let v14 = SchemaMigration("v14", """
        ALTER TABLE audit_events ADD COLUMN repeats \(.integer) NOT NULL DEFAULT 1 CHECK (repeats >= 1);
        ALTER TABLE audit_events ADD COLUMN last_at \(.integer);
        ALTER TABLE audit_events ADD COLUMN aggregate_key \(.blob);
        CREATE UNIQUE INDEX audit_events_aggregated ON audit_events(aggregate_key) WHERE aggregate_key IS NOT NULL;
        """)
}
