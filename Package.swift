// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Arbor",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Arbor", targets: ["Arbor"]),
        .library(name: "ArborJSON", targets: ["ArborJSON"]),
        .library(name: "ArborSQLite", targets: ["ArborSQLite"]),
        .library(name: "ArborLMDB", targets: ["ArborLMDB"]),
        .library(name: "ArborPostgres", targets: ["ArborPostgres"]),
        .library(name: "ArborConformance", targets: ["ArborConformance"]),
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
        .systemLibrary(
            name: "CSQLite", path: "Adapters/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        .target(name: "ArborSQLite", dependencies: ["Arbor", "CSQLite"], path: "Adapters/ArborSQLite"),
        .systemLibrary(
            name: "CLMDB", path: "Adapters/CLMDB", pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]),
        .target(name: "ArborLMDB", dependencies: ["Arbor", "CLMDB"], path: "Adapters/ArborLMDB"),
        .systemLibrary(
            name: "CLibPQ", path: "Adapters/CLibPQ", pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]),
        .target(name: "ArborPostgres", dependencies: ["Arbor", "CLibPQ"], path: "Adapters/ArborPostgres"),
        // The conformance suite for adapter authors: depends on the core only, and on no test framework.
        .target(name: "ArborConformance", dependencies: ["Arbor"], path: "Conformance/Sources/ArborConformance"),
        .target(
            name: "ArborCLI",
            dependencies: [
                "Arbor", "ArborJSON", "ArborSQLite", "ArborLMDB", "ArborPostgres", "ArborConformance",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/ArborCLI"
        ),
        .executableTarget(name: "arbor", dependencies: ["ArborCLI"], path: "Sources/arbor"),
        // Drives commits from child processes in the multi-process and crash tests, and holds
        // LMDB reader slots for the reader-table test.
        .executableTarget(name: "arbor-worker", dependencies: ["ArborCLI", "Arbor", "ArborLMDB", "CLMDB"], path: "Sources/ArborWorker"),
        .testTarget(
            name: "ArborTests", dependencies: ["Arbor", "ArborJSON", "ArborSQLite", "ArborLMDB", "ArborPostgres", "ArborCLI"],
            path: "Tests/ArborTests"),
        .testTarget(
            name: "ArborConformanceTests",
            dependencies: ["ArborConformance", "Arbor", "ArborJSON", "ArborSQLite", "ArborLMDB", "ArborPostgres"],
            path: "Tests/ArborConformanceTests"),
        .testTarget(
            name: "ArborCLITests", dependencies: ["ArborCLI", "Arbor", "ArborJSON", "ArborLMDB", "ArborPostgres", "ArborSQLite", "ArborConformance"],
            path: "Tests/ArborCLITests"),
    ],
    swiftLanguageModes: [.v6]
)
