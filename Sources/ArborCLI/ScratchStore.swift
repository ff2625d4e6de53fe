import Arbor
import ArborConformance

/// A store given to `arbor conformance`: a scratch store the suite may fill and wipe, which must
/// be empty (or not exist yet) when the run starts and is left empty when it ends.
struct ScratchStore: Sendable {
    let location: StoreLocation

    /// Creates the store if there is none; throws ``ArborError/Code/invalidInput`` if it holds
    /// objects or refs, which the suite would wipe.
    func prepare() async throws {
        if case .memory = location { return }
        let backend: any Backend
        do { backend = try await openBackend(location, create: false) } catch let error as ArborError where error.code == .notFound {
            backend = try await openBackend(location, create: true)
        }
        // One hash is enough to refuse: a store of millions given by mistake is not listed.
        let refs: [String: Hash]
        let holdsObjects: Bool
        do {
            refs = try await backend.refs()
            holdsObjects = try await !backend.holdsNoObjects()
        } catch {
            try? await backend.close()
            throw error
        }
        try await backend.close()
        guard refs.isEmpty && !holdsObjects else {
            throw ArborError(.invalidInput, """
                the store at \(location) is not empty (it holds \(holdsObjects ? "objects" : "no objects") and \(refs.count) refs): \
                the conformance suite fills and wipes its stores; give it a new or empty scratch store
                """)
        }
    }

    /// The adapter under test: a fresh store is the scratch store, opened again and wiped after each case.
    var adapter: AdapterUnderTest {
        if case .memory = location {
            // A memory: store lives as long as its handle: it cannot be reopened or shared.
            return AdapterUnderTest(name: location.redacted, capabilities: .largeObjects) { FreshBackend(backend: MemoryBackend()) }
        }
        let location = self.location
        let open: @Sendable () async throws -> any Backend = { try await openBackend(location, create: false) }
        return AdapterUnderTest(name: location.redacted, capabilities: .all) {
            FreshBackend(backend: try await open(), reopen: open, openSecondHandle: open, cleanup: { try await Self.wipe(try await open()) })
        }
    }

    /// Removes every ref and object of `backend`, then closes it.
    static func wipe(_ backend: any Backend) async throws {
        do {
            let (refs, objects) = try await contents(of: backend)
            for (name, hash) in refs { _ = try await backend.compareAndSwap(ref: name, expected: hash, new: nil) }
            for start in stride(from: 0, to: objects.count, by: 10_000) {
                try await backend.delete(Array(objects[start..<min(start + 10_000, objects.count)]))
            }
        } catch {
            try? await backend.close()
            throw error
        }
        try await backend.close()
    }

    private static func contents(of backend: any Backend) async throws -> (refs: [String: Hash], objects: [Hash]) {
        (try await backend.refs(), Array(try await backend.allHashes()))
    }
}
