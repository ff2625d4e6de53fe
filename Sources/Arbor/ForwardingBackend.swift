/// A backend that passes every call to another: conform, name the ``inner`` backend, and
/// implement only the calls to change. For instrumentation (counting, timing) and for fault
/// injection in tests.
///
/// ``InPlaceReading`` is not forwarded: point reads through a wrapper use ``Backend/get(_:)``.
/// ``Backend/objectSizes(_:)`` is: a type that changes the size of what `get` returns implements
/// it too (or returns `nil`).
///
/// ``Backend/replace(_:)`` is not forwarded: a repair's writes go through the conforming type's
/// ``Backend/delete(_:)`` and ``Backend/put(_:)`` (the default), so a type that changes what it
/// stores (compression, encryption) sees them too. Forward it explicitly to keep the inner
/// backend's replacement in one transaction.
///
/// ``Backend/ancestry(of:limit:)`` and ``Backend/enumerateObjects(batchSize:_:)`` are not
/// forwarded: they go through the conforming type's ``Backend/get(_:)`` (and
/// `enumerateHashes`), so a type that changes `get` sees every read; nor is
/// ``Backend/enumerateHashesCheckedByEngine(batchSize:_:)``, which reads no bytes at all. Forward
/// them explicitly to keep the inner backend's many-generations-per-request walks, engine-order
/// scans and hash checks.
///
/// ```swift
/// final class CountingReads: ForwardingBackend {
///     let inner: any Backend
///     let reads = Atomic(0)
///     init(_ inner: any Backend) { self.inner = inner }
///     func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
///         reads.add(hashes.count, ordering: .relaxed)
///         return try await inner.get(hashes)
///     }
/// }
/// ```
public protocol ForwardingBackend: Backend {
    /// The backend every call not implemented by the conforming type goes to.
    var inner: any Backend { get }
}

extension ForwardingBackend {
    public var engineName: String { inner.engineName }
    public func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] { try await inner.get(hashes) }
    public func contains(_ hashes: [Hash]) async throws -> Set<Hash> { try await inner.contains(hashes) }
    public func objectSizes(_ hashes: [Hash]) async throws -> [Hash: Int]? { try await inner.objectSizes(hashes) }
    public func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws { try await inner.put(objects) }
    public func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        try await inner.enumerateHashes(batchSize: batchSize, body)
    }
    // put(_:restating:) is not forwarded: the default calls this wrapper's put, then restate,
    // so a wrapper that overrides put sees every object written (in two calls, not one).
    public func restate(_ restatements: [Restatement]) async throws { try await inner.restate(restatements) }
    public var acceptsRestatements: Bool { inner.acceptsRestatements }
    public func delete(_ hashes: [Hash]) async throws { try await inner.delete(hashes) }
    public func refs() async throws -> [String: Hash] { try await inner.refs() }
    public func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try await inner.compareAndSwap(ref: name, expected: expected, new: new)
    }
    public func close() async throws { try await inner.close() }
    public var writeBatchLimit: WriteBatchLimit { inner.writeBatchLimit }
}
