import Foundation
import Synchronization
import Testing
@testable import Arbor

/// `Store.collectGarbage`: removes exactly what nothing reaches, on every adapter, and never
/// what a concurrent commit needs.
@Suite struct GarbageCollectionTests {
    @Test(arguments: AdapterKind.allCases) func removesExactlyTheUnreachable(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let store = try await VerifyTests().filled(backend)
        // Garbage of another kind too: what an interrupted transfer leaves.
        let stray = (0..<5).map { BackendContractTests.object(10_000 + $0) }
        try await backend.put(stray)
        let before = try await store.verify()
        let tasks = try await store.values(Task.self)
        let report = try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(report.removedObjects == before.unreachableObjects)
        #expect(report.reachableObjects == before.reachableObjects)
        let after = try await store.verify()
        #expect(after.isIntact && after.unreachableObjects == 0)
        #expect(try await backend.allHashes().count == before.reachableObjects)
        #expect(try await store.values(Task.self) == tasks)
        #expect(try await store.log().count == 4)
        try await store.close()
    }

    @Test func aCollectedVersionIsGoneFromTheStoresCachesToo() async throws {
        let backend = MemoryBackend()
        let store = Store(backend: backend)
        let orphan = try await store.save(Task(id: "gone", title: "soon unreachable", done: false))
        // Read, so that the version and its index sit in the store's caches; the snapshot reads
        // through the node caches alone, with no version lookup.
        #expect(try await store.version(orphan.id).root == orphan.root)
        #expect(try await store.value(Task.self, id: "gone", at: orphan.id) != nil)
        let snapshot = try await store.snapshot(at: orphan.id)
        let key = try #require(try await store.records(ofType: Task.typeName, at: orphan.id).first?.key)
        #expect(try await snapshot.record(key) != nil)
        #expect(try await backend.compareAndSwap(ref: RefName.heads, expected: try await backend.ref(RefName.heads), new: nil))
        try await store.save(Task(id: "kept", title: "kept", done: true))

        try await store.collectGarbage(gracePeriod: .milliseconds(10))
        await #expect { try await store.version(orphan.id) } throws: { ($0 as? ArborError)?.code == .missingObject }
        await #expect { try await store.value(Task.self, id: "gone", at: orphan.id) } throws: {
            ($0 as? ArborError)?.code == .missingObject
        }
        await #expect { try await snapshot.record(key) } throws: { ($0 as? ArborError)?.code == .missingObject }
    }

    @Test func refusesADamagedStore() async throws {
        let backend = MemoryBackend()
        let store = try await VerifyTests().filled(backend)
        try await backend.put([BackendContractTests.object(1)])
        let head = try #require(try await store.head())
        try await backend.delete([head.root])
        await #expect { try await store.collectGarbage(gracePeriod: .zero) } throws: { ($0 as? ArborError)?.code == .corruptObject }
        #expect(try await backend.contains([BackendContractTests.object(1).hash]).count == 1)
    }

    /// A store on `backend(inner)` holding one version, and on `inner` a version of one record
    /// that no ref reaches (garbage), with a function that lands, as a writer that found the
    /// garbage's index present would, a version whose index is that very node.
    private func storeWithReusableGarbage<B: Backend>(
        _ backend: (MemoryBackend) -> B
    ) async throws -> (orphan: Version, store: Store, backend: B, reuse: @Sendable () async throws -> Void) {
        let inner = MemoryBackend()
        let orphan = try await Store(backend: inner).save(Task(id: "again", title: "same content", done: false))
        #expect(try await inner.compareAndSwap(ref: RefName.heads, expected: try await inner.ref(RefName.heads), new: nil))
        let wrapped = backend(inner)
        let store = Store(backend: wrapped)
        try await store.save(Task(id: "kept", title: "kept", done: true))
        return (orphan, store, wrapped, {
            var content = orphan.content
            content.parents = []
            let bytes = content.encoded()
            try await inner.put([(Hash.of(bytes), bytes)])
            try await store.updateHeads(removing: [], adding: Hash.of(bytes))
        })
    }

    @Test func anObjectACommitReusesDuringTheSweepIsWrittenBack() async throws {
        // A garbage node: the index of a version that no ref reaches any more. When gc deletes
        // it, a commit that had found it present (content addressing) moves the heads to a
        // version whose index is that very node.
        let (orphan, store, backend, reuse) = try await storeWithReusableGarbage { ReusingCommitBackend($0) }
        backend.onDelete = { deleted in
            guard deleted.contains(orphan.root) else { return }
            try await reuse()
        }
        let report = try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(report.rescued >= 1)
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage)")
        #expect(try await store.heads().count == 2)
    }

    /// What a collection writes back goes children first, in one put: it used to put the top of
    /// a re-used index first and what it names at the next pass, so for a moment a node was
    /// present without its children, which an exchange takes to be there.
    @Test func whatIsWrittenBackGoesChildrenFirst() async throws {
        let inner = MemoryBackend()
        let scratch = Store(backend: inner)
        var changes = ChangeSet()
        for index in 0..<300 { try changes.save(Task(id: "o\(index)", title: "orphan \(index)", done: false)) }
        let orphan = try await scratch.commit(changes)
        #expect(try await inner.compareAndSwap(ref: RefName.heads, expected: try await inner.ref(RefName.heads), new: nil))
        let checking = ClosureCheckingBackend(inner)
        let backend = ReusingCommitBackend(checking)
        let store = Store(backend: backend)
        try await store.save(Task(id: "kept", title: "kept", done: true))
        backend.onDelete = { deleted in
            guard deleted.contains(orphan.root) else { return }
            var content = orphan.content
            content.parents = []
            let bytes = content.encoded()
            try await inner.put([(Hash.of(bytes), bytes)])
            try await store.updateHeads(removing: [], adding: Hash.of(bytes))
        }
        let report = try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(report.rescued > 10)
        #expect(checking.violations.isEmpty, "\(checking.violations.count) objects put before what they name")
        #expect(try await store.verify().isIntact)
    }

    /// The last marking after the sweep is what writes back an object a writer re-used during
    /// the grace period; one failed read of the refs there used to end the collection with the
    /// removed bytes dropped, and the writer's version missing an object for good. Now that
    /// marking is tried again; also, the report counts what was written back as not removed.
    @Test func aLastMarkingThatFailsOnceIsTriedAgainAndWritesBack() async throws {
        let (orphan, store, backend, reuse) = try await storeWithReusableGarbage { FlakyRefsBackend(ReusingCommitBackend($0)) }
        let reusing = try #require(backend.inner as? ReusingCommitBackend)
        let landed = Mutex<_Concurrency.Task<Void, any Error>?>(nil)
        reusing.onDelete = { deleted in
            guard deleted.contains(orphan.root) else { return }
            // A writer that found the orphan's index present lands during the grace period,
            // after the marking right after the batch; the second read of the refs after it
            // (the last marking's: the first reads the claims) fails.
            landed.withLock { $0 = _Concurrency.Task.detached {
                try await _Concurrency.Task.sleep(for: .milliseconds(30))
                try await reuse()
                backend.failing(readsAfterNow: [2])
            } }
        }
        let report = try await store.collectGarbage(gracePeriod: .milliseconds(300))
        if let writer = landed.withLock({ $0 }) { try await writer.value } else { Issue.record("no writer landed") }
        #expect(backend.failed == 1)
        #expect(report.rescued >= 1 && report.removedObjects >= 0)
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage)")
    }

    /// A version no ref reaches, made on `backend` by another store: `count` tasks, each with
    /// a title of `titleSize` characters (over 1,024 makes each record a blob). Returns the
    /// version and its objects by kind.
    private func orphan(on backend: MemoryBackend, count: Int, titleSize: Int = 10) async throws -> (version: Version, branches: [Hash], leaves: [Hash], blobs: [Hash]) {
        let scratch = Store(backend: backend)
        var changes = ChangeSet()
        for index in 0..<count { try changes.save(Task(id: "o\(index)", title: String(repeating: "t", count: titleSize) + "\(index)", done: false)) }
        let version = try await scratch.commit(changes)
        #expect(try await backend.compareAndSwap(ref: RefName.heads, expected: try await backend.ref(RefName.heads), new: nil))
        var branches = [Hash](), leaves = [Hash](), blobs = [Hash]()
        var frontier = [version.root]
        while !frontier.isEmpty {
            let objects = try await backend.get(frontier)
            frontier = []
            for (hash, bytes) in objects {
                let links = try ObjectLinks(bytes)
                switch links.kind {
                case .branch: branches.append(hash); frontier += links.children.map(\.hash)
                case .leaf: leaves.append(hash); blobs += links.blobs
                default: break
                }
            }
        }
        return (version, branches, leaves, blobs)
    }

    /// Moves the heads of `store` to a new version of `orphan`'s index, as a commit that found
    /// its objects present (content addressing) would.
    @discardableResult
    private func revive(_ orphan: Version, on inner: MemoryBackend, through store: Store) async throws -> Hash {
        var content = orphan.content
        content.parents = []
        content.message = "revived"
        let bytes = content.encoded()
        try await inner.put([(Hash.of(bytes), bytes)])
        try await store.updateHeads(removing: [], adding: Hash.of(bytes))
        return Hash.of(bytes)
    }

    /// Collects the garbage of a store on `inner`, `sweepBatch` objects at a time (top down:
    /// head sets, versions, index nodes from the top, blobs, then what does not parse), while a
    /// commit that makes `orphan`'s index reachable again lands after the `atDelete`th batch.
    /// Checks the store verifies intact; returns the report and the records the revived
    /// version holds.
    private func collect(
        _ inner: MemoryBackend, reviving orphan: Version, sweepBatch: Int, atDelete: Int
    ) async throws -> (report: GarbageCollectionReport, revivedTasks: Int) {
        let backend = LandingCommitBackend(inner, atDelete: atDelete)
        let store = Store(backend: backend)
        try await store.save(Task(id: "kept", title: "kept", done: true))
        backend.onDelete = { try await self.revive(orphan, on: inner, through: store) }
        let report = try await store.collectGarbage(gracePeriod: .milliseconds(10), progress: nil, sweepBatch: sweepBatch)
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage.count) damaged, first: \(after.damage.first.map { "\($0)" } ?? "none")")
        let revived = try #require(try await store.heads().first { $0.message == "revived" }?.id)
        #expect(try await store.heads().count == 2)
        return (report, try await store.values(Task.self, at: revived).count)
    }

    /// A commit that lands during the sweep reaches objects of a batch not yet removed: they
    /// are kept (a collection used to remove them, having filtered its candidates only once).
    @Test func whatACommitReachesDuringTheSweepIsNotRemovedLater() async throws {
        let inner = MemoryBackend()
        let orphan = try await orphan(on: inner, count: 3)
        try await inner.put((0..<20).map { BackendContractTests.object(20_000 + $0) })
        // Batches of two: the orphan's head set and version, then its index (one leaf), when
        // the commit has landed.
        let (report, tasks) = try await collect(inner, reviving: orphan.version, sweepBatch: 2, atDelete: 1)
        #expect(report.keptLate >= 1 && tasks == 3)
    }

    /// A removed index is written back whole when a commit lands on it after its batches, more
    /// than the 1,000 objects a verify report lists.
    @Test func everyRemovedObjectACommitReachesIsWrittenBack() async throws {
        let inner = MemoryBackend()
        let orphan = try await orphan(on: inner, count: 1_100, titleSize: 1_100)
        #expect(orphan.blobs.count == 1_100)
        try await inner.put((0..<900).map { BackendContractTests.object(30_000 + $0) })
        // The version, its index and its blobs go in the first two batches of 1,000.
        let (report, tasks) = try await collect(inner, reviving: orphan.version, sweepBatch: 1_000, atDelete: 2)
        #expect(report.rescued > 1_000 && tasks == 1_100)
    }

    /// A store on `inner` holding a kept task beside an orphan version of `count` tasks, on a
    /// backend that runs a writer (its `onDelete`) at its `atDelete`th delete.
    private func storeWithOrphan(
        _ inner: MemoryBackend, count: Int, atDelete: Int, refusingCancelledCalls: Bool = false
    ) async throws -> (orphan: Version, backend: LandingCommitBackend, store: Store) {
        let orphan = try await orphan(on: inner, count: count)
        let backend = LandingCommitBackend(refusingCancelledCalls ? CancellationRefusingBackend(inner) : inner, atDelete: atDelete)
        let store = Store(backend: backend)
        try await store.save(Task(id: "kept", title: "kept", done: true))
        return (orphan.version, backend, store)
    }

    /// A collection cancelled during its sweep stops between batches, and still checks a grace
    /// period later for writers that found a removed object present before it went: a commit
    /// moving its heads onto the orphan's index after the sweep stopped gets it written back
    /// (a cancelled collection used to skip that last check, its wait throwing at once). Also
    /// on a backend that refuses the calls of a cancelled task, as PostgreSQL does: the check
    /// used to run in the cancelled task, and wrote nothing back there.
    @Test(arguments: [false, true]) func aCancelledSweepStillWritesBackWhatALateCommitReached(refusingCancelledCalls: Bool) async throws {
        let inner = MemoryBackend()
        // Top down, one at a time: the orphan's head set, its version, then its index's root.
        let (orphan, backend, store) = try await storeWithOrphan(inner, count: 400, atDelete: 3, refusingCancelledCalls: refusingCancelledCalls)
        let landed = Mutex<_Concurrency.Task<Hash, any Error>?>(nil)
        let rootRemoved = Mutex(false)
        backend.onDelete = {
            let left = try await inner.contains([orphan.root])
            rootRemoved.withLock { $0 = left.isEmpty }
            // A writer that found the orphan's objects present moves its heads 50 ms from now;
            // meanwhile the collection is cancelled.
            landed.withLock { $0 = _Concurrency.Task.detached {
                try await _Concurrency.Task.sleep(for: .milliseconds(50))
                return try await self.revive(orphan, on: inner, through: store)
            } }
            withUnsafeCurrentTask { $0?.cancel() }
        }
        let before = try await inner.allHashes().count
        // In a task of its own: a test whose own task is cancelled ends there, silently.
        let collection = _Concurrency.Task { try await store.collectGarbage(gracePeriod: .milliseconds(300), progress: nil, sweepBatch: 1) }
        await #expect(throws: CancellationError.self) { try await collection.value }
        let revived = try await #require(landed.withLock { $0 }).value
        // It stopped after its third batch, of one object each, and wrote the root back.
        #expect(rootRemoved.withLock { $0 })
        #expect(try await inner.allHashes().count >= before - 3)
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage.count) damaged, first: \(after.damage.first.map { "\($0)" } ?? "none")")
        #expect(try await store.values(Task.self, at: revived).count == 400)
    }

    /// An exchange that found the orphan's index root present, wrote a version naming it, and
    /// failed before its heads moved or its claim was seen (killed, its claim lapsed), while the
    /// sweep removed that root: the collection writes back what such an object, written during
    /// it and reached by nothing, names, so that the exchange run again, which finds its version
    /// present and makes it a head, leaves the store whole. It left the version without its
    /// index, and every collection after refused a damaged store.
    @Test func whatAFailedExchangeWroteDuringTheSweepKeepsWhatItNames() async throws {
        let inner = MemoryBackend()
        // Top down, one at a time: the orphan's head set, its version, then its index's root.
        let (orphan, backend, store) = try await storeWithOrphan(inner, count: 400, atDelete: 3)
        var content = orphan.content
        content.parents = []
        content.message = "written by an exchange that failed"
        let stray = content.encoded()
        backend.onDelete = { try await inner.put([(Hash.of(stray), stray)]) }
        let report = try await store.collectGarbage(gracePeriod: .milliseconds(20), progress: nil, sweepBatch: 1)
        #expect(report.rescued > 0, "\(report)")
        #expect(try await inner.contains([orphan.root]) == [orphan.root])
        // The exchange run again makes its version a head.
        try await store.updateHeads(removing: [], adding: Hash.of(stray))
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage.count) damaged, first: \(after.damage.first.map { "\($0)" } ?? "none")")
        #expect(try await store.values(Task.self, at: Hash.of(stray)).count == 400)
    }

    /// The same with the object written during the sweep one the sweep had removed: a writer
    /// found the orphan's root missing and wrote it again, took the nodes below it to be there
    /// (they were, then), and failed; the sweep then removed those. Listed before, the root is
    /// written during the collection all the same, and what it names goes back.
    @Test func aRemovedObjectWrittenAgainDuringTheSweepKeepsWhatItNames() async throws {
        let inner = MemoryBackend()
        let (orphan, backend, store) = try await storeWithOrphan(inner, count: 400, atDelete: 3)
        let rootBytes = try #require(try await inner.get([orphan.root])[orphan.root])
        backend.onDelete = { try await inner.put([(orphan.root, rootBytes)]) }
        _ = try await store.collectGarbage(gracePeriod: .milliseconds(20), progress: nil, sweepBatch: 1)
        let revived = try await revive(orphan, on: inner, through: store)
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage.count) damaged, first: \(after.damage.first.map { "\($0)" } ?? "none")")
        #expect(try await store.values(Task.self, at: revived).count == 400)
    }

    /// A delete that removes its batch and then fails (a connection dropped after the server
    /// committed) still has what it removed checked a grace period later: a commit that landed on
    /// it meanwhile gets it written back, though the collection then stops with the error.
    @Test func aDeleteThatFailsAfterRemovingStillHasItsBatchWrittenBack() async throws {
        let inner = MemoryBackend()
        let (orphan, backend, store) = try await storeWithOrphan(inner, count: 3, atDelete: 1)
        backend.onDelete = {
            try await self.revive(orphan, on: inner, through: store)
            throw ArborError(.connection, "the connection dropped after the delete")
        }
        await #expect { try await store.collectGarbage(gracePeriod: .milliseconds(10), progress: nil, sweepBatch: 100) } throws: {
            ($0 as? ArborError)?.code == .connection
        }
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage.count) damaged, first: \(after.damage.first.map { "\($0)" } ?? "none")")
        let revived = try #require(try await store.heads().first { $0.message == "revived" }?.id)
        #expect(try await store.values(Task.self, at: revived).count == 3)
    }

    /// A removed node is written back, and the nodes below it that are still there (in later
    /// batches) are kept: the walk that found it missing could not read below it.
    @Test func whatIsBelowAWrittenBackNodeIsKept() async throws {
        let inner = MemoryBackend()
        let orphan = try await orphan(on: inner, count: 400)
        #expect(!orphan.branches.isEmpty && orphan.leaves.count > 1)
        // One at a time: the head set, the version, the root; then the commit lands.
        let (report, tasks) = try await collect(inner, reviving: orphan.version, sweepBatch: 1, atDelete: 3)
        #expect(report.rescued == 1 && report.keptLate >= orphan.leaves.count && tasks == 400)
    }
}

extension GarbageCollectionTests {
    /// A collection interrupted during its sweep (its second batch fails, as if the process
    /// were killed) leaves what it has not removed whole: every object left names only objects
    /// that are there, so an exchange that finds one present may take all it names to be there.
    /// Then a collection run again finishes the job.
    @Test func anInterruptedSweepLeavesWhatRemainsWhole() async throws {
        let inner = MemoryBackend()
        // Garbage of every kind: a history of three versions no ref reaches, with large records.
        let scratch = Store(backend: inner)
        for round in 0..<3 {
            var changes = ChangeSet()
            for index in 0..<500 { try changes.save(Task(id: "o\(index)", title: String(repeating: "t", count: 1_100) + "\(round)-\(index)", done: false)) }
            try await scratch.commit(changes)
        }
        #expect(try await inner.compareAndSwap(ref: RefName.heads, expected: try await inner.ref(RefName.heads), new: nil))
        let backend = FailingDeleteBackend(inner, failingAt: 2)
        let store = Store(backend: backend)
        try await store.save(Task(id: "kept", title: "kept", done: true))
        let before = try await inner.allHashes().count
        await #expect(throws: ArborError.self) { try await store.collectGarbage(gracePeriod: .milliseconds(10)) }

        let left = try await inner.allHashes()
        #expect(left.count == before - 1_000)
        var dangling = [Hash]()
        for chunk in Array(left).chunks(of: 1_000) {
            for bytes in try await inner.get(chunk).values { dangling += try ObjectLinks(bytes).all.filter { !left.contains($0) } }
        }
        #expect(dangling.isEmpty, "\(dangling.count) objects named by objects left behind are gone")

        let report = try await Store(backend: inner).collectGarbage(gracePeriod: .milliseconds(10))
        #expect(report.removedObjects == left.count - report.reachableObjects)
        let after = try await Store(backend: inner).verify()
        #expect(after.isIntact && after.unreachableObjects == 0)
    }
}

/// Fails its `failingAt`th delete, removing nothing, as a collection killed at that batch would.
final class FailingDeleteBackend: ForwardingBackend {
    let inner: any Backend
    let failingAt: Int
    nonisolated(unsafe) var deletes = 0
    init(_ inner: any Backend, failingAt: Int) { (self.inner, self.failingAt) = (inner, failingAt) }
    func delete(_ hashes: [Hash]) async throws {
        deletes += 1
        if deletes == failingAt { throw ArborError(.io, "the collection was interrupted") }
        try await inner.delete(hashes)
    }
}

/// Runs `onDelete` once, after the `atDelete`th delete: a writer landing at that point.
final class LandingCommitBackend: ForwardingBackend {
    let inner: any Backend
    let atDelete: Int
    nonisolated(unsafe) var deletes = 0
    nonisolated(unsafe) var onDelete: () async throws -> Void = {}
    /// Reads of the refs so far; the one numbered `failingRefsRead` fails, as a dropped connection.
    let refsReads = Atomic<Int>(0)
    nonisolated(unsafe) var failingRefsRead: Int?
    init(_ inner: any Backend, atDelete: Int) { (self.inner, self.atDelete) = (inner, atDelete) }
    func delete(_ hashes: [Hash]) async throws {
        try await inner.delete(hashes)
        deletes += 1
        if deletes == atDelete { try await onDelete() }
    }
    /// Runs before each read of the refs is answered, with its number.
    nonisolated(unsafe) var beforeRefsRead: (Int) async throws -> Void = { _ in }
    func refs() async throws -> [String: Hash] {
        let read = refsReads.add(1, ordering: .relaxed).newValue
        try await beforeRefsRead(read)
        if read == failingRefsRead { throw ArborError(.connection, "the connection dropped reading the refs", backend: engineName, operation: "refs") }
        return try await inner.refs()
    }
}

/// Refuses every call made in a cancelled task with `CancellationError`, as PostgreSQL's pool
/// does (it cancels the statement).
final class CancellationRefusingBackend: ForwardingBackend {
    let inner: any Backend
    init(_ inner: any Backend) { self.inner = inner }
    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try _Concurrency.Task.checkCancellation()
        return try await inner.get(hashes)
    }
    func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        try _Concurrency.Task.checkCancellation()
        return try await inner.contains(hashes)
    }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try _Concurrency.Task.checkCancellation()
        try await inner.put(objects)
    }
    func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        try _Concurrency.Task.checkCancellation()
        try await inner.enumerateHashes(batchSize: batchSize, body)
    }
    func delete(_ hashes: [Hash]) async throws {
        try _Concurrency.Task.checkCancellation()
        try await inner.delete(hashes)
    }
    func refs() async throws -> [String: Hash] {
        try _Concurrency.Task.checkCancellation()
        return try await inner.refs()
    }
    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try _Concurrency.Task.checkCancellation()
        return try await inner.compareAndSwap(ref: name, expected: expected, new: new)
    }
}

/// Runs a closure after each delete, as a writer racing a collection would.
/// Forwards to a backend, and records every object put while something it names is neither
/// stored nor ahead of it in the same put.
final class ClosureCheckingBackend: ForwardingBackend {
    let inner: any Backend
    private let found = Mutex([Hash]())
    init(_ inner: any Backend) { self.inner = inner }
    var violations: [Hash] { found.withLock { $0 } }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        var ahead = Set<Hash>()
        for (hash, bytes) in objects {
            let named = (try? ObjectLinks(bytes).all) ?? []
            let stored = try await inner.contains(named)
            if named.contains(where: { !ahead.contains($0) && !stored.contains($0) }) { found.withLock { $0.append(hash) } }
            ahead.insert(hash)
        }
        try await inner.put(objects)
    }
}

/// Forwards to a backend, failing the reads of the refs it is told to, counted from a moment.
final class FlakyRefsBackend: ForwardingBackend {
    let inner: any Backend
    private let state = Mutex((reads: 0, failing: Set<Int>(), failed: 0))
    init(_ inner: any Backend) { self.inner = inner }
    /// Fails the reads numbered `reads` (1: the next one) from now on.
    func failing(readsAfterNow reads: Set<Int>) { state.withLock { $0 = (0, reads, $0.failed) } }
    var failed: Int { state.withLock { $0.failed } }
    func refs() async throws -> [String: Hash] {
        let fails = state.withLock { state in
            state.reads += 1
            guard state.failing.contains(state.reads) else { return false }
            state.failed += 1
            return true
        }
        if fails { throw ArborError(.connection, "the connection dropped reading the refs", backend: engineName, operation: "refs") }
        return try await inner.refs()
    }
}

final class ReusingCommitBackend: ForwardingBackend {
    let inner: any Backend
    nonisolated(unsafe) var onDelete: ([Hash]) async throws -> Void = { _ in }
    init(_ inner: any Backend) { self.inner = inner }
    func delete(_ hashes: [Hash]) async throws {
        try await inner.delete(hashes)
        try await onDelete(hashes)
        onDelete = { _ in }
    }
}

/// Exchanges into a store claim it while they copy (`TransferReservation`), and a collection
/// removes nothing meanwhile: an exchange may take longer than any grace period from finding an
/// object present, or writing it, to moving its heads.
extension GarbageCollectionTests {
    /// A collection while an exchange into the store is midway (some batches written, its heads
    /// not moved yet) used to remove what the exchange had written: the exchange then moved its
    /// heads onto missing objects.
    @Test(arguments: [Duration.zero, .milliseconds(200)])
    func aCollectionRemovesNothingWhileAnExchangeIntoTheStoreIsInFlight(claimDelay: Duration) async throws {
        let source = Store(backend: MemoryBackend(), configuration: .init(replica: "source"))
        for round in 0..<3 {
            var changes = ChangeSet()
            for index in 0..<200 { try changes.save(Task(id: "x\(index)", title: "round \(round) of \(index)", done: false)) }
            try await source.commit(changes)
        }
        let inner = MemoryBackend()
        let local = Store(backend: inner)
        try await local.save(Person(id: "kept", name: "kept"))
        let paused = PausedPutBackend(inner, holdAt: 3)
        let target = Store(backend: paused, configuration: .init(exchangeClaimDelay: claimDelay))
        let exchange = _Concurrency.Task { _ = try await source.exchange(to: target, batchSize: 50) }
        // Midway, and claimed (after its delay).
        func claimed() async throws -> Bool { try await inner.refs().contains { TransferReservation.isClaim($0.key, holding: $0.value) } }
        try await paused.waitUntilHolding()
        let deadline = ContinuousClock.now + .seconds(120)
        while try await !claimed() {
            try #require(ContinuousClock.now < deadline, "the exchange never claimed the store")
            try await _Concurrency.Task.sleep(for: .milliseconds(1))
        }
        let written = try await local.verify().unreachableObjects
        #expect(written >= 50)
        let report = try await local.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(report.stoppedForExchange && report.removedObjects == 0)
        paused.release()
        try await exchange.value
        let after = try await local.verify()
        #expect(after.isIntact, "\(after.damage.count) damaged, first: \(after.damage.first.map { "\($0)" } ?? "none")")
        let heads = try await local.heads()
        #expect(heads.count == 2)
        let tasks = try await heads.asyncMap { try await local.values(Task.self, at: $0.id).count }
        #expect(tasks.sorted() == [0, 200])
        // The exchange dropped its claim: the next collection sweeps.
        #expect(try await inner.refs().keys.sorted() == [RefName.heads])
        try await inner.put([BackendContractTests.object(40_000)])
        let next = try await local.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(!next.stoppedForExchange && next.removedObjects >= 1)
        #expect(try await inner.contains([BackendContractTests.object(40_000).hash]).isEmpty)
    }

    /// An exchange that claims the store while a batch is removed may have found objects of that
    /// batch present: the collection stops, and goes on marking until that exchange is done,
    /// however long after the grace period, writing back what it re-used once its heads moved. So
    /// does a second exchange claiming the store once the grace period is over (exchanges claim
    /// only after a delay); also when a marking during the wait fails. Cancelled in that batch,
    /// on a backend that refuses the calls of a cancelled task as PostgreSQL does, it writes
    /// back everything it removed instead of waiting (``aCollectionWaitsForAnExchangeOnlySoLong(cancelled:)``),
    /// and the exchanges land onto what they found present all the same. (The first claim is made just after the delete here, as if it landed during it.)
    @Test(arguments: [(false, false), (true, false), (false, true)])
    func aCollectionClaimedDuringABatchWaitsForThatExchange(cancelled: Bool, failingAMarking: Bool) async throws {
        let inner = MemoryBackend()
        // Top down, one at a time: the orphan's head set, its version, then its index's root.
        let (orphan, backend, store) = try await storeWithOrphan(inner, count: 400, atDelete: 3, refusingCancelledCalls: cancelled)
        let landed = Mutex<_Concurrency.Task<Hash, any Error>?>(nil)
        let later = SharedValue<TransferReservation?>(nil)
        backend.onDelete = {
            // Claimed as the root goes: the exchange found it present, and moves its heads onto it
            // long after the grace period.
            let claim = try await TransferReservation.make(on: inner)
            // After the batch, the collection reads the refs for its marking, then the claims
            // (cancelled, its marking is refused and it reads nothing more until its grace period
            // is over); then the claims once more, and marks while it waits: the first such
            // marking fails.
            let readsBefore = backend.refsReads.load(ordering: .relaxed)
            if failingAMarking { backend.failingRefsRead = readsBefore + 4 }
            // A second exchange claims the store just before the collection reads the claims once
            // its grace period is over (the third read, or the second when cancelled), and ends
            // 300 ms after the first.
            let secondAt = readsBefore + (cancelled ? 2 : 3)
            backend.beforeRefsRead = { read in
                guard read == secondAt else { return }
                later.set(try await TransferReservation.make(on: inner))
            }
            let exchanges = _Concurrency.Task.detached {
                try await _Concurrency.Task.sleep(for: .milliseconds(300))
                let revived = try await self.revive(orphan, on: inner, through: store)
                await claim.remove()
                _Concurrency.Task.detached {
                    try await _Concurrency.Task.sleep(for: .milliseconds(300))
                    await later.value?.remove()
                }
                return revived
            }
            landed.withLock { $0 = exchanges }
            if cancelled { withUnsafeCurrentTask { $0?.cancel() } }
        }
        let started = ContinuousClock.now
        // In a task of its own: a test whose own task is cancelled ends there, silently.
        let collection = _Concurrency.Task { try await store.collectGarbage(gracePeriod: .milliseconds(20), progress: nil, sweepBatch: 1) }
        if cancelled {
            await #expect(throws: CancellationError.self) { try await collection.value }
        } else {
            let report = try await collection.value
            #expect(report.stoppedForExchange && report.rescued >= 1)
        }
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(cancelled ? 20 : 600) && waited < .seconds(60))
        let revived = try await #require(landed.withLock { $0 }).value
        if !cancelled {
            // The collection waited for the second exchange too.
            let second = try #require(later.value)
            #expect(try await inner.refs()[second.name] == nil)
        }
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage.count) damaged, first: \(after.damage.first.map { "\($0)" } ?? "none")")
        #expect(try await store.values(Task.self, at: revived).count == 400)
    }

    /// A collection waits for an exchange that claimed the store during its sweep only so long
    /// (`longestWaitForExchanges`), or until it is cancelled: it then writes back everything it
    /// removed, unchecked, so that the exchange, landing later onto objects it found present,
    /// finds them there. (It used to wait as long as the exchange ran, and a Ctrl-C waited too.)
    @Test(arguments: [false, true]) func aCollectionWaitsForAnExchangeOnlySoLong(cancelled: Bool) async throws {
        let inner = MemoryBackend()
        // Top down, one at a time: the orphan's head set, its version, then its index's root.
        let (orphan, backend, store) = try await storeWithOrphan(inner, count: 400, atDelete: 3)
        let landed = Mutex<_Concurrency.Task<Hash, any Error>?>(nil)
        let revived = SharedValue(false)
        let claimed = SharedValue(false)
        let collected = SharedValue(false)
        backend.onDelete = {
            // Claimed as the root goes: the exchange found it present, and lands once the
            // collection is over (a collection that waited for it would wait 120 s), not at a
            // fixed time, which a loaded machine's collection could outlast.
            let claim = try await TransferReservation.make(on: inner)
            claimed.set(true)
            let exchange = _Concurrency.Task.detached {
                let deadline = ContinuousClock.now + .seconds(120)
                while !collected.value, ContinuousClock.now < deadline { try await _Concurrency.Task.sleep(for: .milliseconds(10)) }
                let version = try await self.revive(orphan, on: inner, through: store)
                revived.set(true)
                await claim.remove()
                return version
            }
            landed.withLock { $0 = exchange }
        }
        let collection = _Concurrency.Task {
            try await store.collectGarbage(
                gracePeriod: .milliseconds(20), progress: nil, sweepBatch: 1, longestWaitForExchanges: cancelled ? .seconds(600) : .milliseconds(300))
        }
        if cancelled {
            // Once it waits for the exchange.
            while !claimed.value { try await _Concurrency.Task.sleep(for: .milliseconds(5)) }
            try await _Concurrency.Task.sleep(for: .milliseconds(200))
            collection.cancel()
            // Cancelled once its sweep is over, it reports what it did (in its sweep, it throws).
            do {
                let report = try await collection.value
                #expect(report.stoppedForExchange && report.restoredForExchange >= 1, "\(report)")
            } catch is CancellationError {}
        } else {
            let report = try await collection.value
            #expect(report.stoppedForExchange && report.restoredForExchange >= 1 && report.removedObjects == 0, "\(report)")
        }
        #expect(!revived.value, "it stopped waiting before the exchange landed")
        collected.set(true)
        // Everything removed is back, the orphan's index among it.
        #expect(try await inner.contains([orphan.root]) == [orphan.root])
        let version = try await #require(landed.withLock { $0 }).value
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage.count) damaged, first: \(after.damage.first.map { "\($0)" } ?? "none")")
        #expect(try await store.values(Task.self, at: version).count == 400)
    }

    /// A claim is renewed by a task of its own, whatever the exchange is doing (a single large
    /// request can take minutes: renewing only as the exchange asked and read let it lapse). An
    /// exchange whose renewals failed for too long does not move the heads (a collection may
    /// have removed what it found present), and run again it completes.
    @Test func aClaimIsRenewedWhileTheExchangeWaitsAndALapsedOneMovesNoHeads() async throws {
        let inner = MemoryBackend()
        let kept = try await KeptClaim.make(on: inner, timing: ClaimTiming(delay: .zero, renewal: .milliseconds(20), lapse: .seconds(60)))
        let first = try #require(kept.name)
        // Renewed (waited for: a loaded machine may run the renewing task late), under the same id
        // (two claims for a moment while one replaces the other).
        let deadline = ContinuousClock.now + .seconds(120)
        while kept.name == first, ContinuousClock.now < deadline { try await _Concurrency.Task.sleep(for: .milliseconds(10)) }
        let claims = try await inner.refs().filter { TransferReservation.isClaim($0.key, holding: $0.value) }.keys
        #expect(kept.name != first && !claims.isEmpty && claims.count <= 2)
        #expect(claims.allSatisfy { TransferReservation.id(of: $0) == TransferReservation.id(of: first) })
        #expect(!kept.mayHaveLapsed)
        await kept.remove()
        #expect(try await inner.refs().isEmpty)

        let source = Store(backend: MemoryBackend(), configuration: .init(replica: "source"))
        var changes = ChangeSet()
        for index in 0..<300 { try changes.save(Task(id: "x\(index)", title: "task \(index)", done: false)) }
        let version = try await source.commit(changes)
        /// Exchanges from `source` into `backend`, whose swaps fail after the first `swapsLanding`,
        /// held 200 ms at its second put: it must fail, having moved no heads.
        func heldExchange(into backend: MemoryBackend, swapsLanding: Int, timing: ClaimTiming) async throws {
            let paused = PausedPutBackend(SwapsFailingAfterBackend(backend, failingAfter: swapsLanding), holdAt: 2)
            let exchange = _Concurrency.Task { try await source.exchange(to: Store(backend: paused), batchSize: 5, progress: nil, claimTiming: timing) }
            try await paused.waitUntilHolding()
            try await _Concurrency.Task.sleep(for: .milliseconds(200))
            paused.release()
            await #expect { try await exchange.value } throws: { error in
                // With why: the adapter's error from the last attempt.
                (error as? ArborError)?.code == .connection && "\(error)".contains("could not claim the target, or renew its claim")
                    && (error as? ArborError)?.message.contains("the connection dropped") == true
            }
            #expect(try await backend.ref(RefName.heads) == nil)
        }
        // The claim lands; every later swap fails (its renewals), while the copy waits.
        try await heldExchange(into: inner, swapsLanding: 1, timing: ClaimTiming(delay: .zero, renewal: .milliseconds(20), lapse: .milliseconds(100)))
        // Nor does one that could not claim the target by its delay and the margin after it.
        try await heldExchange(
            into: MemoryBackend(), swapsLanding: 0,
            timing: ClaimTiming(delay: .milliseconds(20), claimMargin: .milliseconds(80), renewal: .milliseconds(20), lapse: .seconds(60)))

        try await source.exchange(to: Store(backend: inner))
        #expect(try await Store(backend: inner).heads().map(\.id) == [version.id])
        #expect(try await Store(backend: inner).verify().isIntact)
    }

    /// A claim that lands only after its deadline (its first attempts failed) is not trusted: a
    /// collection may have ended meanwhile without seeing it. It used to count as made in time.
    @Test func aClaimMadeLateIsNotTrusted() async throws {
        let swaps = SwapsFailingAfterBackend(MemoryBackend(), failingFirst: 3)
        let kept = try await KeptClaim.make(
            on: swaps, timing: ClaimTiming(delay: .milliseconds(10), claimMargin: .milliseconds(30), renewal: .milliseconds(20), lapse: .seconds(60)))
        let deadline = ContinuousClock.now + .seconds(120)
        while kept.name == nil, ContinuousClock.now < deadline { try await _Concurrency.Task.sleep(for: .milliseconds(5)) }
        // (A loaded machine can starve the renewing task for many seconds: waited for above.)
        #expect(kept.name != nil && kept.mayHaveLapsed, "claim \(kept.name ?? "not made") after \(swaps.swapsMade) swaps")
        await kept.remove()
    }

    /// An exchange claims the store only once it has run for its delay, so it may have found
    /// objects of the last batch present before: a collection also waits for the exchanges that
    /// claim the store once its grace period after that batch is over, and writes back what they
    /// re-used as their heads move.
    @Test func anExchangeThatClaimsOnlyAfterTheLastBatchIsWaitedFor() async throws {
        let inner = MemoryBackend()
        // One batch: all of the orphan's objects go at once.
        let (orphan, backend, store) = try await storeWithOrphan(inner, count: 400, atDelete: 1)
        let landed = Mutex<_Concurrency.Task<Hash, any Error>?>(nil)
        backend.onDelete = {
            // After the batch, the collection marks and reads the claims (none); the exchange,
            // which found the orphan's objects present, claims during the grace period (just
            // before the collection reads the claims once it is over).
            let readsBefore = backend.refsReads.load(ordering: .relaxed)
            let claim = SharedValue<TransferReservation?>(nil)
            backend.beforeRefsRead = { read in
                guard read == readsBefore + 3 else { return }
                claim.set(try await TransferReservation.make(on: inner))
            }
            let exchange = _Concurrency.Task.detached {
                try await _Concurrency.Task.sleep(for: .milliseconds(400))
                let revived = try await self.revive(orphan, on: inner, through: store)
                await claim.value?.remove()
                return revived
            }
            landed.withLock { $0 = exchange }
        }
        let report = try await store.collectGarbage(gracePeriod: .milliseconds(20), progress: nil, sweepBatch: 10_000)
        #expect(!report.stoppedForExchange && report.rescued >= 1)
        let revived = try await #require(landed.withLock { $0 }).value
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage.count) damaged, first: \(after.damage.first.map { "\($0)" } ?? "none")")
        #expect(try await store.values(Task.self, at: revived).count == 400)
    }

    /// A claim counts while its start is less than `TransferReservation.lifetime` from now, either
    /// way (clocks differ); a collection removes one twice as far, or whose name does not parse
    /// (a killed exchange left it). Claims name no object, so verify leaves them out, and a
    /// running exchange renews its claim under a fresh name with the same id.
    @Test func aClaimCountsUntilItsLifetimeEnds() async throws {
        let inner = MemoryBackend()
        let store = try await VerifyTests().filled(inner)
        let lifetime = TimeInterval(TransferReservation.lifetime.components.seconds)
        func claim(_ name: String) async throws {
            #expect(try await inner.compareAndSwap(ref: name, expected: nil, new: TransferReservation.value(of: name)))
        }
        let lapsed = TransferReservation.name(of: "a1", startedAt: Date(timeIntervalSinceNow: -lifetime - 5))
        let long = TransferReservation.name(of: "a2", startedAt: Date(timeIntervalSinceNow: -2 * lifetime - 5))
        let farAhead = TransferReservation.name(of: "a3", startedAt: Date(timeIntervalSinceNow: 2 * lifetime + 5))
        let unparsed = RefName.transferPrefix + "not-a-claim-name"
        for name in [lapsed, long, farAhead, unparsed] { try await claim(name) }
        #expect(try await store.verify().isIntact)
        try await inner.put((0..<5).map { BackendContractTests.object(50_000 + $0) })
        let unclaimed = try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(!unclaimed.stoppedForExchange && unclaimed.removedObjects >= 5)
        #expect(try await inner.refs().keys.sorted() == [RefName.heads, lapsed].sorted())

        // A clock a minute ahead: its claim counts.
        let ahead = TransferReservation.name(of: "a4", startedAt: Date(timeIntervalSinceNow: 60))
        try await claim(ahead)
        try await inner.put((0..<5).map { BackendContractTests.object(60_000 + $0) })
        #expect(try await store.collectGarbage(gracePeriod: .milliseconds(10)).removedObjects == 0)
        #expect(try await inner.compareAndSwap(ref: ahead, expected: TransferReservation.value(of: ahead), new: nil))

        var running = try await TransferReservation.make(on: inner)
        let claimed = try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(claimed.stoppedForExchange && claimed.removedObjects == 0)
        let first = running.name
        try await _Concurrency.Task.sleep(for: .milliseconds(5))
        try await running.renew()
        #expect(running.name != first && TransferReservation.id(of: running.name) == running.id)
        #expect(try await inner.refs().keys.sorted() == [RefName.heads, lapsed, running.name].sorted())
        await running.remove()
        let released = try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(!released.stoppedForExchange && released.removedObjects == 5)
    }
}

extension GarbageCollectionTests {
    /// A claim an exchange could not drop, or could not tell it made (the connection dropped as
    /// the swap landed), is dropped by the next collection in this process: it held collections
    /// off for its whole lifetime. The first exchange fails making its claim, the second
    /// dropping it; both leave one.
    @Test(arguments: [1, 2]) func aClaimThisProcessCouldNotDropIsDroppedByTheNextCollection(failingSwap: Int) async throws {
        let inner = MemoryBackend()
        let store = try await VerifyTests().filled(inner)
        let faults = FaultInjectingBackend(inner)
        let source = Store(backend: MemoryBackend(), configuration: .init(replica: "elsewhere"))
        try await source.save(Person(id: "p", name: "from elsewhere"))
        // The exchange's swaps: its claim, the heads, the claim's removal.
        faults.arm(FaultPlan(call: .compareAndSwap, countdown: failingSwap == 1 ? 1 : 3, timing: failingSwap == 1 ? .after : .before, sticky: false))
        if failingSwap == 1 {
            await #expect(throws: ArborError.self) { try await source.exchange(to: Store(backend: faults, configuration: .init(exchangeClaimDelay: .zero))) }
        } else {
            try await source.exchange(to: Store(backend: faults, configuration: .init(exchangeClaimDelay: .zero)))
        }
        faults.disarm()
        #expect(try await inner.refs().contains { TransferReservation.isClaim($0.key, holding: $0.value) })
        try await inner.put((0..<5).map { BackendContractTests.object(70_000 + $0) })
        let report = try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(!report.stoppedForExchange && report.removedObjects >= 5)
        #expect(try await inner.refs().keys.sorted() == [RefName.heads])
    }
}

/// A value shared with tasks a test starts (a class, so that `sending` closures may capture it).
final class SharedValue<Value: Sendable>: Sendable {
    private let state: Mutex<Value>
    init(_ value: Value) { state = Mutex(value) }
    var value: Value { state.withLock { $0 } }
    func set(_ value: Value) { state.withLock { $0 = value } }
}

/// Fails every compare-and-swap after the first `failingAfter`, or the first `failingFirst`,
/// with a dropped connection.
final class SwapsFailingAfterBackend: ForwardingBackend {
    let inner: any Backend
    let failingAfter: Int
    let failingFirst: Int
    private let swaps = Atomic<Int>(0)
    var swapsMade: Int { swaps.load(ordering: .relaxed) }
    init(_ inner: any Backend, failingAfter: Int = .max, failingFirst: Int = 0) {
        (self.inner, self.failingAfter, self.failingFirst) = (inner, failingAfter, failingFirst)
    }
    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        let swap = swaps.add(1, ordering: .relaxed).newValue
        guard swap <= failingAfter, swap > failingFirst else {
            throw ArborError(.connection, "the connection dropped", backend: engineName, operation: "compareAndSwap")
        }
        return try await inner.compareAndSwap(ref: name, expected: expected, new: new)
    }
}

/// Holds its `holdAt`th put until released, as an exchange slowed down midway would be.
final class PausedPutBackend: ForwardingBackend {
    let inner: any Backend
    let holdAt: Int
    private let state = Mutex((puts: 0, holding: false, released: false))
    init(_ inner: any Backend, holdAt: Int) { (self.inner, self.holdAt) = (inner, holdAt) }
    var isHolding: Bool { state.withLock { $0.holding } }
    /// Waits until a put is held; fails after 30 seconds (the writer never got that far).
    func waitUntilHolding() async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while !isHolding {
            guard ContinuousClock.now < deadline else { throw ArborError(.io, "no put reached number \(holdAt)") }
            try await _Concurrency.Task.sleep(for: .milliseconds(1))
        }
    }
    func release() { state.withLock { $0.released = true } }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        let holds = state.withLock { state in
            state.puts += 1
            if state.puts == holdAt { state.holding = true }
            return state.puts == holdAt
        }
        if holds { while !state.withLock({ $0.released }) { try await _Concurrency.Task.sleep(for: .milliseconds(1)) } }
        try await inner.put(objects)
    }
}
