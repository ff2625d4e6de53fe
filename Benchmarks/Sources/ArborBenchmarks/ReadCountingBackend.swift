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

/// A backend wrapper for a store across a network: every request waits `latency` first (a round
/// trip), and requests that read objects are counted. `ancestry` is passed on (many generations
/// per request, where the engine can) or, without `followsParents`, answered with one `get` (a
/// generation per request, as history walks did before it).
final class RemoteBackend: ForwardingBackend {
    let inner: any Backend
    let followsParents: Bool
    let latency: Duration
    private let count = Mutex(0)

    init(_ inner: any Backend, followsParents: Bool, latency: Duration) {
        self.inner = inner
        self.followsParents = followsParents
        self.latency = latency
    }

    /// Requests that read objects so far.
    var reads: Int { count.withLock { $0 } }

    private func roundTrip() async throws {
        if latency > .zero { try await Task.sleep(for: latency) }
    }

    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        count.withLock { $0 += 1 }
        try await roundTrip()
        return try await inner.get(hashes)
    }

    func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]] {
        guard followsParents else { return try await get(hashes) }
        count.withLock { $0 += 1 }
        try await roundTrip()
        return try await inner.ancestry(of: hashes, limit: limit)
    }

    func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        try await roundTrip()
        return try await inner.contains(hashes)
    }

    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try await roundTrip()
        try await inner.put(objects)
    }

    func refs() async throws -> [String: Hash] {
        try await roundTrip()
        return try await inner.refs()
    }

    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try await roundTrip()
        return try await inner.compareAndSwap(ref: name, expected: expected, new: new)
    }
}
