// swift-tools-version:6.1
import PackageDescription

// A client generated from the repository's openapi.yaml by Apple's swift-openapi-generator, as
// a team that will not hand-write one would make it, and a program that runs the A→B story
// with it against a real server (scripts/generated-client-test). It proves that the spec
// generates with no schema skipped, that the client compiles, and that it talks to the server.
let package = Package(
    name: "GeneratedClient",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-generator", exact: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", exact: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession", exact: "1.4.0"),
        .package(url: "https://github.com/apple/swift-http-types", exact: "1.8.0"),
    ],
    targets: [
        .executableTarget(
            name: "TransferStory",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
    ]
)
