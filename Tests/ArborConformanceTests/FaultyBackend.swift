import Arbor
import Synchronization

/// A handle on a store kept in a `MemoryBackend` that outlives its handles (the "disk"), so that
/// it can be reopened and shared — with one deliberate fault, or none.
///
/// Each fault must make the conformance suite fail; without one the adapter must pass.
final class FaultyBackend: Backend {
    enum Fault: String, CaseIterable, Sendable, CustomStringConvertible {
        /// Compare-and-swap reads, checks, waits and then writes: racers that all read the same
        /// value all win.
        case nonAtomicSwap
        /// `put` silently drops every 1,000th object of a batch.
        case dropsEvery1000th
        /// Ref changes after a ref's creation stay in the handle and are lost on close: a
        /// reopened store shows stale refs.
        case staleRefsAfterReopen
        /// `put` keeps only the first 16 MB of larger objects.
        case truncatesLargeObjects
        /// `get` flips a bit in the middle of every object it returns, without an error.
        case corruptsBytes
        /// `put` stores a batch from its last object to its first, 100 at a time, a millisecond
        /// apart: a reader finds objects whose predecessors are not there yet.
        case storesBackToFront
        /// `get` and `contains` look hashes up by their first 31 bytes: a hash differing from a
        /// stored one only in its last byte is taken for it.
        case comparesHashPrefixes
        /// `enumerateObjects` ignores an error its body throws and goes on.
        case swallowsEnumerationErrors
        /// `delete` removes a batch from its last object to its first, 100 at a time, a
        /// millisecond apart.
        case deletesBackToFront

        var description: String { rawValue }
    }

    let engineName = "faulty"
    private let disk: MemoryBackend
    private let fault: Fault?
    private let isClosed = Atomic<Bool>(false)
    /// For ``Fault/staleRefsAfterReopen``: the refs as this handle sees them.
    private let localRefs: Mutex<[String: Hash]>

    init(disk: MemoryBackend, fault: Fault?) async throws {
        self.disk = disk
        self.fault = fault
        localRefs = Mutex(try await disk.refs())
    }

    private func checkOpen(_ operation: String) throws {
        if isClosed.load(ordering: .acquiring) { throw ArborError(.closed, "the store is closed", backend: engineName, operation: operation) }
    }

    /// For ``Fault/comparesHashPrefixes``: each of `hashes` as the stored hash that shares its
    /// first 31 bytes, where there is one.
    private func byPrefix(_ hashes: [Hash]) async throws -> [Hash: Hash] {
        var stored = [ArraySlice<UInt8>: Hash]()
        for hash in try await disk.allHashes() { stored[hash.bytes.prefix(31)] = hash }
        return Dictionary(hashes.compactMap { hash in stored[hash.bytes.prefix(31)].map { (hash, $0) } }, uniquingKeysWith: { first, _ in first })
    }

    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try checkOpen("get")
        if fault == .comparesHashPrefixes {
            let found = try await byPrefix(hashes)
            let objects = try await disk.get(Array(Set(found.values)))
            return found.compactMapValues { objects[$0] }
        }
        var objects = try await disk.get(hashes)
        if fault == .corruptsBytes {
            for (hash, var bytes) in objects where !bytes.isEmpty {
                bytes[bytes.count / 2] ^= 0x10
                objects[hash] = bytes
            }
        }
        return objects
    }

    func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        try checkOpen("contains")
        if fault == .comparesHashPrefixes { return Set(try await byPrefix(hashes).keys) }
        return try await disk.contains(hashes)
    }

    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try checkOpen("put")
        switch fault {
        case .dropsEvery1000th:
            try await disk.put(objects.enumerated().filter { ($0.offset + 1) % 1000 != 0 }.map(\.element))
        case .truncatesLargeObjects:
            try await disk.put(objects.map { ($0.hash, Array($0.bytes.prefix(16 << 20))) })
        case .storesBackToFront:
            for end in stride(from: objects.count, to: 0, by: -100) {
                try await disk.put(Array(objects[max(end - 100, 0)..<end]))
                if objects.count > 100 { try await _Concurrency.Task.sleep(for: .milliseconds(1)) }
            }
        default:
            try await disk.put(objects)
        }
    }

    func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        try checkOpen("enumerate")
        try await disk.enumerateHashes(batchSize: batchSize, body)
    }

    func enumerateObjects(batchSize: Int, _ body: ([(hash: Hash, bytes: [UInt8])]) async throws -> Void) async throws {
        try checkOpen("enumerate")
        try await disk.enumerateObjects(batchSize: batchSize) { batch in
            if fault == .swallowsEnumerationErrors { try? await body(batch) } else { try await body(batch) }
        }
    }

    func delete(_ hashes: [Hash]) async throws {
        try checkOpen("delete")
        if fault == .deletesBackToFront {
            for end in stride(from: hashes.count, to: 0, by: -100) {
                try await disk.delete(Array(hashes[max(end - 100, 0)..<end]))
                if hashes.count > 100 { try await _Concurrency.Task.sleep(for: .milliseconds(1)) }
            }
            return
        }
        try await disk.delete(hashes)
    }

    func refs() async throws -> [String: Hash] {
        try checkOpen("refs")
        return fault == .staleRefsAfterReopen ? localRefs.withLock { $0 } : try await disk.refs()
    }

    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try checkOpen("compareAndSwap")
        try RefName.validate(name, backend: engineName)
        switch fault {
        case .nonAtomicSwap:
            guard try await disk.ref(name) == expected else { return false }
            try await _Concurrency.Task.sleep(for: .milliseconds(2))
            while true {  // write whatever is there now
                let current = try await disk.ref(name)
                if try await disk.compareAndSwap(ref: name, expected: current, new: new) { return true }
            }
        case .staleRefsAfterReopen:
            let swapped = localRefs.withLock { refs in
                guard refs[name] == expected else { return false }
                refs[name] = new
                return true
            }
            if swapped && expected == nil { _ = try await disk.compareAndSwap(ref: name, expected: nil, new: new) }
            return swapped
        default:
            return try await disk.compareAndSwap(ref: name, expected: expected, new: new)
        }
    }

    func close() async throws {
        isClosed.store(true, ordering: .releasing)
    }
}
