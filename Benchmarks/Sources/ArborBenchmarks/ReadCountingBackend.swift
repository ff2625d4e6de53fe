import Arbor
import Synchronization

/// A backend wrapper that counts the objects read through it.
final class ReadCountingBackend: Backend {
    let inner: any Backend
    private let count = Mutex(0)

    init(_ inner: any Backend) { self.inner = inner }

    var engineName: String { inner.engineName }
    var reads: Int { count.withLock { $0 } }
    func reset() { count.withLock { $0 = 0 } }

    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        count.withLock { $0 += hashes.count }
        return try await inner.get(hashes)
    }
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
