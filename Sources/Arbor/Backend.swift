/// The storage contract every adapter implements: immutable objects keyed by hash, and a
/// handful of refs changed only by compare-and-swap. Everything else is built by the core.
///
/// Rules every implementation keeps:
/// - `put` is idempotent: putting an object that exists is a no-op.
/// - `put` stores its objects durably before it returns, and never an object before those given
///   ahead of it in the same call: the core gives what an object names before the object, and an
///   exchange that finds an object present takes all it names to be there. One transaction per
///   call, or writing in the order given, keeps this; a `put` that fails or is cut short may
///   leave a prefix of its objects stored, never a later object without an earlier one.
/// - `put` takes calls of any size: a commit puts all its objects in one call, whatever
///   ``writeBatchLimit`` says (that is a hint for transfers).
/// - `get` returns bytes exactly as they were put; objects it does not have are left out of the result.
/// - `compareAndSwap` is atomic, also across processes that share the store: a crash leaves the
///   ref at its old or its new value.
/// - Failures are thrown as ``ArborError``, naming the backend and the operation. Never a crash.
/// - A call made in a cancelled task may throw `CancellationError` instead of running (PostgreSQL
///   cancels the statement): the core runs what must finish after a cancellation, such as a
///   collection's last marking, in a task of its own.
public protocol Backend: Sendable {
    /// A short name of the engine, such as `"memory"` or `"json"`, used in errors and reports.
    var engineName: String { get }

    /// The objects among `hashes` that the store holds; missing ones are absent from the result.
    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]]

    /// The subset of `hashes` that the store holds.
    func contains(_ hashes: [Hash]) async throws -> Set<Hash>

    /// The size in bytes of each object among `hashes` that the store holds (missing ones are
    /// left out), found without reading the objects' bytes; `nil` when the engine cannot tell
    /// so cheaply (the default). Exchanges, migrations and verification read large records in
    /// requests sized by it, each holding about 16 MB whatever the records' sizes; without it,
    /// requests grow step by step from the sizes read so far (``BlobRequestSizer``), and a run of
    /// large records after many smaller ones can be read some hundreds at once. Sizes only size
    /// requests: a wrapper that changes what ``get(_:)`` returns should say `nil` or its own.
    ///
    /// - Complexity: one request (or one per few thousand hashes).
    func objectSizes(_ hashes: [Hash]) async throws -> [Hash: Int]?

    /// The objects among `hashes` that the store holds, and with them, at the backend's
    /// choice, ancestors of those that are commits (following parents), nearest generations
    /// first, up to `limit` objects in all.
    ///
    /// A history walk learns each generation's hashes only from the one before, so through
    /// ``get(_:)`` it costs a request per generation: over a network, a round trip per version
    /// of a linear history. A backend that can follow parents itself (PostgreSQL, with a
    /// recursive query) implements this to answer many generations in one request. The default
    /// returns `get(hashes)`. The caller checks every object against its hash, as for `get`.
    ///
    /// - Complexity: one request.
    func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]]

    /// Stores objects. The caller guarantees that each hash is the SHA-256 of its bytes.
    /// Existing objects are left as they are.
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws

    /// Every object hash in the store, in batches of at most `batchSize`, in no particular order.
    func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws

    /// Every object in the store with its bytes, in batches of at most `batchSize`, in no
    /// particular order; `body` may use the backend.
    ///
    /// What reads a whole store (a migration's verification) calls this rather than
    /// ``enumerateHashes(batchSize:_:)`` and ``get(_:)``: an engine can read a batch of objects
    /// in the order it keeps them, in one request. The default does those two calls (and asks
    /// ``objectSizes(_:)`` to size its reads).
    /// The caller checks every object against its hash, as for `get`.
    ///
    /// An engine may end a batch before `batchSize` objects to bound the bytes it holds (the
    /// SQLite, LMDB and PostgreSQL adapters, and the default, end one once it reaches
    /// ``enumerationBatchBytes``): a short batch is not the last.
    ///
    /// - Complexity: O(*n*) for *n* objects, in O(`batchSize`) memory.
    func enumerateObjects(batchSize: Int, _ body: ([(hash: Hash, bytes: [UInt8])]) async throws -> Void) async throws

    /// Every object's hash and size in bytes, in batches of at most `batchSize`, in no
    /// particular order, each object checked against its hash by the engine itself, where it is
    /// kept, without sending its bytes; throws ``ArborError/Code/corruptObject`` naming an object
    /// whose bytes are not the SHA-256 of its hash. Returns `false`, having called nothing, when
    /// the engine cannot compute SHA-256 (the default); then the caller reads the objects.
    ///
    /// A migration's verification into a server (PostgreSQL's `sha256()`) uses it: the bytes
    /// need not travel back to be hashed.
    ///
    /// - Complexity: O(*n*) for *n* objects, in O(`batchSize`) memory.
    func enumerateHashesCheckedByEngine(batchSize: Int, _ body: ([(hash: Hash, size: Int)]) async throws -> Void) async throws -> Bool

    /// Lets the backend keep objects as deltas against others (``ObjectDelta``), to save space:
    /// a commit restates the index nodes it replaced against their replacements, in its write
    /// (``put(_:restating:)``). Optional, and a hint: a backend may keep any of them whole (the
    /// default keeps all). One it does keep as a delta reads as it did, by ``get(_:)`` and every
    /// other call, byte for byte: the backend checks that the delta makes the object's bytes
    /// (those it holds, or their SHA-256) before it drops them, and ignores a restatement of an object or against a
    /// base it does not hold whole.
    ///
    /// - Complexity: O(*k* log *n*) for *k* restatements, plus the bytes of their bases read.
    func restate(_ restatements: [Restatement]) async throws

    /// ``put(_:)``, then ``restate(_:)``: a backend that can does both in one transaction, so
    /// that a commit's restatements share its write (the default makes the two calls). The
    /// restatements' bases are among `objects` or already stored.
    ///
    /// - Complexity: O((*k* + *r*) log *n*) for *k* objects and *r* restatements.
    func put(_ objects: [(hash: Hash, bytes: [UInt8])], restating restatements: [Restatement]) async throws

    /// Whether ``restate(_:)`` may keep objects as deltas, so that a store works them out at
    /// all. `false` by default.
    var acceptsRestatements: Bool { get }

    /// Stores objects over whatever the store holds under their hashes: for repairing damage
    /// only (``Store/repair(from:progress:)``), where a stored object's bytes no longer match its
    /// hash and ``put(_:)`` would leave them as they are. The caller has checked each object
    /// against its hash. An object kept as a delta is kept whole; objects kept as deltas against
    /// one replaced read through its new bytes. Like ``put(_:)``, never stores an object before
    /// those given ahead of it in the same call.
    ///
    /// The default removes the objects (``delete(_:)``), then puts them: a crash between the two
    /// leaves them missing, which a repair run again puts back. The adapters of this package
    /// replace each in place: SQLite, LMDB and PostgreSQL in one transaction per call, the JSON
    /// files one after the other in order (each renamed over the old), memory under its lock.
    ///
    /// - Complexity: O(*k* log *n*) for *k* objects in a store of *n*.
    func replace(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws

    /// Removes objects (for garbage collection only). Unknown hashes are ignored. Never removes
    /// an object before those given before it (all at once, as a transaction does, is fine):
    /// garbage collection gives objects that name others first, so that a collection stopped
    /// midway leaves no object whose children are gone.
    func delete(_ hashes: [Hash]) async throws

    /// The current value of every ref.
    func refs() async throws -> [String: Hash]

    /// Sets ref `name` to `new` (or removes it when `new` is `nil`) if it currently is `expected`
    /// (`nil`: the ref does not exist). Returns whether the swap happened.
    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool

    /// Releases the engine's resources. Further calls throw ``ArborError/Code/closed``.
    func close() async throws

    /// How many objects, and about how many bytes of them, an exchange or a migration puts
    /// into this backend in one ``put(_:)`` (one transaction on most engines) unless its caller
    /// names a count. A hint; the default is ``WriteBatchLimit/standard``.
    var writeBatchLimit: WriteBatchLimit { get }
}

/// How much an exchange or a migration writes to a backend in one ``Backend/put(_:)``.
///
/// A transaction has a fixed cost (a sync to disk, a round trip) that larger batches share out;
/// a transfer holds up to two batches in memory (one being written, one being filled).
public struct WriteBatchLimit: Sendable, Hashable {
    /// The most objects in one call.
    public var objects: Int
    /// The bytes of objects in one call: a batch ends with the object that reaches it.
    public var bytes: Int

    public init(objects: Int, bytes: Int) {
        self.objects = objects
        self.bytes = bytes
    }

    /// 4,000 objects or 16 MB: batches of 4,000 migrated a million records 15–30% faster than
    /// batches of 2,000 on SQLite and LMDB, for about 35 MB more memory.
    public static let standard = WriteBatchLimit(objects: 4_000, bytes: 16 << 20)
}

/// The bytes at which an adapter may end a batch of ``Backend/enumerateObjects(batchSize:_:)``
/// early: records of up to 256 MiB make a batch of a thousand objects unbounded otherwise.
public let enumerationBatchBytes = 16 << 20

extension Backend {
    /// ``WriteBatchLimit/standard``.
    public var writeBatchLimit: WriteBatchLimit { .standard }

    /// Returns `get(hashes)`: no ancestors.
    public func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]] {
        try await get(hashes)
    }

    /// Returns `nil`: sizes are not known before reading.
    public func objectSizes(_ hashes: [Hash]) async throws -> [Hash: Int]? { nil }

    /// ``delete(_:)``, then ``put(_:)``.
    public func replace(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        guard !objects.isEmpty else { return }
        try await delete(objects.map(\.hash))
        try await put(objects)
    }

    /// Does nothing: every object stays whole.
    public func restate(_ restatements: [Restatement]) async throws {}

    /// `false`.
    public var acceptsRestatements: Bool { false }

    /// ``put(_:)``, then ``restate(_:)`` unless there is nothing to restate.
    public func put(_ objects: [(hash: Hash, bytes: [UInt8])], restating restatements: [Restatement]) async throws {
        try await put(objects)
        if !restatements.isEmpty { try await restate(restatements) }
    }

    /// Returns `false`: the engine cannot hash.
    public func enumerateHashesCheckedByEngine(batchSize: Int, _ body: ([(hash: Hash, size: Int)]) async throws -> Void) async throws -> Bool {
        false
    }

    /// Each batch of ``enumerateHashes(batchSize:_:)``, read with ``get(_:)`` in requests sized
    /// by ``objectSizes(_:)``, or where it says nothing by the objects read so far
    /// (``BlobRequestSizer``), and handed on once they hold
    /// ``enumerationBatchBytes``: a batch of a thousand large records would otherwise be read
    /// whole. An object deleted in between is left out.
    public func enumerateObjects(batchSize: Int, _ body: ([(hash: Hash, bytes: [UInt8])]) async throws -> Void) async throws {
        var requests = BlobRequestSizer(maximumCount: batchSize)
        try await enumerateHashes(batchSize: batchSize) { hashes in
            var batch = [(hash: Hash, bytes: [UInt8])]()
            var size = 0
            try await requests.inRequests(hashes, sizes: try await objectSizes(hashes), fetch: get) { request, objects in
                // A request that would take the batch past the budget starts the next one.
                let requestSize = objects.values.reduce(0) { $0 + $1.count }
                if !batch.isEmpty && size + requestSize > enumerationBatchBytes {
                    try await body(batch)
                    (batch, size) = ([], 0)
                }
                for hash in request {
                    guard let bytes = objects[hash] else { continue }
                    batch.append((hash, bytes))
                }
                size += requestSize
            }
            if !batch.isEmpty { try await body(batch) }
        }
    }

    /// The current value of one ref, or `nil` if it does not exist.
    public func ref(_ name: String) async throws -> Hash? {
        try await refs()[name]
    }

    /// Fetches one object, or `nil` if it is missing.
    public func get(_ hash: Hash) async throws -> [UInt8]? {
        try await get([hash])[hash]
    }

    /// All object hashes in the store.
    ///
    /// - Complexity: O(*n*) memory; prefer ``enumerateHashes(batchSize:_:)`` on large stores.
    public func allHashes() async throws -> Set<Hash> {
        var result = Set<Hash>()
        try await enumerateHashes(batchSize: 10_000) { result.formUnion($0) }
        return result
    }
}

/// Ref names are ASCII paths of letters, digits and `._-/` segments, so that every adapter
/// can store them as they are (file names, keys, SQL text parameters).
public enum RefName {
    /// The ref holding the set of heads.
    public static let heads = "heads"

    /// The prefix of the refs by which exchanges in flight claim their target, so that a
    /// collection removes nothing meanwhile. Their values name no object.
    public static let transferPrefix = "transfers/"

    /// The prefix of the refs by which a collection marks a batch of its sweep in flight, so
    /// that a reader that finds an object missing meanwhile waits for the batch's write-back
    /// before it reads once more. Their values name no object.
    public static let sweepPrefix = "sweeps/"

    /// Throws ``ArborError/Code/invalidInput`` unless `name` is a valid ref name.
    public static func validate(_ name: String, backend: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/".utf8)
        let segments = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !name.isEmpty, name.utf8.count <= 200, name.utf8.allSatisfy(allowed.contains),
            segments.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." })
        else {
            throw ArborError(.invalidInput, "invalid ref name \(String(reflecting: String(name.prefix(80))))", backend: backend)
        }
    }
}
