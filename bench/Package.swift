// swift-tools-version:6.1
import PackageDescription

// The benchmark helpers bench/run drives: the bare-Hummingbird ceiling, the raw argon2 rate,
// and bulk seeding through the store's schema. A package of its own, so that the service's
// manifest holds only the server, the CLI and their libraries.
let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "transfer-bench",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "bench-baseline", targets: ["BenchBaseline"]),
        .executable(name: "argon2-bench", targets: ["BenchArgon2"]),
        .executable(name: "bench-seed", targets: ["BenchSeed"]),
    ],
    dependencies: [
        .package(name: "device-transfer", path: ".."),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", exact: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", exact: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log.git", exact: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "BenchBaseline",
            dependencies: [.product(name: "Hummingbird", package: "hummingbird")],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "BenchArgon2",
            dependencies: [.product(name: "TransferArgon2", package: "device-transfer")],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "BenchSeed",
            dependencies: [
                .product(name: "TransferCore", package: "device-transfer"),
                .product(name: "TransferArgon2", package: "device-transfer"),
                .product(name: "TransferSQLite", package: "device-transfer"),
                .product(name: "TransferStorage", package: "device-transfer"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
    ]
)
