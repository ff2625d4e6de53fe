@testable import ArborSQLite
import Foundation
import Testing
@testable import Arbor

/// SQLite stores that keep the index nodes commits replaced as deltas
/// (``SQLiteBackend/Configuration/restatesReplacedNodes``).
@Suite struct SQLiteDeltaTests {
    func withPath(_ body: (String) async throws -> Void) async throws {
        let path = temporaryPath("sqlite-deltas")
        defer { for suffix in ["", "-wal", "-shm", "-journal"] { removeItem(path + suffix) } }
        try await body(path)
    }

    /// Twelve commits of edits, inserts and deletes with random ids, on a SQLite store that keeps
    /// deltas and on a memory store: every version holds the same records on both (the same
    /// roots), read through a cold store; verify finds nothing wrong; an exchange out of the
    /// SQLite store copies every version whole.
    @Test func aHistoryKeptAsDeltasReadsAsTheWholeOneDoes() async throws {
        try await withPath { path in
            let backend = try SQLiteBackend.create(.init(path: path, restatesReplacedNodes: true))
            let store = Store(backend: backend, configuration: .init(replica: "a"))
            let reference = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
            var random = SeededGenerator(seed: 7)
            var versions = [(sqlite: Version, memory: Version)]()
            for round in 0..<12 {
                var changes = ChangeSet()
                for _ in 0..<150 {
                    let id = String(format: "%08x", UInt32.random(in: 0..<1_500, using: &random) &* 2_654_435_761)
                    if round > 2 && Int.random(in: 0..<10, using: &random) == 0 {
                        changes.delete(RecordKey(type: "Item", id: id))
                    } else {
                        try changes.save(Record(type: "Item", id: id, properties: ["round": .int(Int64(round)), "text": .string(String(repeating: "x", count: Int.random(in: 20..<120, using: &random)))]))
                    }
                }
                versions.append((try await store.commit(changes), try await reference.commit(changes)))
            }
            let restated = try backend.deltaCount()
            #expect(restated > 100, "commits restated the nodes they replaced (\(restated))")
            try await store.close()

            let reopened = Store(backend: try SQLiteBackend.open(.init(path: path)), configuration: .init(nodeCacheCapacity: 0))
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

    /// A store of format version 1 (no delta tables) is brought to version 2 when opened for
    /// writing, and then keeps deltas.
    @Test func aVersionOneStoreIsUpgradedOnOpen() async throws {
        try await withPath { path in
            try await SQLiteBackend.create(.init(path: path)).close()
            try rawSQLite(path, "DROP TABLE deltas")
            try rawSQLite(path, "DROP TABLE delta_heights")
            try rawSQLite(path, "UPDATE arbor_meta SET value = '1' WHERE key = 'version'")
            let backend = try SQLiteBackend.open(.init(path: path))
            let base = (0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let old = Array(base[0..<1_000]) + [1, 2, 3]
            try await backend.put([(Hash.of(base), base), (Hash.of(old), old)])
            try await backend.restate([Restatement(hash: Hash.of(old), base: Hash.of(base), delta: [0xD1, 0xEB, 0x07, 1, 0, 0xE8, 0x07, 0, 3, 1, 2, 3])])
            #expect(try backend.deltaCount() == 1)
            #expect(try await backend.get([Hash.of(old)])[Hash.of(old)] == old)
            try await backend.close()
            let again = try SQLiteBackend.open(.init(path: path))
            #expect(try again.deltaCount() == 1 && again.hasDeltaTables)
            try await again.close()
        }
    }
}
