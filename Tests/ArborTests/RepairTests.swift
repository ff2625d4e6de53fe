@testable import ArborLMDB
@testable import ArborSQLite
import Foundation
import Synchronization
import Testing
@testable import Arbor

/// ``Store/repair(from:progress:)`` where the conformance cases do not reach: stores that keep
/// deltas, and a replica whose copy is damaged too.
@Suite struct RepairTests {
    /// Opens a store that keeps deltas on `engine`, with its delta count and check.
    func deltaBackend(_ engine: String, _ path: String) throws -> (backend: any Backend, deltaCount: @Sendable () throws -> Int, isDelta: @Sendable (Hash) throws -> Bool) {
        if engine == "sqlite" {
            let sqlite = try SQLiteBackend.create(.init(path: path, restatesReplacedNodes: true))
            return (sqlite, { try sqlite.deltaCount() }, { try sqlite.isDelta($0) })
        }
        let lmdb = try LMDBBackend.create(.init(path: path, synchronous: false, restatesReplacedNodes: true))
        return (lmdb, { try lmdb.deltaCount() }, { try lmdb.isDelta($0) })
    }

    /// `replace` in a store that keeps deltas: a base replaced keeps its deltas, which read
    /// through its new bytes; a delta replaced is kept whole, and its base can go.
    @Test(arguments: ["sqlite", "lmdb"]) func replaceKeepsDeltasAgainstWhatItReplaces(engine: String) async throws {
        let path = temporaryPath("replace-deltas")
        defer { removeItem(path) }
        let (backend, deltaCount, isDelta) = try deltaBackend(engine, path)
        let base = (0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 29) }
        let old = Array(base[0..<1_000]) + [1, 2, 3]
        let (baseHash, oldHash) = (Hash.of(base), Hash.of(old))
        try await backend.put([(baseHash, base), (oldHash, old)])
        try await backend.restate([Restatement(hash: oldHash, base: baseHash, delta: LMDBDeltaTests.delta(copying: 1_000, then: [1, 2, 3]))])
        try #require(try isDelta(oldHash))

        // The base damaged (replace takes the caller's word for the bytes), then mended.
        try await backend.replace([(baseHash, Array(repeating: 7, count: 2_000))])
        #expect(try await backend.get([oldHash])[oldHash] != old)
        try await backend.replace([(baseHash, base)])
        #expect(try await backend.get([oldHash, baseHash]) == [oldHash: old, baseHash: base])
        #expect(try isDelta(oldHash) && deltaCount() == 1)

        try await backend.replace([(oldHash, old)])
        #expect(try !isDelta(oldHash) && deltaCount() == 0)
        try await backend.delete([baseHash])
        #expect(try await backend.get([oldHash, baseHash]) == [oldHash: old])
        try await backend.close()
    }

    /// A store that keeps deltas, with every version, its head set and three deltas overwritten
    /// with garbage, is mended from a whole replica in one round, though each corrupt version hid
    /// the one before it and the trees below: what damage hid is read in the round. The deltas it
    /// wrote are kept whole; every other delta stays one.
    @Test(arguments: ["sqlite", "lmdb"]) func aStoreKeepingDeltasIsMended(engine: String) async throws {
        let path = temporaryPath("repair-deltas")
        defer { removeItem(path) }
        let (backend, deltaCount, isDelta) = try deltaBackend(engine, path)
        let store = Store(backend: backend, configuration: .init(replica: "d"))
        for round in 0..<6 {
            var changes = ChangeSet()
            for index in stride(from: round, to: 400, by: 7) { try changes.save(Task(id: "t\(index)", title: "round \(round)", done: false)) }
            try await store.commit(changes, message: "round \(round)")
        }
        let replica = Store(backend: MemoryBackend())
        try await store.exchange(to: replica)
        let deltas = try await backend.allHashes().sorted().filter { try isDelta($0) }
        try #require(deltas.count >= 10)
        let versions = try await store.log().map(\.id)
        let headSet = try #require(try await backend.refs()[RefName.heads])
        let damaged = versions + [headSet] + deltas.prefix(3)
        try await backend.replace(damaged.map { ($0, Array("damaged \($0.hex)".utf8)) })
        #expect(try deltaCount() == deltas.count - 3)
        #expect(try await Store(backend: backend).verify().corruptCount == 1)  // the head set hides the rest
        // The three, and any delta whose chain passes through one of them (a base can become a
        // delta later), read damaged.
        var readDamaged = [Hash]()
        for delta in deltas {
            let bytes = try? await backend.get([delta])[delta]
            if bytes.map({ Hash.of($0) != delta }) ?? true { readDamaged.append(delta) }
        }
        #expect(readDamaged.count >= 3)

        let report = try await Store(backend: backend).repair(from: replica)
        #expect(report.isIntact && report.unrepaired.isEmpty, "\(report.unrepaired.prefix(3))")
        // Two passes: the history and the trees' deltas, all hidden behind the head set, are
        // read and mended in one round; the second pass checks.
        #expect(report.objectsWritten == versions.count + 1 + readDamaged.count && report.passes == 2,
                "\(report.objectsWritten) written in \(report.passes) passes")
        #expect(try deltaCount() == deltas.count - readDamaged.count)
        #expect(try readDamaged.allSatisfy { try !isDelta($0) })
        let fresh = Store(backend: backend)
        #expect(try await fresh.verify().isIntact)
        for version in versions {
            #expect(try await fresh.records(ofType: "Task", at: version) == (try await replica.records(ofType: "Task", at: version)))
        }
        try await backend.close()
    }

    /// An object the replica holds damaged too is left, and said so; nothing else is written
    /// over it. A second repair from a sound replica mends it.
    @Test func aReplicaDamagedTooIsReportedAndNothingIsWritten() async throws {
        let store = Store(backend: MemoryBackend())
        let version = try await store.save(Task(id: "t", title: "x", done: false))
        let replica = Store(backend: MemoryBackend())
        try await store.exchange(to: replica)
        let sound = Store(backend: MemoryBackend())
        try await store.exchange(to: sound)
        try await store.backend.replace([(version.root, Array("damaged here".utf8))])
        try await replica.backend.replace([(version.root, Array("damaged there".utf8))])

        let report = try await store.repair(from: replica)
        #expect(!report.isIntact && report.objectsWritten == 0 && report.passes == 1)
        #expect(report.unrepaired.map(\.hash) == [version.root])
        #expect(report.unrepaired.first?.detail.contains("the replica's copy is damaged too") == true, "\(report.unrepaired)")
        #expect(try await store.backend.get([version.root])[version.root] == Array("damaged here".utf8))

        let mended = try await store.repair(from: sound)
        #expect(mended.isIntact && mended.objectsWritten == 1)
        #expect(try await store.value(Task.self, id: "t")?.title == "x")
    }

    /// A missing version, its missing index and a corrupt node under it are written in one
    /// round, each object after everything it names: a repair stopped between two writes leaves
    /// no object whose children are not there, which an exchange would take as whole.
    @Test func objectsAreWrittenAfterWhatTheyName() async throws {
        let recording = ReplaceRecordingBackend(MemoryBackend())
        let store = Store(backend: recording)
        var changes = ChangeSet()
        for index in 0..<3_000 { try changes.save(Task(id: "t\(index)", title: "task \(index)", done: false)) }
        let first = try await store.commit(changes)
        let second = try await store.save(Task(id: "t1", title: "changed", done: false))
        let replica = Store(backend: MemoryBackend())
        try await store.exchange(to: replica)
        // The second version and its root are gone, and a child of its root is corrupt.
        let rootBytes = try #require(try await recording.get([second.root])[second.root])
        let children = try ObjectLinks(rootBytes).children.map(\.hash)
        try #require(children.count > 1)
        try await recording.delete([second.id, second.root])
        try await recording.replace([(children[1], Array("damaged".utf8))])
        recording.written.withLock { $0 = [] }

        let report = try await store.repair(from: replica)
        #expect(report.isIntact && report.passes == 2 && report.objectsWritten == 3)
        let order = recording.written.withLock { $0 }
        #expect(order.count == 3)
        #expect(order.firstIndex(of: children[1])! < order.firstIndex(of: second.root)!)
        #expect(order.firstIndex(of: second.root)! < order.firstIndex(of: second.id)!)
        #expect(try await store.value(Task.self, id: "t1", at: second.id)?.title == "changed")
        #expect(try await store.value(Task.self, id: "t1", at: first.id)?.title == "task 1")
    }
}

extension RepairTests {
    /// A version whose bytes match its hash but whose index holds another record count is
    /// malformed on every replica: named, with that reason, and neither fetched nor written.
    @Test func anObjectMalformedEverywhereIsNamedNotWritten() async throws {
        let store = Store(backend: MemoryBackend())
        let head = try await store.save(Task(id: "t", title: "x", done: false))
        var content = head.content
        content.recordCount += 1
        content.parents = [head.id]
        let bytes = content.encoded()
        try await store.backend.put([(Hash.of(bytes), bytes)])
        try await store.updateHeads(removing: [head.id], adding: Hash.of(bytes))
        // Copied object by object: an exchange refuses the version (it is no later than its parent).
        let replica = Store(backend: MemoryBackend())
        let hashes = Array(try await store.backend.allHashes())
        try await replica.backend.put(try await store.backend.get(hashes).map { ($0.key, $0.value) })
        for (name, hash) in try await store.backend.refs() { _ = try await replica.backend.compareAndSwap(ref: name, expected: nil, new: hash) }

        let report = try await store.repair(from: replica)
        #expect(!report.isIntact && report.objectsWritten == 0 && report.passes == 1)
        #expect(report.unrepaired.map(\.hash) == [Hash.of(bytes)])
        #expect(report.unrepaired.first?.detail.contains("its bytes here match its hash") == true, "\(report.unrepaired)")
    }

    /// A missing version whose root neither store holds is left missing, not written without its
    /// tree: present, it would pass for whole, and an exchange of a later version that re-uses
    /// the tree would skip it.
    @Test func anObjectNamingWhatNoStoreHoldsIsNotWritten() async throws {
        let store = Store(backend: MemoryBackend())
        _ = try await store.save(Task(id: "a", title: "a", done: false))
        let head = try await store.save(Task(id: "b", title: "b", done: false))
        let replica = Store(backend: MemoryBackend())
        try await store.exchange(to: replica)
        try await store.backend.delete([head.id, head.root])
        try await replica.backend.delete([head.root])

        let report = try await store.repair(from: replica)
        #expect(!report.isIntact && report.objectsWritten == 0)
        #expect(report.unrepaired.map(\.hash) == [head.id])
        #expect(report.unrepaired.first?.detail.contains("it names \(head.root)") == true, "\(report.unrepaired)")
        #expect(try await store.backend.contains([head.id]).isEmpty)
    }
}

extension RepairTests {
    /// A missing version whose index is here but was never read (the missing version hid it)
    /// and lacks a node that no store holds: the version is left missing, as writing it would
    /// make a version present with a node missing below it, which passes for whole.
    @Test func anObjectNamingWhatNoStoreHoldsBelowAnIntactNodeIsNotWritten() async throws {
        let store = Store(backend: MemoryBackend())
        var changes = ChangeSet()
        for index in 0..<3_000 { try changes.save(Task(id: "t\(index)", title: "task \(index)", done: false)) }
        let head = try await store.commit(changes)
        let replica = Store(backend: MemoryBackend())
        try await store.exchange(to: replica)
        let rootBytes = try #require(try await store.backend.get([head.root])[head.root])
        let lost = try #require(try ObjectLinks(rootBytes).children.last?.hash)
        try await store.backend.delete([head.id, lost])
        try await replica.backend.delete([lost])

        let report = try await store.repair(from: replica)
        #expect(!report.isIntact && report.objectsWritten == 0 && report.passes == 1)
        #expect(report.unrepaired.map(\.hash) == [head.id])
        #expect(report.unrepaired.first?.detail.contains("it names \(lost)") == true, "\(report.unrepaired)")
    }

    /// An engine that cannot tell the size of a damaged object (a delta whose length is damaged)
    /// does not stop a repair: sizes only size the requests.
    @Test func aStoreThatFailsToTellSizesIsRepaired() async throws {
        let backend = SizeRefusingBackend(MemoryBackend())
        let store = Store(backend: backend)
        let version = try await store.save(Task(id: "t", title: "x", done: false))
        let replica = Store(backend: MemoryBackend())
        try await store.exchange(to: replica)
        try await backend.replace([(version.root, Array("damaged".utf8))])
        let report = try await store.repair(from: replica)
        #expect(report.isIntact && report.objectsWritten == 1)
    }

    /// A wrapper that changes what it stores sees a repair's writes (through its delete and put):
    /// ForwardingBackend does not pass `replace` to the backend it wraps.
    @Test func aWrapperThatChangesWhatItStoresSeesTheRepair() async throws {
        let inner = MemoryBackend()
        let backend = InvertingBackend(inner)
        let store = Store(backend: backend)
        let version = try await store.save(Task(id: "t", title: "x", done: false))
        let replica = Store(backend: MemoryBackend())
        try await store.exchange(to: replica)
        try await inner.replace([(version.root, Array("damaged".utf8))])
        let report = try await store.repair(from: replica)
        #expect(report.isIntact && report.objectsWritten == 1)
        #expect(try await inner.get([version.root])[version.root] != (try await backend.get([version.root])[version.root]))
        #expect(try await Store(backend: backend).value(Task.self, id: "t")?.title == "x")
    }
}

extension RepairTests {
    /// An object left unwritten because something it names read damaged and the replica could
    /// not give it is asked about again once a round has written: a node kept as a delta against
    /// a corrupt base, damaged on the replica, reads intact once the base is mended, and the
    /// missing version above it is then written.
    @Test(arguments: ["sqlite", "lmdb"]) func anObjectLeftForADeltaIsWrittenOnceTheDeltasBaseIsMended(engine: String) async throws {
        let path = temporaryPath("repair-blocked")
        defer { removeItem(path) }
        let (backend, _, isDelta) = try deltaBackend(engine, path)
        let store = Store(backend: backend)
        var changes = ChangeSet()
        for index in 0..<3_000 { try changes.save(Task(id: "t\(index)", title: "task \(index)", done: false)) }
        let head = try await store.commit(changes)
        let replica = Store(backend: MemoryBackend())
        try await store.exchange(to: replica)
        let rootBytes = try #require(try await backend.get([head.root])[head.root])
        let children = try ObjectLinks(rootBytes).children.map(\.hash)
        try #require(children.count > 1)
        let (base, node) = (children[0], children[children.count - 1])
        // The node kept as its base's first byte (both begin with the format marker) and the rest.
        let nodeBytes = try #require(try await backend.get([node])[node])
        try await backend.restate([Restatement(hash: node, base: base, delta: LMDBDeltaTests.delta(copying: 1, then: Array(nodeBytes.dropFirst())))])
        try #require(try isDelta(node))
        try await backend.replace([(base, Array("damaged base".utf8))])
        try #require(try await backend.get([node])[node] != nodeBytes)
        try await backend.delete([head.id])
        try await replica.backend.replace([(node, Array("damaged there".utf8))])

        // The first round writes the base and leaves the version (it names the root, which
        // names the node); the second finds the node intact through the mended base.
        let report = try await store.repair(from: replica)
        #expect(report.isIntact && report.unrepaired.isEmpty, "\(report.unrepaired.prefix(3))")
        #expect(report.objectsWritten == 2 && report.passes == 3, "\(report.objectsWritten) written in \(report.passes) passes")
        #expect(try isDelta(node))
        #expect(try await Store(backend: backend).value(Task.self, id: "t1")?.title == "task 1")
        try await backend.close()
    }
}

extension RepairTests {
    /// A damaged head set hides the whole history from the verification: the round reads it
    /// through the backend's ancestry, many generations per request, not one request per version.
    @Test func aHistoryHiddenBehindADamagedHeadSetIsReadManyGenerationsPerRequest() async throws {
        let backend = CountingBackend(MemoryBackend())
        let store = Store(backend: backend)
        for index in 0..<300 { _ = try await store.save(Task(id: "t\(index % 7)", title: "version \(index)", done: false)) }
        let replica = Store(backend: MemoryBackend())
        try await store.exchange(to: replica)
        let headSet = try #require(try await backend.refs()[RefName.heads])
        try await backend.replace([(headSet, Array("damaged".utf8))])
        backend.reset()

        let report = try await store.repair(from: replica)
        #expect(report.isIntact && report.objectsWritten == 1 && report.passes == 2)
        // Two verifications and a round: 18 requests here; one per version would be over 300.
        #expect(backend.getCalls + backend.ancestryCalls < 40, "\(backend.getCalls) gets, \(backend.ancestryCalls) ancestry requests")
        #expect(try await store.log().count == 300)
    }
}

/// Throws for every size asked, as LMDB does for a delta whose length prefix is damaged.
final class SizeRefusingBackend: ForwardingBackend {
    let inner: any Backend
    init(_ inner: any Backend) { self.inner = inner }
    func objectSizes(_ hashes: [Hash]) async throws -> [Hash: Int]? {
        throw ArborError(.corruptObject, "a damaged length")
    }
}

/// Stores every byte inverted: a wrapper that changes what it stores, as compression would.
final class InvertingBackend: ForwardingBackend {
    let inner: any Backend
    init(_ inner: any Backend) { self.inner = inner }
    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try await inner.get(hashes).mapValues { $0.map { ~$0 } }
    }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try await inner.put(objects.map { ($0.hash, $0.bytes.map { ~$0 }) })
    }
    func objectSizes(_ hashes: [Hash]) async throws -> [Hash: Int]? { nil }
}

/// Records the hashes `replace` writes, in order.
final class ReplaceRecordingBackend: ForwardingBackend {
    let inner: any Backend
    let written = Mutex<[Hash]>([])
    init(_ inner: any Backend) { self.inner = inner }
    func replace(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        written.withLock { $0 += objects.map(\.hash) }
        try await inner.replace(objects)
    }
}
