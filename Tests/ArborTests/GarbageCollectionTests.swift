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

    @Test func anObjectACommitReusesDuringTheSweepIsWrittenBack() async throws {
        // A garbage node: the index of a version that no ref reaches any more.
        let inner = MemoryBackend()
        let scratch = Store(backend: inner)
        let orphan = try await scratch.save(Task(id: "again", title: "same content", done: false))
        #expect(try await inner.compareAndSwap(ref: RefName.heads, expected: try await inner.ref(RefName.heads), new: nil))
        let backend = ReusingCommitBackend(inner)
        let store = Store(backend: backend)
        try await store.save(Task(id: "kept", title: "kept", done: true))
        // When gc deletes the orphan's root, a commit that had found it present (content
        // addressing) moves the heads to a version whose index is that very node.
        backend.onDelete = { deleted in
            guard deleted.contains(orphan.root) else { return }
            var content = orphan.content
            content.parents = []
            let bytes = content.encoded()
            try await inner.put([(Hash.of(bytes), bytes)])
            try await store.updateHeads(removing: [], adding: Hash.of(bytes))
        }
        let report = try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(report.rescued >= 1)
        let after = try await store.verify()
        #expect(after.isIntact, "\(after.damage)")
        #expect(try await store.heads().count == 2)
    }
}

/// Runs a closure after each delete, as a writer racing a collection would.
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
