import Arbor
import Foundation

/// Many heads: `heads` commits on the same version of a 10,000-record SQLite store, each
/// saving a record of its own (replicas that each sent one change to a hub without merging),
/// then one `mergeHeads` of them all, timed.
struct HeadsBenchmark {
    var heads: Int

    func run() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-heads-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try TransferBenchmark.open("sqlite:" + folder + "/store", create: true)
        let (_, base) = try await CommitBenchmark.commit(CommitBenchmark.items(10_000), in: store, batch: 10_000)
        var start = ContinuousClock.now
        for index in 0..<heads {
            var changes = ChangeSet()
            try changes.save(BenchmarkItem(id: "head-\(index)", title: "from replica \(index)", count: index, done: false))
            _ = try await store.commit(changes, message: "replica \(index)", parents: [base.id])
        }
        print(String(format: "heads: %d commits on one version in %.2f s; %d heads", heads, (ContinuousClock.now - start).seconds, try await store.heads().count))
        start = ContinuousClock.now
        let outcome = try await store.mergeHeads()
        let seconds = (ContinuousClock.now - start).seconds
        let records = outcome?.version?.recordCount ?? 0
        guard records == UInt64(10_000 + heads), try await store.heads().count == 1 else {
            throw ArborError(.engine, "benchmark check failed: the merge holds \(records) records")
        }
        print(String(format: "heads: merging %d heads into one took %.2f s", heads, seconds))
        try await store.close()
    }
}
