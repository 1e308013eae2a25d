// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// What the tests and their support target build on: every module, the stores' libraries, the
/// SDK, and the clients the tests talk to the server with.
let testDependencies: [Target.Dependency] = [
    "TransferCore",
    "TransferAttestation",
    "TransferArgon2",
    "TransferSQL",
    "TransferSQLite",
    "TransferHTTP",
    "TransferPostgres",
    "TransferStorage",
    "TransferSettings",
    .product(name: "HummingbirdTesting", package: "hummingbird"),
    .product(name: "JWTKit", package: "jwt-kit"),
    .product(name: "GRDB", package: "GRDB.swift"),
    .product(name: "Crypto", package: "swift-crypto"),
    .product(name: "_CryptoExtras", package: "swift-crypto"),
    .product(name: "X509", package: "swift-certificates"),
    .product(name: "SwiftASN1", package: "swift-asn1"),
    .product(name: "AsyncHTTPClient", package: "async-http-client"),
    .product(name: "NIOHTTP1", package: "swift-nio"),
    .product(name: "TransferKit", package: "TransferKit"),
    .product(name: "TransferKitTesting", package: "TransferKit"),
]

let package = Package(
    name: "device-transfer",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "transfer-server", targets: ["TransferServer"]),
        .executable(name: "transfer", targets: ["TransferCLI"]),
        // The libraries bench/ (a package of its own) builds its helpers on.
        .library(name: "TransferCore", targets: ["TransferCore"]),
        .library(name: "TransferArgon2", targets: ["TransferArgon2"]),
        .library(name: "TransferSQLite", targets: ["TransferSQLite"]),
        .library(name: "TransferStorage", targets: ["TransferStorage"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", exact: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", exact: "5.8.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", exact: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-crypto.git", exact: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", exact: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", exact: "1.7.4"),
        .package(url: "https://github.com/vapor/postgres-nio.git", exact: "1.33.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
        // Traces (OTLP/HTTP only: the gRPC exporter and its dependencies are not built).
        .package(url: "https://github.com/swift-otel/swift-otel.git", exact: "1.6.0", traits: ["OTLPHTTP"]),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", exact: "1.7.3"),
        // The client SDK, a package of its own (no server dependency); the scenario tests drive it.
        .package(path: "Clients/TransferKit"),
    ],
    targets: [
        // libargon2 from the system (Debian: libargon2-dev).
        .systemLibrary(
            name: "CArgon2",
            pkgConfig: "libargon2",
            providers: [.apt(["libargon2-dev"])]
        ),
        // The domain: accounts, devices, transfers, their rules and errors. No HTTP, no database.
        .target(
            name: "TransferCore",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            resources: [.embedInCode("Resources/common-passwords.txt")],
            swiftSettings: strict
        ),
        // Device attestation (App Attest, Play Integrity): a strict CBOR decoder and the two
        // verifiers. No HTTP, no database; the server wires them to the routes and stores.
        .target(
            name: "TransferAttestation",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            swiftSettings: strict
        ),
        // argon2id hashing on a bounded worker pool.
        .target(
            name: "TransferArgon2",
            dependencies: [
                "CArgon2",
                "TransferCore",
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // The SQL both stores speak, written once: statements with bound values rendered per
        // dialect, the effects' statements, the reads as plans, the row decoders.
        // Its generic reads and decoders are specialised for each store's row type across the
        // module boundary (cross-module optimisation): through `any SQLRow` they cost the
        // SQLite login path, whose single writer runs them, about 12 % (BENCHMARKS.md).
        .target(
            name: "TransferSQL", dependencies: ["TransferCore"],
            swiftSettings: strict + [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]),
        // The embedded store: GRDB on system SQLite.
        .target(
            name: "TransferSQLite",
            dependencies: [
                "TransferCore", "TransferSQL",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The system SQLite GRDB links: rows are stepped through its C API (`SQLiteStore+SQL.swift`).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            resources: [.embedInCode("Resources/migrations")],
            swiftSettings: strict
        ),
        // The multi-node store: PostgreSQL through postgres-nio, on its connection pool
        // (`_ConnectionPoolModule`) with a factory of its own that walks a multi-host URL.
        .target(
            name: "TransferPostgres",
            dependencies: [
                "TransferCore", "TransferSQL",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.embedInCode("Resources/migrations")],
            swiftSettings: strict
        ),
        // Opens the store a `--database` value names (the server, the CLI, tests, benchmarks).
        .target(
            name: "TransferStorage",
            dependencies: [
                "TransferCore", "TransferSQLite", "TransferPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Every flag of the server, declared once (name, variable, type, default, check, help),
        // and how they are read from the command line, the environment and secret files; the
        // server and the CLI both read them.
        .target(
            name: "TransferSettings",
            dependencies: ["TransferCore", "TransferArgon2"],
            swiftSettings: strict
        ),
        // The HTTP layer, tokens, configuration and the server's composition.
        .target(
            name: "TransferHTTP",
            dependencies: [
                "TransferCore",
                "TransferArgon2",
                "TransferAttestation",
                "TransferStorage",
                "TransferSettings",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // The pool a PostgreSQL store opens with runs as one of the server's services.
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ],
            resources: [.embedInCode("Resources/openapi.yaml")],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "TransferServer",
            dependencies: ["TransferHTTP", "TransferSettings"],
            swiftSettings: strict
        ),
        // `transfer`: the support-staff command line, on the same core and stores.
        .executableTarget(
            name: "TransferCLI",
            dependencies: [
                "TransferCore",
                "TransferArgon2",
                "TransferStorage",
                "TransferSettings",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        // What both test targets share: the in-process harness and client, the fakes of Apple,
        // App Attest, Play Integrity and a webhook receiver, child processes, the stores under test.
        .target(
            name: "TransferTestSupport",
            dependencies: testDependencies,
            path: "Tests/TransferTestSupport",
            swiftSettings: strict
        ),
        // The fast tier (`./test --fast`): the domain, plans, parsers, verifiers, each store, and
        // every route through the in-process server. No child process, no second node.
        .testTarget(
            name: "TransferTests",
            dependencies: ["TransferTestSupport"] + testDependencies,
            swiftSettings: strict
        ),
        // The system tier: the binaries as processes (server, CLI, release builds), kill -9 and
        // restarts, PostgreSQL outages and host walks, two nodes, real sockets, TransferKit against
        // the real server, and the state machine's long random runs.
        .testTarget(
            name: "TransferSystemTests",
            dependencies: ["TransferTestSupport"] + testDependencies,
            swiftSettings: strict
        ),
    ]
)
