import Foundation
import Synchronization
import Testing
@testable import Arbor

/// A collection's sweep markers (``SweepMarker``): a read that finds an object missing while a
/// batch of a sweep is in flight waits for the batch to end and reads again, on every adapter
/// and every read path (fetched nodes, nodes read in place, history); the markers name no
/// version; a collection makes one around each batch and leaves none.
@Suite struct SweepMarkerTests {
    /// How a test reads what a batch removed.
    enum ReadPath: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// A value at a version: its index nodes fetched.
        case fetched
        /// A point read of a snapshot, on a backend that lends its bytes: the node read in place.
        case inPlace
        /// The history: a version's parent, read as a history walk reads commits.
        case history
        var testDescription: String { rawValue }
    }

    /// Two versions; for `path`, the object a read of the newer must fetch (its index root, or
    /// the older version) goes while a marker is up, and a reader finds it missing, and waits:
    /// it is still waiting after the object is put back, and reads it once the marker goes;
    /// unless the object was not written back: then the read fails once the marker is gone.
    /// (Bytes are lent in place on memory, SQLite and LMDB.)
    @Test(arguments: AdapterKind.allCases.flatMap { kind in
        ReadPath.allCases.filter { $0 != .inPlace || [.memory, .sqlite, .lmdb].contains(kind) }.map { (kind, $0) }
    })
    func aReadThatMissesWaitsForTheBatchInFlight(kind: AdapterKind, path: ReadPath) async throws {
        for writtenBack in [true, false] {
            let (backend, cleanup) = try makeBackend(kind)
            defer { cleanup() }
            let store = Store(backend: backend)
            let older = try await store.save(Task(id: "t", title: "first", done: false))
            let newer = try await store.save(Task(id: "t", title: "kept", done: false))
            let gone = path == .history ? older.id : newer.root
            let bytes = try #require(try await backend.get([gone])[gone])
            let marker = SweepMarker(on: backend)
            try await marker.make()
            try await backend.delete([gone])
            let watched = MissWatchingBackend(backend)
            watched.watched = gone
            let lending = (backend as? any InPlaceReading).map { LendingBackend(watched, lender: $0) }
            lending?.watched = gone
            let reader = Store(backend: path == .inPlace ? try #require(lending) : watched, configuration: .init(nodeCacheCapacity: 0))
            let finished = Mutex(false)
            let read = _Concurrency.Task { () async throws -> String? in
                defer { finished.withLock { $0 = true } }
                switch path {
                case .fetched: return try await reader.value(Task.self, id: "t", at: newer.id)?.title
                case .inPlace:
                    let key = RecordKey(type: Task.typeName, id: "t")
                    return try await reader.snapshot(at: newer.id).record(key).map { _ in "kept" }
                case .history: return try await reader.log(from: [newer.id]).map(\.id) == [newer.id, older.id] ? "kept" : "wrong history"
                }
            }
            await watched.waitForMiss()
            #expect(watched.missed)
            if path == .inPlace { #expect(lending?.lentMisses ?? 0 > 0, "the leaf was first read in place") }
            if writtenBack { try await backend.put([(gone, bytes)]) }
            // Still waiting, with the object back, until its batch's marker goes.
            try await _Concurrency.Task.sleep(for: .milliseconds(50))
            #expect(!finished.withLock { $0 }, "the read waited for the marker")
            await marker.remove()
            if writtenBack {
                #expect(try await read.value == "kept")
            } else {
                await #expect { try await read.value } throws: { ($0 as? ArborError)?.code == .missingObject }
            }
            #expect(try await backend.refs().keys.allSatisfy { !$0.hasPrefix(RefName.sweepPrefix) })
            try await store.close()
        }
    }

    /// A marker is followed while it is younger than its lifetime (either way), and no longer
    /// than that by the reader's clock; a name that does not parse, or a `sweeps/` ref holding
    /// anything but the hash of its name, is not followed.
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
        var refs = Dictionary(uniqueKeysWithValues: names.values.map { ($0, SweepMarker.value(of: $0)) })
        refs["\(RefName.sweepPrefix)\(millis)-e"] = BackendContractTests.object(1).hash
        #expect(SweepMarker.live(in: refs, now: now) == [names["fresh"]!, names["ahead"]!])

        // A marker never removed (its collection was killed) holds a reader only so long.
        let backend = MemoryBackend()
        let stuck = SweepMarker(on: backend)
        try await stuck.make()
        var started = ContinuousClock.now
        try await SweepMarker.awaitBatchesInFlight(on: backend, longest: .milliseconds(50))
        #expect(ContinuousClock.now - started >= .milliseconds(50), "it waited")
        #expect(try await backend.ref(stuck.name) == SweepMarker.value(of: stuck.name))
        // One that lapses during the wait ends it then (in about 100 ms, not 20 s).
        await stuck.remove()
        try await SweepMarker(on: backend, now: Date(timeIntervalSinceNow: -59.9)).make()
        started = ContinuousClock.now
        try await SweepMarker.awaitBatchesInFlight(on: backend, longest: .seconds(20))
        #expect(ContinuousClock.now - started < .seconds(15), "the wait ended when the marker lapsed")
    }

    /// Markers name no version: verify finds the store intact, a migration neither copies nor
    /// counts them, and a collection removes the lapsed ones (and no live one, which another
    /// collection may have made). A `sweeps/` or `transfers/` ref naming a version is an
    /// ordinary ref: its history is kept and migrated.
    @Test(arguments: AdapterKind.allCases) func markersNameNoVersion(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let store = Store(backend: backend)
        let tagged = try await store.save(Task(id: "t", title: "tagged", done: false))
        try await store.save(Task(id: "t", title: "kept", done: false))
        let live = SweepMarker(on: backend)
        try await live.make()
        try await SweepMarker(on: backend, now: Date(timeIntervalSinceNow: -600)).make()
        // Another program's ref under the same prefix, naming the older version.
        let millis = Int64(Date().timeIntervalSince1970 * 1000)
        let tag = "\(RefName.sweepPrefix)\(millis)-7a9", claimLike = "\(RefName.transferPrefix)\(millis)-7a9"
        #expect(try await backend.compareAndSwap(ref: tag, expected: nil, new: tagged.id))
        #expect(try await backend.compareAndSwap(ref: claimLike, expected: nil, new: tagged.id))
        let report = try await store.verify()
        #expect(report.isIntact, "\(report.damage)")
        let copy = Store(backend: MemoryBackend())
        try await store.migrate(to: copy)
        #expect(try await copy.backend.refs().keys.sorted() == [RefName.heads, tag, claimLike].sorted())
        try await backend.put([BackendContractTests.object(77)])
        // That object and the first head set; the tag keeps the older version's objects.
        let garbage = try await store.verify().unreachableObjects
        #expect(garbage == 2)
        let collected = try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(collected.removedObjects == garbage)
        let left = try await backend.refs().filter { SweepMarker.isMarker($0.key, holding: $0.value) }.keys
        #expect(Array(left) == [live.name], "the lapsed marker is removed, the live one kept")
        #expect(try await store.value(Task.self, id: "t", at: tagged.id)?.title == "tagged")
        try await store.close()
    }

    /// A collection makes a marker before it deletes each batch and removes it once it has
    /// marked again; also for a batch whose delete failed, which the next marking settles, and
    /// for one whose marker could not be removed at first.
    @Test(arguments: [nil, FaultedCall.delete, .compareAndSwap]) func aCollectionMarksEachBatchItDeletes(failing: FaultedCall?) async throws {
        let inner = MemoryBackend()
        let faults = FaultInjectingBackend(inner)
        let logged = CallLoggingBackend(faults)
        let store = Store(backend: logged)
        try await store.save(Task(id: "t", title: "kept", done: false))
        try await inner.put((0..<3).map { BackendContractTests.object(100 + $0) })
        // The second batch's delete; or the first batch's marker's removal (the second swap).
        // A delete fails once it landed; a removal fails before it lands, so the marker stays.
        if let failing { faults.arm(FaultPlan(call: failing, countdown: 2, timing: failing == .delete ? .after : .before, sticky: false)) }
        do {
            let report = try await store.collectGarbage(gracePeriod: .milliseconds(10), progress: nil, sweepBatch: 1)
            #expect(failing != .delete)
            #expect(report.removedObjects == 3)
        } catch {
            #expect(failing == .delete, "\(error)")
        }
        let calls = logged.calls
        let deletes = calls.indices.filter { calls[$0] == "delete" }
        #expect(deletes.count == (failing == .delete ? 2 : 3))
        for index in deletes {
            // Made just before: a swap from nothing to a marker.
            #expect(calls[index - 1].hasPrefix("make \(RefName.sweepPrefix)"), "\(calls)")
            let name = calls[index - 1].dropFirst("make ".count)
            #expect(calls[(index + 1)...].contains("remove \(name)"), "\(calls)")
        }
        #expect(try await inner.refs().keys.allSatisfy { !$0.hasPrefix(RefName.sweepPrefix) })
        #expect(try await store.verify().isIntact)
    }
}

/// Logs each `delete`, and each compare-and-swap that makes or removes a ref, in order (one
/// that throws after it landed, as the inner backend's fault may, is logged too).
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
        let before = try await inner.ref(name)
        let result: Result<Bool, any Error>
        do { result = .success(try await inner.compareAndSwap(ref: name, expected: expected, new: new)) } catch { result = .failure(error) }
        let after = try await inner.ref(name)
        if before == nil, after != nil { log.withLock { $0.append("make \(name)") } }
        if before != nil, after == nil { log.withLock { $0.append("remove \(name)") } }
        return try result.get()
    }
}

/// Lends `lender`'s bytes in place (which a ``ForwardingBackend`` does not), counting the reads
/// of `watched` that found nothing; forwards the rest to `inner`.
final class LendingBackend: ForwardingBackend, InPlaceReading {
    let inner: any Backend
    let lender: any InPlaceReading
    nonisolated(unsafe) var watched: Hash?
    private let misses = Mutex(0)
    init(_ inner: any Backend, lender: any InPlaceReading) {
        self.inner = inner
        self.lender = lender
    }
    var lentMisses: Int { misses.withLock { $0 } }
    func withObjectBytes<R>(_ hash: Hash, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        try lender.withObjectBytes(hash) { bytes in
            if bytes == nil, hash == watched { misses.withLock { $0 += 1 } }
            return try body(bytes)
        }
    }
}
