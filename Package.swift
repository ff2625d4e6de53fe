// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Arbor",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Arbor", targets: ["Arbor"]),
        .library(name: "ArborJSON", targets: ["ArborJSON"]),
        .library(name: "ArborCLI", targets: ["ArborCLI"]),
        .executable(name: "arbor", targets: ["arbor"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
    ],
    targets: [
        .target(
            name: "Arbor",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            path: "Sources/Arbor"
        ),
        .target(name: "ArborJSON", dependencies: ["Arbor"], path: "Adapters/ArborJSON"),
        .target(
            name: "ArborCLI",
            dependencies: [
                "Arbor", "ArborJSON",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/ArborCLI"
        ),
        .executableTarget(name: "arbor", dependencies: ["ArborCLI"], path: "Sources/arbor"),
        .testTarget(name: "ArborTests", dependencies: ["Arbor", "ArborJSON"], path: "Tests/ArborTests"),
        .testTarget(name: "ArborCLITests", dependencies: ["ArborCLI", "Arbor", "ArborJSON"], path: "Tests/ArborCLITests"),
    ],
    swiftLanguageModes: [.v6]
)
