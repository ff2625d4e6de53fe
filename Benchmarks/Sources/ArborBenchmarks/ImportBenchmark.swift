import Arbor
import Foundation

/// A large import: `records` records of ~100 bytes committed in commits of `batch` (one commit
/// of all of them with `--batch` equal to `--records`) into a new store on each engine, with the
/// seconds, the rate and the peak of anonymous memory (heap and stacks) above what the process
/// held before the first commit, the values to import included: what a commit holds of its
/// change set and of the index it builds.
struct ImportBenchmark {
    var records: Int
    var batch: Int
    var engines: [String]
    var orderedIDs = false
    let sampler = AnonymousMemorySampler()

    func run() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-import-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let items = CommitBenchmark.items(records, ordered: orderedIDs)
        for engine in engines {
            let store = try TransferBenchmark.open(engine == "memory" ? "memory:" : "\(engine):\(folder)/\(engine)", create: true)
            // Settle the sampler on the figure before the commits.
            let baseline = sampler.resetToBaseline()
            let (seconds, _) = try await CommitBenchmark.commit(items, in: store, batch: batch)
            let peak = sampler.peakMegabytes
            try await store.close()
            // Per record of one commit: the store's caches hold more than a commit's worth.
            let perRecord = batch >= records ? String(format: " (%.0f bytes per record)", (peak - baseline) * 1_048_576 / Double(records)) : ""
            print(String(format: "import: %-6@ %d records (%@ ids) in commits of %d: %.2f s, %.0f records/s, peak anon +%.0f MB%@",
                         engine, records, orderedIDs ? "ordered" : "random", batch, seconds, Double(records) / seconds, peak - baseline, perRecord))
        }
    }
}
