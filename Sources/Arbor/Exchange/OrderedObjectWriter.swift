/// Writes objects to a backend in batches, strictly in the order they are added, with one batch
/// in flight while the caller goes on reading.
///
/// Callers add every object after the objects it names (children first). Because batches land
/// one after another, an interrupted transfer leaves the target holding only objects whose
/// children it also holds, which is what lets the next transfer skip any subtree it finds.
/// Used from one task at a time.
final class OrderedObjectWriter {
    let backend: any Backend
    private let maxObjects: Int
    private let maxBytes: Int
    private var pending: [(hash: Hash, bytes: [UInt8])] = []
    private var pendingBytes = 0
    /// Objects added but not yet known to be stored: the pending batch and the one in flight.
    private var queued = Set<Hash>()
    /// The batch being written: its seconds, and what its objects name outside it when recorded.
    private var inFlight: Task<(seconds: Double, named: Set<Hash>), any Error>?
    private var inFlightHashes: [Hash] = []

    /// The objects that have landed, when a transfer wants to know (``LandedObjects``).
    var landed: LandedObjects?
    /// What a migration into a new store records of the objects that land, to prove the copy
    /// afterwards (``CopyRecord``).
    var record: CopyRecord?

    private(set) var objectsWritten = 0
    private(set) var bytesWritten = 0
    /// Seconds the backend spent storing the batches that have landed.
    private(set) var writeSeconds: Double = 0

    /// Whether batches go through ``Backend/replace(_:)``, over what the store holds (a
    /// repair), rather than ``Backend/put(_:)``.
    private let replacing: Bool

    init(backend: any Backend, maxObjects: Int, maxBytes: Int, replacing: Bool = false) {
        self.backend = backend
        self.maxObjects = maxObjects
        self.maxBytes = maxBytes
        self.replacing = replacing
    }

    /// Whether `hash` was added and may not be stored yet.
    func isQueued(_ hash: Hash) -> Bool { queued.contains(hash) }

    /// Adds an object after everything added before; an object already added is ignored.
    func add(_ hash: Hash, _ bytes: [UInt8]) async throws {
        guard queued.insert(hash).inserted else { return }
        pending.append((hash, bytes))
        pendingBytes += bytes.count
        if pending.count >= maxObjects || pendingBytes >= maxBytes { try await flush() }
    }

    /// Starts writing the pending batch once the batch in flight has landed.
    func flush() async throws {
        try await awaitInFlight()
        guard !pending.isEmpty else { return }
        let batch = pending
        let backend = backend
        inFlightHashes = batch.map(\.hash)
        objectsWritten += batch.count
        bytesWritten += pendingBytes
        pending = []
        pendingBytes = 0
        let recording = record != nil
        let replacing = replacing
        inFlight = Task {
            // Parsed while the backend stores the batch.
            async let named = recording ? CopyRecord.names(of: batch) : []
            let started = ContinuousClock.now
            if replacing { try await backend.replace(batch) } else { try await backend.put(batch) }
            let seconds = started.secondsUntilNow
            return (seconds, try await named)
        }
    }

    /// Writes everything added and waits until it has landed.
    func finish() async throws {
        try await flush()
        try await awaitInFlight()
    }

    /// Waits for a write in flight; on failure nothing more is written.
    func cancel() async {
        if let inFlight { _ = try? await inFlight.value }
        inFlight = nil
    }

    private func awaitInFlight() async throws {
        guard let task = inFlight else { return }
        inFlight = nil
        let (seconds, named) = try await task.value
        writeSeconds += seconds
        if landed != nil { for hash in inFlightHashes { landed?.insert(hash) } }
        try await record?.add(inFlightHashes, naming: named)
        queued.subtract(inFlightHashes)
        inFlightHashes = []
    }
}
