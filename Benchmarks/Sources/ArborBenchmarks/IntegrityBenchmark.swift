import Arbor
import Foundation

/// `verify` and `gc` on a store of `records` records (commits of `commitSize`, all history) on
/// each engine, each run in a child process that reports its own peak memory. JSON stores are
/// built with `jsonRecords`, as JSON writes a file per object.
struct IntegrityBenchmark {
    var transfer: TransferBenchmark

    func run() async throws {
        try FileManager.default.createDirectory(atPath: transfer.folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: transfer.folder) }
        print("integrity: verify and gc on \(transfer.records) records (JSON: \(transfer.jsonRecords)), commits of \(transfer.commitSize), all history")
        print("engine     records   objects   verify s  peak anon MB      gc s  removed")
        for engine in transfer.engines {
            let count = engine == "json" ? transfer.jsonRecords : transfer.records
            let (url, cleanup) = try transfer.makeLocation(engine, "integrity")
            defer { cleanup() }
            if engine == "json" {
                // Through a migration from SQLite: JSON writes a file per object, with fsync.
                let (seed, seedCleanup) = try transfer.makeLocation("sqlite", "seed")
                defer { seedCleanup() }
                try await build(seed, count)
                _ = try await transfer.child(["migrate-child", seed, url])
            } else {
                try await build(url, count)
            }
            let verify = try await transfer.child(["verify-child", url, "-"])
            let gc = try await transfer.child(["gc-child", url, "-"])
            print(String(format: "%-8@ %9d %9.0f %10.2f %13.0f %9.2f %8.0f", engine, count, verify["objects"] ?? 0,
                         verify["seconds"] ?? 0, verify["peakAnonMB"] ?? 0, gc["seconds"] ?? 0, gc["removed"] ?? 0))
        }
    }

    private func build(_ url: String, _ count: Int) async throws {
        let store = try TransferBenchmark.open(url, create: true)
        _ = try await CommitBenchmark.commit(CommitBenchmark.items(count), in: store, batch: transfer.commitSize)
        try await store.close()
    }

    /// `verify-child URL -`: verifies and prints `key=value` lines.
    static func verifyChild(_ url: String) async throws {
        let sampler = AnonymousMemorySampler()
        let store = try TransferBenchmark.open(url, create: false)
        let report = try await store.verify()
        guard report.isIntact else { throw ArborError(.corruptObject, "the benchmark store is damaged: \(report.damage.prefix(3))") }
        print("seconds=\(report.seconds)\nobjects=\(report.reachableObjects)\npeakAnonMB=\(sampler.peakMegabytes)")
        try await store.close()
    }

    /// `gc-child URL -`: collects garbage (no grace period: nothing else writes) and prints `key=value` lines.
    static func gcChild(_ url: String) async throws {
        let store = try TransferBenchmark.open(url, create: false)
        let report = try await store.collectGarbage(gracePeriod: .zero)
        print("seconds=\(report.seconds)\nremoved=\(report.removedObjects)")
        try await store.close()
    }
}
