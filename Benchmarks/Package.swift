// swift-tools-version:6.1
import PackageDescription

// A separate package so that users of Arbor never fetch or build benchmark code.
// Run: swift run -c release --package-path Benchmarks arbor-benchmarks [commit|phases|engines|reads|merge|sync|history|heads|import|postgres|transfer|integrity] [--records N] [--reads N] [--json-records N] [--adapters sqlite,lmdb] [--ids ordered] [--changes K] [--conflicts] [--batch N] [--store URL [--build] [--tasks N]]
// The postgres suite needs (and transfer uses when set) ARBOR_BENCH_POSTGRES_URL (e.g. from scripts/postgres-fixture.sh start).
let package = Package(
    name: "ArborBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Arbor", path: "..")],
    targets: [
        .executableTarget(
            name: "arbor-benchmarks",
            dependencies: [
                .product(name: "Arbor", package: "Arbor"), .product(name: "ArborJSON", package: "Arbor"),
                .product(name: "ArborPostgres", package: "Arbor"),
                .product(name: "ArborSQLite", package: "Arbor"), .product(name: "ArborLMDB", package: "Arbor"),
                .product(name: "ArborCLI", package: "Arbor"),
            ],
            path: "Sources/ArborBenchmarks"
        )
    ],
    swiftLanguageModes: [.v6]
)
