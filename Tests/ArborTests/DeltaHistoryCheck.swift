import Foundation
import Testing
@testable import Arbor

/// The history check that every backend keeping replaced nodes as deltas must pass.
enum DeltaHistoryCheck {
    /// Round `round` of a random-id history: 150 saves of records of 20 to 120 bytes among
    /// 1,500 ids, and from the fourth round on about one delete in ten.
    static func changes(round: Int, using random: inout SeededGenerator) throws -> ChangeSet {
        var changes = ChangeSet()
        for _ in 0..<150 {
            let id = String(format: "%08x", UInt32.random(in: 0..<1_500, using: &random) &* 2_654_435_761)
            if round > 2 && Int.random(in: 0..<10, using: &random) == 0 {
                changes.delete(RecordKey(type: "Item", id: id))
            } else {
                try changes.save(Record(type: "Item", id: id, properties: [
                    "round": .int(Int64(round)), "text": .string(String(repeating: "x", count: Int.random(in: 20..<120, using: &random))),
                ]))
            }
        }
        return changes
    }

    /// Twelve commits of edits, inserts and deletes with random ids from `seed`, on `backend`
    /// (which keeps deltas) and on a memory store: more than 100 nodes become deltas
    /// (`deltaCount`); every version holds the same records on both (the same roots), read
    /// through a cold store on `reopen()`; verify finds nothing wrong; an exchange out copies
    /// every version whole. Closes both backends.
    static func run(
        _ backend: any Backend, seed: UInt64, deltaCount: () throws -> Int, reopen: () throws -> any Backend
    ) async throws {
        let store = Store(backend: backend, configuration: .init(replica: "a"))
        let reference = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
        var random = SeededGenerator(seed: seed)
        var versions = [(restating: Version, memory: Version)]()
        for round in 0..<12 {
            let changes = try Self.changes(round: round, using: &random)
            versions.append((try await store.commit(changes), try await reference.commit(changes)))
        }
        let restated = try deltaCount()
        #expect(restated > 100, "commits restated the nodes they replaced (\(restated))")
        try await store.close()

        let reopened = Store(backend: try reopen(), configuration: .init(nodeCacheCapacity: 0))
        for (index, (version, expected)) in versions.enumerated() {
            #expect(version.root == expected.root, "version \(index) has the same root on both stores")
            let records = try await reopened.records(ofType: "Item", at: version.id)
            let want = try await reference.records(ofType: "Item", at: expected.id)
            #expect(records == want, "version \(index) reads the same records")
        }
        let report = try await reopened.verify()
        #expect(report.damage.isEmpty && report.missingCount == 0, "verify finds nothing wrong: \(report.damage.prefix(3))")

        let copy = Store(backend: MemoryBackend(), configuration: .init(replica: "b"))
        try await reopened.exchange(to: copy)
        for (version, expected) in versions {
            #expect(try await copy.records(ofType: "Item", at: version.id) == (try await reference.records(ofType: "Item", at: expected.id)))
        }
        try await reopened.close()
    }
}
