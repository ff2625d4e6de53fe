import Foundation
import Testing
@testable import Arbor

/// `Store.verify` finds indexes that read back but are not in canonical shape (FORMAT.md
/// section 7): each test writes one such tree node by node, as an older or faulty writer or a
/// peer could have, and verify must name what is out of shape, and nothing else.
extension VerifyTests {
    /// A key `tag` + n whose boundary status is `status[level]` on each level listed; tags keep
    /// keys in the order a test needs.
    static func key(_ tag: String, boundaryAt status: [Int: Bool]) -> [UInt8] {
        for index in 0... {
            let key = RecordKey(type: "Shape", id: "\(tag)\(index)").indexBytes
            if status.allSatisfy({ ProllyTree.isBoundary(key, level: $0.key) == $0.value }) { return key }
        }
        fatalError("unreachable")
    }

    static func leaf(_ keys: [[UInt8]]) -> IndexNode {
        IndexNode(level: 0, entries: keys.map { IndexEntry(key: $0, payload: .inline(RecordCoding.encode(["n": .int(1)]))) })
    }

    static func branch(_ level: Int, _ children: [IndexNode]) -> IndexNode {
        IndexNode(level: level, entries: children.map {
            IndexEntry(key: $0.lastKey!, payload: .node(Hash.of($0.encoded()), count: $0.recordCount))
        })
    }

    /// Writes `nodes` and `blobs` as they are and a version with index `root` on `parent`, which
    /// becomes the head; returns the version's hash.
    @discardableResult
    static func commit(root: IndexNode, nodes: [IndexNode], blobs: [[UInt8]] = [], on parent: Hash? = nil, to store: Store) async throws -> Hash {
        let content = Version.Content(
            root: Hash.of(root.encoded()), parents: parent.map { [$0] } ?? [], time: HybridTime(milliseconds: 1_000 + (parent == nil ? 0 : 1)),
            replica: "v", message: "", recordCount: root.recordCount)
        let objects = ([root] + nodes).map { ($0.encoded()) } + blobs + [content.encoded()]
        try await store.backend.put(objects.map { (Hash.of($0), $0) })
        try await store.updateHeads(removing: Set(parent.map { [$0] } ?? []), adding: Hash.of(content.encoded()))
        return Hash.of(content.encoded())
    }

    /// Verifies `store` and expects one non-canonical object, `hash`, whose detail says `detail`.
    static func expectOneNonCanonical(_ store: Store, _ hash: Hash, saying detail: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let report = try await store.verify()
        #expect(report.nonCanonicalCount == 1 && report.missingCount == 0 && report.corruptCount == 0, "\(report.damage)", sourceLocation: sourceLocation)
        #expect(!report.isIntact && report.isComplete, sourceLocation: sourceLocation)
        #expect(report.damage.first?.kind == .nonCanonical && report.damage.first?.hash == hash, "\(report.damage)", sourceLocation: sourceLocation)
        #expect(report.damage.first?.detail.contains(detail) == true, "\(report.damage)", sourceLocation: sourceLocation)
    }

    /// A store written by commits, with updates, deletions and large records, in three levels:
    /// no shape problem.
    @Test func aStoreWrittenByCommitsIsCanonical() async throws {
        let backend = MemoryBackend()
        let store = Store(backend: backend, configuration: .init(replica: "v"))
        for round in 0..<3 {
            var changes = ChangeSet()
            for index in stride(from: round, to: 2_400, by: round == 2 ? 7 : 2) {
                let size = index % 50 == 0 ? 2_000 : index % 10
                try changes.save(Note(id: "n\(index)", text: String(repeating: "x", count: size) + "\(round)"))
            }
            if round == 2 {
                for index in stride(from: 0, to: 2_400, by: 9) where index % 7 != 2 { try changes.delete(Note.self, id: "n\(index)") }
            }
            try await store.commit(changes)
        }
        let head = try #require(try await store.head())
        #expect(try IndexNode.decode(try #require(try await backend.get(head.root))).level >= 2, "three levels")
        let report = try await store.verify()
        #expect(report.isIntact && report.nonCanonicalCount == 0, "\(report.damage)")
    }

    /// A record of exactly 1,024 bytes inline and one of 1,025 in a blob are canonical; one of
    /// 1,025 inline, and a blob holding 1,024, are not.
    @Test func recordsInlineOrInBlobsByTheirSizeOnly() async throws {
        // One string property: 1 + 2 + 1 bytes before the string's 2-byte length and its bytes.
        func record(_ size: Int) -> [UInt8] { RecordCoding.encode(["s": .string(String(repeating: "x", count: size - 6))]) }
        let (inline, large) = (record(1_024), record(1_025))
        #expect(inline.count == 1_024 && large.count == 1_025)
        let largeBlob = Blob.encode(record: large)
        let canonical = IndexNode(level: 0, entries: [
            IndexEntry(key: RecordKey(type: "Shape", id: "a").indexBytes, payload: .inline(inline)), IndexEntry(key: RecordKey(type: "Shape", id: "b").indexBytes, payload: .blob(Hash.of(largeBlob))),
        ])
        var store = Store(backend: MemoryBackend())
        try await Self.commit(root: canonical, nodes: [], blobs: [largeBlob], to: store)
        #expect(try await store.verify().isIntact)

        let oversized = IndexNode(level: 0, entries: [IndexEntry(key: RecordKey(type: "Shape", id: "a").indexBytes, payload: .inline(large))])
        store = Store(backend: MemoryBackend())
        try await Self.commit(root: oversized, nodes: [], to: store)
        try await Self.expectOneNonCanonical(store, Hash.of(oversized.encoded()), saying: "1025 bytes inline")

        let smallBlob = Blob.encode(record: inline)
        let blobbed = IndexNode(level: 0, entries: [IndexEntry(key: RecordKey(type: "Shape", id: "a").indexBytes, payload: .blob(Hash.of(smallBlob)))])
        store = Store(backend: MemoryBackend())
        try await Self.commit(root: blobbed, nodes: [], blobs: [smallBlob], to: store)
        try await Self.expectOneNonCanonical(store, Hash.of(smallBlob), saying: "which a leaf holds inline")
    }

    /// A leaf that goes on past a key that ends a node: the rest belongs in the next leaf.
    @Test func aBoundaryBeforeANodesLastEntryIsNamed() async throws {
        let boundary = Self.key("a", boundaryAt: [0: true])
        let after = Self.key("b", boundaryAt: [0: false])
        let leaf = Self.leaf([boundary, after])
        let store = Store(backend: MemoryBackend())
        try await Self.commit(root: leaf, nodes: [], to: store)
        try await Self.expectOneNonCanonical(store, Hash.of(leaf.encoded()), saying: "entry 0 is a boundary at level 0")
    }

    /// A leaf that is not the last one but does not end on a boundary: it and the next are one
    /// leaf in the canonical tree.
    @Test func aNodeBeforeTheLastThatEndsWithoutABoundaryIsNamed() async throws {
        let short = Self.leaf([Self.key("a", boundaryAt: [0: false, 1: false])])
        let last = Self.leaf([Self.key("b", boundaryAt: [0: false])])
        let root = Self.branch(1, [short, last])
        let store = Store(backend: MemoryBackend())
        try await Self.commit(root: root, nodes: [short, last], to: store)
        try await Self.expectOneNonCanonical(store, Hash.of(short.encoded()), saying: "not the last node on level 0, yet it does not end on a boundary")
    }

    /// The last leaf under a branch that is not the last branch is not the last leaf: it must
    /// end on a boundary too, though within its branch it is last.
    @Test func theLastChildOfABranchBeforeTheLastMustEndOnABoundary() async throws {
        let first = Self.leaf([Self.key("a", boundaryAt: [0: true, 1: false, 2: false])])
        // Ends its branch (a boundary at level 1), but not its leaf.
        let second = Self.leaf([Self.key("b", boundaryAt: [0: false, 1: true, 2: false])])
        let third = Self.leaf([Self.key("c", boundaryAt: [0: false, 1: false])])
        let left = Self.branch(1, [first, second])
        let right = Self.branch(1, [third])
        let root = Self.branch(2, [left, right])
        let store = Store(backend: MemoryBackend())
        try await Self.commit(root: root, nodes: [left, right, first, second, third], to: store)
        try await Self.expectOneNonCanonical(store, Hash.of(second.encoded()), saying: "not the last node on level 0, yet it does not end on a boundary")
    }

    /// A root branch with one entry: the root is the lowest level with one node, its child.
    @Test func aRootBranchWithOneEntryIsNamed() async throws {
        let leaf = Self.leaf([Self.key("a", boundaryAt: [0: false]), Self.key("b", boundaryAt: [0: false])])
        let root = Self.branch(1, [leaf])
        let store = Store(backend: MemoryBackend())
        try await Self.commit(root: root, nodes: [leaf], to: store)
        try await Self.expectOneNonCanonical(store, Hash.of(root.encoded()), saying: "a branch with one entry")
    }

    /// A node that one version holds as the last on its level (where it need not end on a
    /// boundary) and a later version holds before other nodes is read once, as the first: the
    /// later version's use of it is checked all the same, down to the leaves below it.
    @Test func aNodeSharedWithAVersionWhereItWasLastIsCheckedWhereItIsNot() async throws {
        // A leaf: the one leaf of the first version, the first of two in the second.
        var store = Store(backend: MemoryBackend())
        let leaf = Self.leaf([Self.key("a", boundaryAt: [0: false, 1: false])])
        let first = try await Self.commit(root: leaf, nodes: [], to: store)
        let next = Self.leaf([Self.key("b", boundaryAt: [0: false])])
        try await Self.commit(root: Self.branch(1, [leaf, next]), nodes: [next], on: first, to: store)
        try await Self.expectOneNonCanonical(store, Hash.of(leaf.encoded()), saying: "it does not end on a boundary")

        // A branch whose key ends a branch but not a leaf: the root of the first version, the
        // first of two branches in the second, where the last leaf below it is not the last leaf.
        store = Store(backend: MemoryBackend())
        let ends = Self.leaf([Self.key("a", boundaryAt: [0: true, 1: false])])
        let open = Self.leaf([Self.key("b", boundaryAt: [0: false, 1: true, 2: false])])
        let shared = Self.branch(1, [ends, open])
        let base = try await Self.commit(root: shared, nodes: [ends, open], to: store)
        let tail = Self.leaf([Self.key("c", boundaryAt: [0: false])])
        let right = Self.branch(1, [tail])
        try await Self.commit(root: Self.branch(2, [shared, right]), nodes: [right, tail], on: base, to: store)
        try await Self.expectOneNonCanonical(store, Hash.of(shared.encoded()), saying: "the last node below it on level 0 does not end on a boundary")
    }

    /// A node out of shape that two versions' roots both name, read in one group: it is walked
    /// and reported once, and where one root names it last and the other not, its end is
    /// checked as the other's.
    @Test func aNodeTwoRootsNameIsWalkedOnce() async throws {
        let store = Store(backend: MemoryBackend(), configuration: .init(replica: "v"))
        // Out of shape: a boundary before its last entry; it ends on one, as a node before others must.
        let shared = Self.leaf([Self.key("a", boundaryAt: [0: true]), Self.key("b", boundaryAt: [0: true, 1: false])])
        let first = Self.leaf([Self.key("c", boundaryAt: [:])])
        let second = Self.leaf([Self.key("d", boundaryAt: [:])])
        try await Self.commit(root: Self.branch(1, [shared, first]), nodes: [shared, first], to: store)
        try await Self.commit(root: Self.branch(1, [shared, second]), nodes: [second], to: store)
        try await Self.expectOneNonCanonical(store, Hash.of(shared.encoded()), saying: "is a boundary at level 0, which ends a node")

        // Named last by one root (its end unchecked) and before another node by the other.
        let other = Store(backend: MemoryBackend(), configuration: .init(replica: "v"))
        let open = Self.leaf([Self.key("e", boundaryAt: [0: false, 1: false])])
        let before = Self.leaf([Self.key("0", boundaryAt: [0: true, 1: false])])
        let after = Self.leaf([Self.key("f", boundaryAt: [:])])
        try await Self.commit(root: Self.branch(1, [before, open]), nodes: [before, open], to: other)
        try await Self.commit(root: Self.branch(1, [open, after]), nodes: [after], to: other)
        try await Self.expectOneNonCanonical(other, Hash.of(open.encoded()), saying: "yet it does not end on a boundary")
    }
}

/// `Store.verify` decodes every record as reads decode it: a record a faulty writer or a peer
/// encoded otherwise than the format says matches its hash, yet no read of it succeeds.
extension VerifyTests {
    /// Property names out of order, a string of invalid UTF-8, bytes after the last property,
    /// and an index key that is no record key: each is named, inline or in a blob, and a read of
    /// that record fails as verify says.
    @Test(arguments: ["names out of order", "invalid UTF-8", "trailing bytes", "not a valid record key"])
    func aRecordThatDoesNotReadBackIsNamed(damage: String) async throws {
        for inBlob in [false, true] where !(inBlob && damage == "not a valid record key") {
            // Long enough to go in a blob, as a canonical writer would put it.
            let text = String(repeating: "x", count: inBlob ? ProllyTree.inlineLimit : 4)
            var bytes = RecordCoding.encode(["s": .string(text)]), indexKey = RecordKey(type: "Shape", id: "a").indexBytes
            switch damage {
            case "names out of order":
                // Two properties, "s" written before "a": a writer that did not sort them.
                var writer = ByteWriter()
                writer.varint(2)
                writer.string("s"); writer.value(.string(text))
                writer.string("a"); writer.value(.int(1))
                bytes = writer.bytes
            case "invalid UTF-8":
                bytes[bytes.count - 1] = 0xFF
            case "trailing bytes":
                bytes.append(0)
            default:
                indexKey = Array("a".utf8)
            }
            let blob = Blob.encode(record: bytes)
            let leaf = IndexNode(level: 0, entries: [IndexEntry(key: indexKey, payload: inBlob ? .blob(Hash.of(blob)) : .inline(bytes))])
            let store = Store(backend: MemoryBackend())
            try await Self.commit(root: leaf, nodes: [], blobs: inBlob ? [blob] : [], to: store)
            let report = try await store.verify()
            #expect(report.corruptCount == 1 && report.missingCount == 0 && report.nonCanonicalCount == 0, "\(damage): \(report.damage)")
            #expect(report.damage.first?.hash == Hash.of(inBlob ? blob : leaf.encoded()), "\(report.damage)")
            #expect(report.damage.first?.detail.contains(damage) == true, "\(report.damage)")
            // (A key of no type is found by no type's scan: the diff from nothing lists every key.)
            await #expect(throws: ArborError.self, "\(damage), in a blob: \(inBlob)") {
                _ = try await store.records(ofType: "Shape")
                _ = try await store.diff(from: nil, to: try #require(try await store.head()).id)
            }
            // A collection needs only what objects name: a record's damage does not stop one.
            try await store.collectGarbage(gracePeriod: .zero)
        }
    }
}
