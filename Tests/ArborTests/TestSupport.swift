import Foundation
import Synchronization
@testable import Arbor

/// A backend wrapper that counts the objects read and written through it.
final class CountingBackend: ForwardingBackend {
    let inner: any Backend
    private let counters = Mutex((gets: 0, puts: 0, getCalls: 0, asked: 0, putsAll: 0, ancestryCalls: 0))

    init(_ inner: any Backend = MemoryBackend()) { self.inner = inner }

    var objectsRead: Int { counters.withLock { $0.gets } }
    /// Objects put that the store did not hold.
    var objectsWritten: Int { counters.withLock { $0.puts } }
    /// Every object put, also those the store held already.
    var objectsPut: Int { counters.withLock { $0.putsAll } }
    var getCalls: Int { counters.withLock { $0.getCalls } }
    /// Requests through ``Backend/ancestry(of:limit:)`` (their objects are not in ``objectsRead``).
    var ancestryCalls: Int { counters.withLock { $0.ancestryCalls } }
    /// Hashes asked about with `contains`.
    var hashesAsked: Int { counters.withLock { $0.asked } }
    func reset() { counters.withLock { $0 = (0, 0, 0, 0, 0, 0) } }

    func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        counters.withLock { $0.asked += hashes.count }
        return try await inner.contains(hashes)
    }

    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        counters.withLock { $0.gets += hashes.count; $0.getCalls += 1 }
        return try await inner.get(hashes)
    }
    func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]] {
        counters.withLock { $0.ancestryCalls += 1 }
        return try await inner.ancestry(of: hashes, limit: limit)
    }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        let fresh = try await objects.count - inner.contains(objects.map(\.hash)).count
        counters.withLock { $0.puts += fresh; $0.putsAll += objects.count }
        try await inner.put(objects)
    }
}

/// A store of `count` records of `size` bytes each (blobs, as records past 1 KiB are), on a
/// backend that keeps the most bytes one read returned, reset once they are written.
func storeOfLargeRecords(count: Int = 40, size: Int = 1 << 20) async throws -> (store: Store, backend: LargestReadBackend) {
    let backend = LargestReadBackend(MemoryBackend())
    let store = Store(backend: backend)
    var changes = ChangeSet()
    for index in 0..<count { try changes.save(Attachment(id: "large \(index)", data: Data(repeating: UInt8(index % 256), count: size))) }
    try await store.commit(changes)
    backend.reset()
    return (store, backend)
}

/// A backend wrapper that keeps the most bytes one `get` returned.
final class LargestReadBackend: ForwardingBackend {
    let inner: any Backend
    private let largest = Mutex(0)

    init(_ inner: any Backend) { self.inner = inner }

    var largestRead: Int { largest.withLock { $0 } }
    func reset() { largest.withLock { $0 = 0 } }

    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        let objects = try await inner.get(hashes)
        let bytes = objects.values.reduce(0) { $0 + $1.count }
        largest.withLock { $0 = max($0, bytes) }
        return objects
    }
}

/// Checks, on every put, that each object's names (an index node's children and blobs, a
/// commit's root and parents, a heads object's heads) are stored already or come earlier in the
/// same batch: the order every writer must keep, so that a store never holds an object without
/// what it names.
final class OrderCheckingBackend: ForwardingBackend {
    let inner: any Backend
    private let problems = Mutex<[String]>([])

    init(_ inner: any Backend) { self.inner = inner }

    /// Each object written before an object it names, as "X names Y".
    var violations: [String] { problems.withLock { $0 } }

    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        var earlier = Set<Hash>()
        var named = [(object: Hash, name: Hash)]()
        for object in objects {
            let links = try ObjectLinks(object.bytes)
            let names = links.children.map(\.hash) + links.blobs + (links.root.map { [$0] } ?? []) + links.parents + links.heads
            for name in names where !earlier.contains(name) { named.append((object.hash, name)) }
            earlier.insert(object.hash)
        }
        let present = try await inner.contains(named.map(\.name))
        let missing = named.filter { !present.contains($0.name) }
        if !missing.isEmpty { problems.withLock { $0 += missing.map { "\($0.object) names \($0.name)" } } }
        try await inner.put(objects)
    }
}

/// A small deterministic random number generator (SplitMix64), so failures reproduce.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Whether `error` is an ``ArborError`` of `code` whose message contains each of `texts`.
func isArborError(_ error: any Error, _ code: ArborError.Code, mentioning texts: String...) -> Bool {
    guard let error = error as? ArborError, error.code == code else { return false }
    return texts.allSatisfy { error.message.contains($0) }
}

/// A fresh temporary folder path (not created).
func temporaryPath(_ label: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("arbor-test-\(label)-\(UUID().uuidString)").path
}

func removeItem(_ path: String) { try? FileManager.default.removeItem(atPath: path) }
