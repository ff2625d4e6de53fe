@testable import Arbor
import Synchronization
import Testing

/// A memory store that counts the objects it lends in place, and can lend other bytes than it
/// holds for one object, as a damaged disk would.
final class LendingProbe: ForwardingBackend, InPlaceReading {
    let memory = MemoryBackend()
    var inner: any Backend { memory }
    private let state = Mutex((lends: 0, damaged: Hash?.none))

    var lends: Int { state.withLock { $0.lends } }

    /// From now on, lends `hash` with its last byte flipped.
    func damage(_ hash: Hash) { state.withLock { $0.damaged = hash } }

    func withObjectBytes<R>(_ hash: Hash, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        let damaged = state.withLock { state in
            state.lends += 1
            return state.damaged == hash
        }
        guard damaged else { return try memory.withObjectBytes(hash, body) }
        var bytes = try memory.withObjectBytes(hash) { $0.map { [UInt8]($0) } }
        if let last = bytes?.indices.last { bytes?[last] ^= 1 }
        return try bytes.map { try $0.withUnsafeBytes(body) } ?? body(nil)
    }
}

@Suite struct InPlaceReadTests {
    private func people(_ count: Int) -> [Record] {
        (0..<count).map { Record(type: "Person", id: String(format: "p%05d", $0), properties: ["name": .string("Person \($0)")]) }
    }

    /// Commits `records` and returns the head.
    private func commit(_ records: [Record], to backend: any Backend) async throws -> Version {
        var changes = ChangeSet()
        for record in records { try changes.save(record) }
        return try await Store(backend: backend, configuration: .init(replica: "r")).commit(changes)
    }

    @Test func pointReadsThroughALendingBackendFindWhatBatchedReadsFind() async throws {
        let probe = LendingProbe()
        let records = people(3_000)
        let head = try await commit(records, to: probe)
        let keys = records.map(\.key) + [RecordKey(type: "Person", id: "absent"), RecordKey(type: "Zebra", id: "p00001")]
        let batched = try await Store(backend: probe, configuration: .init(replica: "r")).snapshot(at: head.id).records(keys)
        #expect(batched.count == records.count)
        // A store of its own: the batched read's nodes, in its caches, would spare the engine.
        let snapshot = try await Store(backend: probe, configuration: .init(replica: "r")).snapshot(at: head.id)
        for round in 1...3 {
            for key in keys {
                #expect(try await snapshot.record(key) == batched[key], "\(key), round \(round)")
            }
        }
        #expect(probe.lends > 0, "the point reads read leaves in place")
    }

    /// A store whose leaves fit its cache copies each into it after a few reads (one read in
    /// eight admits), and then reads without asking the engine at all.
    @Test func leavesThatFitTheCacheEndUpReadFromIt() async throws {
        let probe = LendingProbe()
        let records = people(2_000)
        let head = try await commit(records, to: probe)
        let snapshot = try await Store(backend: probe, configuration: .init(replica: "r")).snapshot(at: head.id)
        for _ in 0..<40 {
            for record in records { _ = try await snapshot.record(record.key) }
        }
        let lendsBefore = probe.lends
        #expect(lendsBefore > 0, "the leaves were lent before they were cached")
        for record in records { #expect(try await snapshot.record(record.key)?.properties == record.properties) }
        #expect(probe.lends == lendsBefore, "no leaf lent after 40 rounds of reads of a store that fits the cache")
    }

    @Test func aLeafLentDamagedIsRefusedNamingIt() async throws {
        let probe = LendingProbe()
        let head = try await commit(people(1), to: probe)
        probe.damage(head.root)  // one record: the root is the leaf
        let store = Store(backend: probe, configuration: .init(replica: "r"))
        let error = await #expect(throws: ArborError.self) { try await store.record(RecordKey(type: "Person", id: "p00000"), at: head.id) }
        #expect(error?.code == .corruptObject)
        #expect(error?.description.contains(head.root.hex) == true, "\(String(describing: error))")
    }

    /// With the caches off, a store remembers no object as checked: every read checks again.
    @Test func withoutCachesEveryLentReadIsChecked() async throws {
        let probe = LendingProbe()
        let head = try await commit(people(1), to: probe)
        let store = Store(backend: probe, configuration: .init(replica: "r", nodeCacheCapacity: 0))
        let key = RecordKey(type: "Person", id: "p00000")
        #expect(try await store.record(key, at: head.id) != nil)
        probe.damage(head.root)
        await #expect { try await store.record(key, at: head.id) } throws: { ($0 as? ArborError)?.code == .corruptObject }
    }

    /// A node damaged after the store first read (and hashed) it is caught by its fingerprint,
    /// on the later reads that skip SHA-256, and never reaches the node caches.
    @Test func aLeafDamagedAfterItsFirstReadIsCaughtByItsFingerprint() async throws {
        let probe = LendingProbe()
        let head = try await commit(people(1), to: probe)
        let store = Store(backend: probe, configuration: .init(replica: "r"))
        let key = RecordKey(type: "Person", id: "p00000")
        #expect(try await store.record(key, at: head.id) != nil)
        #expect(store.inPlace.verified.value(head.root) != nil, "the leaf is remembered as checked")
        probe.damage(head.root)
        // Enough reads that some are admitted to the cache (and hashed) and most are not.
        for _ in 0..<(2 * Int(InPlaceReadState.admissionInterval)) {
            await #expect { try await store.record(key, at: head.id) } throws: { ($0 as? ArborError)?.code == .corruptObject }
        }
        #expect(store.bytesCache.value(head.root) == nil, "damaged bytes never enter the cache")
    }

    /// A backend that lends nothing gets no fingerprints, and their share of memory goes to
    /// the node bytes.
    @Test func theFingerprintsShareGoesToNodeBytesWhenNothingIsLent() {
        let limit = 1 << 20
        let lending = Store(backend: MemoryBackend(), configuration: .init(replica: "r", cacheMemoryLimit: limit))
        let copying = Store(backend: RecordingBackend(MemoryBackend()), configuration: .init(replica: "r", cacheMemoryLimit: limit))
        #expect(lending.inPlace.verified.capacity > 0 && lending.bytesCache.byteLimit == limit / 32 * 11)
        #expect(copying.inPlace.verified.capacity == 0 && copying.bytesCache.byteLimit == limit / 8 * 3)
        let huge = Store(backend: MemoryBackend(), configuration: .init(replica: "r", nodeCacheCapacity: .max))
        #expect(huge.inPlace.verified.capacity == .max, "a capacity past Int.max / 8 saturates")
    }

    @Test func aFingerprintCatchesEveryFlippedBit() {
        for length in [0, 1, 7, 8, 9, 31, 32, 33, 100, 4_000] {
            var bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }
            let print = bytes.withUnsafeBufferPointer(Fingerprint.of)
            #expect(bytes.withUnsafeBufferPointer(Fingerprint.of) == print, "the same bytes, the same fingerprint")
            for bit in stride(from: 0, to: length * 8, by: length > 100 ? 97 : 1) {
                bytes[bit / 8] ^= 1 << (bit % 8)
                #expect(bytes.withUnsafeBufferPointer(Fingerprint.of) != print, "bit \(bit) of \(length) bytes")
                bytes[bit / 8] ^= 1 << (bit % 8)
            }
            #expect((bytes + [0]).withUnsafeBufferPointer(Fingerprint.of) != print, "a zero byte more, \(length) bytes")
        }
    }

    /// A node checked once is remembered by the store, and garbage collection forgets what it
    /// deletes (the read after it fails as it would anyway: the engine no longer lends the node).
    @Test func garbageCollectionForgetsCheckedNodes() async throws {
        let probe = LendingProbe()
        let store = Store(backend: probe, configuration: .init(replica: "r"))
        let orphan = try await commit(people(1), to: probe)
        let key = RecordKey(type: "Person", id: "p00000")
        #expect(try await store.record(key, at: orphan.id) != nil)
        #expect(store.inPlace.verified.value(orphan.root) != nil, "the leaf read in place is remembered as checked")
        #expect(try await probe.compareAndSwap(ref: RefName.heads, expected: try await probe.ref(RefName.heads), new: nil))
        try await store.save(Task(id: "kept", title: "kept", done: true))
        try await store.collectGarbage(gracePeriod: .milliseconds(10))
        #expect(store.inPlace.verified.value(orphan.root) == nil, "the deleted leaf is forgotten")
        await #expect { try await store.record(key, at: orphan.id) } throws: { ($0 as? ArborError)?.code == .missingObject }
    }
}
