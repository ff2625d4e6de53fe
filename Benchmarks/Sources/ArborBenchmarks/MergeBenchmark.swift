import Arbor
import Foundation

/// Merges two branches that each changed `changes` records of a store of `n` records, for
/// several `n`, and reports the time and the objects read: a merge should cost O(k log n).
struct MergeBenchmark {
    var sizes: [Int]
    var changes: Int

    func run() async throws {
        var results = [(n: Int, seconds: Double, reads: Int)]()
        for n in sizes {
            let backend = ReadCountingBackend(MemoryBackend())
            let loader = Store(backend: backend, configuration: .init(replica: "bench"))
            // The merge runs with no shared node cache, so that every node it reads is counted.
            let store = Store(backend: backend, configuration: .init(replica: "bench", nodeCacheCapacity: 0))
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
                b.count = -index
                try ours.save(a)
                try theirs.save(b)
            }
            let left = try await loader.commit(ours, message: "ours", parents: [base.id])
            let right = try await loader.commit(theirs, message: "theirs", parents: [base.id])
            backend.reset()
            let start = ContinuousClock.now
            let outcome = try await store.merge(left.id, right.id, strategy: .mostRecent)
            let elapsed = ContinuousClock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            guard case .merged(_, let report) = outcome else { print("n=\(n): no merge commit"); return }
            results.append((n, seconds, backend.reads))
            print(String(format: "merge n=%d k=%d per side: %.1f ms, %d objects read, %d records changed, %d conflicts",
                         n, changes, seconds * 1000, backend.reads, report.changed.count, report.resolved.count))
        }
        if let small = results.first, let large = results.last, results.count > 1 {
            print(String(format: "ratio n=%d / n=%d: time %.2fx (target <= 1.5x), reads %.2fx", large.n, small.n,
                         large.seconds / small.seconds, Double(large.reads) / Double(small.reads)))
        }
    }
}
