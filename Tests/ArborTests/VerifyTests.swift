import Foundation
import Testing
@testable import Arbor

/// `Store.verify`: intact stores pass on every adapter; missing, corrupt and malformed objects are
/// found and named; garbage is counted.
@Suite struct VerifyTests {
    /// A store with two heads, blobs and several versions.
    func filled(_ backend: any Backend) async throws -> Store {
        let store = Store(backend: backend, configuration: .init(replica: "v"))
        for commit in 0..<3 {
            var changes = ChangeSet()
            for index in stride(from: commit, to: 90, by: 3) {
                var task = Task(id: "t\(index)", title: "task \(index) v\(commit)", done: false)
                task.notes = [Note(id: "n\(index)", text: String(repeating: "n", count: index == 4 ? 3_000 : 10))]
                try changes.save(task)
            }
            try await store.commit(changes)
        }
        let first = try await store.log().last!
        try await store.change(on: first) { try $0.save(Task(id: "side", title: "side", done: true)) }
        return store
    }

    @Test(arguments: AdapterKind.allCases) func intactStoreVerifiesAndCountsGarbage(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let store = try await filled(backend)
        let report = try await store.verify()
        #expect(report.isIntact, "\(report.damage)")
        #expect(report.versions == 4)
        // Every object but the superseded head sets is reachable.
        let all = try await backend.allHashes().count
        #expect(report.reachableObjects + report.unreachableObjects == all)
        #expect(report.unreachableObjects == 3)  // the head sets of the three earlier commits
        try await store.close()
    }

    /// Verify and gc read large records about 16 MB at a time, however many a group of leaves
    /// names: they used to read every blob below up to 1,024 leaves at once.
    /// A version named by a ref besides the heads (a tag on the head) is one version: it was
    /// counted, and checked, once per name.
    /// A version whose index files a leaf that later versions share with another record count:
    /// verify names the leaf, though the sound filings, checked in the same batch of versions,
    /// read it first, in an earlier request of that batch.
    @Test func aSharedNodeFiledOtherwiseLaterInABatchIsNamed() async throws {
        let backend = MemoryBackend()
        let store = Store(backend: backend, configuration: .init(replica: "v"))
        var changes = ChangeSet()
        for index in 0..<6_000 { try changes.save(Person(id: "p\(index)", name: "person \(index)")) }
        let head = try await store.commit(changes)
        // Down the first entries to the first branch over leaves.
        var path = [try IndexNode.decode(try #require(try await backend.get(head.root)))]
        while path[path.count - 1].level > 1 {
            guard case .node(let next, _) = path[path.count - 1].entries[0].payload else { Issue.record("no branch"); return }
            path.append(try IndexNode.decode(try #require(try await backend.get(next))))
        }
        // That branch's last leaf, filed with one record more: later versions add records that
        // sort first, into the branch's first leaf, and share this one.
        var branch = path.removeLast()
        guard case .node(let leaf, let leafCount) = branch.entries[branch.entries.count - 1].payload else { Issue.record("no leaf"); return }
        branch.entries[branch.entries.count - 1].payload = .node(leaf, count: leafCount + 1)
        var written = [(hash: Hash, bytes: [UInt8])]()
        var below = branch
        while true {
            let bytes = below.encoded()
            written.append((Hash.of(bytes), bytes))
            guard var parent = path.popLast() else { break }
            parent.entries[0].payload = .node(Hash.of(bytes), count: below.recordCount)
            below = parent
        }
        var content = head.content
        (content.root, content.recordCount, content.parents) = (written[written.count - 1].hash, below.recordCount, [head.id])
        content.time = HybridTime.next(after: [head.time], now: Date())
        let damaged = content.encoded()
        try await backend.put(written + [(Hash.of(damaged), damaged)])
        try await store.updateHeads(removing: [], adding: Hash.of(damaged))
        // 240 sound versions on the first one, the first also naming the damaged one as a parent:
        // verify checks them together (256 versions at a time, newest first), and the damaged
        // one's filing comes after thousands of sound ones, in a later request.
        var parents = [head.id, Hash.of(damaged)]
        for index in 0..<240 {
            var more = ChangeSet()
            try more.save(Person(id: "a\(index)", name: "added"))
            parents = [try await store.commit(more, parents: parents).id]
        }
        let report = try await store.verify()
        #expect(report.damage.map(\.hash) == [leaf], "\(report.damage.map(\.detail))")
    }

    @Test func aVersionNamedTwiceIsCountedOnce() async throws {
        let store = Store(backend: MemoryBackend())
        let version = try await store.save(Task(id: "t", title: "tagged", done: false))
        #expect(try await store.backend.compareAndSwap(ref: "tags/v1", expected: nil, new: version.id))
        let report = try await store.verify()
        #expect(report.isIntact && report.versions == 1, "\(report.versions) versions")
    }

    @Test func largeRecordsAreReadInRequestsOfBoundedSize() async throws {
        let size = 1 << 20
        let (store, backend) = try await storeOfLargeRecords(count: 40, size: size)
        let report = try await store.verify()
        #expect(report.isIntact && report.reachableBytes > 40 * size)
        #expect(backend.largestRead > size && backend.largestRead <= BlobRequestSizer.byteBudget + size + 1_024)
        backend.reset()
        _ = try await store.collectGarbage(gracePeriod: .zero)
        #expect(backend.largestRead > size && backend.largestRead <= BlobRequestSizer.byteBudget + size + 1_024)
    }

    /// A damaged index root that two versions far apart in the history share (a change, 300
    /// others, then the change undone), on an adapter that refuses a damaged object and with it
    /// the whole batch, as the JSON adapter does: verify reports it, rather than stop with the
    /// adapter's error when it meets the root again in a later chunk of versions.
    @Test func aDamagedRootMetAgainLaterInTheHistoryIsReported() async throws {
        let inner = MemoryBackend()
        let writer = Store(backend: inner, configuration: .init(replica: "v"))
        let first = try await writer.save(Task(id: "t", title: "kept", done: false))
        for index in 0..<300 { try await writer.save(Task(id: "t", title: "title \(index)", done: false)) }
        let reverted = try await writer.save(Task(id: "t", title: "kept", done: false))
        #expect(reverted.root == first.root)
        let store = Store(backend: DamagingBackend(inner, damaging: first.root, by: .refusal))
        let report = try await store.verify()
        #expect(!report.isIntact && report.damage.contains { $0.hash == first.root }, "\(report.damage)")
    }

    @Test func missingCorruptAndMalformedObjectsAreNamed() async throws {
        let inner = MemoryBackend()
        let store = try await filled(inner)
        let head = try #require(try await store.head())
        let root = try IndexNode.decode(try #require(try await inner.get(head.root)))
        guard case .node(let child, _) = root.entries[0].payload else { Issue.record("a one-level tree"); return }
        // A node missing.
        let missing = child
        let saved = try #require(try await inner.get(missing))
        try await inner.delete([missing])
        var report = try await store.verify()
        #expect(!report.isIntact && report.missingCount == 1)
        #expect(report.damage.first?.hash == missing && report.damage.first?.kind == .missing)
        // Named with the node that names it (it was "an index node").
        #expect(report.damage.first?.detail.contains("named by index node \(head.root)") == true, "\(report.damage)")
        try await inner.put([(missing, saved)])
        #expect(try await store.verify().isIntact)

        // Bytes that do not match the hash.
        let corrupting = Store(backend: DamagingBackend(inner, damaging: head.root, by: .flippedByte))
        report = try await corrupting.verify()
        #expect(report.corruptCount == 1 && report.damage.first?.hash == head.root)

        // A version whose index says another record count: well-formedness, not just hashes.
        var content = head.content
        content.recordCount += 1
        content.parents = [head.id]
        let bytes = content.encoded()
        try await inner.put([(Hash.of(bytes), bytes)])
        try await store.updateHeads(removing: [head.id], adding: Hash.of(bytes))
        report = try await store.verify()
        #expect(report.corruptCount == 1 && report.damage.first?.hash == Hash.of(bytes))
        #expect(report.damage.first?.detail.contains("records") == true)
    }

    /// A branch that files a child under a key other than the child's last key parses, keeps
    /// its keys in order and its counts right, yet lookups (which follow branch keys) and diffs
    /// (which follow the leaves) would disagree on it: verify names the child.
    @Test func aBranchKeyThatIsNotItsChildsLastKeyIsNamed() async throws {
        let inner = MemoryBackend()
        let store = try await filled(inner)
        let head = try #require(try await store.head())
        var root = try IndexNode.decode(try #require(try await inner.get(head.root)))
        try #require(root.level > 0 && root.entries.count > 1)
        guard case .node(let child, _) = root.entries[0].payload else { Issue.record("a one-level tree"); return }
        // Still below the next entry's key: the node stays in order and parses.
        root.entries[0].key += [0x01]
        #expect(compareKeys(root.entries[0].key, root.entries[1].key) < 0)
        let rootBytes = root.encoded()
        var content = head.content
        content.root = Hash.of(rootBytes)
        content.parents = [head.id]
        let commit = content.encoded()
        try await inner.put([(Hash.of(rootBytes), rootBytes), (Hash.of(commit), commit)])
        try await store.updateHeads(removing: [head.id], adding: Hash.of(commit))
        let report = try await store.verify()
        #expect(report.corruptCount == 1 && report.damage.first?.hash == child)
        #expect(report.damage.first?.detail.contains("last key") == true, "\(report.damage)")
    }

    /// Sibling nodes whose keys overlap: each parses, keeps its keys in order, ends on the key
    /// its parent files it under and holds the count it says, yet a key in both is found in one
    /// by a lookup and twice by a listing. Verify names the second.
    @Test func siblingsWhoseKeysOverlapAreNamed() async throws {
        let inner = MemoryBackend()
        let store = try await filled(inner)
        let head = try #require(try await store.head())
        var root = try IndexNode.decode(try #require(try await inner.get(head.root)))
        try #require(root.level == 1 && root.entries.count > 1, "a tree of leaves under one branch")
        guard case .node(let first, _) = root.entries[0].payload, case .node(let second, let count) = root.entries[1].payload else {
            Issue.record("branch entries that are not nodes"); return
        }
        // The second leaf, with the first leaf's first record put in front of its own.
        let firstLeaf = try IndexNode.decode(try #require(try await inner.get(first)))
        var overlapping = try IndexNode.decode(try #require(try await inner.get(second)))
        overlapping.entries.insert(firstLeaf.entries[0], at: 0)
        let leafBytes = overlapping.encoded()
        root.entries[1].payload = .node(Hash.of(leafBytes), count: count + 1)
        let rootBytes = root.encoded()
        var content = head.content
        content.root = Hash.of(rootBytes)
        content.parents = [head.id]
        content.recordCount += 1
        let commit = content.encoded()
        try await inner.put([(Hash.of(leafBytes), leafBytes), (Hash.of(rootBytes), rootBytes), (Hash.of(commit), commit)])
        try await store.updateHeads(removing: [head.id], adding: Hash.of(commit))
        let report = try await store.verify()
        #expect(report.corruptCount == 1 && report.damage.first?.hash == Hash.of(leafBytes), "\(report.damage)")
        #expect(report.damage.first?.detail.contains("first key") == true, "\(report.damage)")
    }

    /// A version whose root is an object reached already as something else (here its parent's
    /// commit, read with the history, and 0 records, which a commit "holds"): still checked as
    /// an index root, and named.
    @Test func aRootReachedAsAVersionIsNamed() async throws {
        let inner = MemoryBackend()
        let store = try await filled(inner)
        let head = try #require(try await store.head())
        var content = head.content
        content.root = head.id
        content.recordCount = 0
        content.parents = [head.id]
        content.time = HybridTime(milliseconds: head.time.milliseconds + 1_000)
        let commit = content.encoded()
        try await inner.put([(Hash.of(commit), commit)])
        try await store.updateHeads(removing: [head.id], adding: Hash.of(commit))
        let report = try await store.verify()
        #expect(report.corruptCount == 1 && report.damage.first?.hash == Hash.of(commit), "\(report.damage)")
        #expect(report.damage.first?.detail.contains("is a commit, not an index node") == true, "\(report.damage)")
    }
}
