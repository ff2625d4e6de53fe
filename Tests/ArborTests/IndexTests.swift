import Foundation
import Testing
@testable import Arbor

/// The prolly tree: canonical shape, costs counted in node reads and writes.
@Suite struct IndexTests {
    static func key(_ index: Int) -> [UInt8] { RecordKey(type: "Item", id: String(format: "%08d", index)).indexBytes }
    static func payload(_ index: Int, version: Int = 0) -> IndexPayload { .inline(RecordCoding.encode(["n": .int(Int64(index)), "v": .int(Int64(version))])) }

    /// Builds the tree for a sorted entry list from scratch, level by level: the definition of
    /// the canonical tree the incremental editor must reproduce.
    static func referenceRoot(_ entries: [IndexEntry]) -> Hash {
        var level = 0
        var nodes = ProllyTree.chunk(entries, level: 0)
        while nodes.count > 1 {
            level += 1
            let parents = nodes.map { IndexEntry(key: $0.lastKey!, payload: .node(Hash.of($0.encoded()), count: $0.recordCount)) }
            nodes = ProllyTree.chunk(parents, level: level)
        }
        return Hash.of((nodes.first ?? .empty).encoded())
    }

    func makeSource(_ backend: any Backend = MemoryBackend()) -> NodeSource {
        NodeSource(backend: backend, cache: NodeCache(capacity: 0))
    }

    /// Applies edits in batches and writes the new nodes; returns the root.
    func apply(_ edits: [IndexEdit], to root: Hash, backend: any Backend) async throws -> Hash {
        let source = makeSource(backend)
        _ = source.create(.empty)
        let sorted = edits.sorted { compareKeys($0.key, $1.key) < 0 }
        let newRoot = try await ProllyTree.apply(sorted, to: root, source: source)
        var objects = source.newObjects(reachableFrom: newRoot)
        if newRoot == Store.emptyRoot.hash { objects.append(Store.emptyRoot) }
        try await backend.put(objects)
        return newRoot
    }

    @Test func emptyTreeHasAFixedRoot() async throws {
        let backend = MemoryBackend()
        try await backend.put([Store.emptyRoot])
        #expect(Store.emptyRoot.hash == IndexTests.referenceRoot([]))
        let root = try await apply([], to: Store.emptyRoot.hash, backend: backend)
        #expect(root == Store.emptyRoot.hash)
    }

    @Test(arguments: [1, 2, 3, 4, 5]) func sameRecordsInAnyOrderGiveTheSameRoot(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let count = 3_000
        let entries = (0..<count).map { IndexEntry(key: IndexTests.key($0), payload: IndexTests.payload($0)) }
        let expected = IndexTests.referenceRoot(entries)

        let backend = MemoryBackend()
        try await backend.put([Store.emptyRoot])
        var root = Store.emptyRoot.hash
        var remaining = entries.shuffled(using: &random)
        // Random batch sizes, including single inserts and large batches.
        while !remaining.isEmpty {
            let size = min(remaining.count, [1, 7, 50, 400, 1200].randomElement(using: &random)!)
            let batch = remaining.prefix(size).map { IndexEdit(key: $0.key, payload: $0.payload) }
            remaining.removeFirst(size)
            root = try await apply(batch, to: root, backend: backend)
        }
        #expect(root == expected)

        // Deleting a random half (in random batches) gives the tree of the other half.
        let doomed = Set(entries.shuffled(using: &random).prefix(count / 2).map(\.key))
        var deletions = Array(doomed).shuffled(using: &random)
        while !deletions.isEmpty {
            let size = min(deletions.count, [1, 13, 300].randomElement(using: &random)!)
            root = try await apply(deletions.prefix(size).map { IndexEdit(key: $0, payload: nil) }, to: root, backend: backend)
            deletions.removeFirst(size)
        }
        #expect(root == IndexTests.referenceRoot(entries.filter { !doomed.contains($0.key) }))

        // Deleting everything gives the empty tree again.
        root = try await apply(entries.filter { !doomed.contains($0.key) }.map { IndexEdit(key: $0.key, payload: nil) }, to: root, backend: backend)
        #expect(root == Store.emptyRoot.hash)
    }

    /// Small trees are where a root splits into a copy of itself plus a new node, or collapses:
    /// every single insert and delete on trees of 0 to 60 records must match a fresh build.
    @Test func singleEditsOnSmallTreesMatchAFreshBuild() async throws {
        var random = SeededGenerator(seed: 2026)
        for size in 0...60 {
            for _ in 0..<12 {
                let backend = MemoryBackend()
                try await backend.put([Store.emptyRoot])
                let ids = Array(Set((0..<size).map { _ in Int.random(in: 0..<200, using: &random) }))
                var model = Dictionary(uniqueKeysWithValues: ids.map { (IndexTests.key($0), IndexTests.payload($0)) })
                var root = try await apply(model.map { IndexEdit(key: $0.key, payload: $0.value) }, to: Store.emptyRoot.hash, backend: backend)
                let target = Int.random(in: 0..<200, using: &random)
                let delete = !model.isEmpty && Bool.random(using: &random)
                let key = delete ? model.keys.randomElement(using: &random)! : IndexTests.key(target)
                model[key] = delete ? nil : IndexTests.payload(target, version: 1)
                root = try await apply([IndexEdit(key: key, payload: model[key])], to: root, backend: backend)
                let expected = IndexTests.referenceRoot(model.sorted { compareKeys($0.key, $1.key) < 0 }.map { IndexEntry(key: $0.key, payload: $0.value) })
                #expect(root == expected, "size \(size), \(delete ? "delete" : "insert")")
            }
        }
    }

    @Test func mixedUpdatesMatchAFreshBuild() async throws {
        var random = SeededGenerator(seed: 99)
        let backend = MemoryBackend()
        try await backend.put([Store.emptyRoot])
        var model = [[UInt8]: IndexPayload]()
        var root = Store.emptyRoot.hash
        for round in 0..<40 {
            var edits = [[UInt8]: IndexPayload?]()
            for _ in 0..<Int.random(in: 1...300, using: &random) {
                let index = Int.random(in: 0..<2_000, using: &random)
                edits[IndexTests.key(index)] = Bool.random(using: &random) && round > 3 ? .some(nil) : IndexTests.payload(index, version: round)
            }
            for (key, payload) in edits { model[key] = payload ?? nil }
            root = try await apply(edits.map { IndexEdit(key: $0.key, payload: $0.value) }, to: root, backend: backend)
            let expected = IndexTests.referenceRoot(model.sorted { compareKeys($0.key, $1.key) < 0 }.map { IndexEntry(key: $0.key, payload: $0.value) })
            #expect(root == expected, "round \(round)")
        }
        // Every key reads back.
        let found = try await ProllyTree.lookup(model.keys.sorted { compareKeys($0, $1) < 0 }, root: root, source: makeSource(backend))
        #expect(found == model)
    }

    /// A node must not keep the buffer its entries were gathered in: that buffer grows to the
    /// largest run of the level, and every node cut from it would hold that much room.
    @Test func newNodesHoldNoMoreRoomThanTheirEntries() async throws {
        func check(_ node: IndexNode) {
            #expect(node.entries.capacity <= node.entries.count * 2 + 8, "a node of \(node.entries.count) entries has room for \(node.entries.capacity)")
        }
        let entries = (0..<20_000).map { IndexEntry(key: IndexTests.key($0), payload: IndexTests.payload($0)) }
        let built = ProllyTree.chunk(entries, level: 0)
        #expect(built.map(\.entries.count).max()! > 64)
        built.forEach(check)

        // Edits on an existing tree cut their nodes in the same way.
        let backend = MemoryBackend()
        let root = try await build(20_000, backend: backend)
        let source = makeSource(backend)
        let edits = stride(from: 0, to: 20_000, by: 7).map { IndexEdit(key: IndexTests.key($0), payload: IndexTests.payload($0, version: 1)) }
        let newRoot = try await ProllyTree.apply(edits, to: root, source: source)
        let created = source.newObjects(reachableFrom: newRoot)
        #expect(created.count > 100)
        // An edit makes nodes as bytes, each array sized to its node (the buffer they were
        // gathered in is reused), whatever the longest run.
        for object in created {
            #expect(object.bytes.capacity <= object.bytes.count + 64, "a node of \(object.bytes.count) bytes has room for \(object.bytes.capacity)")
        }
    }

    /// A damaged or hostile tree whose branch files a leaf under a key past the leaf's last
    /// key: an edit between the two keys finds no place in that leaf. It must fail, naming the
    /// leaf, not seek the same leaf forever.
    @Test func anEditIntoAMisfiledLeafFailsInsteadOfLooping() async throws {
        func key(_ text: String) -> [UInt8] { RecordKey(type: "Item", id: text).indexBytes }
        // A leaf that ends on a boundary key, so its copy closes a node and the run is empty.
        let last = try #require((0..<10_000).lazy.map { key("b\($0)") }.first { ProllyTree.isBoundary($0, level: 0) })
        let misfiled = IndexNode(level: 0, entries: [IndexEntry(key: key("a"), payload: IndexTests.payload(1)), IndexEntry(key: last, payload: IndexTests.payload(2))])
        let after = IndexNode(level: 0, entries: [IndexEntry(key: key("x"), payload: IndexTests.payload(3)), IndexEntry(key: key("z"), payload: IndexTests.payload(4))])
        let leaves = [misfiled, after].map { (hash: Hash.of($0.encoded()), bytes: $0.encoded()) }
        let root = IndexNode(level: 1, entries: [
            IndexEntry(key: key("m"), payload: .node(leaves[0].hash, count: 2)),
            IndexEntry(key: key("z"), payload: .node(leaves[1].hash, count: 2)),
        ])
        let backend = MemoryBackend()
        try await backend.put(leaves + [(Hash.of(root.encoded()), root.encoded())])
        let edit = IndexEdit(key: key("e"), payload: IndexTests.payload(5))
        let error = await #expect(throws: ArborError.self) {
            _ = try await ProllyTree.apply([edit], to: Hash.of(root.encoded()), source: self.makeSource(backend))
        }
        #expect(error?.code == .corruptObject)
        #expect(error?.message.contains("\(leaves[0].hash)") == true, "\(String(describing: error))")
    }

    /// A branch at level 2 that names a leaf: every descent refuses it, the scan behind listings too
    /// (it listed the leaf's records, which a point read refused).
    @Test func aScanRefusesABranchThatSkipsALevel() async throws {
        func key(_ text: String) -> [UInt8] { RecordKey(type: "Item", id: text).indexBytes }
        let leaf = IndexNode(level: 0, entries: [IndexEntry(key: key("a"), payload: IndexTests.payload(1))])
        let root = IndexNode(level: 2, entries: [IndexEntry(key: key("a"), payload: .node(Hash.of(leaf.encoded()), count: 1))])
        let backend = MemoryBackend()
        try await backend.put([(Hash.of(leaf.encoded()), leaf.encoded()), (Hash.of(root.encoded()), root.encoded())])
        let error = await #expect(throws: ArborError.self) {
            try await ProllyTree.scan(prefix: [], root: Hash.of(root.encoded()), source: self.makeSource(backend)) { _ in }
        }
        #expect(error?.code == .corruptObject && error?.message.contains("level 0 under a branch at level 2") == true, "\(String(describing: error))")
    }

    /// Builds a tree of `count` records and returns its root.
    func build(_ count: Int, backend: any Backend) async throws -> Hash {
        try await backend.put([Store.emptyRoot])
        let edits = (0..<count).map { IndexEdit(key: IndexTests.key($0), payload: IndexTests.payload($0)) }
        return try await apply(edits, to: Store.emptyRoot.hash, backend: backend)
    }

    func height(_ root: Hash, backend: any Backend) async throws -> Int {
        try await makeSource(backend).node(root).level + 1
    }

    @Test func pointLookupReadsOneNodePerLevel() async throws {
        let backend = CountingBackend()
        for count in [1_000, 100_000] {
            let root = try await build(count, backend: backend)
            let height = try await height(root, backend: backend)
            for index in stride(from: 0, to: count, by: count / 50) {
                backend.reset()
                let found = try await ProllyTree.lookup([IndexTests.key(index)], root: root, source: makeSource(backend))
                #expect(found[IndexTests.key(index)] == IndexTests.payload(index))
                #expect(backend.objectsRead == height, "a lookup reads one node per level")
            }
            // log(n): with fan-out 32 on average, 100,000 records need 4 levels at most by a wide margin.
            #expect(height <= 2 + Int((log(Double(count)) / log(32.0)).rounded(.up)))
        }
    }

    /// A tree of `count` records on a backend that counts reads, and its height.
    func countedTree(_ count: Int) async throws -> (backend: CountingBackend, root: Hash, height: Int) {
        let backend = CountingBackend()
        let root = try await build(count, backend: backend)
        return (backend, root, try await height(root, backend: backend))
    }

    @Test func aPointReadSearchesTheNodesBytesAndKeepsThemForTheNext() async throws {
        let count = 20_000
        let (backend, root, height) = try await countedTree(count)
        let nodes = NodeCache(capacity: 1_024)
        let kept = ObjectCache<NodeBytes>(capacity: 1_024)
        func source() -> NodeSource { NodeSource(backend: backend, cache: nodes, bytesCache: kept) }
        for index in stride(from: 1, to: count, by: 997) {
            backend.reset()
            #expect(try await ProllyTree.lookup(IndexTests.key(index), root: root, source: source()) == IndexTests.payload(index))
            #expect(backend.objectsRead <= height)
            // The same leaf again: no read at all.
            backend.reset()
            #expect(try await ProllyTree.lookup(IndexTests.key(index), root: root, source: source()) == IndexTests.payload(index))
            #expect(backend.objectsRead == 0)
            #expect(try await ProllyTree.lookup(IndexTests.key(index) + [0x00], root: root, source: source()) == nil)
        }
        // Keys past either end of the tree are absent, not errors.
        #expect(try await ProllyTree.lookup([], root: root, source: source()) == nil)
        #expect(try await ProllyTree.lookup([0xFF, 0xFF], root: root, source: source()) == nil)
        #expect(nodes.node(root) == nil, "point reads keep nodes as bytes, not decoded")
    }

    @Test func aPointReadAfterACommitReadsNothingFromTheBackend() async throws {
        let backend = CountingBackend()
        let nodes = NodeCache(capacity: 4_096)
        let kept = ObjectCache<NodeBytes>(capacity: 4_096)
        let writer = NodeSource(backend: backend, cache: nodes, bytesCache: kept)
        _ = writer.create(.empty)
        let edits = (0..<5_000).map { IndexEdit(key: IndexTests.key($0), payload: IndexTests.payload($0)) }
        let root = try await ProllyTree.apply(edits, to: Store.emptyRoot.hash, source: writer)
        try await backend.put(writer.newObjects(reachableFrom: root))
        backend.reset()
        for index in stride(from: 0, to: 5_000, by: 499) {
            let reader = NodeSource(backend: backend, cache: nodes, bytesCache: kept)
            #expect(try await ProllyTree.lookup(IndexTests.key(index), root: root, source: reader) == IndexTests.payload(index))
        }
        #expect(backend.objectsRead == 0, "the commit's nodes are at hand")
    }

    @Test func aChildAtTheWrongLevelIsAClearError() async throws {
        let backend = MemoryBackend()
        let inner = IndexNode(level: 1, entries: [IndexEntry(key: IndexTests.key(5), payload: .node(Hash.of(IndexNode.empty.encoded()), count: 0))])
        let outer = IndexNode(level: 1, entries: [IndexEntry(key: IndexTests.key(9), payload: .node(Hash.of(inner.encoded()), count: 0))])
        try await backend.put([(Hash.of(inner.encoded()), inner.encoded()), (Hash.of(outer.encoded()), outer.encoded())])
        let source = NodeSource(backend: backend, cache: NodeCache(capacity: 16), bytesCache: ObjectCache(capacity: 16))
        func isWrongLevel(_ error: any Error) -> Bool {
            (error as? ArborError)?.code == .corruptObject && "\(error)".contains("is at level 1 under a branch at level 1")
        }
        await #expect(performing: { try await ProllyTree.lookup(IndexTests.key(1), root: Hash.of(outer.encoded()), source: source) }, throws: isWrongLevel)
        await #expect(performing: { try await ProllyTree.lookup([IndexTests.key(1)], root: Hash.of(outer.encoded()), source: source) }, throws: isWrongLevel)
        await #expect(performing: { try await ProllyTree.diff(Store.emptyRoot.hash, Hash.of(outer.encoded()), source: source) }, throws: isWrongLevel)
        // A leaf two levels down, reached by a point read that the memory adapter lends it to in place.
        let leaf = IndexNode(level: 0, entries: [IndexEntry(key: IndexTests.key(1), payload: IndexTests.payload(1))])
        let high = IndexNode(level: 2, entries: [IndexEntry(key: IndexTests.key(9), payload: .node(Hash.of(leaf.encoded()), count: 1))])
        try await backend.put([(Hash.of(leaf.encoded()), leaf.encoded()), (Hash.of(high.encoded()), high.encoded())])
        await #expect(performing: { try await ProllyTree.lookup(IndexTests.key(1), root: Hash.of(high.encoded()), source: source) }, throws: {
            (error: any Error) in (error as? ArborError)?.code == .corruptObject && "\(error)".contains("is at level 0 under a branch at level 2")
        })
    }

    /// An edit that would make a node past the format's maximum size (only keys chosen to avoid
    /// boundaries can) fails with an error that says so, not one that calls the index damaged.
    /// The check the editor runs on every new node, tested on sizes: a real one is 4 GB.
    @Test func aNodePastTheMaximumSizeIsRefusedAsSuch() {
        #expect(throws: Never.self) { try ProllyTree.checkSize(ofNewNode: ProllyTree.maximumNodeSize) }
        #expect {
            try ProllyTree.checkSize(ofNewNode: ProllyTree.maximumNodeSize + 1)
        } throws: { error in
            let error = error as? ArborError
            return error?.code == .invalidInput && error?.message.contains("exceed the format's maximum node size of 4294967295 bytes") == true
                && error?.message.contains("keys none of which is a boundary") == true && error?.message.contains("damaged") == false
        }
    }

    @Test func diffReadsOnlyDifferingNodes() async throws {
        let count = 100_000
        let (backend, base, height) = try await countedTree(count)
        var random = SeededGenerator(seed: 7)
        for k in [1, 10, 100] {
            let changed = (0..<k).map { _ in Int.random(in: 0..<count, using: &random) }
            let edits = Set(changed).map { IndexEdit(key: IndexTests.key($0), payload: IndexTests.payload($0, version: 1)) }
            backend.reset()
            let updated = try await apply(edits, to: base, backend: backend)
            let written = backend.objectsWritten
            // A commit of k changes writes at most k nodes per level (plus a neighbour where a boundary moved).
            #expect(written <= (Set(changed).count + 1) * height, "k=\(k): wrote \(written) nodes")

            backend.reset()
            let differences = try await ProllyTree.diff(base, updated, source: makeSource(backend))
            #expect(differences.count == Set(changed).count)
            #expect(differences.allSatisfy { $0.old != nil && $0.new != nil && $0.old != $0.new })
            // Both trees are walked only along the changed paths: at most 2 nodes per change per level.
            #expect(backend.objectsRead <= 2 * Set(changed).count * height, "k=\(k): read \(backend.objectsRead) nodes")
        }
        backend.reset()
        #expect(try await ProllyTree.diff(base, base, source: makeSource(backend)).isEmpty)
        #expect(backend.objectsRead == 0, "equal roots are compared without a read")
    }

    @Test func diffAgreesWithAReferenceOverRandomEdits() async throws {
        let backend = MemoryBackend()
        var random = SeededGenerator(seed: 11)
        var state = [Int: Int]()
        for index in 0..<3_000 where Bool.random(using: &random) { state[index] = 0 }
        try await backend.put([Store.emptyRoot])
        var root = try await apply(state.keys.map { IndexEdit(key: IndexTests.key($0), payload: IndexTests.payload($0)) }, to: Store.emptyRoot.hash, backend: backend)
        func expected(from old: [Int: Int], to new: [Int: Int]) -> [IndexDifference] {
            Set(old.keys).union(new.keys).sorted().compactMap { index in
                let before = old[index].map { IndexTests.payload(index, version: $0) }
                let after = new[index].map { IndexTests.payload(index, version: $0) }
                return before == after ? nil : IndexDifference(key: IndexTests.key(index), old: before, new: after)
            }
        }
        func same(_ a: [IndexDifference], _ b: [IndexDifference]) -> Bool {
            a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.old == $1.old && $0.new == $1.new }
        }
        // Rounds of inserts, deletes and updates, from one change to a third of the keys; the last
        // round empties the tree.
        for (round, changes) in [1, 5, 40, 300, 1_000, -1].enumerated() {
            var next = state
            if changes < 0 {
                next = [:]
            } else {
                for _ in 0..<changes {
                    let index = Int.random(in: 0..<3_500, using: &random)
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: next[index] = nil
                    default: next[index] = round + 1
                    }
                }
            }
            let edits = Set(state.keys).union(next.keys).filter { state[$0] != next[$0] }.map { index in
                IndexEdit(key: IndexTests.key(index), payload: next[index].map { IndexTests.payload(index, version: $0) })
            }
            let nextRoot = try await apply(edits, to: root, backend: backend)
            let forward = try await ProllyTree.diff(root, nextRoot, source: makeSource(backend))
            let backward = try await ProllyTree.diff(nextRoot, root, source: makeSource(backend))
            #expect(same(forward, expected(from: state, to: next)), "round \(round): the diff differs from the reference")
            #expect(same(backward, expected(from: next, to: state)), "round \(round): the reverse diff differs from the reference")
            (state, root) = (next, nextRoot)
        }
        #expect(root == Store.emptyRoot.hash)
    }

    /// Payloads are compared as bytes in place: one that differs only in its last byte, in a
    /// blob's hash, a record or a child's record count, still differs.
    @Test func diffSeesAPayloadThatDiffersInItsLastByteOnly() async throws {
        let backend = MemoryBackend()
        try await backend.put([Store.emptyRoot])
        let hashA = try #require(Hash(bytes: [UInt8](repeating: 7, count: 31) + [1]))
        let hashB = try #require(Hash(bytes: [UInt8](repeating: 7, count: 31) + [2]))
        // Keys 0 to 199 hold blobs, 200 to 399 inline records; two trees that differ in one of
        // each, in the last byte, and (above them) in the record counts of no child.
        func edits(blob: Hash, record: UInt8) -> [IndexEdit] {
            (0..<400).map { index in
                let payload: IndexPayload = index < 200
                    ? .blob(index == 100 ? blob : hashA)
                    : .inline([1, 2, index == 300 ? record : 3])
                return IndexEdit(key: IndexTests.key(index), payload: payload)
            }
        }
        let a = try await apply(edits(blob: hashA, record: 3), to: Store.emptyRoot.hash, backend: backend)
        let b = try await apply(edits(blob: hashB, record: 4), to: Store.emptyRoot.hash, backend: backend)
        let differences = try await ProllyTree.diff(a, b, source: makeSource(backend))
        #expect(differences.map(\.key) == [IndexTests.key(100), IndexTests.key(300)])
        #expect(differences.first?.old == .blob(hashA) && differences.first?.new == .blob(hashB))
        #expect(differences.last?.old == .inline([1, 2, 3]) && differences.last?.new == .inline([1, 2, 4]))
    }

    @Test func diffFindsAddedAndRemovedKeys() async throws {
        let backend = MemoryBackend()
        let base = try await build(5_000, backend: backend)
        let edits = [IndexEdit(key: IndexTests.key(10), payload: nil), IndexEdit(key: IndexTests.key(7_000), payload: IndexTests.payload(7_000))]
        let updated = try await apply(edits, to: base, backend: backend)
        let differences = try await ProllyTree.diff(base, updated, source: makeSource(backend))
        #expect(differences.map(\.key) == [IndexTests.key(10), IndexTests.key(7_000)])
        #expect(differences[0].new == nil && differences[1].old == nil)
        let reverse = try await ProllyTree.diff(updated, base, source: makeSource(backend))
        #expect(reverse.map(\.key) == [IndexTests.key(10), IndexTests.key(7_000)])
        #expect(reverse[0].old == nil && reverse[1].new == nil)
    }

    @Test func rangeScanReturnsExactlyOneType() async throws {
        let backend = MemoryBackend()
        try await backend.put([Store.emptyRoot])
        var edits = [IndexEdit]()
        for type in ["A", "AB", "B", "Item", "Itemz"] {
            for index in 0..<700 {
                edits.append(IndexEdit(key: RecordKey(type: type, id: "\(index)").indexBytes, payload: IndexTests.payload(index)))
            }
        }
        let root = try await apply(edits, to: Store.emptyRoot.hash, backend: backend)
        for type in ["A", "AB", "Item", "Itemz", "Missing"] {
            var keys = [RecordKey]()
            try await ProllyTree.scan(prefix: RecordKey.typePrefix(type), root: root, source: makeSource(backend)) { entries in
                keys += try entries.map { try RecordKey(indexBytes: $0.key[...]) }
            }
            #expect(keys.count == (type == "Missing" ? 0 : 700))
            #expect(keys.allSatisfy { $0.type == type })
            #expect(keys == keys.sorted())
        }
    }
}
