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

    /// The history check (``DeltaHistoryCheck``): every version reads as it does on memory.
    @Test func aHistoryKeptAsDeltasReadsAsTheWholeOneDoes() async throws {
        try await withPath { path in
            let backend = try SQLiteBackend.create(.init(path: path, restatesReplacedNodes: true))
            try await DeltaHistoryCheck.run(backend, seed: 7, deltaCount: { try backend.deltaCount() }, reopen: { try SQLiteBackend.open(.init(path: path)) })
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
