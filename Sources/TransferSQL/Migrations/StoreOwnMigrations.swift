/// The files of a store's own migrations v1…v13: `Resources/migrations/vN.sql` in the store's
/// module, compiled into the binary by SwiftPM's `embedInCode` (no resource bundle to deploy
/// beside it) as that module's `PackageResources`, which conforms. Each store has its own
/// dialect's files, but the same thirteen versions: they are named here once.
///
/// They predate the shared list: a new schema change goes to `SchemaMigration.shared`, which
/// each store applies after these.
public protocol StoreOwnMigrationFiles {
    static var v1_sql: [UInt8] { get }
    static var v2_sql: [UInt8] { get }
    static var v3_sql: [UInt8] { get }
    static var v4_sql: [UInt8] { get }
    static var v5_sql: [UInt8] { get }
    static var v6_sql: [UInt8] { get }
    static var v7_sql: [UInt8] { get }
    static var v8_sql: [UInt8] { get }
    static var v9_sql: [UInt8] { get }
    static var v10_sql: [UInt8] { get }
    static var v11_sql: [UInt8] { get }
    static var v12_sql: [UInt8] { get }
    static var v13_sql: [UInt8] { get }
}

extension StoreOwnMigrationFiles {
    /// The files with the versions the store records them under, v1 first.
    public static var migrations: [(version: String, sql: [UInt8])] {
        [
            ("v1", v1_sql), ("v2", v2_sql), ("v3", v3_sql), ("v4", v4_sql), ("v5", v5_sql), ("v6", v6_sql), ("v7", v7_sql),
            ("v8", v8_sql), ("v9", v9_sql), ("v10", v10_sql), ("v11", v11_sql), ("v12", v12_sql), ("v13", v13_sql),
        ]
    }
}
