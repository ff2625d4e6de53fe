import Foundation
import Synchronization
@testable import Arbor

/// A backend that forwards every call to `inner`; wrappers override what they change.
protocol ForwardingBackend: Backend {
    var inner: any Backend { get }
}

extension ForwardingBackend {
    var engineName: String { inner.engineName }
    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] { try await inner.get(hashes) }
    func contains(_ hashes: [Hash]) async throws -> Set<Hash> { try await inner.contains(hashes) }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws { try await inner.put(objects) }
    func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        try await inner.enumerateHashes(batchSize: batchSize, body)
    }
    func delete(_ hashes: [Hash]) async throws { try await inner.delete(hashes) }
    func refs() async throws -> [String: Hash] { try await inner.refs() }
    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try await inner.compareAndSwap(ref: name, expected: expected, new: new)
    }
    func close() async throws { try await inner.close() }
}

/// A backend wrapper that counts the objects read and written through it.
final class CountingBackend: ForwardingBackend {
    let inner: any Backend
    private let counters = Mutex((gets: 0, puts: 0, getCalls: 0))

    init(_ inner: any Backend = MemoryBackend()) { self.inner = inner }

    var objectsRead: Int { counters.withLock { $0.gets } }
    var objectsWritten: Int { counters.withLock { $0.puts } }
    var getCalls: Int { counters.withLock { $0.getCalls } }
    func reset() { counters.withLock { $0 = (0, 0, 0) } }

    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        counters.withLock { $0.gets += hashes.count; $0.getCalls += 1 }
        return try await inner.get(hashes)
    }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        let fresh = try await objects.count - inner.contains(objects.map(\.hash)).count
        counters.withLock { $0.puts += fresh }
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

/// A fresh temporary folder path (not created).
func temporaryPath(_ label: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("arbor-test-\(label)-\(UUID().uuidString)").path
}

func removeItem(_ path: String) { try? FileManager.default.removeItem(atPath: path) }
