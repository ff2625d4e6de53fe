import Arbor
import Synchronization

/// A backend wrapper that counts the objects read through it.
final class ReadCountingBackend: ForwardingBackend {
    let inner: any Backend
    private let count = Mutex(0)

    init(_ inner: any Backend) { self.inner = inner }

    var reads: Int { count.withLock { $0 } }
    func reset() { count.withLock { $0 = 0 } }

    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        count.withLock { $0 += hashes.count }
        return try await inner.get(hashes)
    }
}
