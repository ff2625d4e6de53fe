import Arbor
import Foundation

/// Splits the commit benchmark's time into its phases: encoding values into records, and
/// committing already-encoded records.
enum PhaseProbe {
    static func run(records: Int, batch: Int, orderedIDs: Bool) async throws {
        let items = CommitBenchmark.items(records, ordered: orderedIDs)
        var start = ContinuousClock.now
        var encoded = [Record]()
        encoded.reserveCapacity(records)
        for item in items { encoded += try RecordEncoder.records(of: item) }
        print(String(format: "phase   encode %d values to records: %.3f s", records, (ContinuousClock.now - start).seconds))
        start = ContinuousClock.now
        var saved = ChangeSet()
        for item in items { try saved.save(item) }
        print(String(format: "phase   save %d values into a change set: %.3f s", records, (ContinuousClock.now - start).seconds))
        start = ContinuousClock.now
        var savedRecords = ChangeSet()
        for record in encoded { try savedRecords.save(record) }
        print(String(format: "phase   save %d records into a change set: %.3f s", records, (ContinuousClock.now - start).seconds))

        let capacity = Int(ProcessInfo.processInfo.environment["ARBOR_NODE_CACHE"] ?? "") ?? Store.Configuration().nodeCacheCapacity
        let megabytes = Int(ProcessInfo.processInfo.environment["ARBOR_CACHE_MB"] ?? "") ?? Store.Configuration().cacheMemoryLimit >> 20
        let store = Store(backend: MemoryBackend(), configuration: .init(nodeCacheCapacity: capacity, cacheMemoryLimit: megabytes << 20))
        start = ContinuousClock.now
        var committed = 0
        while committed < encoded.count {
            var changes = ChangeSet()
            for record in encoded[committed..<min(committed + batch, encoded.count)] { try changes.save(record) }
            try await store.commit(changes)
            committed += batch
        }
        print(String(format: "phase   commit %d encoded records: %.3f s", records, (ContinuousClock.now - start).seconds))
    }
}
