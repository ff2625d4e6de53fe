import Arbor
import Synchronization

/// A backend wrapper that counts the objects read through it: by `get`, and by `ancestry`, which
/// it passes on so that the engine's many-generations-per-request walk is the one measured.
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

    func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]] {
        let found = try await inner.ancestry(of: hashes, limit: limit)
        count.withLock { $0 += found.count }
        return found
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

/// A backend wrapper that counts every request made to it, by kind.
final class RequestCountingBackend: ForwardingBackend {
    let inner: any Backend
    private let counts = Mutex([String: Int]())

    init(_ inner: any Backend) { self.inner = inner }

    private func count(_ kind: String) { counts.withLock { $0[kind, default: 0] += 1 } }

    /// Requests so far.
    var total: Int { counts.withLock { $0.values.reduce(0, +) } }
    /// Requests by kind, e.g. `refs 1, get 1`.
    var summary: String { counts.withLock { $0.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") } }

    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        count("get")
        return try await inner.get(hashes)
    }

    func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]] {
        count("ancestry")
        return try await inner.ancestry(of: hashes, limit: limit)
    }

    func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        count("contains")
        return try await inner.contains(hashes)
    }

    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        count("put")
        try await inner.put(objects)
    }

    func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        count("enumerateHashes")
        try await inner.enumerateHashes(batchSize: batchSize, body)
    }

    func delete(_ hashes: [Hash]) async throws {
        count("delete")
        try await inner.delete(hashes)
    }

    func refs() async throws -> [String: Hash] {
        count("refs")
        return try await inner.refs()
    }

    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        count("compareAndSwap")
        return try await inner.compareAndSwap(ref: name, expected: expected, new: new)
    }
}
