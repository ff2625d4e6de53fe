// swift-tools-version:6.1
import PackageDescription

// A separate package, like Benchmarks/, so that users of Arbor never build fuzzing code.
// Run: bash scripts/fuzz.sh [seconds]   (libFuzzer, from the Swift toolchain on Linux)
let package = Package(
    name: "ArborFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Arbor", path: "..")],
    targets: [
        .executableTarget(
            name: "arbor-fuzz",
            dependencies: [.product(name: "Arbor", package: "Arbor")],
            path: "Sources/ArborFuzz"
        )
    ],
    swiftLanguageModes: [.v6]
)
