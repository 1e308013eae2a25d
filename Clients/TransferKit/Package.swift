// swift-tools-version:6.0
import PackageDescription

// TransferKit: the Swift client of the device-transfer service (contract v1, v1.1 and v1.2's codes and ways back).
// No package dependencies: Foundation only (FoundationNetworking on Linux), Security on Apple platforms.
let package = Package(
    name: "TransferKit",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "TransferKit", targets: ["TransferKit"]),
        // Simulated phones for scenario tests (old phone A → new phone B) against a staging server.
        .library(name: "TransferKitTesting", targets: ["TransferKitTesting"]),
    ],
    targets: [
        .target(name: "TransferKit", swiftSettings: [.swiftLanguageMode(.v6)]),
        .target(name: "TransferKitTesting", dependencies: ["TransferKit"], swiftSettings: [.swiftLanguageMode(.v6)]),
        .testTarget(
            name: "TransferKitTests",
            dependencies: ["TransferKit", "TransferKitTesting"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
