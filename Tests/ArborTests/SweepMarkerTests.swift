import Foundation
import Synchronization
import Testing
@testable import Arbor

/// A collection's sweep markers (``SweepMarker``): a read that finds an object missing while a
/// batch of a sweep is in flight waits for the batch to end and reads again, on every adapter;
/// the markers name no version; a collection makes one around each batch and leaves none.
@Suite struct SweepMarkerTests {
    /// A store with one version, the backend it is on, and that version.
    private func oneVersion(_ backend: any Backend) async throws -> (Store, Version) {
        let store = Store(backend: backend)
        let version = try await store.save(Task(id: "t", title: "kept", done: false))
        return (store, version)
    }

    /// The version's index root goes while a marker is up; a reader finds it missing, and
    /// waits. `writtenBack`: the root is put back before the marker goes, and the read finds it;
    /// else the read fails as the object is missing, once the marker is gone.
    @Test(arguments: AdapterKind.allCases, [true, false])
    func aReadThatMissesWaitsForTheBatchInFlight(kind: AdapterKind, writtenBack: Bool) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let (store, version) = try await oneVersion(backend)
        let root = try #require(try await backend.get([version.root])[version.root])
        let marker = try await SweepMarker.make(on: backend)
        try await backend.delete([version.root])
        let watched = MissWatchingBackend(backend)
        watched.watched = version.root
        let reader = Store(backend: watched, configuration: .init(nodeCacheCapacity: 0))
        let read = _Concurrency.Task { try await reader.value(Task.self, id: "t", at: version.id) }
        await watched.waitForMiss()
        #expect(watched.missed)
        if writtenBack { try await backend.put([(version.root, root)]) }
        await marker.remove()
        if writtenBack {
            #expect(try await read.value?.title == "kept")
        } else {
            await #expect { try await read.value } throws: { ($0 as? ArborError)?.code == .missingObject }
        }
        #expect(try await backend.refs().keys.allSatisfy { !SweepMarker.isMarker($0) })
        try await store.close()
    }

    /// A marker is followed while it is younger than its lifetime (either way), and no longer
    /// than that by the reader's clock; one whose name does not parse is not followed.
    @Test func onlyLiveMarkersAreWaitedFor() async throws {
        let now = Date()
        let millis = Int64(now.timeIntervalSince1970 * 1000)
        let names = [
            "fresh": "\(RefName.sweepPrefix)\(millis - 1_000)-a",
            "ahead": "\(RefName.sweepPrefix)\(millis + 30_000)-b",
            "lapsed": "\(RefName.sweepPrefix)\(millis - 61_000)-c",
            "farAhead": "\(RefName.sweepPrefix)\(millis + 61_000)-d",
            "unparsed": "\(RefName.sweepPrefix)not-a-marker-name",
        ]
        let refs = Dictionary(uniqueKeysWithValues: names.values.map { ($0, SweepMarker.value(of: $0)) })
        #expect(SweepMarker.live(in: refs, now: now) == [names["fresh"]!, names["ahead"]!])

        // A marker never removed (its collection was killed) holds a reader only so long.
        let backend = MemoryBackend()
        let stuck = try await SweepMarker.make(on: backend)
        try await SweepMarker.awaitBatchesInFlight(on: backend, longest: .milliseconds(50))
        #expect(try await backend.ref(stuck.name) == SweepMarker.value(of: stuck.name))
        // One that lapses during the wait ends it then (in about 100 ms, not 20 s).
        _ = try await backend.compareAndSwap(ref: stuck.name, expected: SweepMarker.value(of: stuck.name), new: nil)
        let lapsing = try await SweepMarker.make(on: backend, now: Date(timeIntervalSinceNow: -59.9))
        let started = ContinuousClock.now
        try await SweepMarker.awaitBatchesInFlight(on: backend, longest: .seconds(20))
        #expect(ContinuousClock.now - started < .seconds(15), "the wait ended when \(lapsing.name) lapsed")
    }

    /// Markers name no version: verify finds the store intact, a migration neither copies nor
    /// counts them, and a collection removes the lapsed ones (and no live one, which another
    /// collection may have made).
    @Test(arguments: AdapterKind.allCases) func markersNameNoVersion(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let (store, _) = try await oneVersion(backend)
        let live = try await SweepMarker.make(on: backend)
        let lapsed = try await SweepMarker.make(on: backend, now: Date(timeIntervalSinceNow: -600))
        let report = try await store.verify()
        #expect(report.isIntact, "\(report.damage)")
        let copy = Store(backend: MemoryBackend())
        try await store.migrate(to: copy)
        #expect(try await copy.backend.refs().keys.sorted() == [RefName.heads])
        try await backend.put([BackendContractTests.object(77)])
        let collected = try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(collected.removedObjects == 1)
        let left = try await backend.refs().keys.filter(SweepMarker.isMarker)
        #expect(left == [live.name], "the lapsed marker \(lapsed.name) is removed, the live one kept")
        try await store.close()
    }

    /// A collection makes a marker before it deletes each batch and removes it once it has
    /// marked again; also for a batch whose delete failed, which the last marking settles.
    @Test(arguments: [false, true]) func aCollectionMarksEachBatchItDeletes(failingDelete: Bool) async throws {
        let inner = MemoryBackend()
        let faults = FaultInjectingBackend(inner)
        let logged = CallLoggingBackend(faults)
        let store = Store(backend: logged)
        try await store.save(Task(id: "t", title: "kept", done: false))
        try await inner.put((0..<3).map { BackendContractTests.object(100 + $0) })
        if failingDelete { faults.arm(FaultPlan(call: .delete, countdown: 2, timing: .after, sticky: false)) }
        do {
            let report = try await store.collectGarbage(gracePeriod: .milliseconds(10), progress: nil, sweepBatch: 1)
            #expect(!failingDelete)
            #expect(report.removedObjects == 3)
        } catch {
            #expect(failingDelete, "\(error)")
        }
        let calls = logged.calls
        let deletes = calls.indices.filter { calls[$0] == "delete" }
        #expect(deletes.count == (failingDelete ? 2 : 3))
        for index in deletes {
            // Made just before: a swap from nothing to a marker.
            #expect(calls[index - 1].hasPrefix("make \(RefName.sweepPrefix)"), "\(calls)")
            let name = calls[index - 1].dropFirst("make ".count)
            #expect(calls[(index + 1)...].contains("remove \(name)"), "\(calls)")
        }
        #expect(try await inner.refs().keys.allSatisfy { !SweepMarker.isMarker($0) })
        #expect(try await store.verify().isIntact)
    }
}

/// Logs each `delete`, and each compare-and-swap that makes or removes a ref, in order.
final class CallLoggingBackend: ForwardingBackend {
    let inner: any Backend
    private let log = Mutex([String]())
    init(_ inner: any Backend) { self.inner = inner }
    var calls: [String] { log.withLock { $0 } }
    func delete(_ hashes: [Hash]) async throws {
        log.withLock { $0.append("delete") }
        try await inner.delete(hashes)
    }
    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        let swapped = try await inner.compareAndSwap(ref: name, expected: expected, new: new)
        if swapped, expected == nil { log.withLock { $0.append("make \(name)") } }
        if swapped, new == nil { log.withLock { $0.append("remove \(name)") } }
        return swapped
    }
}
