import Arbor
import Foundation

/// Point reads of a store made once (`build`: `records` records in commits of 10,000, as the
/// `engines` benchmark commits them), in several rounds, each through a fresh `Store` so that
/// its caches start cold, as after opening a store. The same seeded keys every time: two builds
/// read the same store the same way, alternately, which is how a change to the read path is
/// measured on a noisy machine without building the store again for each.
struct ReadBenchmark {
    var url: String
    var records: Int
    var reads: Int
    var build = false
    /// Tasks reading at once, each a share of the keys through the same snapshot.
    var tasks = 1
    var rounds = 3

    func run() async throws {
        let items = CommitBenchmark.items(records)
        if build {
            let store = try TransferBenchmark.open(url, create: true)
            let (seconds, _) = try await CommitBenchmark.commit(items, in: store, batch: 10_000)
            try await store.close()
            print(String(format: "reads: built %@ with %d records in %.1f s", url, records, seconds))
        }
        var generator = FastRandom(state: 0xB0B)
        let keys = CommitBenchmark.randomKeys(reads, of: items, using: &generator)
        var times = [Double]()
        for _ in 0..<rounds {
            let store = try TransferBenchmark.open(url, create: false)
            let start = ContinuousClock.now
            let snapshot = try await store.snapshot()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for share in keys.chunks(of: (keys.count + tasks - 1) / tasks) {
                    group.addTask { try await EngineBenchmark.readEach(share, from: snapshot) }
                }
                try await group.waitForAll()
            }
            times.append((ContinuousClock.now - start).seconds)
            try await store.close()
        }
        print(String(format: "reads: %d point reads of %d records at %@ by %d task(s): %@ s (median %.3f s)", reads, records, url, tasks,
                     times.map { String(format: "%.3f", $0) }.joined(separator: " "), times.sorted()[times.count / 2]))
    }
}

extension Array {
    /// The array in consecutive pieces of at most `size` elements.
    func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: Swift.max(size, 1)).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
