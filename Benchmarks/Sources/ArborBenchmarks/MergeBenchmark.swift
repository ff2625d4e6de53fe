import Arbor
import ArborLMDB
import ArborSQLite
import Foundation

/// Merges two branches that each changed `changes` records of a store of `n` records, for
/// several `n`, and reports the time and the objects read: a merge should cost O(k log n).
/// Runs on the memory engine, or on `engine` (`sqlite`, `lmdb`) in a temporary folder.
struct MergeBenchmark {
    var sizes: [Int]
    var changes: Int
    var engine = "memory"
    var conflicting = false
    /// Merges per size (7, or ARBOR_BENCH_REPETITIONS); the median is reported, and the first
    /// (the only one that writes the merge's new nodes; later ones find them stored) beside it.
    /// Each runs through a fresh store with the default caches, as after opening a store, so the
    /// objects counted are those the merge fetched from the engine.
    static let repetitions = max(Int(ProcessInfo.processInfo.environment["ARBOR_BENCH_REPETITIONS"] ?? "") ?? 7, 1)
    /// The peak of anonymous memory over a size's merges, above the figure before them.
    let sampler = AnonymousMemorySampler()

    func run() async throws {
        var results = [(n: Int, seconds: Double, reads: Int)]()
        print("merge on \(engine)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-merge-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for n in sizes {
            let engineBackend: any Backend = switch engine {
            case "sqlite": try SQLiteBackend.create(.init(path: "\(folder)/\(n).sqlite"))
            case "lmdb": try LMDBBackend.create(.init(path: "\(folder)/\(n)"))
            case "memory": MemoryBackend()
            default: throw ArborError(.invalidInput, "the merge benchmark runs on memory, sqlite or lmdb, not \(engine)")
            }
            let backend = ReadCountingBackend(engineBackend)
            let loader = Store(backend: backend, configuration: .init(replica: "bench"))
            let items = CommitBenchmark.items(n)
            var committed = 0
            var base: Version?
            while committed < items.count {
                var batch = ChangeSet()
                for item in items[committed..<min(committed + 50_000, items.count)] { try batch.save(item) }
                base = try await loader.commit(batch, message: "load")
                committed += 50_000
            }
            guard let base else { return }
            var ours = ChangeSet(), theirs = ChangeSet()
            for index in 0..<changes {
                var a = items[(index * 7919) % n], b = items[(index * 104_729 + 13) % n]
                a.title = "ours \(index)"
                // `--conflicts`: both sides change the title, so keys both changed conflict.
                if conflicting { b.title = "theirs \(index)" } else { b.count = -index }
                try ours.save(a)
                try theirs.save(b)
            }
            let left = try await loader.commit(ours, message: "ours", parents: [base.id])
            let right = try await loader.commit(theirs, message: "theirs", parents: [base.id])
            // The median of several merges, each through a fresh store: one merge takes
            // milliseconds, and a single one varied by half from run to run.
            var runs = [(seconds: Double, reads: Int, report: MergeReport)]()
            // Peak anonymous memory above the figure before the merges, the largest of the runs.
            let baseline = sampler.resetToBaseline()
            for _ in 0..<Self.repetitions {
                let store = Store(backend: backend, configuration: .init(replica: "bench"))
                backend.reset()
                let start = ContinuousClock.now
                let outcome = try await store.merge(left.id, right.id, strategy: .mostRecent)
                let seconds = (ContinuousClock.now - start).seconds
                guard case .merged(_, let report) = outcome else { print("n=\(n): no merge commit"); return }
                runs.append((seconds, backend.reads, report))
            }
            let median = runs.sorted { $0.seconds < $1.seconds }[runs.count / 2]
            results.append((n, median.seconds, median.reads))
            print(String(format: "merge n=%d k=%d per side: %.1f ms (median of %d; in order, the first writing: %@), %d objects read, %d records changed, %d conflicts, peak anon +%.0f MB",
                         n, changes, median.seconds * 1000, runs.count, runs.map { String(format: "%.1f", $0.seconds * 1000) }.joined(separator: " "),
                         median.reads, median.report.changed.count, median.report.resolved.count, sampler.peakMegabytes - baseline))
            try await loader.close()
        }
        if let small = results.first, let large = results.last, results.count > 1 {
            print(String(format: "ratio n=%d / n=%d: time %.2fx (target <= 1.5x), reads %.2fx", large.n, small.n,
                         large.seconds / small.seconds, Double(large.reads) / Double(small.reads)))
        }
    }
}
