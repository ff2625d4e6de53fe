import Foundation
import Testing
@testable import Arbor

/// The shape rules of the index (FORMAT.md section 7), pinned.
///
/// These values are part of format 1. Never re-pin them: every replica must cut the index into
/// the same nodes for equal records to give equal roots, so a failure here means the format
/// changed, and stores written before would no longer converge with stores written after.
/// Change the format version instead. The expected values were computed by an implementation
/// of FORMAT.md written apart from this code, not printed from it.
@Suite struct ShapeRuleTests {
    /// Section 7.1's table of test vectors, as it stands.
    @Test func boundaryHashesAreTheFormatsVectors() {
        let vectors: [(key: [UInt8], level: Int, hash: UInt64, isBoundary: Bool)] = [
            ([], 0, 0xefd0_1f60_ba99_2926, false),
            (Array("Task\0t1".utf8), 0, 0xf2ed_16c4_ff0c_8d70, false),
            (Array("Task\0t1".utf8), 1, 0xbd8a_3497_b925_cb37, false),
            (Array("Note\0n140".utf8), 0, 0x03e2_63cf_343f_f7a9, true),
        ]
        for vector in vectors {
            #expect(ProllyTree.boundaryHash(vector.key, level: vector.level) == vector.hash, "\(vector)")
            #expect(ProllyTree.isBoundary(vector.key, level: vector.level) == vector.isBoundary, "\(vector)")
        }
    }

    /// Section 7.1's seeds and thresholds, the fanouts behind them, section 7.4's threshold and
    /// section 7.2's maximum node size.
    @Test func thresholdsAndSeedsAreTheFormats() {
        #expect(ProllyTree.boundaryThreshold(level: 0) == 0x0FFF_FFFF_FFFF_FFFF)
        for level in 1...64 { #expect(ProllyTree.boundaryThreshold(level: level) == 0x07FF_FFFF_FFFF_FFFF, "level \(level)") }
        #expect(ProllyTree.leafFanout == 16 && ProllyTree.branchFanout == 32)
        // The empty key's hash is the mixed seed: the plain FNV-1a basis at level 0, salted above.
        #expect(ProllyTree.boundaryHash([], level: 0) == murmurMix(0xcbf2_9ce4_8422_2325))
        #expect(ProllyTree.boundaryHash([], level: 1) == murmurMix(0x55c5_e55d_fb68_5f30))
        #expect(ProllyTree.boundaryHash([], level: 1) == 0x6bcb_9d63_eb8e_ab8b)
        #expect(ProllyTree.boundaryHash([], level: 64) == 0xb7a6_c1a4_51ca_7468)
        // How many of the keys k0 … k9999 end a node, on several levels.
        let keys = (0..<10_000).map { Array("k\($0)".utf8) }
        for (level, boundaries) in [(0, 557), (1, 301), (2, 308), (7, 266), (64, 308)] {
            #expect(keys.count { ProllyTree.isBoundary($0, level: level) } == boundaries, "level \(level)")
        }
        #expect(ProllyTree.storesInline(recordSize: 1_024) && !ProllyTree.storesInline(recordSize: 1_025))
        #expect(ProllyTree.maximumNodeSize == 4_294_967_295)
    }

    /// Section 11.3: the keys of the golden store's 1,100 records give 70 level-0 boundaries,
    /// 71 leaves, 6 level-1 branches and a level-2 root of 6 entries, whatever the records hold.
    @Test func theGoldenStoresKeysGiveTheFormatsShape() async throws {
        let keys = (0..<1_000).map { RecordKey(type: "Task", id: String(format: "t%04d", $0)).indexBytes }
            + stride(from: 0, to: 1_000, by: 10).map { RecordKey(type: "Note", id: "n\($0)").indexBytes }
        #expect(keys.count { ProllyTree.isBoundary($0, level: 0) } == 70)
        let backend = MemoryBackend()
        let root = try await Self.build([keys.map { IndexEntry(key: $0, payload: .inline([])) }], in: backend)
        let shape = try await Self.shape(of: root, in: backend)
        #expect(shape.nodesPerLevel == [71, 6, 1] && shape.rootEntries == 6, "\(shape)")
    }

    /// One golden root for a tree made from raw index entries, not through the record encoder:
    /// keys of 2 to 205 bytes, many of them prefixes of the next (`k1`, `k1\0`, `k10`, …), bytes
    /// 0x00 and 0xFF in keys, empty, small and 1,024-byte inline payloads and blob payloads,
    /// 4,273 entries in three levels. Built from scratch (``IndexNode/encoded()``) and by the
    /// editor (``NodeDraft``), in one commit or in several with deletions, it is the same tree.
    @Test func aTreeOfRawEntriesHasItsGoldenRoot() async throws {
        let entries = Self.goldenEntries()
        #expect(entries.count == 4_273)
        #expect(entries.count { if case .blob = $0.payload { true } else { false } } == 329)
        let golden = "98549a2763ea1b9d28fabf7e0bafc66d0e5cad1e51396048834c2a74020cefd2"
        #expect(IndexTests.referenceRoot(entries).hex == golden)

        let backend = MemoryBackend()
        let root = try await Self.build([entries], in: backend)
        #expect(root.hex == golden)
        let shape = try await Self.shape(of: root, in: backend)
        #expect(shape.nodesPerLevel == [233, 6, 1] && shape.rootEntries == 6, "\(shape)")

        // In three commits: a third of the entries with keys that go again, the rest, then the
        // deletions (some of them boundaries, whose nodes merge with the next).
        let extra = entries.enumerated().compactMap { $0.offset % 5 == 0 ? IndexEntry(key: $0.element.key + [0x01], payload: .inline([1])) : nil }
        #expect(extra.contains { ProllyTree.isBoundary($0.key, level: 0) })
        let first = entries.enumerated().filter { $0.offset % 3 == 1 }.map(\.element) + extra
        let second = entries.enumerated().filter { $0.offset % 3 != 1 }.map(\.element)
        let edited = try await Self.build([first, second], deleting: extra.map(\.key), in: MemoryBackend())
        #expect(edited.hex == golden)
    }

    /// The golden tree's entries (`k0` … `k2999`, some with a 0x00 or a run of 0xFF after
    /// them), in key order.
    static func goldenEntries() -> [IndexEntry] {
        var entries = [IndexEntry]()
        for index in 0..<3_000 {
            let base = Array("k\(index)".utf8)
            var keys = [(key: base, variant: 0)]
            if index % 3 == 0 { keys.append((base + [0x00], 1)) }
            if index % 11 == 0 { keys.append((base + [UInt8](repeating: 0xFF, count: index % 200 + 1), 2)) }
            for (key, variant) in keys {
                let payload: IndexPayload =
                    if (index + variant) % 13 == 0 { .blob(Hash.of(key)) }
                    else if index % 97 == 0 { .inline([UInt8](repeating: UInt8(index % 256), count: 1_024)) }
                    else { .inline([UInt8](repeating: UInt8(index % 256), count: index % 40)) }
                entries.append(IndexEntry(key: key, payload: payload))
            }
        }
        return entries.sorted { compareKeys($0.key, $1.key) < 0 }
    }

    /// Applies `batches` of entries, then deletes `deleting`, each in one edit written to
    /// `backend`, from the empty index; returns the root.
    static func build(_ batches: [[IndexEntry]], deleting: [[UInt8]] = [], in backend: MemoryBackend) async throws -> Hash {
        try await backend.put([Store.emptyRoot])
        var root = Store.emptyRoot.hash
        let edits = batches.map { $0.map { IndexEdit(key: $0.key, payload: $0.payload) } } + [deleting.map { IndexEdit(key: $0, payload: nil) }]
        for batch in edits where !batch.isEmpty {
            let source = NodeSource(backend: backend, cache: NodeCache(capacity: 0))
            root = try await ProllyTree.apply(batch.sorted { compareKeys($0.key, $1.key) < 0 }, to: root, source: source)
            try await backend.put(source.newObjects(reachableFrom: root))
        }
        return root
    }

    /// The number of nodes on each level of the tree at `root`, leaves first, and the root's entries.
    static func shape(of root: Hash, in backend: MemoryBackend) async throws -> (nodesPerLevel: [Int], rootEntries: Int) {
        var level = [root]
        var widths = [Int]()
        var rootEntries = 0
        while let first = level.first {
            let nodes = try await backend.get(level)
            let decoded = try level.map { try IndexNode.decode(try #require(nodes[$0])) }
            if first == root { rootEntries = decoded[0].entries.count }
            widths.insert(level.count, at: 0)
            guard decoded[0].level > 0 else { break }
            level = decoded.flatMap { node in node.entries.compactMap { if case .node(let child, _) = $0.payload { child } else { nil } } }
        }
        return (widths, rootEntries)
    }
}
