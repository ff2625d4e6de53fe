import Arbor
import ArborJSON
import Foundation

/// The record the commit benchmark writes: about 100 bytes once encoded.
struct BenchmarkItem: Storable {
    var id: String
    var title: String
    var count: Int
    var done: Bool
}

/// Commits `records` records of ~100 bytes in commits of `batch` through the Store API, the
/// same path an application takes, and reports records per second.
struct CommitBenchmark {
    var records: Int
    var batch: Int

    /// Deterministic ids, so runs are comparable: pseudo-random, whose keys land all over the
    /// index, or with `ordered`, counters that sort in the order they are made.
    static func items(_ count: Int, ordered: Bool = false) -> [BenchmarkItem] {
        var state: UInt64 = 0x5EED
        return (0..<count).map { index in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            // Ordered: ids that sort as they are made, as time-ordered ids (UUIDv7, ULID) do.
            let hex = String(ordered ? UInt64(index) : state >> 1, radix: 16)
            let id = ordered ? String(repeating: "0", count: 16 - hex.count) + hex : hex
            return BenchmarkItem(id: id, title: "Item number \(index) with a title long enough to make the record ~100 bytes", count: index, done: index % 2 == 0)
        }
    }

    /// The keys of `count` items picked at random (with repeats) from `items`.
    static func randomKeys(_ count: Int, of items: [BenchmarkItem], using generator: inout some RandomNumberGenerator) -> [RecordKey] {
        (0..<count).map { _ in RecordKey(type: BenchmarkItem.typeName, id: items[Int.random(in: 0..<items.count, using: &generator)].id) }
    }

    /// Commits `items` through `store` in commits of `batch` values; returns the seconds taken
    /// and the head, checked to hold every item.
    static func commit(_ items: [BenchmarkItem], in store: Store, batch: Int) async throws -> (seconds: Double, head: Version) {
        let start = ContinuousClock.now
        var committed = 0
        while committed < items.count {
            var changes = ChangeSet()
            for item in items[committed..<min(committed + batch, items.count)] { try changes.save(item) }
            try await store.commit(changes, message: "batch \(committed / batch)")
            committed += batch
        }
        let seconds = (ContinuousClock.now - start).seconds
        guard let head = try await store.head(), head.recordCount == UInt64(items.count) else {
            throw ArborError(.engine, "benchmark check failed: the head does not hold all \(items.count) records")
        }
        return (seconds, head)
    }

    func run(on backend: any Backend, label: String) async throws -> Double {
        let store = Store(backend: backend, configuration: .init(replica: "bench"))
        let items = CommitBenchmark.items(records)
        let recordBytes = RecordCodingProbe.size(of: items[0])
        let (seconds, _) = try await CommitBenchmark.commit(items, in: store, batch: batch)
        print(String(format: "commit  %-7@ %9d records (%3d bytes each as JSON) in commits of %5d: %8.3f s  %10.0f records/s",
                     label, records, recordBytes, batch, seconds, Double(records) / seconds))
        try await store.close()
        return seconds
    }
}

enum RecordCodingProbe {
    /// The size of a value's record rendered as compact JSON (its canonical bytes are a little smaller).
    static func size(of item: BenchmarkItem) -> Int {
        guard let record = try? RecordEncoder.records(of: item).first else { return 0 }
        return JSONValue(properties: record.properties).serialized().utf8.count
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
