import Foundation
import Testing
@testable import Arbor

/// Stores whose objects are damaged yet correctly named: what a buggy or hostile replica can
/// send, since an exchange checks every object against its hash but cannot know whether the
/// bytes make sense. One object of a real store is mutated and every object above it rewritten
/// to name the new hash, so the store's whole graph is consistent; reading, committing on top,
/// exchanging and migrating from it must then work or fail with an ``ArborError`` — never crash
/// (counts that overflow, times at the end of the clock, missing children).
@Suite struct FuzzHostileStoreTests {
    /// The objects of a store with two versions: tasks with notes (children, deleted with their
    /// parent), one record large enough for a blob, and the path from the heads to each kind.
    struct Seed {
        var objects: [Hash: [UInt8]]
        var first: Hash
        /// heads → commit → root → a leaf holding a blob → the blob.
        var path: [Hash]
        var leaves: [Hash]
        var keys: [RecordKey]
    }

    static func seed() async throws -> Seed {
        let backend = MemoryBackend()
        let store = Store(backend: backend, configuration: .init(replica: "fuzz", clock: TickClock().read))
        var changes = ChangeSet()
        for index in 0..<80 {
            try changes.save(Task(id: "t\(index)", title: "task \(index)", done: index % 2 == 0,
                                  notes: index % 8 == 0 ? [Note(id: "n\(index)", text: "note")] : [], owner: Ref(id: "p\(index % 3)")))
        }
        try changes.save(Note(id: "large", text: String(repeating: "large ", count: 300)))
        let first = try await store.commit(changes)
        let second = try await store.change(on: first, "second") { changes in
            for index in stride(from: 0, to: 80, by: 16) { try changes.save(Task(id: "t\(index)", title: "changed", done: true)) }
        }
        var objects = [Hash: [UInt8]]()
        for (hash, bytes) in try await backend.get(Array(backend.allHashes())) { objects[hash] = bytes }
        let heads = try #require(try await backend.ref(RefName.heads))
        let leaves = try ObjectLinks(objects[second.root] ?? []).children.map(\.hash)
        let blobLeaf = try #require(try leaves.first { !(try ObjectLinks(objects[$0] ?? [])).blobs.isEmpty })
        let blob = try #require(try ObjectLinks(objects[blobLeaf] ?? []).blobs.first)
        let keys = (0..<80).map { RecordKey(type: "Task", id: "t\($0)") } + [RecordKey(type: "Note", id: "n8"), RecordKey(type: "Note", id: "large")]
        return Seed(objects: objects, first: first.id, path: [heads, second.id, second.root, blobLeaf, blob], leaves: leaves, keys: keys)
    }

    /// `seed`'s objects with the object at `path[depth]` (or, past the blob's leaf, a random leaf)
    /// replaced by `bytes`, and each object above it rewritten to name the new hash; the new
    /// head-set hash.
    static func relink(_ seed: Seed, victim: Hash, path: [Hash], bytes: [UInt8]) -> (objects: [Hash: [UInt8]], heads: Hash) {
        var objects = seed.objects
        var old = victim
        var new = Hash.of(bytes)
        objects[new] = bytes
        for parent in path.reversed() {
            // Hashes sit in objects as their 32 raw bytes: swap them in place.
            var parentBytes = objects[parent] ?? []
            let needle = old.bytes
            if let start = stride(from: 0, through: parentBytes.count - 32, by: 1).first(where: { parentBytes[$0..<($0 + 32)].elementsEqual(needle) }) {
                parentBytes.replaceSubrange(start..<(start + 32), with: new.bytes)
            }
            old = parent
            new = Hash.of(parentBytes)
            objects[new] = parentBytes
        }
        return (objects, new)
    }

    @Test func storesOfDamagedObjectsFailClearly() async throws {
        let seed = try await Self.seed()
        var mutator = Mutator(seed: FuzzSettings.seed ^ 0x570E)
        let allowed: Set<ArborError.Code> = [.corruptObject, .missingObject, .unsupportedFormat, .invalidInput, .coding, .unknownVersion]
        var tally = FuzzTally("stores of damaged, correctly hashed objects (read, commit, merge, exchange, migrate)", allowing: allowed)
        let iterations = max(FuzzSettings.iterations / 10, 1)
        while tally.inputs < iterations {
            // The heads, the commit, the root, a leaf or the blob.
            let depth = mutator.below(5)
            let victim = depth == 3 ? mutator.element(seed.leaves) : seed.path[depth]
            let input = mutator.mutate(seed.objects[victim] ?? [], donor: mutator.element(Array(seed.objects.values)))
            let (objects, heads) = Self.relink(seed, victim: victim, path: Array(seed.path.prefix(depth)), bytes: input)
            let keys = [mutator.element(seed.keys), mutator.element(seed.keys)]
            await tally.run(input) { _ in try await Self.exercise(objects: objects, heads: heads, first: seed.first, keys: keys) }
            // A memory store never suspends: let other tests have the thread now and then.
            await _Concurrency.Task.yield()
        }
        tally.report()
    }

    /// Hand-made objects at the limits: record counts that overflow when added, a commit at the
    /// end of the clock, a commit naming itself as parent... each through every operation.
    @Test func hostileObjectsAtTheLimitsFailClearly() async throws {
        let seed = try await Self.seed()
        let root = try IndexNode.decode(try #require(seed.objects[seed.path[2]]))
        let commit = try Version.Content.decode(try #require(seed.objects[seed.path[1]]))
        var cases: [(name: String, depth: Int, bytes: [UInt8])] = []
        var counts = root
        for index in counts.entries.indices {
            if case .node(let hash, _) = counts.entries[index].payload { counts.entries[index].payload = .node(hash, count: .max - 1) }
        }
        cases.append(("record counts that overflow", 2, counts.encoded()))
        var lateCommit = commit
        lateCommit.time = HybridTime(milliseconds: .max, counter: .max)
        lateCommit.recordCount = .max
        cases.append(("a commit at the end of the clock", 1, lateCommit.encoded()))
        var selfParent = commit
        selfParent.parents = Array(repeating: seed.path[1], count: 64)
        cases.append(("64 parents, all the same", 1, selfParent.encoded()))
        var deep = root
        deep.level = 64
        cases.append(("a root at level 64 over leaves", 2, deep.encoded()))
        cases.append(("an empty branch", 2, IndexNode(level: 3, entries: []).encoded()))
        cases.append(("a head set naming a leaf", 0, try HeadSet.encode([seed.path[3]])))

        var tally = FuzzTally("stores of hostile objects (hand-made)", allowing: [.corruptObject, .missingObject, .coding])
        for (name, depth, bytes) in cases {
            let (objects, heads) = Self.relink(seed, victim: seed.path[depth], path: Array(seed.path.prefix(depth)), bytes: bytes)
            await tally.run(Array(name.utf8)) { _ in try await Self.exercise(objects: objects, heads: heads, first: seed.first, keys: seed.keys) }
        }
        tally.report()
    }

    /// A branch that files the empty leaf (the empty tree's) in the middle of its level: a
    /// commit whose edits reach it is refused. It used to hand that leaf every edit after it,
    /// writing an index that held a record twice.
    @Test func aCommitThroughAnEmptyLeafFiledMidLevelIsRefused() async throws {
        let seed = try await Self.seed()
        var root = try IndexNode.decode(try #require(seed.objects[seed.path[2]]))
        try #require(root.level == 1 && root.entries.count > 2)
        let firstKey = root.entries[0].key
        guard case .node(let secondLeaf, _) = root.entries[1].payload else { Issue.record("not a branch"); return }
        let secondLeafBytes = try #require(seed.objects[secondLeaf])
        let nextKey = try #require(try IndexNode.decode(secondLeafBytes).entries.first?.key)
        root.entries[0].payload = .node(Store.emptyRoot.hash, count: 0)
        let (objects, heads) = Self.relink(seed, victim: seed.path[2], path: Array(seed.path.prefix(2)), bytes: root.encoded())
        let backend = MemoryBackend()
        try await backend.put(objects.map { ($0.key, $0.value) })
        _ = try await backend.compareAndSwap(ref: RefName.heads, expected: nil, new: heads)
        let store = Store(backend: backend, configuration: .init(replica: "hostile", clock: TickClock().read))
        // One edit filed under the emptied entry, one under the next: the empty leaf took both,
        // in order, and the next leaf kept its own copy of the second.
        var changes = ChangeSet()
        try changes.save(Record(key: try RecordKey(indexBytes: firstKey[...]), properties: ["n": .int(1)]))
        try changes.save(Record(key: try RecordKey(indexBytes: nextKey[...]), properties: ["n": .int(2)]))
        await #expect { try await store.commit(changes) } throws: { error in
            (error as? ArborError)?.code == .corruptObject && "\(error)".contains("empty but not the last")
        }
        #expect(try await backend.ref(RefName.heads) == heads)
    }

    /// A leaf whose keys are out of order, correctly hashed: an exchange and a migration refuse
    /// it, naming it, as a read does, and leave the target without refs; `verify` reports it.
    @Test func aNodeWithKeysOutOfOrderIsRefusedByExchangeAndVerifyAlike() async throws {
        let seed = try await Self.seed()
        let victim = try #require(try seed.leaves.first { try IndexNode.decode(seed.objects[$0] ?? []).entries.count >= 2 })
        var leaf = try IndexNode.decode(try #require(seed.objects[victim]))
        leaf.entries.swapAt(0, 1)
        let bytes = leaf.encoded()
        let (objects, heads) = Self.relink(seed, victim: victim, path: Array(seed.path.prefix(3)), bytes: bytes)
        let backend = MemoryBackend()
        try await backend.put(objects.map { ($0.key, $0.value) })
        _ = try await backend.compareAndSwap(ref: RefName.heads, expected: nil, new: heads)
        let store = Store(backend: backend)
        func namesTheLeaf(_ error: any Error) -> Bool {
            (error as? ArborError)?.code == .corruptObject && "\(error)".contains("\(Hash.of(bytes))") && "\(error)".contains("keys out of order")
        }
        for operation in ["exchange", "migrate"] {
            let target = Store(backend: MemoryBackend())
            await #expect(performing: {
                if operation == "exchange" { try await store.exchange(to: target) } else { try await store.migrate(to: target) }
            }, throws: namesTheLeaf)
            #expect(try await target.backend.refs().isEmpty, "\(operation) left the target without refs")
        }
        await #expect(performing: { _ = try await store.records(ofType: "Task") }, throws: { ($0 as? ArborError)?.code == .corruptObject })
        let report = try await store.verify()
        #expect(!report.isIntact && report.corruptCount >= 1)
    }

    /// A merge keeps the records it works on undecoded until it reaches them: a damaged one
    /// is still found, named, before anything is written.
    @Test func aMergeOverADamagedRecordNamesItAndWritesNothing() async throws {
        let seed = try await Self.seed()
        // The second version's leaf holding Task/t16, with that record's bytes damaged.
        let key = RecordKey(type: "Task", id: "t16")
        let leaf = try #require(try seed.leaves.first { hash in
            try IndexNode.decode(seed.objects[hash] ?? []).entries.contains { $0.key == key.indexBytes }
        })
        var node = try IndexNode.decode(seed.objects[leaf] ?? [])
        let position = try #require(node.entries.firstIndex { $0.key == key.indexBytes })
        node.entries[position].payload = .inline([0xFF, 0xFF])
        let (objects, heads) = Self.relink(seed, victim: leaf, path: Array(seed.path.prefix(3)), bytes: node.encoded())
        let backend = MemoryBackend()
        try await backend.put(objects.map { ($0.key, $0.value) })
        _ = try await backend.compareAndSwap(ref: RefName.heads, expected: nil, new: heads)
        let store = Store(backend: backend, configuration: .init(replica: "hostile", clock: TickClock().read))
        try await store.change(on: try await store.version(seed.first), "branch") { changes in
            try changes.save(Task(id: "t16", title: "on a branch", done: false))
        }
        let headsBefore = try await store.heads().map(\.id)
        let objectsBefore = try await backend.allHashes()
        #expect(headsBefore.count == 2)
        await #expect {
            _ = try await store.mergeHeads()
        } throws: { error in
            guard let error = error as? ArborError else { return false }
            return error.code == .corruptObject && error.message.contains("Task/t16")
        }
        #expect(try await store.heads().map(\.id) == headsBefore)
        #expect(try await backend.allHashes() == objectsBefore)
    }

    /// Runs every kind of operation on a store of `objects` whose heads ref is `heads`; throws
    /// the first ``ArborError`` any of them threw (all of them run).
    static func exercise(objects: [Hash: [UInt8]], heads: Hash, first: Hash, keys: [RecordKey]) async throws {
        let backend = MemoryBackend()
        try await backend.put(objects.map { ($0.key, $0.value) })
        _ = try await backend.compareAndSwap(ref: RefName.heads, expected: nil, new: heads)
        let store = Store(backend: backend, configuration: .init(replica: "hostile", nodeCacheCapacity: 64, clock: TickClock().read))
        var failure: ArborError?
        func attempt(_ operation: () async throws -> Void) async {
            do { try await operation() } catch let error as ArborError { failure = failure ?? error } catch {
                failure = ArborError(.engine, "not an ArborError: \(type(of: error)): \(error)")
            }
        }
        await attempt { for version in try await store.log() { _ = version.time.description } }
        await attempt { _ = try await store.records(ofType: "Task") }
        await attempt { _ = try await store.values(Task.self) }
        await attempt { _ = try await store.records(keys) }
        await attempt { _ = try await store.diff(from: first, to: try await store.heads().first?.id ?? first) }
        await attempt { _ = try await store.history(of: keys[0]) }
        await attempt {
            var changes = ChangeSet()
            try changes.save(Task(id: "t1", title: "on top", done: false))
            changes.delete(RecordKey(type: "Task", id: "t8"))
            try await store.commit(changes, message: "on top", parents: try await store.heads().map(\.id))
        }
        // A branch from the first version that changes a record the second changed too: the
        // merge diffs the damaged tree and decodes all three versions of what both changed.
        await attempt {
            try await store.change(on: try await store.version(first), "branch") { changes in
                try changes.save(Task(id: "t16", title: "on a branch", done: false))
                try changes.save(Task(id: "t79", title: "on a branch", done: false))
            }
            _ = try await store.mergeHeads()
        }
        await attempt { try await store.exchange(to: Store(backend: MemoryBackend())) }
        await attempt { try await store.migrate(to: Store(backend: MemoryBackend())) }
        if let failure { throw failure }
    }
}
