@testable import ArborLMDB
@testable import ArborSQLite
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

            let (migrated, migratedCount) = try engine.open(paths[1], create: true, deltas: true)
            let report = try await reference.migrate(to: Store(backend: migrated))
            #expect(report.verified && report.exchange.restatements > 0)
            #expect(try migratedCount() > 100)
            try await Self.expectSameHistory(Store(backend: migrated), reference, versions)
            try await migrated.close()
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
}
