@testable import ArborLMDB
@testable import ArborSQLite
import CSQLite
import Foundation
import Testing
@testable import Arbor

/// Replaced nodes restated after the fact: ``Store/compactHistory(progress:)`` over a history
/// written whole, and exchanges and migrations into a store that keeps deltas.
@Suite struct CompactionTests {
    /// The engines that keep deltas, each opened whole or keeping deltas.
    enum Engine: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case sqlite, lmdb
        var testDescription: String { rawValue }

        func open(_ path: String, create: Bool, deltas: Bool) throws -> (backend: any Backend, deltaCount: () throws -> Int) {
            switch self {
            case .sqlite:
                let configuration = SQLiteBackend.Configuration(path: path, restatesReplacedNodes: deltas)
                let backend = create ? try SQLiteBackend.create(configuration) : try SQLiteBackend.open(configuration)
                return (backend, { try backend.deltaCount() })
            case .lmdb:
                let configuration = LMDBBackend.Configuration(path: path, restatesReplacedNodes: deltas)
                let backend = create ? try LMDBBackend.create(configuration) : try LMDBBackend.open(configuration)
                return (backend, { try backend.deltaCount() })
            }
        }
    }

    func withPaths(_ count: Int, _ body: ([String]) async throws -> Void) async throws {
        let paths = (0..<count).map { temporaryPath("compaction-\($0)") }
        defer { for path in paths { for suffix in ["", "-wal", "-shm", "-journal"] { removeItem(path + suffix) } } }
        try await body(paths)
    }

    /// Twelve commits of random-id edits, inserts and deletes on `store`, then (`branching`) a
    /// branch of two and its merge: the versions, oldest first. `halfway` runs after the sixth
    /// commit.
    static func writeHistory(
        _ store: Store, seed: UInt64, branching: Bool = true, halfway: () async throws -> Void = {}
    ) async throws -> [Version] {
        var random = SeededGenerator(seed: seed)
        var versions = [Version]()
        func changes(_ round: Int) throws -> ChangeSet { try DeltaHistoryCheck.changes(round: round, using: &random) }
        for round in 0..<12 {
            versions.append(try await store.commit(try changes(round)))
            if round == 5 { try await halfway() }
        }
        guard branching else { return versions }
        let fork = versions[9]
        versions.append(try await store.commit(try changes(12), parents: [fork.id]))
        versions.append(try await store.commit(try changes(13), parents: [versions.last!.id]))
        guard case .merged(let merge, _) = try await store.merge(versions[11].id, versions[13].id, strategy: .mostRecent) else {
            throw ArborError(.invalidInput, "the branches did not merge")
        }
        versions.append(merge)
        return versions
    }

    /// Every one of `versions` reads on `store` as on `reference`, and verify finds nothing wrong.
    static func expectSameHistory(_ store: Store, _ reference: Store, _ versions: [Version]) async throws {
        for (index, version) in versions.enumerated() {
            let records = try await store.records(ofType: "Item", at: version.id)
            #expect(records == (try await reference.records(ofType: "Item", at: version.id)), "version \(index) reads the same records")
        }
        let report = try await store.verify()
        #expect(report.isIntact, "verify finds nothing wrong: \(report.damage.prefix(3))")
    }

    /// A history written whole, compacted once the store keeps deltas, keeps the same nodes as
    /// deltas that commits restating as they went keep (a merge, which restates nothing as it
    /// commits, has its nodes restated against both parents: more), and reads as before;
    /// compacting again changes nothing.
    @Test(arguments: Engine.allCases, [false, true])
    func compactingAWholeHistoryKeepsWhatCommitsWouldHave(engine: Engine, branching: Bool) async throws {
        try await withPaths(2) { paths in
            let reference = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
            let versions = try await Self.writeHistory(reference, seed: 5, branching: branching)
            // Whole: the history arrives by exchange into a store that keeps no deltas.
            let (whole, wholeCount) = try engine.open(paths[0], create: true, deltas: false)
            try await reference.exchange(to: Store(backend: whole))
            #expect(try wholeCount() == 0)
            try await whole.close()
            // The same commits on a store that keeps deltas as it goes.
            let (restating, restatingCount) = try engine.open(paths[1], create: true, deltas: true)
            let direct = Store(backend: restating, configuration: .init(replica: "a"))
            let again = try await Self.writeHistory(direct, seed: 5, branching: branching)
            #expect(again.map(\.root) == versions.map(\.root))
            let committedDeltas = try restatingCount()
            try await restating.close()

            let (opened, deltaCount) = try engine.open(paths[0], create: false, deltas: true)
            let store = Store(backend: opened)
            let report = try await store.compactHistory()
            #expect(report.versions == versions.count)
            let compacted = try deltaCount()
            #expect(compacted > 100 && report.restatements >= compacted, "\(compacted) of \(report.restatements) offered")
            if branching {
                #expect(compacted > committedDeltas, "the merge's nodes too (\(compacted) against \(committedDeltas))")
            } else {
                #expect(compacted == committedDeltas, "compaction keeps what the commits kept (\(compacted) against \(committedDeltas))")
            }
            _ = try await store.compactHistory()
            #expect(try deltaCount() == compacted, "compacting again keeps nothing more")
            try await opened.close()

            let (cold, _) = try engine.open(paths[0], create: false, deltas: false)
            try await Self.expectSameHistory(Store(backend: cold, configuration: .init(nodeCacheCapacity: 0)), reference, versions)
            try await cold.close()
        }
    }

    /// An exchange into a store that keeps deltas restates what each version it brought
    /// replaced, also against the target's own earlier heads; a migration does the same, and
    /// still proves its copy.
    @Test(arguments: Engine.allCases) func exchangesAndMigrationsIntoADeltaStoreKeepDeltas(engine: Engine) async throws {
        try await withPaths(2) { paths in
            let reference = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
            let (opened, deltaCount) = try engine.open(paths[0], create: true, deltas: true)
            let target = Store(backend: opened)
            // Half the history, then the rest, as a replica catching up gets it.
            var afterFirst = 0
            let versions = try await Self.writeHistory(reference, seed: 9) {
                let first = try await reference.exchange(to: target)
                #expect(first.versions == 6 && first.restatements > 0)
                afterFirst = try deltaCount()
                #expect(afterFirst > 0)
            }
            let second = try await reference.exchange(to: target)
            #expect(second.versions == versions.count - 6 && second.restatements > 0)
            #expect(try deltaCount() > afterFirst, "versions built on the target's heads restate their nodes")
            try await Self.expectSameHistory(target, reference, versions)
            try await opened.close()

            // A line of commits brought by one exchange: the deltas its commits would have kept.
            let line = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
            let lineVersions = try await Self.writeHistory(line, seed: 9, branching: false)
            let (lineTarget, lineCount) = try engine.open(paths[1], create: true, deltas: true)
            try await line.exchange(to: Store(backend: lineTarget))
            let brought = try lineCount()
            try await lineTarget.close()
            for suffix in ["", "-wal", "-shm"] { removeItem(paths[1] + suffix) }
            let (lineCommitted, lineCommittedCount) = try engine.open(paths[1], create: true, deltas: true)
            let again = try await Self.writeHistory(Store(backend: lineCommitted, configuration: .init(replica: "a")), seed: 9, branching: false)
            #expect(again.map(\.root) == lineVersions.map(\.root))
            #expect(brought == (try lineCommittedCount()), "an exchange keeps what the commits kept")
            try await lineCommitted.close()
            for suffix in ["", "-wal", "-shm"] { removeItem(paths[1] + suffix) }

            let (migrated, migratedCount) = try engine.open(paths[1], create: true, deltas: true)
            let report = try await reference.migrate(to: Store(backend: migrated))
            #expect(report.verified && report.exchange.restatements > 0)
            #expect(try migratedCount() > 100)
            try await Self.expectSameHistory(Store(backend: migrated), reference, versions)
            try await migrated.close()
        }
    }

    /// After a compaction, a vacuum gives the space the deltas freed back to the file system:
    /// the SQLite file shrinks to pages without a free one, every version reads as before through
    /// a store opened afresh and verifies, and commits go on. A reader holding a snapshot keeps
    /// the log from being truncated, which the report says.
    @Test func aVacuumAfterACompactionShrinksTheSQLiteFile() async throws {
        try await withPaths(1) { paths in
            let reference = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
            let versions = try await Self.writeHistory(reference, seed: 9)
            let whole = try SQLiteBackend.create(.init(path: paths[0], synchronous: false))
            try await reference.exchange(to: Store(backend: whole))
            try await whole.close()
            let compacting = try SQLiteBackend.open(.init(path: paths[0], synchronous: false, restatesReplacedNodes: true))
            _ = try await Store(backend: compacting).compactHistory()
            // Closed, so that the log is checkpointed away: what the vacuum gives back is free pages.
            try await compacting.close()
            let backend = try SQLiteBackend.open(.init(path: paths[0], synchronous: false, busyTimeout: 200, restatesReplacedNodes: true))
            func freePages() async throws -> Int { try await backend.onWriter("test") { try $0.pragmaValue("freelist_count") } }
            let compacted = backend.fileBytes
            #expect(try await freePages() > 0)
            let report = try await backend.vacuum()
            #expect(report.bytesBefore == compacted && report.logTruncated)
            #expect(report.bytesAfter < compacted * 3 / 4, "the file shrank: \(compacted) -> \(report.bytesAfter) bytes")
            #expect(report.bytesAfter == backend.fileBytes)
            #expect(try await freePages() == 0)
            try await Self.expectSameHistory(Store(backend: backend, configuration: .init(nodeCacheCapacity: 0)), reference, versions)
            let store = Store(backend: backend)
            var random = SeededGenerator(seed: 1)
            let next = try await store.commit(try DeltaHistoryCheck.changes(round: 20, using: &random))
            #expect(try await store.heads().map(\.id) == [next.id])

            // Another connection's read snapshot: the vacuum lands, the log stays.
            var reader: OpaquePointer?
            #expect(sqlite3_open(paths[0], &reader) == SQLITE_OK)
            defer { sqlite3_close_v2(reader) }
            #expect(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM objects;", nil, nil, nil) == SQLITE_OK)
            let held = try await backend.vacuum()
            #expect(!held.logTruncated && held.bytesAfter > 0)
            #expect(sqlite3_exec(reader, "COMMIT", nil, nil, nil) == SQLITE_OK)
            try await Self.expectSameHistory(Store(backend: backend, configuration: .init(nodeCacheCapacity: 0)), reference, versions)
            try await backend.close()
            await #expect { try await backend.vacuum() } throws: { ($0 as? ArborError)?.code == .closed }
            let reopened = try SQLiteBackend.open(.init(path: paths[0], synchronous: false))
            try await Self.expectSameHistory(Store(backend: reopened, configuration: .init(nodeCacheCapacity: 0)), reference, versions)
            try await reopened.close()
        }
    }

    /// A store that keeps no deltas refuses to compact, and writes nothing.
    @Test func aStoreThatKeepsNoDeltasRefusesToCompact() async throws {
        let store = Store(backend: MemoryBackend())
        _ = try await Self.writeHistory(store, seed: 3)
        await #expect { try await store.compactHistory() } throws: { ($0 as? ArborError)?.code == .invalidInput }
    }

    /// A change replayed in slices keeps most of what it keeps in one piece, and every version
    /// still reads as before.
    @Test(arguments: Engine.allCases) func aLargeChangeIsReplayedInSlices(engine: Engine) async throws {
        try await withPaths(2) { paths in
            let reference = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
            let versions = try await Self.writeHistory(reference, seed: 13, branching: false)
            var counts = [Int]()
            for (path, sliceSize) in zip(paths, [ReplacedNodeRestater.defaultSliceSize, 20]) {
                let (whole, _) = try engine.open(path, create: true, deltas: false)
                try await reference.exchange(to: Store(backend: whole))
                try await whole.close()
                let (opened, deltaCount) = try engine.open(path, create: false, deltas: true)
                var restater = ReplacedNodeRestater(backend: opened)
                restater.sliceSize = sliceSize
                for (parent, version) in zip(versions, versions.dropFirst()) {
                    _ = try await restater.restate(replacedIn: parent.root, by: version.root)
                }
                counts.append(try deltaCount())
                try await Self.expectSameHistory(Store(backend: opened, configuration: .init(nodeCacheCapacity: 0)), reference, versions)
                try await opened.close()
            }
            // 150 changes a version: in slices of 20, the nodes above the leaves stay whole.
            #expect(counts[1] < counts[0] && counts[1] * 4 > counts[0] * 3, "\(counts[1]) in slices, \(counts[0]) at once")
        }
    }

    /// A merge that lands restates the nodes of the tree it edited, as a commit does; one
    /// computed only for its conflicts restates nothing.
    @Test(arguments: Engine.allCases) func aMergeRestatesWhatItReplaced(engine: Engine) async throws {
        try await withPaths(1) { paths in
            let (opened, deltaCount) = try engine.open(paths[0], create: true, deltas: true)
            let store = Store(backend: opened, configuration: .init(replica: "a"))
            let reference = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
            var random = SeededGenerator(seed: 21)
            let first = try DeltaHistoryCheck.changes(round: 0, using: &random)
            let base = (try await store.commit(first), try await reference.commit(first))
            let records = try await reference.records(ofType: "Item", at: base.1.id)
            // Two branches that change different records: they merge without a conflict.
            for side in 0..<2 {
                var changes = ChangeSet()
                for (index, record) in records.enumerated() where index % 2 == side {
                    var edited = record
                    edited.properties["side"] = .int(Int64(side))
                    try changes.save(edited)
                }
                try await store.commit(changes, parents: [base.0.id])
                try await reference.commit(changes, parents: [base.1.id])
            }
            #expect(try await store.heads().count == 2)
            let before = try deltaCount()
            #expect(try await store.conflicts().isEmpty)
            #expect(try deltaCount() == before, "a merge computed for its conflicts restates nothing")
            let merged = try #require(try await store.mergeHeads()?.version)
            #expect(try deltaCount() > before, "the merge restated the nodes it replaced")
            let expected = try #require(try await reference.mergeHeads()?.version)
            #expect(merged.root == expected.root, "the same records (the commits, made at other times, differ)")
            #expect(try await store.records(ofType: "Item", at: merged.id) == (try await reference.records(ofType: "Item", at: expected.id)))
            #expect(try await store.verify().isIntact)

            // Three heads, one of which conflicts with another: a manual merge stops at the
            // conflict, perhaps after the tournament's first merge was written, and restates
            // nothing; merged most recent, all three land and restate.
            for side in 0..<3 {
                var changes = ChangeSet()
                for (index, record) in records.enumerated() where index % 3 == side || (side == 2 && index == 0) {
                    var edited = record
                    edited.properties["third"] = .int(Int64(side))
                    try changes.save(edited)
                }
                try await store.commit(changes, parents: [merged.id])
            }
            let beforeThree = try deltaCount()
            guard case .conflicts? = try await store.mergeHeads(strategy: .manual) else {
                Issue.record("the heads conflict on record 0")
                return
            }
            #expect(try deltaCount() == beforeThree, "a tournament stopped at conflicts restates nothing")
            #expect(try await store.mergeHeads()?.version != nil)
            #expect(try deltaCount() > beforeThree, "a tournament that lands restates its merges' nodes")
            #expect(try await store.heads().count == 1)
            #expect(try await store.verify().isIntact)
            try await opened.close()
        }
    }

    /// The objects `backend` keeps as deltas.
    static func deltaHashes(_ backend: any Backend) async throws -> Set<Hash> {
        var hashes = [Hash]()
        try await backend.enumerateHashes(batchSize: 1_000) { hashes += $0 }
        return try Set(hashes.filter { hash in
            switch backend {
            case let lmdb as LMDBBackend: try lmdb.isDelta(hash)
            case let sqlite as SQLiteBackend: try sqlite.isDelta(hash)
            default: false
            }
        })
    }

    /// A version that brings back a tree an earlier one replaced (a revert) reads its nodes
    /// whole after a compaction and after an exchange, as after commits that restate as they go:
    /// all three keep the very same objects as deltas.
    @Test(arguments: Engine.allCases) func aRevertedTreeStaysWhole(engine: Engine) async throws {
        try await withPaths(3) { paths in
            var random = SeededGenerator(seed: 17)
            let first = try DeltaHistoryCheck.changes(round: 0, using: &random)
            let second = try DeltaHistoryCheck.changes(round: 1, using: &random)
            let reference = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
            let v0 = try await reference.commit(first)
            let v1 = try await reference.commit(second)
            // Back to v0's records: what v1 added goes, what it changed comes back.
            var revert = ChangeSet()
            let before = Dictionary(uniqueKeysWithValues: try await reference.records(ofType: "Item", at: v0.id).map { ($0.key, $0) })
            for record in try await reference.records(ofType: "Item", at: v1.id) {
                if let old = before[record.key] { try revert.save(old) } else { revert.delete(record.key) }
            }
            let v2 = try await reference.commit(revert)
            #expect(v2.root == v0.root)

            let (direct, _) = try engine.open(paths[0], create: true, deltas: true)
            let committing = Store(backend: direct, configuration: .init(replica: "a"))
            for changes in [first, second, revert] { try await committing.commit(changes) }
            let committed = try await Self.deltaHashes(direct)
            #expect(!committed.isEmpty && !committed.contains(v2.root), "commits leave the head's root whole")
            try await direct.close()

            let (whole, _) = try engine.open(paths[1], create: true, deltas: false)
            try await reference.exchange(to: Store(backend: whole))
            try await whole.close()
            let (compacting, _) = try engine.open(paths[1], create: false, deltas: true)
            _ = try await Store(backend: compacting).compactHistory()
            #expect(try await Self.deltaHashes(compacting) == committed, "compaction keeps the objects commits keep as deltas")
            try await compacting.close()

            let (receiving, _) = try engine.open(paths[2], create: true, deltas: true)
            try await reference.exchange(to: Store(backend: receiving))
            #expect(try await Self.deltaHashes(receiving) == committed, "an exchange keeps the objects commits keep as deltas")
            try await Self.expectSameHistory(Store(backend: receiving), reference, [v0, v1, v2])
            try await receiving.close()
        }
    }
}
