import Arbor
import Foundation

/// `verify` and `gc` on a store of `records` records (commits of `commitSize`, all history) on
/// each engine, each run in a child process that reports its own peak memory; then `gc` of the
/// same objects as garbage (copied into a store whose heads are then removed), a sweep of all;
/// then `repair` of the store with one object in a hundred deleted and one in a thousand
/// corrupted, from a copy of it on the same engine made before, beside its own `verify`. JSON stores are
/// built with `jsonRecords`, as JSON writes a file per object.
struct IntegrityBenchmark {
    var transfer: TransferBenchmark

    func run() async throws {
        try FileManager.default.createDirectory(atPath: transfer.folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: transfer.folder) }
        print("integrity: verify and gc on \(transfer.records) records (JSON: \(transfer.jsonRecords)), commits of \(transfer.commitSize), all history")
        print("engine     records   objects   verify s  peak anon MB      gc s  removed   sweep s    swept")
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
            // A sweep: the same objects, copied blind into a store whose heads then go, all garbage.
            let (garbage, garbageCleanup) = try transfer.makeLocation(engine, "garbage")
            defer { garbageCleanup() }
            _ = try await transfer.child(["copy-child", url, garbage])
            let emptied = try TransferBenchmark.open(garbage, create: false)
            _ = try await emptied.backend.compareAndSwap(ref: "heads", expected: try await emptied.backend.refs()["heads"], new: nil)
            try await emptied.close()
            let sweep = try await transfer.child(["gc-child", garbage, "-"])
            // A repair: the store damaged (one object in a hundred gone, one in a thousand
            // overwritten), mended from a copy made before (the sweep emptied the other).
            let (replica, replicaCleanup) = try transfer.makeLocation(engine, "replica")
            defer { replicaCleanup() }
            _ = try await transfer.child(["copy-child", url, replica])
            let damaged = try TransferBenchmark.open(url, create: false)
            let hashes = try await damaged.backend.allHashes().sorted()
            let removed = stride(from: 0, to: hashes.count, by: 100).map { hashes[$0] }
            try await damaged.backend.delete(removed)
            let overwritten = stride(from: 50, to: hashes.count, by: 1_000).map { (hashes[$0], Array("damaged".utf8)) }
            try await damaged.backend.replace(overwritten)
            try await damaged.close()
            let repair = try await transfer.child(["repair-child", url, replica])
            print(String(format: "%-8@ %9d %9.0f %10.2f %13.0f %9.2f %8.0f %9.2f %8.0f", engine, count, verify["objects"] ?? 0,
                         verify["seconds"] ?? 0, verify["peakAnonMB"] ?? 0, gc["seconds"] ?? 0, gc["removed"] ?? 0,
                         sweep["seconds"] ?? 0, sweep["removed"] ?? 0))
            print(String(format: "  repair of %d deleted and %d overwritten objects: %.2f s (%.2fx verify), %.0f objects written, %.0f passes, peak anon %.0f MB",
                         removed.count, overwritten.count, repair["seconds"] ?? 0, (repair["seconds"] ?? 0) / max(verify["seconds"] ?? 1, 0.001),
                         repair["written"] ?? 0, repair["passes"] ?? 0, repair["peakAnonMB"] ?? 0))
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

    /// `repair-child URL REPLICA`: repairs URL from REPLICA and prints `key=value` lines.
    static func repairChild(_ url: String, from replicaURL: String) async throws {
        let sampler = AnonymousMemorySampler()
        let store = try TransferBenchmark.open(url, create: false)
        let replica = try TransferBenchmark.open(replicaURL, create: false)
        let report = try await store.repair(from: replica)
        guard report.isIntact else { throw ArborError(.corruptObject, "the repair left damage: \(report.unrepaired.prefix(3))") }
        print("seconds=\(report.seconds)\nwritten=\(report.objectsWritten)\npasses=\(report.passes)\npeakAnonMB=\(sampler.peakMegabytes)")
        try await store.close()
        try await replica.close()
    }
}
