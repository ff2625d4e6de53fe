import Synchronization

/// The in-memory reference adapter: objects and refs in dictionaries behind a mutex.
///
/// Its behaviour defines the contract; every other adapter must be indistinguishable from it.
/// Nothing survives the process.
public final class MemoryBackend: Backend, InPlaceReading {
    private struct State {
        var objects: [Hash: [UInt8]] = [:]
        var refs: [String: Hash] = [:]
        var isClosed = false
    }

    private let state = Mutex(State())

    public let engineName = "memory"

    public init() {}

    private func withOpenState<R>(_ operation: String, _ body: (inout State) throws -> R) throws -> R {
        try state.withLock { state in
            guard !state.isClosed else {
                throw ArborError(.closed, "the store is closed", backend: engineName, operation: operation)
            }
            return try body(&state)
        }
    }

    public func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try withOpenState("get") { state in
            var result = [Hash: [UInt8]](minimumCapacity: hashes.count)
            for hash in hashes { if let bytes = state.objects[hash] { result[hash] = bytes } }
            return result
        }
    }

    /// Calls `body` with the stored array's bytes, outside the lock (the array is immutable).
    public func withObjectBytes<R>(_ hash: Hash, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        let bytes = try withOpenState("get") { state in state.objects[hash] }
        guard let bytes else { return try body(nil) }
        return try bytes.withUnsafeBytes(body)
    }

    public func objectSizes(_ hashes: [Hash]) async throws -> [Hash: Int]? {
        try withOpenState("get") { state in
            var result = [Hash: Int](minimumCapacity: hashes.count)
            for hash in hashes { if let bytes = state.objects[hash] { result[hash] = bytes.count } }
            return result
        }
    }

    public func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        try withOpenState("contains") { state in Set(hashes.filter { state.objects[$0] != nil }) }
    }

    /// The objects among `hashes` and their ancestors, breadth first, up to `limit` objects
    /// read (``Ancestry``, as the file engines do). An object that does not parse as a commit
    /// is returned but not followed.
    public func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]] {
        try withOpenState("get") { state in Ancestry.collect(hashes, limit: limit) { state.objects[$0] } }
    }

    public func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try withOpenState("put") { state in
            for object in objects where state.objects[object.hash] == nil {
                state.objects[object.hash] = object.bytes
            }
        }
    }

    public func replace(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try withOpenState("replace") { state in
            for object in objects { state.objects[object.hash] = object.bytes }
        }
    }

    public func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        let all = try withOpenState("enumerate") { Array($0.objects.keys) }
        var start = 0
        while start < all.count {
            let end = min(start + max(batchSize, 1), all.count)
            try await body(Array(all[start..<end]))
            start = end
        }
    }

    public func delete(_ hashes: [Hash]) async throws {
        try withOpenState("delete") { state in for hash in hashes { state.objects[hash] = nil } }
    }

    public func refs() async throws -> [String: Hash] {
        try withOpenState("refs") { $0.refs }
    }

    public func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try RefName.validate(name, backend: engineName)
        return try withOpenState("compareAndSwap") { state in
            guard state.refs[name] == expected else { return false }
            state.refs[name] = new
            return true
        }
    }

    public func close() async throws {
        state.withLock { $0.isClosed = true }
    }
}
