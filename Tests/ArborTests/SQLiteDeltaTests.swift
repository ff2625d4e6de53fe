@testable import ArborSQLite
import Foundation
import Testing
@testable import Arbor

/// SQLite stores that keep the index nodes commits replaced as deltas
/// (``SQLiteBackend/Configuration/restatesReplacedNodes``).
@Suite struct SQLiteDeltaTests {
    /// The format version a store's file records.
    func sqliteVersion(_ path: String) async throws -> String? {
        let backend = try SQLiteBackend.open(.init(path: path))
        let version = try backend.metaValue("version")
        try await backend.close()
        return version
    }

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

    /// A store is created at format version 1 and stays there, readable by Arbor before deltas,
    /// unless deltas are asked for: then it is brought to version 3 when opened, and keeps them.
    @Test func aStoreTakesTheDeltaFormatOnlyWhenDeltasAreAskedFor() async throws {
        try await withPath { path in
            try await SQLiteBackend.create(.init(path: path)).close()
            let kept = (0..<500).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let plain = try SQLiteBackend.open(.init(path: path))
            try await plain.put([(Hash.of(kept), kept)])
            #expect(!plain.hasDeltaColumns && !plain.acceptsRestatements)
            // A restatement is a hint such a store does not take.
            let copy = Array(kept[0..<400])
            try await plain.put([(Hash.of(copy), copy)])
            try await plain.restate([Restatement(hash: Hash.of(copy), base: Hash.of(kept), delta: [0xD1, 0x90, 0x03, 1, 0, 0x90, 0x03])])
            #expect(try plain.deltaCount() == 0)
            let read = try await plain.get([Hash.of(copy)])
            #expect(read[Hash.of(copy)] == copy)
            try await plain.close()
            let first = try await sqliteVersion(path)
            #expect(first == "1")

            let backend = try SQLiteBackend.open(.init(path: path, restatesReplacedNodes: true))
            #expect(backend.hasDeltaColumns && backend.acceptsRestatements)
            let second = try await sqliteVersion(path)
            #expect(second == "3")
            #expect(try await backend.get([Hash.of(kept)])[Hash.of(kept)] == kept)
            let base = (0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let old = Array(base[0..<1_000]) + [1, 2, 3]
            try await backend.put([(Hash.of(base), base), (Hash.of(old), old)])
            try await backend.restate([Restatement(hash: Hash.of(old), base: Hash.of(base), delta: [0xD1, 0xEB, 0x07, 1, 0, 0xE8, 0x07, 0, 3, 1, 2, 3])])
            #expect(try backend.deltaCount() == 1)
            #expect(try await backend.get([Hash.of(old)])[Hash.of(old)] == old)
            try await backend.close()
            // Opened without asking for deltas, a version 3 store still reads them.
            let again = try SQLiteBackend.open(.init(path: path))
            #expect(try again.deltaCount() == 1 && again.hasDeltaColumns)
            #expect(try await again.get([Hash.of(old)])[Hash.of(old)] == old)
            try await again.close()
        }
    }

    /// A backend that opened a version 1 store before another process brought it to version 3
    /// and restated objects in it still reads them whole, lists them whole, and makes a delta
    /// whole before it removes its base.
    @Test func aBackendOpenedBeforeTheUpgradeStillReadsDeltas() async throws {
        try await withPath { path in
            try await SQLiteBackend.create(.init(path: path)).close()
            let early = try SQLiteBackend.open(.init(path: path))
            #expect(!early.hasDeltaColumns)
            let base = (0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
            let old = Array(base[0..<1_000]) + [9, 8, 7]
            try await early.put([(Hash.of(base), base), (Hash.of(old), old)])

            let upgrading = try SQLiteBackend.open(.init(path: path, restatesReplacedNodes: true))
            try await upgrading.restate([Restatement(hash: Hash.of(old), base: Hash.of(base), delta: [0xD1, 0xEB, 0x07, 1, 0, 0xE8, 0x07, 0, 3, 9, 8, 7])])
            #expect(try upgrading.deltaCount() == 1)

            #expect(try await early.get([Hash.of(old)])[Hash.of(old)] == old)
            let lent = try early.withObjectBytes(Hash.of(old)) { $0.map { Array($0) } }
            #expect(lent == old)
            var listed = [Hash: [UInt8]]()
            try await early.enumerateObjects(batchSize: 10) { batch in for (hash, bytes) in batch { listed[hash] = bytes } }
            #expect(listed == [Hash.of(base): base, Hash.of(old): old])
            #expect(try await early.objectSizes([Hash.of(old)]) == [Hash.of(old): old.count])
            try await early.delete([Hash.of(base)])
            #expect(try await early.get([Hash.of(old)])[Hash.of(old)] == old)
            #expect(try await upgrading.get([Hash.of(old)])[Hash.of(old)] == old)
            try await early.close()
            try await upgrading.close()
        }
    }
}
