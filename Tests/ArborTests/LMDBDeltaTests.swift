@testable import ArborLMDB
import Foundation
import Testing
@testable import Arbor

/// LMDB stores that keep the index nodes commits replaced as deltas
/// (``LMDBBackend/Configuration/restatesReplacedNodes``).
@Suite struct LMDBDeltaTests {
    func withPath(_ body: (String) async throws -> Void) async throws {
        let path = temporaryPath("lmdb-deltas")
        defer { removeItem(path) }
        try await body(path)
    }

    /// `base` with `old`'s difference: its first 1,000 bytes, then `tail`.
    static func delta(copying count: Int, then tail: [UInt8]) -> [UInt8] {
        var writer = [UInt8]()
        func varint(_ value: Int) {
            var value = value
            while value >= 0x80 {
                writer.append(UInt8(value & 0x7F) | 0x80)
                value >>= 7
            }
            writer.append(UInt8(value))
        }
        writer.append(ObjectDelta.marker)
        varint(count + tail.count)
        writer.append(1)
        varint(0)
        varint(count)
        writer.append(0)
        varint(tail.count)
        writer += tail
        return writer
    }

    /// An exchange into a store that keeps deltas, of a merge whose other parent is the target's
    /// head, damaged in the source: the roots of the parents it restates against are read from
    /// the target, which holds them. It read that parent from the source, and failed there.
    @Test func aMergeOverADamagedHeadOfTheTargetIsExchangedIntoAStoreKeepingDeltas() async throws {
        try await withPath { path in
            let inner = MemoryBackend()
            let writer = Store(backend: inner, configuration: .init(replica: "s"))
            var versions = [Version]()
            for index in 0..<6 { versions.append(try await writer.save(Task(id: "t\(index)", title: "v\(index)", done: false))) }
            // A head in the upper half of the hashes, so that each branch below is the lower of
            // the two with even odds: a head near zero left all 64 branches above it.
            while versions[versions.count - 1].id.hex.first! < "8" {
                versions.append(try await writer.save(Task(id: "t\(versions.count)", title: "v\(versions.count)", done: false)))
            }
            let target = Store(backend: try LMDBBackend.create(.init(path: path, synchronous: false, restatesReplacedNodes: true)))
            try await writer.exchange(to: target)
            let head = versions[versions.count - 1]
            // A branch off the version before, whose merge with the head names it first.
            var branch: Version?
            for attempt in 0..<64 where branch == nil {
                var changes = ChangeSet()
                try changes.save(Task(id: "branch", title: "attempt \(attempt)", done: false))
                let candidate = try await writer.commit(changes, parents: [versions[versions.count - 2].id])
                if candidate.id < head.id { branch = candidate }
            }
            let branchID = try #require(branch).id
            let merged = try #require(try await writer.merge(branchID, head.id, strategy: .mostRecent).version)
            #expect(merged.parents.first == branch?.id)
            let source = Store(backend: DamagingBackend(inner, damaging: head.id, by: .flippedByte), configuration: .init(replica: "s"))
            try await source.exchange(to: target)
            #expect(try await target.heads().map(\.id).contains(merged.id))
            #expect(try await target.verify().isIntact)
            try await target.close()
        }
    }

    /// The history check (``DeltaHistoryCheck``): every version reads as it does on memory.
    @Test func aHistoryKeptAsDeltasReadsAsTheWholeOneDoes() async throws {
        try await withPath { path in
            let backend = try LMDBBackend.create(.init(path: path, synchronous: false, restatesReplacedNodes: true))
            #expect(backend.acceptsRestatements)
            try await DeltaHistoryCheck.run(backend, seed: 11, deltaCount: { try backend.deltaCount() }, reopen: { try LMDBBackend.open(.init(path: path)) })
        }
    }

    /// A store is created at format version 1 and stays there, readable by Arbor before deltas,
    /// unless deltas are asked for: then it is brought to version 2 when opened, and keeps them.
    @Test func aStoreTakesTheDeltaFormatOnlyWhenDeltasAreAskedFor() async throws {
        try await withPath { path in
            try await LMDBBackend.create(.init(path: path)).close()
            let kept = (0..<500).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let plain = try LMDBBackend.open(.init(path: path))
            try await plain.put([(Hash.of(kept), kept)])
            #expect(!plain.acceptsRestatements)
            // A restatement is a hint such a store does not take.
            let copy = Array(kept[0..<400])
            try await plain.put([(Hash.of(copy), copy)])
            try await plain.restate([Restatement(hash: Hash.of(copy), base: Hash.of(kept), delta: [0xD1, 0x90, 0x03, 1, 0, 0x90, 0x03])])
            #expect(try plain.deltaCount() == 0)
            #expect(try await plain.get([Hash.of(copy)])[Hash.of(copy)] == copy)
            #expect(try plain.formatVersionRecorded() == "1")
            try await plain.close()

            let backend = try LMDBBackend.open(.init(path: path, restatesReplacedNodes: true))
            #expect(backend.acceptsRestatements)
            #expect(try backend.formatVersionRecorded() == "2")
            #expect(try await backend.get([Hash.of(kept)])[Hash.of(kept)] == kept)
            let base = (0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let old = Array(base[0..<1_000]) + [1, 2, 3]
            try await backend.put([(Hash.of(base), base), (Hash.of(old), old)])
            try await backend.restate([Restatement(hash: Hash.of(old), base: Hash.of(base), delta: Self.delta(copying: 1_000, then: [1, 2, 3]))])
            #expect(try backend.deltaCount() == 1)
            #expect(try await backend.get([Hash.of(old)])[Hash.of(old)] == old)
            try await backend.close()
            // Opened without asking for deltas, a version 2 store still reads them.
            let again = try LMDBBackend.open(.init(path: path))
            #expect(!again.acceptsRestatements)
            #expect(try again.deltaCount() == 1)
            #expect(try await again.get([Hash.of(old)])[Hash.of(old)] == old)
            try await again.close()
        }
    }

    /// A backend that knew no delta databases (as a process that opened the store before
    /// another brought it to version 2) reads a delta whole, lends it, sizes it, lists it, makes
    /// it whole when it is put again, and makes a delta whole before it removes its base, also
    /// when the removal takes two links of its chain.
    @Test func aBackendThatOpenedBeforeTheUpgradeStillReadsDeltas() async throws {
        try await withPath { path in
            let backend = try LMDBBackend.create(.init(path: path, restatesReplacedNodes: true))
            let base = (0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
            let middle = Array(base[0..<1_500]) + [4, 5, 6]
            let old = Array(base[0..<1_000]) + [9, 8, 7]
            let other = Array(base[0..<1_200]) + [1]
            let root = base + [7, 7, 7]
            try await backend.put([(Hash.of(base), base), (Hash.of(middle), middle), (Hash.of(old), old), (Hash.of(other), other), (Hash.of(root), root)])
            // old → middle → base → root, and other → base.
            try await backend.restate([
                Restatement(hash: Hash.of(old), base: Hash.of(middle), delta: Self.delta(copying: 1_000, then: [9, 8, 7])),
                Restatement(hash: Hash.of(middle), base: Hash.of(base), delta: Self.delta(copying: 1_500, then: [4, 5, 6])),
                Restatement(hash: Hash.of(other), base: Hash.of(base), delta: Self.delta(copying: 1_200, then: [1])),
                Restatement(hash: Hash.of(base), base: Hash.of(root), delta: Self.delta(copying: 1_999, then: [base[1_999]])),
            ])
            #expect(try backend.deltaCount() == 4)

            backend.environment.forgetDeltaIndex()
            #expect(try await backend.get([Hash.of(old)])[Hash.of(old)] == old)
            backend.environment.forgetDeltaIndex()
            let lent = try backend.withObjectBytes(Hash.of(old)) { $0.map { Array($0) } }
            #expect(lent == old)
            backend.environment.forgetDeltaIndex()
            var listed = [Hash: [UInt8]]()
            try await backend.enumerateObjects(batchSize: 10) { batch in for (hash, bytes) in batch { listed[hash] = bytes } }
            #expect(listed == [Hash.of(base): base, Hash.of(middle): middle, Hash.of(old): old, Hash.of(other): other, Hash.of(root): root])
            backend.environment.forgetDeltaIndex()
            #expect(try await backend.objectSizes([Hash.of(old), Hash.of(base)]) == [Hash.of(old): old.count, Hash.of(base): base.count])
            backend.environment.forgetDeltaIndex()
            try await backend.put([(Hash.of(other), other)])
            #expect(try backend.deltaCount() == 3, "put again, it is whole")

            // Two links of the chain go at once, the one nearer the root first: `old` is made
            // whole through both before either stops being a delta.
            backend.environment.forgetDeltaIndex()
            try await backend.delete([Hash.of(base), Hash.of(middle)])
            #expect(try backend.deltaCount() == 0)
            #expect(try await backend.get([Hash.of(old), Hash.of(other), Hash.of(base)]) == [Hash.of(old): old, Hash.of(other): other])
            #expect(try await backend.objectSizes([Hash.of(old)]) == [Hash.of(old): old.count])
            try await backend.close()
        }
    }

    /// A restatement that does not make the stored bytes, or past the chain bound, is refused:
    /// the object stays whole.
    @Test func restatementsThatCouldLoseBytesAreRefused() async throws {
        try await withPath { path in
            let backend = try LMDBBackend.create(.init(path: path, restatesReplacedNodes: true))
            // A chain of versions, each the previous one's first bytes and one more byte.
            var versions = [(0..<2_001).map { UInt8(truncatingIfNeeded: $0 &* 29) }]
            for step in 0..<(LMDBBackend.maximumDeltaChain + 1) {
                versions.append(Array(versions[versions.count - 1][0..<2_000]) + [UInt8(step)])
            }
            // Newest first is the base: version i is restated against version i + 1.
            versions.reverse()
            try await backend.put(versions.map { (Hash.of($0), $0) })
            // Wrong bytes: the tail differs.
            let wrong = Restatement(hash: Hash.of(versions[1]), base: Hash.of(versions[0]), delta: Self.delta(copying: 2_000, then: [0xEE]))
            try await backend.restate([wrong])
            #expect(try backend.deltaCount() == 0)
            // Oldest first, each against the next newer one, still whole when it is restated.
            for index in stride(from: versions.count - 1, to: 0, by: -1) {
                let target = versions[index]
                let restatement = Restatement(hash: Hash.of(target), base: Hash.of(versions[index - 1]), delta: Self.delta(copying: 2_000, then: [target[2_000]]))
                try await backend.restate([restatement])
            }
            // One more than the bound were asked for: the newest of them stays whole.
            #expect(try backend.deltaCount() == LMDBBackend.maximumDeltaChain, "the chain stops at its bound")
            #expect(try await backend.objectSizes([Hash.of(versions[1])]) == [Hash.of(versions[1]): 2_001])
            let read = try await backend.get(versions.map { Hash.of($0) })
            #expect(read.count == versions.count && versions.allSatisfy { read[Hash.of($0)] == $0 })
            try await backend.close()
        }
    }

    /// In one batch: a restatement against an object the batch already made a delta, and a
    /// second restatement of an object the batch already made a delta, are refused; the first
    /// of each stands, and everything reads whole.
    @Test func aBatchTakesNoDeltaAsABase() async throws {
        try await withPath { path in
            let backend = try LMDBBackend.create(.init(path: path, restatesReplacedNodes: true))
            let b = (0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let x = Array(b[0..<2_500]) + [1]
            let a = Array(x[0..<2_000]) + [2]
            let c = Array(x[0..<2_200]) + [3]
            try await backend.put([b, x, a, c].map { (Hash.of($0), $0) })
            try await backend.restate([
                // a against x, while x is whole: kept.
                Restatement(hash: Hash.of(a), base: Hash.of(x), delta: Self.delta(copying: 2_000, then: [2])),
                // x against b: kept; x is a delta from here on.
                Restatement(hash: Hash.of(x), base: Hash.of(b), delta: Self.delta(copying: 2_500, then: [1])),
                // c against x, now a delta: refused.
                Restatement(hash: Hash.of(c), base: Hash.of(x), delta: Self.delta(copying: 2_200, then: [3])),
                // a again, against b: refused, a is a delta already.
                Restatement(hash: Hash.of(a), base: Hash.of(b), delta: Self.delta(copying: 2_000, then: [2])),
            ])
            #expect(try backend.deltaCount() == 2)
            let whole = try await backend.get([b, x, a, c].map { Hash.of($0) })
            #expect(whole == Dictionary(uniqueKeysWithValues: [b, x, a, c].map { (Hash.of($0), $0) }))
            // c stayed whole: removing x, then b, leaves it and a readable.
            try await backend.delete([Hash.of(x)])
            try await backend.delete([Hash.of(b)])
            #expect(try await backend.get([Hash.of(a), Hash.of(c)]) == [Hash.of(a): a, Hash.of(c): c])
            #expect(try backend.deltaCount() == 0)
            try await backend.close()
        }
    }

    /// An object whose bytes begin with the delta marker and end with another object's hash is
    /// still read, sized and listed whole: only an entry in `deltas` makes a value a delta.
    @Test func wholeObjectsThatLookLikeDeltasReadWhole() async throws {
        try await withPath { path in
            let backend = try LMDBBackend.create(.init(path: path, restatesReplacedNodes: true))
            let base = (0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 17) }
            let lookalike = Self.delta(copying: 1_000, then: [1, 2]) + Hash.of(base).bytes
            try await backend.put([(Hash.of(base), base), (Hash.of(lookalike), lookalike)])
            #expect(try await backend.get([Hash.of(lookalike)]) == [Hash.of(lookalike): lookalike])
            #expect(try backend.withObjectBytes(Hash.of(lookalike)) { $0.map { Array($0) } } == lookalike)
            #expect(try await backend.objectSizes([Hash.of(lookalike)]) == [Hash.of(lookalike): lookalike.count])
            var listed = [Hash: [UInt8]]()
            try await backend.enumerateObjects(batchSize: 10) { batch in for (hash, bytes) in batch { listed[hash] = bytes } }
            #expect(listed == [Hash.of(base): base, Hash.of(lookalike): lookalike])
            try await backend.delete([Hash.of(base)])
            #expect(try await backend.get([Hash.of(lookalike)]) == [Hash.of(lookalike): lookalike])
            try await backend.close()
        }
    }
}
