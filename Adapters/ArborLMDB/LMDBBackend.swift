import Arbor
import Dispatch
import Synchronization

/// A store in an LMDB environment (a folder holding `data.mdb` and `lock.mdb`), shareable by
/// several processes.
///
/// Named databases: `meta` (`format` = `arbor-lmdb-store`, `version` = `1`, or `2` where
/// objects may be kept as deltas), `objects` (32-byte hash → bytes) and `refs` (name → 32-byte
/// hash); at version 2 also `deltas` (see `LMDBBackend+Deltas.swift`).
///
/// Every batch call is one transaction: a batch `put` is one write transaction (all or
/// nothing), a batch `get` one read snapshot. A ref changes only by compare-and-swap inside one
/// write transaction; LMDB admits one writer at a time across all processes (its lock file), so
/// the read of the old value and the write of the new one cannot interleave with another
/// writer's, and a crash leaves the old or the new value.
///
/// The memory map starts at ``Configuration/initialMapSize`` and doubles whenever a write finds
/// it full (`MDB_MAP_FULL`: the transaction is aborted, the map grown and the batch written
/// again), up to ``Configuration/maximumMapSize``. A process that finds the map grown by another
/// (`MDB_MAP_RESIZED`) adopts the new size and retries.
///
/// Reads run on the calling thread (they take microseconds and never wait for a writer); writes
/// run on a serial queue of the environment, off the Swift concurrency pool, since a writer may
/// wait for another process's write transaction and ends with an fsync. Backends of one process
/// that open the same folder share one environment, as LMDB requires.
public final class LMDBBackend: Backend, InPlaceReading {
    /// Where the store lives and how its memory map grows.
    public struct Configuration: Sendable {
        /// The environment's folder.
        public var path: String
        /// `true` (default): every commit is flushed to disk before it returns. `false`
        /// (`MDB_NOSYNC`): still safe against a crash of the process; after a power loss or a
        /// crash of the system, the last commits may be lost, and unless the file system keeps
        /// the order of writes (LMDB's documentation says so), the store may be damaged.
        /// Backends of one process share the environment of a folder, opened as the first asked;
        /// a backend that asks for flushes gets them on one opened without (`mdb_env_sync`).
        public var synchronous: Bool
        /// The size of the memory map when the environment is opened, in bytes. It grows as needed.
        public var initialMapSize: Int
        /// The largest the map may grow to, in bytes. Where another backend of this process has
        /// the folder open, its environment's maximum holds.
        public var maximumMapSize: Int
        /// `true`: commits keep the index nodes they replace as deltas against their
        /// replacements (``Backend/restate(_:)``), which makes a long history of random-id
        /// commits several times smaller and commits slower. A store becomes format version 2
        /// when opened so (Arbor before deltas cannot open it) and then keeps its deltas
        /// whatever later backends say; every process that writes it must be an Arbor that
        /// knows deltas. Default `false`: a store is created, and kept, at version 1.
        public var restatesReplacedNodes: Bool

        public init(
            path: String, synchronous: Bool = true, initialMapSize: Int = 64 << 20, maximumMapSize: Int = 1 << 40,
            restatesReplacedNodes: Bool = false
        ) {
            self.path = path
            self.synchronous = synchronous
            self.initialMapSize = initialMapSize
            self.maximumMapSize = maximumMapSize
            self.restatesReplacedNodes = restatesReplacedNodes
        }
    }

    static let formatName = "arbor-lmdb-store"
    /// The format of stores that keep every object whole.
    static let formatVersion = 1
    /// The format of stores that may keep objects as deltas (``restatesReplacedNodes``).
    static let deltaFormatVersion = 2

    /// The environments open in this process, by folder identity, with how many backends use each.
    private static let openEnvironments = Mutex<[LMDBEnvironment.FolderID: (environment: LMDBEnvironment, users: Int)]>([:])

    public let engineName = "lmdb"
    public let configuration: Configuration
    let environment: LMDBEnvironment
    private let folder: LMDBEnvironment.FolderID
    private let isClosed = Atomic<Bool>(false)

    private init(configuration: Configuration, environment: LMDBEnvironment, folder: LMDBEnvironment.FolderID) {
        self.configuration = configuration
        self.environment = environment
        self.folder = folder
    }

    deinit { release() }

    /// Whether the store was opened on a read-only file system (a snapshot, a backup mounted
    /// read-only): it can be read, and every write throws ``ArborError/Code/permissionDenied``.
    public var isReadOnly: Bool { environment.isReadOnly }

    /// The current size of the memory map, in bytes.
    ///
    /// - Complexity: O(1).
    public var mapSize: Int { environment.mapSize }

    /// Creates a new, empty store: in a new folder (its parent must exist) or an empty one.
    /// Throws ``ArborError/Code/alreadyExists`` if the folder holds anything (it is left
    /// untouched), ``ArborError/Code/notFound`` if the parent folder does not exist and
    /// ``ArborError/Code/permissionDenied`` if it cannot be written. Nothing is left behind on failure.
    ///
    /// - Complexity: O(1).
    public static func create(_ configuration: Configuration) throws -> LMDBBackend {
        let path = configuration.path
        var madeFolder = false
        var adopted = false
        switch LMDBEnvironment.kind(of: path) {
        case .other:
            throw ArborError(.alreadyExists, "\(path) exists and is not a folder; it was left untouched", backend: "lmdb", operation: "create")
        case .folder:
            // What a create killed before its first commit left is taken over: it holds nothing,
            // and running the command again must finish the job.
            if LMDBEnvironment.holdsUnfinishedCreate(path) {
                adopted = true
                break
            }
            if LMDBEnvironment.fileExists(path + "/data.mdb") {
                throw ArborError(.alreadyExists, "a store (or another LMDB environment) already exists at \(path); it was left untouched", backend: "lmdb", operation: "create")
            }
            guard LMDBEnvironment.isEmptyFolder(path) else {
                throw ArborError(.alreadyExists, "\(path) exists and is not an empty folder; it was left untouched", backend: "lmdb", operation: "create")
            }
        case .missing:
            try LMDBEnvironment.makeFolder(path)
            madeFolder = true
        }
        guard case .folder(let folder) = LMDBEnvironment.kind(of: path) else {
            throw ArborError(.notFound, "\(path) disappeared while the store was being created", backend: "lmdb", operation: "create")
        }
        let backend = try openEnvironments.withLock { environments in
            // A creator that raced this one here and won has its environment open: opening the
            // lock file again would reset LMDB's reader table under it.
            if let (environment, _) = environments[folder], environment.hasDataFile(inFolder: path) {
                throw ArborError(.alreadyExists, "a store already exists at \(path) (open in this process); it was left untouched", backend: "lmdb", operation: "create")
            }
            do {
                let environment = try LMDBEnvironment.open(
                    path: path, create: true, mapSize: configuration.initialMapSize,
                    maximumMapSize: configuration.maximumMapSize, synchronous: configuration.synchronous
                ) { txn, meta in
                    // Inside the creating write transaction: a racing creator that got here first wins.
                    if try txn.get(meta, Array("format".utf8)) != nil {
                        throw ArborError(.alreadyExists, "a store already exists at \(path); it was left untouched", backend: "lmdb", operation: "create")
                    }
                    try txn.put(meta, Array("format".utf8), Array(formatName.utf8), overwrite: true)
                    let version = configuration.restatesReplacedNodes ? deltaFormatVersion : formatVersion
                    try txn.put(meta, Array("version".utf8), Array(String(version).utf8), overwrite: true)
                    if configuration.restatesReplacedNodes {
                        _ = try txn.openDatabase("deltas", create: true)
                    }
                }
                environments[folder] = (environment, 1)
                return LMDBBackend(configuration: configuration, environment: environment, folder: folder)
            } catch let error as ArborError {
                // Unless a racing creator (another process) has the environment open: its files.
                if error.code != .alreadyExists && !adopted {
                    LMDBEnvironment.removeUnused(["data.mdb", "lock.mdb"], in: path, folder: madeFolder)
                }
                throw error
            }
        }
        // Made in the creating transaction; the handle is opened here, outside the lock that
        // a backend failing now takes to give its share back.
        if configuration.restatesReplacedNodes { _ = try backend.environment.loadDeltaIndex() }
        return backend
    }

    /// Opens an existing store. Throws ``ArborError/Code/notFound`` if the folder or its
    /// `data.mdb` does not exist, and ``ArborError/Code/unsupportedFormat`` if it is not an LMDB
    /// environment, is the environment of another program, or was written by a newer version
    /// of Arbor. A store on a read-only file system opens for reading (``isReadOnly``).
    ///
    /// - Complexity: O(1).
    public static func open(_ configuration: Configuration) throws -> LMDBBackend {
        let path = configuration.path
        let folder: LMDBEnvironment.FolderID
        switch LMDBEnvironment.kind(of: path) {
        case .missing:
            throw ArborError(.notFound, "no store at \(path): the folder does not exist", backend: "lmdb", operation: "open")
        case .other:
            throw ArborError(.unsupportedFormat, "\(path) is not a folder, so not an Arbor LMDB store", backend: "lmdb", operation: "open")
        case .folder(let id):
            folder = id
        }
        if let problem = LMDBEnvironment.dataFileProblem(in: path) { throw problem }
        if LMDBEnvironment.holdsUnfinishedCreate(path) {
            // `create`, or a migration into it, takes it over.
            throw ArborError(.notFound, "no store at \(path): the LMDB environment is empty (a create that was interrupted?)", backend: "lmdb", operation: "open")
        }
        // LMDB would take an empty data.mdb for a new environment and write one there.
        guard LMDBEnvironment.fileLength(path + "/data.mdb") != 0 else {
            throw ArborError(.corruptObject, "\(path)/data.mdb is empty (0 bytes): the file was cut short, or never written; it was left untouched", backend: "lmdb", operation: "open")
        }
        let backend = try openEnvironments.withLock { environments in
            // The same folder (also by another path, or moved) shares the open environment: a
            // second `mdb_env_open` of it in one process would reset its lock file. An entry
            // whose folder is gone and whose inode number was reused by this one holds another
            // data file: stale, not shared.
            if let (environment, users) = environments[folder], environment.hasDataFile(inFolder: path) {
                environments[folder] = (environment, users + 1)
                return LMDBBackend(configuration: configuration, environment: environment, folder: folder)
            }
            do {
                let environment = try LMDBEnvironment.open(
                    path: path, create: false, mapSize: configuration.initialMapSize,
                    maximumMapSize: configuration.maximumMapSize, synchronous: configuration.synchronous,
                    readOnly: LMDBEnvironment.isOnReadOnlyFileSystem(path)
                ) { txn, meta in
                    let format = try txn.get(meta, Array("format".utf8)).map { String(decoding: $0, as: UTF8.self) }
                    guard format == formatName else {
                        throw ArborError(.unsupportedFormat, "\(path) is an LMDB environment, but not an Arbor store (its format is \(String(reflecting: format ?? "missing")))", backend: "lmdb", operation: "open")
                    }
                    try checkReadableVersion(txn, meta, path: path)
                }
                environments[folder] = (environment, 1)
                return LMDBBackend(configuration: configuration, environment: environment, folder: folder)
            } catch var error as ArborError {
                if error.code == .unsupportedFormat && !error.message.contains(path) {
                    error.message = "\(path) is not an Arbor LMDB store: \(error.message)"
                }
                throw error
            }
        }
        // A backend that throws here gives its share of the environment back as it goes.
        if try backend.environment.loadDeltaIndex() != nil {
            // Version 2 already: nothing to write.
        } else if configuration.restatesReplacedNodes && !backend.isReadOnly {
            _ = try backend.environment.createDeltaIndex { txn in
                // Read again in the upgrading transaction: another process may have changed it.
                try checkReadableVersion(txn, backend.environment.meta, path: path)
                try txn.put(backend.environment.meta, Array("version".utf8), Array(String(deltaFormatVersion).utf8), overwrite: true)
            }
        } else if try backend.formatVersionRecorded() == String(deltaFormatVersion) {
            throw ArborError(.corruptObject, "\(path) says it is store format version \(deltaFormatVersion) but lacks its deltas database; it was left untouched", backend: "lmdb", operation: "open")
        }
        return backend
    }

    /// Gives this backend's share of the environment back; the last user closes it.
    private func release() {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let folder = folder
        let environment = environment
        LMDBBackend.openEnvironments.withLock { environments in
            guard let entry = environments[folder], entry.environment === environment else { return }
            if entry.users > 1 {
                environments[folder] = (environment, entry.users - 1)
            } else {
                environments[folder] = nil
                environment.close()
            }
        }
    }

    func checkOpen(_ operation: String) throws {
        if isClosed.load(ordering: .acquiring) {
            throw ArborError(.closed, "the store is closed", backend: engineName, operation: operation)
        }
    }

    static func key(_ hash: Hash) -> [UInt8] {
        var key = [UInt8]()
        key.reserveCapacity(Hash.byteCount)
        hash.append(to: &key)
        return key
    }

    private func hash(_ bytes: [UInt8], _ what: String, _ operation: String) throws -> Hash {
        guard let hash = Hash(bytes: bytes) else {
            throw ArborError(.corruptObject, "\(configuration.path): \(what) holds \(bytes.count) bytes, not a hash", backend: engineName, operation: operation)
        }
        return hash
    }

    /// 16,000 objects or 16 MB per transaction for transfers. With objects of a few kilobytes
    /// the 16 MB end a batch first: about 6,000 objects of the benchmark's 2.8 KB, against the
    /// standard 4,000. Each LMDB commit syncs the file twice and copies every B-tree page the
    /// batch touches, and a migration writes children first, in no key order, so a batch touches
    /// most leaf pages of the objects tree. In the transfer benchmark (1,000,000 records, SQLite → LMDB, same
    /// session) the copy ran at 131,000–138,000 records/s against 128,000 (and once 55,000) with
    /// the standard batches, for 152–156 MB of peak heap instead of 116–122 MB. 24 MB batches
    /// were as fast again and took 213 MB: LMDB keeps a transaction's dirty pages on the heap,
    /// and more of them as the store grows, so the margin under 256 MB went to safety.
    public var writeBatchLimit: WriteBatchLimit { WriteBatchLimit(objects: 16_000, bytes: 16 << 20) }

    // MARK: Objects

    /// The objects among `hashes` that the store holds, read in one read transaction.
    ///
    /// - Complexity: O(*k* log *n*) for *k* hashes in a store of *n* objects.
    public func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try checkOpen("get")
        return try readKnowingDeltas("get") { deltas in
            try environment.read("get") { txn in
                var reader = DeltaReader(backend: self, txn: txn, deltas: deltas, operation: "get")
                var result = [Hash: [UInt8]](minimumCapacity: hashes.count)
                for hash in hashes where result[hash] == nil {
                    if let bytes = try reader.bytes(hash) { result[hash] = bytes }
                }
                return result
            }
        }
    }

    /// The objects among `hashes` and, up to `limit` objects in all, their ancestors, read in one
    /// transaction (``Ancestry``): a walk of a long history begins a transaction per request
    /// instead of per version.
    ///
    /// - Complexity: O(max(`limit`, *k*) log *n*) for *k* hashes in a store of *n* objects.
    public func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]] {
        try checkOpen("get")
        return try readKnowingDeltas("get") { deltas in
            try environment.read("get") { txn in
                var reader = DeltaReader(backend: self, txn: txn, deltas: deltas, operation: "get")
                return try Ancestry.collect(hashes, limit: limit) { hash in try reader.bytes(hash) }
            }
        }
    }

    /// Calls `body` with object `hash` where LMDB maps it, in a read transaction of its own
    /// (``InPlaceReading``): no copy.
    ///
    /// - Complexity: O(log *n*) in a store of *n* objects.
    public func withObjectBytes<R>(_ hash: Hash, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        try checkOpen("get")
        let objects = environment.objects
        return try readKnowingDeltas("get") { deltas in
            try environment.read("get") { txn in
                var reader = DeltaReader(backend: self, txn: txn, deltas: deltas, operation: "get")
                return try hash.withUnsafeBytes { keyBuffer in
                    try txn.withValue(objects, keyBuffer) { value in
                        // A delta is made whole before `body` runs, so a retry never runs it twice.
                        guard let value else { return try body(nil) }
                        return try reader.withWholeValue(Self.key(hash), stored: value, body)
                    }
                }
            }
        }
    }

    /// The subset of `hashes` that the store holds, found where LMDB maps them (no copy).
    ///
    /// - Complexity: O(*k* log *n*) for *k* hashes in a store of *n* objects.
    public func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        try checkOpen("contains")
        let objects = environment.objects
        return try environment.read("contains") { txn in
            var result = Set<Hash>(minimumCapacity: hashes.count)
            for hash in hashes where !result.contains(hash) {
                if try hash.withUnsafeBytes({ key in try txn.withValue(objects, key) { $0 != nil } }) { result.insert(hash) }
            }
            return result
        }
    }

    /// The sizes of the objects among `hashes` that the store holds, read in one read
    /// transaction where LMDB maps them (no copy); a delta tells the size it makes in its
    /// first bytes.
    ///
    /// - Complexity: O(*k* log *n*) for *k* hashes in a store of *n* objects.
    public func objectSizes(_ hashes: [Hash]) async throws -> [Hash: Int]? {
        try checkOpen("get")
        let objects = environment.objects
        return try readKnowingDeltas("get") { deltas in
            try environment.read("get") { txn in
                let reader = DeltaReader(backend: self, txn: txn, deltas: deltas, operation: "get")
                var result = [Hash: Int](minimumCapacity: hashes.count)
                for hash in hashes where result[hash] == nil {
                    let size = try hash.withUnsafeBytes { keyBuffer in
                        try txn.withValue(objects, keyBuffer) { value -> Int? in
                            guard let value else { return nil }
                            guard try reader.base(ofKey: Self.key(hash), value: value) != nil else { return value.count }
                            guard let length = ObjectDelta.length(ofDeltaPrefix: [UInt8](value.prefix(16))) else {
                                throw ArborError(.corruptObject, "\(configuration.path): object \(hash) is a damaged delta (its length does not parse)", backend: engineName, operation: "get")
                            }
                            return length
                        }
                    }
                    if let size { result[hash] = size }
                }
                return result
            }
        }
    }

    /// Stores objects in one write transaction; existing objects are kept (`MDB_NOOVERWRITE`),
    /// but one kept as a delta is made whole again. Grows the map and writes the batch again if
    /// it does not fit.
    ///
    /// - Complexity: O(*k* log *n*) for *k* objects in a store of *n*.
    public func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try checkOpen("put")
        guard !objects.isEmpty else { return }
        // In key order, each insertion lands next to the previous one in the B+tree.
        let sorted = objects.sorted { $0.hash < $1.hash }
        try await writeKnowingDeltas("put") { txn, deltas in try self.insert(sorted, txn, deltas) }
    }

    /// Stores objects over what the store holds under their hashes, in one write transaction
    /// (for repairs only): each takes the new bytes whole, also one that was a delta; deltas
    /// against it read through them. Grows the map as ``put(_:)`` does.
    ///
    /// - Complexity: O(*k* log *n*) for *k* objects in a store of *n*.
    public func replace(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try checkOpen("replace")
        guard !objects.isEmpty else { return }
        let sorted = objects.sorted { $0.hash < $1.hash }
        let database = environment.objects
        try await writeKnowingDeltas("replace") { txn, deltas in
            for object in sorted {
                let key = Self.key(object.hash)
                // A delta's entry goes with it. (A damaged value that merely looks like a delta
                // names no entry; one left naming a whole object is ignored by every reader.)
                if let deltas, let stored = try txn.get(database, key),
                   let base = try stored.withUnsafeBytes({ try Self.deltaBase(key, stored: $0, txn, deltas) }) {
                    try txn.delete(deltas.dbi, Self.key(base) + key)
                }
                try txn.put(database, key, object.bytes, overwrite: true)
            }
        }
    }

    /// Every object hash, in hash order, in batches of at most `batchSize`; each batch is read in
    /// its own read transaction and `body` runs outside it.
    ///
    /// - Complexity: O(*n*) for *n* objects, in O(`batchSize`) memory.
    public func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        // Keys only: verify and gc list every hash of stores of gigabytes.
        try await scanObjects(batchSize: batchSize, values: false) { entries in
            try await body(try entries.map { try hash($0.key, "the objects database has a key that", "enumerate") })
        }
    }

    /// Every object with its bytes, in hash order, in batches of at most `batchSize` (ended
    /// early once they hold ``enumerationBatchBytes``); each batch is read in its own read
    /// transaction and `body` runs outside it.
    ///
    /// - Complexity: O(*n*) for *n* objects, in O(`batchSize`) memory.
    public func enumerateObjects(batchSize: Int, _ body: ([(hash: Hash, bytes: [UInt8])]) async throws -> Void) async throws {
        try await scanObjects(batchSize: batchSize, values: true) { entries in
            try await body(try entries.map { (try hash($0.key, "the objects database has a key that", "enumerate"), $0.value) })
        }
    }

    /// The objects database's entries in key order, in batches of at most `batchSize`, each read
    /// in its own read transaction; `body` runs outside it. Values are read when `values` is true.
    private func scanObjects(batchSize: Int, values: Bool, _ body: ([(key: [UInt8], value: [UInt8])]) async throws -> Void) async throws {
        let limit = max(batchSize, 1)
        var after: [UInt8]? = nil
        let objects = environment.objects
        while true {
            try checkOpen("enumerate")
            // Deltas are made whole in the batch's own snapshot, and count by the bytes they make.
            let entries = try readKnowingDeltas("enumerate") { deltas in
                try environment.read("enumerate") { [after] txn in
                    try txn.scan(objects, after: after, limit: limit, values: values, byteLimit: enumerationBatchBytes) { key, value in
                        // A reader per entry: the bases it makes are rarely another entry's, and
                        // kept for the batch they would outweigh its bound many times over.
                        var reader = DeltaReader(backend: self, txn: txn, deltas: deltas, operation: "enumerate")
                        return try reader.withWholeValue([UInt8](key), stored: value) { [UInt8]($0) }
                    }
                }
            }
            if entries.isEmpty { return }
            try await body(entries)
            // A batch ended by its bytes may have more after it.
            if entries.count < limit && entries.reduce(0, { $0 + $1.value.count }) < enumerationBatchBytes { return }
            after = entries.last?.key
        }
    }

    /// Removes objects (for garbage collection only), in one write transaction.
    ///
    /// - Complexity: O(*k* log *n*).
    public func delete(_ hashes: [Hash]) async throws {
        try checkOpen("delete")
        let objects = environment.objects
        try await writeKnowingDeltas("delete") { txn, deltas in
            if let deltas { try self.detachDependents(of: hashes, txn, deltas) }
            for hash in hashes { try txn.delete(objects, LMDBBackend.key(hash)) }
        }
    }

    // MARK: Refs

    /// The current value of every ref.
    ///
    /// - Complexity: O(*r*) for *r* refs.
    public func refs() async throws -> [String: Hash] {
        try checkOpen("refs")
        let refs = environment.refs
        let entries = try environment.read("refs") { txn in try txn.scan(refs, after: nil, limit: .max) }
        var result = [String: Hash]()
        for (key, value) in entries {
            let name = String(decoding: key, as: UTF8.self)
            result[name] = try hash(value, "ref \(String(reflecting: name))", "refs")
        }
        return result
    }

    /// Sets ref `name` to `new` (removes it for `nil`) if it is still `expected`, inside one
    /// write transaction, atomically across processes.
    ///
    /// - Complexity: O(log *r*).
    public func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try RefName.validate(name, backend: engineName)
        try checkOpen("compareAndSwap")
        let refs = environment.refs
        let key = Array(name.utf8)
        return try await environment.writeOffPool("compareAndSwap", flushing: configuration.synchronous) { txn in
            let current = try txn.get(refs, key).map { try self.hash($0, "ref \(String(reflecting: name))", "compareAndSwap") }
            guard current == expected else { return false }
            if let new {
                try txn.put(refs, key, LMDBBackend.key(new), overwrite: true)
            } else {
                try txn.delete(refs, key)
            }
            return true
        }
    }

    /// Releases this backend's share of the environment (closing it if no other backend of this
    /// process uses it). Further calls throw ``ArborError/Code/closed``; closing twice is harmless.
    ///
    /// - Complexity: O(1), after in-flight transactions finish.
    public func close() async throws {
        // Off the pool: the last user's close waits for this process's transactions in flight,
        // and a write among them may wait for another process's.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                self.release()
                continuation.resume()
            }
        }
    }
}
