import Arbor
import CLMDB

/// Objects kept as deltas (``Backend/restate(_:)``, store format version 2).
///
/// An object kept as a delta keeps its entry in `objects`, whose value is then an
/// ``ObjectDelta`` against another object, its base, followed by the base's 32-byte hash. One
/// more named database says which values are deltas:
///
/// - `deltas`: base hash and object hash (64 bytes) → one byte, the object's height plus one,
///   for each object kept as a delta against that base. A removal finds there the deltas it
///   must make whole first, in key order after the base's hash.
///
/// Every delta begins with ``ObjectDelta/marker`` and every Arbor object with its format marker,
/// so a read looks in `deltas` only for a value that begins with the delta marker (other bytes
/// may too: the contract does not look inside objects, so the entry decides). Whole objects read
/// as before. A delta of a few dozen bytes lies in a leaf page of `objects`, and the whole node's
/// overflow page is freed for LMDB to reuse.
///
/// An object's height is the most steps any delta takes to reach it: the largest byte among the
/// `deltas` entries under its hash (0 without any). An object is restated only if its height
/// stays below ``maximumDeltaChain``. Only a whole object can become a base, and a delta gains no
/// dependents, so a recorded height stays an upper bound.
///
/// Version 1 stores stay at version 1 (readable by Arbor before deltas) unless opened with
/// ``Configuration/restatesReplacedNodes``. A process that opened the store before another one
/// brought it to version 2 learns it at the first delta it reads, or at its next write (which
/// reads the version in its write transaction): it then opens `deltas` and begins again.
extension LMDBBackend {
    /// The most steps from a delta to the whole object its chain ends at: an old version's node
    /// reads through at most this many lookups.
    public static let maximumDeltaChain = 16

    /// ``Configuration/restatesReplacedNodes``, on a store that can be written. (``restate(_:)``
    /// keeps deltas in a version 2 store whatever this says.)
    public var acceptsRestatements: Bool {
        configuration.restatesReplacedNodes && environment.deltaIndex != nil && !isReadOnly
    }

    /// Stores `objects`, then keeps each of `restatements` as its delta, in one write
    /// transaction (one commit, one sync).
    ///
    /// - Complexity: O((*k* + *r*) log *n*) for *k* objects and *r* restatements.
    public func put(_ objects: [(hash: Hash, bytes: [UInt8])], restating restatements: [Restatement]) async throws {
        try checkOpen("put")
        guard !objects.isEmpty || !restatements.isEmpty else { return }
        let sorted = objects.sorted { $0.hash < $1.hash }
        try await writeKnowingDeltas("put") { txn, deltas in
            try self.insert(sorted, txn, deltas)
            if let deltas { try self.restate(restatements, txn, deltas) }
        }
    }

    /// Keeps each restated object as its delta, in one write transaction, where the object and
    /// its base are whole, the delta makes exactly the object's bytes (compared with the bytes
    /// stored) and the chain stays within ``maximumDeltaChain``; the others stay whole. A store
    /// at version 1 keeps everything whole.
    ///
    /// - Complexity: O(*k* log *n*) for *k* restatements, reading each object and its base.
    public func restate(_ restatements: [Restatement]) async throws {
        try checkOpen("restate")
        guard !restatements.isEmpty else { return }
        try await writeKnowingDeltas("restate") { txn, deltas in
            if let deltas { try self.restate(restatements, txn, deltas) }
        }
    }

    /// Runs `body` in a write transaction with the `deltas` database, or `nil` where the store
    /// has none (read in the transaction itself, so another process cannot have made it
    /// unseen); if another process made it since this one looked, opens it and runs `body`
    /// again in a new transaction.
    func writeKnowingDeltas<R: Sendable>(
        _ operation: String, _ body: @escaping @Sendable (LMDBTransaction, LMDBEnvironment.DeltaIndex?) throws -> R
    ) async throws -> R {
        var deltas = environment.deltaIndex
        while true {
            let known = deltas
            do {
                return try await environment.writeOffPool(operation, flushing: configuration.synchronous) { txn in
                    if known == nil, try !self.isVersionOne(txn) { throw DeltaIndexUnopened() }
                    return try body(txn, known)
                }
            } catch is DeltaIndexUnopened where deltas == nil {
                deltas = try openDeltaIndex(operation)
            }
        }
    }

    /// Runs `body` with the `deltas` database as this process knows it, reading in transactions
    /// it begins itself; if it meets a delta before this process opened it, opens it and runs
    /// `body` again.
    func readKnowingDeltas<R>(_ operation: String, _ body: (LMDBEnvironment.DeltaIndex?) throws -> R) throws -> R {
        let deltas = environment.deltaIndex
        do { return try body(deltas) } catch is DeltaIndexUnopened where deltas == nil {
            return try body(try openDeltaIndex(operation))
        }
    }

    private func openDeltaIndex(_ operation: String) throws -> LMDBEnvironment.DeltaIndex {
        if let deltas = try environment.loadDeltaIndex() { return deltas }
        let version = try formatVersionRecorded()
        guard version == String(Self.deltaFormatVersion) else {
            throw ArborError(.unsupportedFormat, "\(configuration.path) now has store format version \(version ?? "?") (another process changed it); this Arbor reads versions \(Self.formatVersion) and \(Self.deltaFormatVersion)", backend: engineName, operation: operation)
        }
        throw ArborError(.corruptObject, "\(configuration.path) says it is store format version \(Self.deltaFormatVersion) but lacks its deltas database", backend: engineName, operation: operation)
    }

    /// Throws ``ArborError/Code/unsupportedFormat`` unless the store, as `txn` sees it, is at a
    /// format version this Arbor reads (1, or 2 with deltas).
    static func checkReadableVersion(_ txn: LMDBTransaction, _ meta: MDB_dbi, path: String) throws {
        let version = try txn.get(meta, Array("version".utf8)).map { String(decoding: $0, as: UTF8.self) }
        guard version == String(formatVersion) || version == String(deltaFormatVersion) else {
            throw ArborError(.unsupportedFormat, "\(path) has store format version \(version ?? "?"); this Arbor reads versions \(formatVersion) and \(deltaFormatVersion)", backend: "lmdb", operation: "open")
        }
    }

    /// Whether the store, as `txn` sees it, is at format version 1: it holds no deltas.
    func isVersionOne(_ txn: LMDBTransaction) throws -> Bool {
        try txn.get(environment.meta, Array("version".utf8)) == Array(String(Self.formatVersion).utf8)
    }

    /// Inserts `objects` (in hash order) inside the caller's write transaction; one held as a
    /// delta is made whole again, as it is current again.
    func insert(_ objects: [(hash: Hash, bytes: [UInt8])], _ txn: LMDBTransaction, _ deltas: LMDBEnvironment.DeltaIndex?) throws {
        let database = environment.objects
        for object in objects {
            let key = Self.key(object.hash)
            var base: Hash? = nil
            try txn.insert(database, key, object.bytes) { existing in
                if let deltas { base = try Self.deltaBase(key, stored: existing, txn, deltas) }
            }
            guard let base, let deltas else { continue }
            try txn.put(database, key, object.bytes, overwrite: true)
            try txn.delete(deltas.dbi, Self.key(base) + key)
        }
    }

    /// ``restate(_:)`` inside the caller's write transaction.
    private func restate(_ restatements: [Restatement], _ txn: LMDBTransaction, _ deltas: LMDBEnvironment.DeltaIndex) throws {
        try Restatement.forEachKeepable(
            restatements, maximumChain: Self.maximumDeltaChain,
            wholeBytes: { try wholeBytes(Self.key($0), txn, deltas) }, height: { try height(Self.key($0), txn, deltas) }
        ) { restatement, height in
            let key = Self.key(restatement.hash)
            let baseKey = Self.key(restatement.base)
            try txn.put(environment.objects, key, restatement.delta + baseKey, overwrite: true)
            try txn.put(deltas.dbi, baseKey + key, [UInt8(height + 1)], overwrite: true)
        }
    }

    /// Makes whole every delta whose base is among `hashes`, which are about to be removed (and
    /// is not itself among them), and drops the entries of the removed ones, inside the caller's
    /// write transaction. A dependent whose chain is already damaged cannot be made whole and
    /// stays as it is, still naming its base (it did not read before either): a collection must
    /// not stop at it forever.
    func detachDependents(of hashes: [Hash], _ txn: LMDBTransaction, _ deltas: LMDBEnvironment.DeltaIndex) throws {
        let removed = Set(hashes)
        // Every chain is read before any removed object's own entry goes: a dependent may read
        // through several of them.
        var settled = [[UInt8]]()
        for hash in hashes {
            for (entry, _) in try txn.entries(deltas.dbi, withPrefix: Self.key(hash)) {
                let dependentKey = Array(entry[Hash.byteCount...])
                guard let dependent = Hash(bytes: dependentKey), !removed.contains(dependent) else { continue }
                var reader = DeltaReader(backend: self, txn: txn, deltas: deltas, operation: "delete")
                do {
                    // An entry whose object is gone names nothing: it goes too.
                    if let whole = try reader.bytes(dependent) {
                        try txn.put(environment.objects, dependentKey, whole, overwrite: true)
                    }
                    settled.append(entry)
                } catch let error as ArborError where error.code == .corruptObject {
                    // Damaged already: left as it is. (A chain longer than any the format can
                    // record is damage too: see DeltaReader.maximumSteps.)
                }
            }
        }
        for entry in settled { try txn.delete(deltas.dbi, entry) }
        for hash in hashes {
            let key = Self.key(hash)
            guard let stored = try txn.get(environment.objects, key),
                  let base = try stored.withUnsafeBytes({ try Self.deltaBase(key, stored: $0, txn, deltas) }) else { continue }
            try txn.delete(deltas.dbi, Self.key(base) + key)
        }
    }

    /// The base of the object at `key`, whose stored value is `stored`, if the store keeps it
    /// as a delta: a value that begins with the delta marker, ends with a hash, and has an entry
    /// in `deltas` under that hash.
    static func deltaBase(_ key: [UInt8], stored: UnsafeRawBufferPointer, _ txn: LMDBTransaction, _ deltas: LMDBEnvironment.DeltaIndex) throws -> Hash? {
        guard stored.first == ObjectDelta.marker, stored.count > Hash.byteCount else { return nil }
        let baseKey = [UInt8](stored[(stored.count - Hash.byteCount)...])
        guard try txn.get(deltas.dbi, baseKey + key) != nil else { return nil }
        return Hash(bytes: baseKey)
    }

    /// The stored bytes of the object at `key` if the store holds it whole.
    private func wholeBytes(_ key: [UInt8], _ txn: LMDBTransaction, _ deltas: LMDBEnvironment.DeltaIndex) throws -> [UInt8]? {
        guard let bytes = try txn.get(environment.objects, key) else { return nil }
        let base = try bytes.withUnsafeBytes { try Self.deltaBase(key, stored: $0, txn, deltas) }
        return base == nil ? bytes : nil
    }

    private func height(_ key: [UInt8], _ txn: LMDBTransaction, _ deltas: LMDBEnvironment.DeltaIndex) throws -> Int {
        try txn.entries(deltas.dbi, withPrefix: key).reduce(0) { max($0, Int($1.value.first ?? 0)) }
    }

    /// How many objects the store keeps as deltas: for tests and diagnostics.
    func deltaCount() throws -> Int {
        guard let deltas = try environment.loadDeltaIndex() else { return 0 }
        return try environment.read("count") { txn in try txn.scan(deltas.dbi, after: nil, limit: .max, values: false).count }
    }

    /// Whether the store keeps object `hash` as a delta: for tests and diagnostics.
    func isDelta(_ hash: Hash) throws -> Bool {
        guard let deltas = try environment.loadDeltaIndex() else { return false }
        let key = Self.key(hash)
        return try environment.read("get") { txn in
            guard let stored = try txn.get(environment.objects, key) else { return false }
            return try stored.withUnsafeBytes { try Self.deltaBase(key, stored: $0, txn, deltas) } != nil
        }
    }

    /// The format version the store records: for tests and diagnostics.
    func formatVersionRecorded() throws -> String? {
        try environment.read("meta") { txn in try txn.get(environment.meta, Array("version".utf8)).map { String(decoding: $0, as: UTF8.self) } }
    }
}

/// Thrown inside a transaction that met a delta, or a store at version 2, before this process
/// opened the `deltas` database; caught by ``LMDBBackend/readKnowingDeltas(_:_:)`` and
/// ``LMDBBackend/writeKnowingDeltas(_:_:)``, which open it and begin again.
struct DeltaIndexUnopened: Error {}

/// Reads objects whole inside one transaction, following delta chains, with the objects it has
/// made (bases shared by several deltas are made once).
struct DeltaReader {
    let backend: LMDBBackend
    let txn: LMDBTransaction
    let deltas: LMDBEnvironment.DeltaIndex?
    /// What errors name as the operation.
    let operation: String
    private var known = [Hash: [UInt8]]()
    private var knownBytes = 0

    /// The most steps a chain may take before it is damage (a loop): more than any height the
    /// format records (one byte), so a chain written under a larger bound than today's still reads.
    static let maximumSteps = Int(UInt8.max)
    /// The bytes of objects kept for later chains; past it, they are dropped (a batch of reads
    /// must not hold every base it made).
    static let knownByteLimit = 16 << 20

    init(backend: LMDBBackend, txn: LMDBTransaction, deltas: LMDBEnvironment.DeltaIndex?, operation: String) {
        self.backend = backend
        self.txn = txn
        self.deltas = deltas
        self.operation = operation
    }

    private mutating func remember(_ hash: Hash, _ bytes: [UInt8]) {
        if knownBytes + bytes.count > Self.knownByteLimit {
            known.removeAll(keepingCapacity: true)
            knownBytes = 0
        }
        known[hash] = bytes
        knownBytes += bytes.count
    }

    /// The base of the object at `key`, whose stored value is `value`, if it is a delta. Throws
    /// ``DeltaIndexUnopened`` for a value that may be a delta in a store at version 2 whose
    /// `deltas` database this process has not opened.
    /// (`key` is made only for a value that begins with the delta marker: point reads of whole
    /// objects allocate nothing more.)
    func base(ofKey key: @autoclosure () -> [UInt8], value: UnsafeRawBufferPointer) throws -> Hash? {
        guard value.first == ObjectDelta.marker else { return nil }
        guard let deltas else {
            if try backend.isVersionOne(txn) { return nil }
            throw DeltaIndexUnopened()
        }
        return try LMDBBackend.deltaBase(key(), stored: value, txn, deltas)
    }

    /// The object `hash` whole, or `nil` if the store does not hold it. Throws
    /// ``ArborError/Code/corruptObject`` for a chain that breaks (a base gone, a delta that is
    /// not one, a chain past any the store makes).
    mutating func bytes(_ hash: Hash) throws -> [UInt8]? {
        try bytes(hash, steps: 0)
    }

    /// Calls `body` with the value stored at `key` made whole (`key` is a hash's bytes).
    mutating func withWholeValue<R>(_ key: @autoclosure () -> [UInt8], stored value: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        guard let base = try base(ofKey: key(), value: value) else { return try body(value) }
        let whole = try made(Hash(bytes: key()), stored: [UInt8](value), base: base, steps: 0)
        return try whole.withUnsafeBytes(body)
    }

    private mutating func bytes(_ hash: Hash, steps: Int) throws -> [UInt8]? {
        if let bytes = known[hash] { return bytes }
        let stored: (value: [UInt8], base: Hash?)? = try hash.withUnsafeBytes { keyBuffer in
            try txn.withValue(backend.environment.objects, keyBuffer) { value in
                guard let value else { return nil }
                return ([UInt8](value), try base(ofKey: LMDBBackend.key(hash), value: value))
            }
        }
        guard let stored else { return nil }
        guard let base = stored.base else {
            remember(hash, stored.value)
            return stored.value
        }
        let bytes = try made(hash, stored: stored.value, base: base, steps: steps)
        remember(hash, bytes)
        return bytes
    }

    /// The object a stored delta (the delta, then its base's hash) makes.
    private mutating func made(_ hash: Hash?, stored: [UInt8], base: Hash, steps: Int) throws -> [UInt8] {
        let name = hash.map { "\($0)" } ?? "an object"
        let path = backend.configuration.path
        guard steps < Self.maximumSteps else {
            throw ArborError(.corruptObject, "\(path): object \(name) is a delta whose chain of bases runs past \(Self.maximumSteps) steps", backend: backend.engineName, operation: operation)
        }
        guard let baseBytes = try bytes(base, steps: steps + 1) else {
            throw ArborError(.corruptObject, "\(path): object \(name) is a delta against \(base), which the store does not hold", backend: backend.engineName, operation: operation)
        }
        do { return try ObjectDelta.apply(Array(stored.dropLast(Hash.byteCount)), to: baseBytes) } catch let error as ArborError {
            throw ArborError(.corruptObject, "\(path): object \(name) is a damaged delta: \(error.message)", backend: backend.engineName, operation: operation, underlying: error)
        }
    }
}
