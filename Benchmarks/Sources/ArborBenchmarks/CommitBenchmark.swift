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

    /// Deterministic pseudo-random ids, so runs are comparable and keys land all over the index.
    static func items(_ count: Int) -> [BenchmarkItem] {
        var state: UInt64 = 0x5EED
        return (0..<count).map { index in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let id = String(state >> 1, radix: 16)
            return BenchmarkItem(id: id, title: "Item number \(index) with a title long enough to make the record ~100 bytes", count: index, done: index % 2 == 0)
        }
    }

    func run(on backend: any Backend, label: String) async throws -> Double {
        let store = Store(backend: backend, configuration: .init(replica: "bench"))
        let items = CommitBenchmark.items(records)
        let recordBytes = RecordCodingProbe.size(of: items[0])
        let start = ContinuousClock.now
        var committed = 0
        while committed < items.count {
            var changes = ChangeSet()
            for item in items[committed..<min(committed + batch, items.count)] { try changes.save(item) }
            try await store.commit(changes, message: "batch \(committed / batch)")
            committed += batch
        }
        let seconds = (ContinuousClock.now - start).seconds
        let head = try await store.head()
        guard head?.recordCount == UInt64(records) else {
            throw ArborError(.engine, "benchmark check failed: the head holds \(head?.recordCount ?? 0) records, not \(records)")
        }
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
