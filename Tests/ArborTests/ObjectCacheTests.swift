import Testing
@testable import Arbor

/// The store's caches stay within their bounds in values and in bytes.
@Suite struct ObjectCacheTests {
    /// A cached value of a chosen cost.
    struct Sized: CacheCosted {
        var cacheCost: Int
    }

    static func hash(_ index: Int) -> Hash { Hash.of(Array("value \(index)".utf8)) }

    @Test func aCacheNeverHoldsMoreBytesThanItsLimit() {
        let cache = ObjectCache<Sized>(capacity: 1_000, byteLimit: 10_000)
        for index in 0..<200 {
            cache.insert(Sized(cacheCost: 700 + index % 7 * 100), for: Self.hash(index))
            let usage = cache.usage
            #expect(usage.bytes <= 10_000, "after \(index + 1) values: \(usage.bytes) bytes")
            #expect(cache.value(Self.hash(index)) != nil, "the value just inserted is kept")
        }
        #expect(cache.value(Self.hash(0)) == nil, "the oldest values are dropped")
        #expect(cache.usage.count <= 20)
    }

    @Test func theValueBoundStillHoldsForCheapValues() {
        let cache = ObjectCache<Sized>(capacity: 10, byteLimit: 1 << 30)
        for index in 0..<100 { cache.insert(Sized(cacheCost: 1), for: Self.hash(index)) }
        #expect(cache.usage.count <= 10)
    }

    @Test func aValueLargerThanAGenerationIsNotCachedAndEvictsNothing() {
        let cache = ObjectCache<Sized>(capacity: 100, byteLimit: 10_000)
        cache.insert(Sized(cacheCost: 1_000), for: Self.hash(1))
        cache.insert(Sized(cacheCost: 5_001), for: Self.hash(2))
        #expect(cache.value(Self.hash(2)) == nil)
        #expect(cache.value(Self.hash(1)) != nil)
        #expect(cache.usage.bytes == 1_000)
    }

    /// Generations of two values: a hit in the old generation moves to the young one and is
    /// counted once; forgetting it afterwards releases its bytes from wherever it is.
    @Test func aHitInTheOldGenerationMovesAndIsCountedOnce() {
        let cache = ObjectCache<Sized>(capacity: 4)
        for index in 0..<3 { cache.insert(Sized(cacheCost: 10), for: Self.hash(index)) }
        #expect(cache.value(Self.hash(0)) != nil)
        #expect(cache.usage == (count: 3, bytes: 30))
        #expect(cache.value(Self.hash(1)) != nil, "promoting this one turns the generations over")
        #expect(cache.usage == (count: 3, bytes: 30))
        cache.forget([Self.hash(0)])
        #expect(cache.usage == (count: 2, bytes: 20))
        #expect(cache.value(Self.hash(0)) == nil && cache.value(Self.hash(2)) != nil)
    }

    /// Generations of two values: each turn keeps the generation just filled and drops the one
    /// before it (the turn reuses the dropped generation's table for the new young one).
    @Test func aTurnKeepsTheLastGenerationAndDropsTheOneBefore() {
        let cache = ObjectCache<Sized>(capacity: 4)
        for index in 0..<5 { cache.insert(Sized(cacheCost: 10), for: Self.hash(index)) }
        #expect(cache.usage == (count: 3, bytes: 30), "old: 2 and 3; young: 4")
        #expect(cache.value(Self.hash(0)) == nil && cache.value(Self.hash(1)) == nil)
        #expect(cache.value(Self.hash(4)) != nil)
        for index in 5..<7 { cache.insert(Sized(cacheCost: 10), for: Self.hash(index)) }
        #expect(cache.usage == (count: 3, bytes: 30), "old: 4 and 5; young: 6")
        #expect(cache.value(Self.hash(2)) == nil && cache.value(Self.hash(3)) == nil)
        #expect(cache.value(Self.hash(6)) != nil && cache.value(Self.hash(5)) != nil)
    }

    @Test func forgettingReleasesTheBytes() {
        let cache = ObjectCache<Sized>(capacity: 100, byteLimit: 100_000)
        for index in 0..<10 { cache.insert(Sized(cacheCost: 1_000), for: Self.hash(index)) }
        cache.forget((0..<5).map(Self.hash))
        #expect(cache.usage == (count: 5, bytes: 5_000))
    }

    /// Records of about 900 bytes make nodes of about 15 KB: a store with a 1 MB limit keeps its
    /// node caches within it after reading every record, point reads and batched reads alike.
    @Test func aStoreOfLargeRecordsKeepsItsCachesWithinTheLimit() async throws {
        let store = Store(backend: MemoryBackend(), configuration: .init(replica: "r", cacheMemoryLimit: 1 << 20))
        let text = String(repeating: "x", count: 900)
        var changes = ChangeSet()
        let keys = (0..<2_000).map { RecordKey(type: "Page", id: String(format: "%05d", $0)) }
        for key in keys { try changes.save(Record(type: key.type, id: key.id, properties: ["text": .string(text)])) }
        try await store.commit(changes)
        let snapshot = try await store.snapshot()
        for key in keys { #expect(try await snapshot.record(key) != nil) }
        #expect(try await snapshot.records(keys).count == keys.count)
        let decoded = store.cache.usage, bytes = store.bytesCache.usage
        #expect(decoded.bytes <= (1 << 20) / 2, "decoded nodes: \(decoded.bytes) bytes in \(decoded.count)")
        #expect(bytes.bytes <= (1 << 20) / 32 * 11, "node bytes: \(bytes.bytes) bytes in \(bytes.count)")
        #expect(bytes.count > 0, "the bytes cache is used")
    }
}
