import Arbor
import Dispatch
import Foundation
import Synchronization

/// A store in one SQLite database file, shareable by several processes.
///
/// ```
/// CREATE TABLE arbor_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
///     -- ('format', 'arbor-sqlite-store'), ('version', '2')
/// CREATE TABLE objects (hash BLOB NOT NULL UNIQUE, bytes BLOB NOT NULL);
/// CREATE TABLE refs (name TEXT PRIMARY KEY, hash BLOB NOT NULL) WITHOUT ROWID;
/// ```
///
/// where version 3 adds a `base` column to `objects`, for objects kept as deltas against others,
/// and a table that bounds their chains (SQLiteBackend+Deltas.swift).
///
/// Objects live in a rowid table with a unique index on the hash, not in a `WITHOUT ROWID`
/// table keyed by it: objects are often a few kilobytes, and a `WITHOUT ROWID` row keeps only
/// about a quarter of a page in its B-tree cell and the rest on overflow pages of its own.
/// Rows appended by rowid fill whole pages, and only the small hash index takes random inserts
/// (a quarter less disk and a quarter less write time in the `engines` benchmark). Stores created
/// with the earlier `WITHOUT ROWID` table open and work unchanged: every statement names the
/// hash only.
///
/// The database runs in WAL mode, so readers never wait for the writer; writers (also in other
/// processes) take turns through SQLite's own locks, waiting up to ``Configuration/busyTimeout``.
/// Every batch call is one transaction: a batch `put` is all-or-nothing, a batch `get` reads
/// one snapshot. A ref changes only by compare-and-swap inside one `BEGIN IMMEDIATE`
/// transaction, which holds the database's write lock from the read of the old value to the
/// commit of the new one, so the swap is atomic across processes and survives a crash whole.
///
/// Concurrency in this process: every connection (one that writes and reads refs, and up to
/// ``readerLimit`` that read objects) lives in a `Mutex`, so exactly one task uses it at a time
/// (each is opened `SQLITE_OPEN_NOMUTEX`, SQLite's multi-thread mode, which allows a connection
/// to move between threads as long as no two use it at once). A read takes the first reading
/// connection that is free, so reads on several threads run side by side, each in its own
/// snapshot. Everything on the writing connection runs on a
/// serial dispatch queue of its own, off the Swift concurrency pool: a write may wait for another
/// connection's lock (up to the busy timeout) and ends with an fsync, and on the pool's few
/// threads such waits starved every other task (16 tasks syncing with one SQLite file, each
/// through a connection of its own: median sync 0.24 s before, 0.04–0.15 s after). Reads
/// (`get`, `contains`) stay on the calling thread: in WAL mode a reader never waits for a
/// writer, and a point read costs microseconds, less than a hop between threads. No
/// `@unchecked Sendable` is needed: `Mutex` is `Sendable` whatever it holds.
public final class SQLiteBackend: Backend, InPlaceReading {
    /// Where the store lives and how it trades durability for speed.
    public struct Configuration: Sendable {
        /// The database file.
        public var path: String
        /// `true` (default): `PRAGMA synchronous = FULL`, every commit is on disk when it returns.
        /// `false`: `NORMAL`, still safe against a crash of the process; a power loss may lose the
        /// last commits (never damage the database).
        public var synchronous: Bool
        /// How long a writer waits for another connection's lock before failing, in milliseconds.
        public var busyTimeout: Int
        /// How many bytes of the database file SQLite reads through a memory map
        /// (`PRAGMA mmap_size`); 0 (default) reads with `pread`. SQLite caps it at its
        /// compile-time `SQLITE_MAX_MMAP_SIZE` (2 GB in most builds).
        ///
        /// A map saves a copy per page read: in the `engines` benchmark, point reads of a
        /// 400,000-record store (1 GB, more than the node cache holds) took 13–23% less time.
        /// Only the first 2 GB of a file gain: in the 3.7 GB store of 1,000,000 records the
        /// head's nodes, written last, lie past the cap, and reads took as long as without.
        /// The cost is the one LMDB always has: an I/O error on a mapped page (a failing disk,
        /// a file truncated underneath) ends the process with `SIGBUS` instead of returning an
        /// error. Hence opt-in.
        public var memoryMapSize: Int
        /// The most bytes of pages the writing connection keeps cached between its transactions
        /// (`PRAGMA cache_size`); 32 MB by default, against SQLite's 2 MB.
        ///
        /// Objects are found through an index on their hash, so every batch of new objects
        /// touches index pages all over the file. With 2 MB most of them were read again for
        /// each batch: migrating 1,000,000 records from PostgreSQL made 1,058,320 `pread` and
        /// 1,231,101 `pwrite` calls, and 702,852 and 954,123 with 32 MB, for about 30 MB more
        /// memory at the peak. Pages are allocated as used, so a small store costs what it needs;
        /// each open backend has its own cache. Counted in whole KiB, from 1 KiB (SQLite then keeps
        /// its minimum of a few pages) to 2 TiB.
        public var writerCacheSize: Int
        /// Whether a store's commits keep the index nodes they replace as deltas against their
        /// replacements (``SQLiteBackend/restate(_:)``, in the commit's own transaction): `false`
        /// by default.
        ///
        /// With records changing all over the index (random ids) the history is most of a
        /// store's size, and deltas take a fraction of it. In the `engines` benchmark (commits of
        /// 10,000 random ids), 1,000,000 records took 739 MB instead of 3,763 MB, and 300,000 took
        /// 179 MB instead of 633 MB. The price is the commit: each restatement rewrites a row of
        /// an older version, which lies on a page of its own, and the same commits took 147 s
        /// instead of 65 s (17.9 s instead of 8.2 s). Hence opt-in. Reads of the newest version
        /// are unchanged (a node another head still uses may be a delta); an older version's node
        /// reads through up to ``SQLiteBackend/maximumDeltaChain`` lookups.
        ///
        /// Opening a store with this set brings its file to format version 3, which Arbor before
        /// this option cannot open: every process that writes the store must run a version that
        /// knows deltas (one that does not would remove a base without making its deltas whole).
        public var restatesReplacedNodes: Bool

        public init(
            path: String, synchronous: Bool = true, busyTimeout: Int = 10_000, memoryMapSize: Int = 0,
            writerCacheSize: Int = 32 << 20, restatesReplacedNodes: Bool = false
        ) {
            self.path = path
            self.synchronous = synchronous
            self.busyTimeout = busyTimeout
            self.memoryMapSize = memoryMapSize
            self.writerCacheSize = writerCacheSize
            self.restatesReplacedNodes = restatesReplacedNodes
        }
    }

    static let formatName = "arbor-sqlite-store"
    /// The newest format this Arbor reads and writes. 3 keeps objects as deltas too
    /// (``restate(_:)``): a store is created as, or brought to, version 3 only when opened with
    /// ``Configuration/restatesReplacedNodes`` (on a file that can be written); otherwise it is
    /// created and kept at version 1, which Arbor before deltas reads. Version 2 was a
    /// development layout (a separate table of deltas) and is refused.
    static let formatVersion = 3
    static let readableVersions: Set<Int> = [1, 3]

    public let engineName = "sqlite"
    public let configuration: Configuration
    /// The connection, or `nil` once the store is closed.
    private let connection: Mutex<SQLiteConnection?>
    /// Connections for `get`, `contains` and in-place reads, each opened on first use: in WAL
    /// mode each reads its own snapshot while the first connection writes, so reads never wait
    /// for a batch being written (an exchange reads the next objects while the last batch is
    /// committed), and reads on different threads do not wait for one another.
    let readers: [ReadingConnection]
    /// Which reading connection the next read waits for when all are busy.
    private let nextReader = Atomic<UInt>(0)
    /// How many reading connections a store opens at most: one per processor, up to 8, since
    /// reads run on the threads of the Swift pool (one per processor) and each connection keeps
    /// a page cache of its own (2 MB).
    static let readerLimit = min(max(ProcessInfo.processInfo.activeProcessorCount, 2), 8)
    /// Where every call on `connection` runs.
    private let writerQueue = DispatchQueue(label: "arbor.sqlite.writer")

    /// Whether the store was opened on a read-only file system: it is read through immutable,
    /// read-only connections, and every write throws ``ArborError/Code/permissionDenied``.
    public let isReadOnly: Bool
    /// Whether the objects table has the `base` column of format version 3 (not a version 1
    /// store opened read-only).
    let hasDeltaColumns: Bool

    private init(configuration: Configuration, connection: sending SQLiteConnection, readOnly: Bool = false, hasDeltaColumns: Bool) {
        self.configuration = configuration
        self.connection = Mutex(connection)
        self.isReadOnly = readOnly
        self.hasDeltaColumns = hasDeltaColumns
        self.readers = (0..<Self.readerLimit).map { _ in ReadingConnection() }
    }

    /// Creates a new, empty store in a new database file. Throws
    /// ``ArborError/Code/alreadyExists`` if anything exists at the path (it is left untouched),
    /// ``ArborError/Code/notFound`` if the folder does not exist and
    /// ``ArborError/Code/permissionDenied`` if it cannot be written. Nothing is left behind on failure.
    ///
    /// - Complexity: O(1).
    public static func create(_ configuration: Configuration) throws -> SQLiteBackend {
        let path = configuration.path
        // A database with nothing in it, as a create killed before its schema landed leaves, is
        // taken over: it holds nothing to lose, and running the command again must finish the job.
        var adopted = false
        do {
            try SQLiteFiles.createExclusively(path)
        } catch let error as ArborError where error.code == .alreadyExists {
            guard holdsNoSchema(path) else { throw error }
            adopted = true
        }
        do {
            let connection = try SQLiteConnection.connect(path: path, operation: "create")
            do {
                try connection.setBusyTimeout(milliseconds: Int32(clamping: configuration.busyTimeout))
                try connection.withStatement("PRAGMA journal_mode = WAL") { statement in
                    guard try statement.step(), statement.text(0)?.lowercased() == "wal" else {
                        throw ArborError(.engine, "\(path): SQLite refused to switch to WAL mode", backend: "sqlite", operation: "create")
                    }
                }
                try configure(connection, configuration)
                // One transaction: the file is a store with its marker, or an empty database.
                try connection.transaction(immediate: true) {
                    // A creator racing this one for an empty database (which it made, or took
                    // over) may have got here first.
                    if try schemaObjects(connection) > 0 {
                        throw ArborError(.alreadyExists, "\(path) already exists (a store or another file); it was left untouched", backend: "sqlite", operation: "create")
                    }
                    // Version 2's column only where deltas are asked for: a version 1 file stays
                    // readable by Arbor before deltas.
                    let deltas = configuration.restatesReplacedNodes
                    try connection.execute("""
                        CREATE TABLE arbor_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                        CREATE TABLE objects (hash BLOB NOT NULL UNIQUE, bytes BLOB NOT NULL\(deltas ? ", base BLOB" : ""));
                        CREATE TABLE refs (name TEXT PRIMARY KEY, hash BLOB NOT NULL) WITHOUT ROWID;
                        """)
                    if deltas { try connection.execute(deltaColumns) }
                    for (key, value) in [("format", formatName), ("version", deltas ? String(formatVersion) : "1")] {
                        try connection.withStatement("INSERT INTO arbor_meta (key, value) VALUES (?1, ?2)") { statement in
                            try statement.bind(key, at: 1)
                            try statement.bind(value, at: 2)
                            try statement.run()
                        }
                    }
                }
            } catch {
                try? connection.close()
                throw error
            }
            return SQLiteBackend(configuration: configuration, connection: connection, hasDeltaColumns: configuration.restatesReplacedNodes)
        } catch var error as ArborError {
            // A file this create did not make is not its to remove, nor one another creator
            // has made a store of meanwhile.
            if !adopted, error.code != .alreadyExists, holdsNoSchema(path) { SQLiteFiles.remove(path) }
            if error.operation == nil { error.operation = "create" }
            throw error
        }
    }

    /// How many tables, indexes, views and triggers the database has.
    private static func schemaObjects(_ connection: SQLiteConnection) throws -> Int {
        try connection.withStatement("SELECT count(*) FROM sqlite_master") { statement in
            try statement.step() ? Int(statement.integer(0)) : 0
        }
    }

    /// Whether the file at `path` is a SQLite database with nothing in it: empty, or with no
    /// schema at all (WAL mode set, the schema not yet committed).
    private static func holdsNoSchema(_ path: String) -> Bool {
        let kind = SQLiteFiles.kind(path)
        guard kind.exists, kind.isRegularFile else { return false }
        if SQLiteFiles.length(path) == 0, (SQLiteFiles.length(path + "-wal") ?? 0) == 0 { return true }
        guard let connection = try? SQLiteConnection.connect(path: path, operation: "create") else { return false }
        defer { try? connection.close() }
        return (try? schemaObjects(connection)) == 0
    }

    /// Opens an existing store. Throws ``ArborError/Code/notFound`` if there is no file at the
    /// path, and ``ArborError/Code/unsupportedFormat`` if the file is not a SQLite database, is
    /// the database of another program, or was written by a newer version of Arbor.
    ///
    /// A store on a read-only file system (a snapshot, a backup mounted read-only) opens for
    /// reading (``isReadOnly``): SQLite cannot make the shared-memory file that WAL mode reads
    /// through there, and nothing can change the file, so it is read as immutable. Unless its
    /// `-wal` file still holds commits (the store was not closed cleanly): those are not in the
    /// database file yet, and are read only through that shared memory, so such a store is
    /// refused (``ArborError/Code/permissionDenied``), saying so.
    ///
    /// - Complexity: O(1).
    public static func open(_ configuration: Configuration) throws -> SQLiteBackend {
        let path = configuration.path
        let kind = SQLiteFiles.kind(path)
        guard kind.exists else {
            throw ArborError(.notFound, "no store at \(path): the file does not exist", backend: "sqlite", operation: "open")
        }
        guard kind.isRegularFile else {
            throw ArborError(.unsupportedFormat, "\(path) is not a file, so not an Arbor SQLite store", backend: "sqlite", operation: "open")
        }
        let readOnly = SQLiteFiles.isOnReadOnlyFileSystem(path)
        if readOnly, (SQLiteFiles.length(path + "-wal") ?? 0) > 0 {
            throw ArborError(
                .permissionDenied,
                "\(path) is on a read-only file system, and its -wal file holds commits that are not in the database file yet (the store was not closed cleanly): open it once where it can be written, which folds them in",
                backend: "sqlite", operation: "open")
        }
        // A read-only mount of a store another process has open, writable elsewhere (a
        // container's `:ro` volume): opened as immutable, it would keep reading pages that
        // process rewrites, as damage or stale heads.
        if readOnly, let process = SQLiteFiles.processWithTheStoreOpen(path) {
            throw ArborError(
                .permissionDenied,
                "\(path) is on a read-only file system, but \(FileLockProbe.describe(process)) has the store open, and may write it through another mount, which a reader here would not see: open it where it can be written, or read a copy",
                backend: "sqlite", operation: "open")
        }
        let connection = try SQLiteConnection.connect(path: path, operation: "open", readOnly: readOnly)
        var hasDeltaColumns = true
        do {
            try connection.setBusyTimeout(milliseconds: Int32(clamping: configuration.busyTimeout))
            try checkFormat(connection, path: path)
            // WAL mode is a property of the file, set by create; asking again is a no-op.
            if !readOnly { try connection.execute("PRAGMA journal_mode = WAL") }
            try configure(connection, configuration)
            hasDeltaColumns = try hasBaseColumn(connection)
            if !hasDeltaColumns && configuration.restatesReplacedNodes && !readOnly {
                try upgrade(connection)
                hasDeltaColumns = true
            }
        } catch var error as ArborError {
            try? connection.close()
            if error.operation == nil { error.operation = "open" }
            throw error
        }
        return SQLiteBackend(configuration: configuration, connection: connection, readOnly: readOnly, hasDeltaColumns: hasDeltaColumns)
    }

    /// The bytes the write-ahead log is cut back to once checkpointed (`journal_size_limit`).
    static let logSizeLimit = 64 << 20

    private static func configure(_ connection: SQLiteConnection, _ configuration: Configuration) throws {
        try connection.execute(configuration.synchronous ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        #if canImport(Darwin)
        // On Darwin fsync leaves writes in the drive's cache, where a power loss takes them;
        // F_FULLFSYNC, which these ask SQLite for, flushes that too.
        if configuration.synchronous { try connection.execute("PRAGMA fullfsync = ON; PRAGMA checkpoint_fullfsync = ON") }
        #endif
        // Checkpoint every 32 MB of WAL rather than SQLite's 4 MB: a batch of objects is often
        // several megabytes, and a checkpoint (with its fsync of the database) after every batch
        // cost a quarter of a migration's time into SQLite.
        try connection.execute("PRAGMA wal_autocheckpoint = 8192")
        // A batch larger than that grows the log past it, and SQLite keeps a log file at its
        // largest until the last connection closes (a long-running app's never does): once
        // checkpointed, the log is cut back to 64 MB when it starts over.
        try connection.execute("PRAGMA journal_size_limit = \(SQLiteBackend.logSizeLimit)")
        // Negative: a size in KiB, which SQLite reads as a 32-bit number (a larger one would
        // turn into 0). Below a few pages SQLite keeps its own minimum.
        let kibibytes = min(max(configuration.writerCacheSize / 1024, 1), Int(Int32.max))
        try connection.execute("PRAGMA cache_size = -\(kibibytes)")
        try setMemoryMap(connection, configuration)
    }

    /// Sets `PRAGMA mmap_size` (a property of each connection, not of the file) when asked.
    private static func setMemoryMap(_ connection: SQLiteConnection, _ configuration: Configuration) throws {
        guard configuration.memoryMapSize > 0 else { return }
        try connection.execute("PRAGMA mmap_size = \(configuration.memoryMapSize)")
    }

    /// The number of bytes SQLite maps of the file for reads, as it applies the configuration
    /// (capped by its build): for tests and diagnostics.
    func effectiveMemoryMapSize() throws -> Int {
        try withReader("mmap_size") { db in try db.pragmaValue("mmap_size") }
    }

    /// The bytes of pages the writing connection may keep cached, as SQLite applies the
    /// configuration: for tests and diagnostics.
    func effectiveWriterCacheSize() async throws -> Int {
        try await onWriter("cache_size") { db in
            // Negative: KiB; positive: pages.
            let value = try db.pragmaValue("cache_size")
            return value < 0 ? -value * 1024 : value * (try db.pragmaValue("page_size"))
        }
    }

    /// Whether the objects table has format version 3's `base` column.
    static func hasBaseColumn(_ connection: SQLiteConnection) throws -> Bool {
        try connection.withStatement("SELECT count(*) FROM pragma_table_info('objects') WHERE name = 'base'") { statement in
            try statement.step() && statement.integer(0) == 1
        }
    }

    /// Brings a store of format version 1 to 3 (the `base` column, its index and the heights
    /// table), in one transaction, which another process opening it meanwhile may have run first.
    /// Adding a column rewrites no row: old rows read it as NULL, whole.
    private static func upgrade(_ connection: SQLiteConnection) throws {
        try connection.transaction(immediate: true) {
            if try !hasBaseColumn(connection) {
                try connection.execute("ALTER TABLE objects ADD COLUMN base BLOB")
                try connection.execute(deltaColumns)
            }
            try connection.execute("UPDATE arbor_meta SET value = '\(formatVersion)' WHERE key = 'version'")
        }
    }

    /// Reads the marker without writing anything, so a foreign database is never modified.
    private static func checkFormat(_ connection: SQLiteConnection, path: String) throws {
        let hasMarker: Bool
        do {
            hasMarker = try connection.withStatement("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'arbor_meta'") { statement in
                try statement.step() && statement.integer(0) == 1
            }
        } catch let error as ArborError where error.code == .unsupportedFormat {
            throw ArborError(.unsupportedFormat, "\(path) is not an Arbor store: it is not a SQLite database", backend: "sqlite", operation: "open", underlying: error)
        }
        guard hasMarker else {
            if try schemaObjects(connection) == 0 {
                // What a create killed before its schema landed leaves: no store yet (and
                // `create`, or a migration into it, takes the file over).
                throw ArborError(.notFound, "no store at \(path): the database is empty (a create that was interrupted?)", backend: "sqlite", operation: "open")
            }
            throw ArborError(.unsupportedFormat, "\(path) is a SQLite database, but not an Arbor store (it has no arbor_meta table)", backend: "sqlite", operation: "open")
        }
        var meta = [String: String]()
        try connection.withStatement("SELECT key, value FROM arbor_meta") { statement in
            while try statement.step() { meta[statement.text(0) ?? ""] = statement.text(1) }
        }
        guard meta["format"] == formatName else {
            throw ArborError(.unsupportedFormat, "\(path) is not an Arbor SQLite store (its format is \(String(reflecting: meta["format"] ?? "missing")))", backend: "sqlite", operation: "open")
        }
        guard let version = meta["version"].flatMap({ Int($0) }), readableVersions.contains(version) else {
            throw ArborError(.unsupportedFormat, "\(path) has store format version \(meta["version"] ?? "?"); this Arbor reads versions 1 and \(formatVersion)", backend: "sqlite", operation: "open")
        }
    }

    /// Throws ``ArborError/Code/permissionDenied`` for a write to a store on a read-only file system.
    func checkWritable(_ operation: String) throws {
        guard isReadOnly else { return }
        throw ArborError(.permissionDenied, "\(configuration.path) is on a read-only file system: the store can be read, not changed", backend: engineName, operation: operation)
    }

    /// Runs `body` with the open connection, holding the mutex; fills in the operation of errors.
    private func withConnection<R>(_ operation: String, _ body: (SQLiteConnection) throws -> R) throws -> R {
        do {
            return try connection.withLock { connection in
                guard let connection else {
                    throw ArborError(.closed, "the store is closed", backend: engineName, operation: operation)
                }
                return try body(connection)
            }
        } catch var error as ArborError {
            if error.operation == nil { error.operation = operation }
            if error.backend == nil { error.backend = engineName }
            throw error
        }
    }

    /// Runs `body` with the open connection on the writer queue, suspending the calling task
    /// meanwhile, so that waiting for a lock or an fsync never holds a thread of the Swift pool.
    func onWriter<R: Sendable>(_ operation: String, _ body: @escaping @Sendable (SQLiteConnection) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            writerQueue.async {
                continuation.resume(with: Result { try self.withConnection(operation, body) })
            }
        }
    }

    /// Runs `body` with a reading connection of its own: the first that is free, opened on first
    /// use, so that reads from one thread at a time keep to one connection and its page cache;
    /// if all are busy, one of them in turn once it is free (reads hold one for microseconds).
    func withReader<R>(_ operation: String, _ body: (SQLiteConnection) throws -> R) throws -> R {
        for slot in readers {
            if let result = try slot.state.withLockIfAvailable({ state in try read(operation, &state, body) }) { return result }
        }
        let turn = nextReader.wrappingAdd(1, ordering: .relaxed).oldValue
        return try readers[Int(turn % UInt(readers.count))].state.withLock { state in try read(operation, &state, body) }
    }

    /// ``withReader(_:_:)`` on one reading connection's state, held.
    private func read<R>(
        _ operation: String, _ state: inout (connection: SQLiteConnection?, isClosed: Bool), _ body: (SQLiteConnection) throws -> R
    ) throws -> sending R {
        do {
            guard !state.isClosed else {
                throw ArborError(.closed, "the store is closed", backend: engineName, operation: operation)
            }
            if let connection = state.connection { return try body(connection) }
            let connection = try SQLiteConnection.connect(path: configuration.path, operation: operation, readOnly: isReadOnly)
            do {
                try connection.setBusyTimeout(milliseconds: Int32(clamping: configuration.busyTimeout))
                try Self.setMemoryMap(connection, configuration)
            } catch {
                try? connection.close()
                throw error
            }
            state.connection = connection
            return try body(connection)
        } catch var error as ArborError {
            if error.operation == nil { error.operation = operation }
            if error.backend == nil { error.backend = engineName }
            throw error
        }
    }

    // MARK: Objects

    /// The objects among `hashes` that the store holds, read in one transaction (one snapshot).
    ///
    /// - Complexity: O(*k* log *n*) for *k* hashes in a store of *n* objects.
    public func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        let (found, deltas) = try withReader("get") { db in
            try db.readSnapshot(statements: hashes.count) {
                var result = [Hash: [UInt8]](minimumCapacity: hashes.count)
                var deltas = [Hash]()
                try db.withStatement(Self.readSQL) { statement in
                    for hash in hashes where result[hash] == nil {
                        try statement.bind(hash, at: 1)
                        if try statement.step() {
                            if Self.isDeltaRow(statement) { deltas.append(hash) } else { result[hash] = statement.bytes(1) }
                        }
                        statement.reset()
                    }
                }
                // A batch's deltas are made whole in its snapshot (a single hash read without
                // a transaction is made whole in a snapshot of its own, just after).
                if hashes.count > 1, !deltas.isEmpty {
                    result.merge(try materialize(deltas, db)) { $1 }
                    deltas = []
                }
                return (result, deltas)
            }
        }
        guard !deltas.isEmpty else { return found }
        return found.merging(try materialize(deltas)) { $1 }
    }

    /// What `column` reads of the row `sql` finds for each of `hashes` (bound as ?1) that the
    /// store holds, in one snapshot.
    private func lookUp<Value>(_ hashes: [Hash], _ sql: String, _ column: (SQLiteStatement) -> Value) throws -> [Hash: Value] {
        try withReader("get") { db in
            try db.readSnapshot(statements: hashes.count) {
                var result = [Hash: Value](minimumCapacity: hashes.count)
                try db.withStatement(sql) { statement in
                    for hash in hashes where result[hash] == nil {
                        try statement.bind(hash, at: 1)
                        if try statement.step() { result[hash] = column(statement) }
                        statement.reset()
                    }
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
        try withReader("get") { db in
            try db.readSnapshot(statements: max(limit, hashes.count, 2)) {
                try db.withStatement(Self.readSQL) { statement in
                    try Ancestry.collect(hashes, limit: limit) { hash in
                        try statement.bind(hash, at: 1)
                        defer { statement.reset() }
                        guard try statement.step() else { return nil }
                        // Versions are never restated, but a delta reads whole all the same.
                        return Self.isDeltaRow(statement) ? try materialize([hash], db)[hash] : statement.bytes(1)
                    }
                }
            }
        }
    }

    /// Calls `body` with object `hash` where SQLite holds it, read by one statement, which is
    /// its own snapshot (``InPlaceReading``): in its page cache, or, for a row longer than a page,
    /// in the buffer SQLite gathers its overflow pages into. `body` runs holding a reading
    /// connection, and must not call the backend (a nested read could wait for that connection).
    ///
    /// - Complexity: O(log *n*) in a store of *n* objects.
    public func withObjectBytes<R>(_ hash: Hash, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        let whole: R? = try withReader("get") { db in
            try db.withStatement(Self.readSQL) { statement in
                try statement.bind(hash, at: 1)
                // The bytes stay valid until the reset, which comes after `body`.
                defer { statement.reset() }
                guard try statement.step() else { return .some(try body(nil)) }
                guard !Self.isDeltaRow(statement) else { return nil }
                return .some(try statement.withBlob(1, body))
            }
        }
        if let whole { return whole }
        // A delta (an old version's node): made whole here and lent.
        guard let bytes = try materialize([hash])[hash] else { return try body(nil) }
        return try bytes.withUnsafeBytes(body)
    }

    /// The sizes of the objects among `hashes` that the store holds, in one snapshot:
    /// `length()` of a blob reads its size from the row, not the overflow pages that hold it.
    /// (Arbor writes blobs; a text value another program wrote would count in characters, which
    /// only sizes requests.)
    ///
    /// - Complexity: O(*k* log *n*) for *k* hashes in a store of *n* objects.
    public func objectSizes(_ hashes: [Hash]) async throws -> [Hash: Int]? {
        // Asked of the file where this backend opened it at version 1: another process may have
        // brought it to a version with deltas since.
        guard try hasDeltaColumns || withReader("sizes", { db in try Self.hasBaseColumn(db) }) else {
            return try lookUp(hashes, "SELECT length(bytes) FROM objects WHERE hash = ?1") { $0.integer(0) }
        }
        // A delta says the length it makes in its first bytes.
        let sql = "SELECT CASE WHEN base IS NULL THEN length(bytes) ELSE -1 END, CASE WHEN base IS NULL THEN NULL ELSE substr(bytes, 1, 12) END FROM objects WHERE hash = ?1"
        let rows = try lookUp(hashes, sql) { statement in statement.integer(0) >= 0 ? statement.integer(0) : ObjectDelta.length(ofDeltaPrefix: statement.bytes(1)) }
        return rows.compactMapValues { $0 }
    }

    /// The subset of `hashes` that the store holds.
    ///
    /// - Complexity: O(*k* log *n*) for *k* hashes in a store of *n* objects.
    public func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        try withReader("contains") { db in
            try db.readSnapshot(statements: hashes.count) {
                var result = Set<Hash>()
                try db.withStatement("SELECT 1 FROM objects WHERE hash = ?1") { statement in
                    for hash in hashes where !result.contains(hash) {
                        try statement.bind(hash, at: 1)
                        if try statement.step() { result.insert(hash) }
                        statement.reset()
                    }
                }
                return result
            }
        }
    }

    /// Stores objects in one write transaction: existing objects stay as they are, but for one
    /// kept as a delta, which is current again and kept whole.
    ///
    /// - Complexity: O(*k* log *n*) for *k* objects in a store of *n*.
    public func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try checkWritable("put")
        guard !objects.isEmpty else { return try await onWriter("put") { _ in } }  // only checks the store is open
        // Inserting in key order keeps the B-tree's pages hot.
        let sorted = objects.sorted { $0.hash < $1.hash }
        try await onWriter("put") { db in
            try db.transaction(immediate: true) { try self.insert(sorted, db) }
        }
    }

    /// Stores objects over what the store holds under their hashes, in one write transaction
    /// (for repairs only): each row takes the new bytes whole, also one that held a delta;
    /// deltas against it read through them.
    ///
    /// - Complexity: O(*k* log *n*) for *k* objects in a store of *n*.
    public func replace(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try checkWritable("replace")
        guard !objects.isEmpty else { return }
        let sorted = objects.sorted { $0.hash < $1.hash }
        try await onWriter("replace") { db in
            try db.transaction(immediate: true) {
                // Asked of the file: another process may have brought it to version 3 since.
                let sql = try Self.hasBaseColumn(db)
                    ? "INSERT INTO objects (hash, bytes) VALUES (?1, ?2) ON CONFLICT (hash) DO UPDATE SET bytes = excluded.bytes, base = NULL"
                    : "INSERT INTO objects (hash, bytes) VALUES (?1, ?2) ON CONFLICT (hash) DO UPDATE SET bytes = excluded.bytes"
                try Self.run(sql, over: sorted, db)
            }
        }
    }

    /// Every object hash, in hash order, in batches of at most `batchSize`. Each batch is read
    /// in its own short transaction and `body` runs without the connection held, so `body` may
    /// use the backend (to delete, for instance).
    ///
    /// - Complexity: O(*n*) for *n* objects, in O(`batchSize`) memory.
    public func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        let limit = max(batchSize, 1)
        var after: Hash? = nil
        while true {
            let (batch, more) = try await onWriter("enumerate") { [after] db in
                try self.page(of: db, columns: "hash", after: after, limit: limit) { hash, _ in (hash, 0) }
            }
            if batch.isEmpty { return }
            try await body(batch)
            if !more { return }
            after = batch.last
        }
    }

    /// Every object with its bytes, in hash order, in batches of at most `batchSize` (ended
    /// early once they hold ``enumerationBatchBytes``): one statement per batch on a reading
    /// connection (commits go on meanwhile), and `body` runs without it.
    ///
    /// - Complexity: O(*n*) for *n* objects, in O(`batchSize`) memory.
    public func enumerateObjects(batchSize: Int, _ body: ([(hash: Hash, bytes: [UInt8])]) async throws -> Void) async throws {
        let limit = max(batchSize, 1)
        var after: Hash? = nil
        while true {
            let (batch, more) = try withReader("enumerate") { db in
                // Deltas are made whole in the page's snapshot.
                try db.readSnapshot(statements: 2) {
                    let (rows, more) = try page(of: db, columns: "*", after: after, limit: limit) { hash, statement in
                        let bytes = statement.bytes(1)
                        let isDelta = Self.isDeltaRow(statement)
                        // A delta counts as the bytes it makes, which the batch hands on.
                        return ((hash: hash, bytes: bytes, isDelta: isDelta), isDelta ? ObjectDelta.length(ofDeltaPrefix: bytes) ?? bytes.count : bytes.count)
                    }
                    let deltas = rows.filter(\.isDelta).map(\.hash)
                    let whole = deltas.isEmpty ? [:] : try materialize(deltas, db)
                    return (try rows.map { row in
                        guard row.isDelta else { return (hash: row.hash, bytes: row.bytes) }
                        guard let bytes = whole[row.hash] else {
                            throw ArborError(.corruptObject, "\(configuration.path): object \(row.hash) vanished from its own snapshot", backend: engineName, operation: "enumerate")
                        }
                        return (hash: row.hash, bytes: bytes)
                    }, more)
                }
            }
            if batch.isEmpty { return }
            try await body(batch)
            if !more { return }
            after = batch.last?.hash
        }
    }

    /// Up to `limit` rows of the objects table after `after`, in hash order, selecting `columns`
    /// (the hash first), and whether more may follow; `row` makes each row's result and its size
    /// in bytes from its hash and the statement. The rows end early once their sizes reach
    /// ``enumerationBatchBytes``.
    private func page<Row>(
        of db: SQLiteConnection, columns: String, after: Hash?, limit: Int, _ row: (Hash, SQLiteStatement) throws -> (Row, Int)
    ) throws -> (rows: [Row], more: Bool) {
        var rows = [Row]()
        var size = 0
        let sql = after == nil
            ? "SELECT \(columns) FROM objects ORDER BY hash LIMIT ?2"
            : "SELECT \(columns) FROM objects WHERE hash > ?1 ORDER BY hash LIMIT ?2"
        return try db.withStatement(sql) { statement in
            if let after { try statement.bind(after, at: 1) }
            try statement.bind(limit, at: 2)
            while try statement.step() {
                let key = statement.bytes(0)
                guard let hash = Hash(bytes: key) else {
                    throw ArborError(.corruptObject, "\(configuration.path): the objects table holds a key of \(key.count) bytes, not a hash", backend: engineName, operation: "enumerate")
                }
                let (result, bytes) = try row(hash, statement)
                rows.append(result)
                size += bytes
                if size >= enumerationBatchBytes { return (rows, true) }
            }
            return (rows, rows.count == limit)
        }
    }

    /// Removes objects (for garbage collection only), in one write transaction.
    ///
    /// - Complexity: O(*k* log *n*).
    public func delete(_ hashes: [Hash]) async throws {
        try checkWritable("delete")
        try await onWriter("delete") { db in
            try db.transaction(immediate: true) {
                // Asked of the file, not of how it was when this backend opened it: another
                // process may have brought it to version 3 since.
                let deltas = try Self.hasBaseColumn(db)
                // A delta against an object removed is made whole first.
                if deltas { try self.detachDependents(of: hashes, db) }
                try db.withStatement("DELETE FROM objects WHERE hash = ?1") { statement in
                    for hash in hashes {
                        try statement.bind(hash, at: 1)
                        try statement.run()
                        statement.reset()
                    }
                }
                guard deltas else { return }
                try db.withStatement("DELETE FROM delta_heights WHERE hash = ?1") { statement in
                    for hash in hashes {
                        try statement.bind(hash, at: 1)
                        try statement.run()
                        statement.reset()
                    }
                }
            }
        }
    }

    // MARK: Refs

    /// The current value of every ref.
    ///
    /// - Complexity: O(*r*) for *r* refs.
    public func refs() async throws -> [String: Hash] {
        try await onWriter("refs") { [configuration, engineName] db in
            var result = [String: Hash]()
            try db.withStatement("SELECT name, hash FROM refs") { statement in
                while try statement.step() {
                    let name = statement.text(0) ?? ""
                    let bytes = statement.bytes(1)
                    guard let hash = Hash(bytes: bytes) else {
                        throw ArborError(.corruptObject, "\(configuration.path): ref \(String(reflecting: name)) holds \(bytes.count) bytes, not a hash", backend: engineName, operation: "refs")
                    }
                    result[name] = hash
                }
            }
            return result
        }
    }

    /// Sets ref `name` to `new` (removes it for `nil`) if it is still `expected`, inside one
    /// `BEGIN IMMEDIATE` transaction, atomically across processes.
    ///
    /// - Complexity: O(log *r*).
    public func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try checkWritable("compareAndSwap")
        try RefName.validate(name, backend: engineName)
        return try await onWriter("compareAndSwap") { [configuration, engineName] db in
            try db.transaction(immediate: true) {
                let current: Hash? = try db.withStatement("SELECT hash FROM refs WHERE name = ?1") { statement in
                    try statement.bind(name, at: 1)
                    guard try statement.step() else { return nil }
                    let bytes = statement.bytes(0)
                    guard let hash = Hash(bytes: bytes) else {
                        throw ArborError(.corruptObject, "\(configuration.path): ref \(String(reflecting: name)) holds \(bytes.count) bytes, not a hash", backend: engineName, operation: "compareAndSwap")
                    }
                    return hash
                }
                guard current == expected else { return false }
                if let new {
                    try db.withStatement("INSERT INTO refs (name, hash) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET hash = excluded.hash") { statement in
                        try statement.bind(name, at: 1)
                        try statement.bind(new, at: 2)
                        try statement.run()
                    }
                } else {
                    try db.withStatement("DELETE FROM refs WHERE name = ?1") { statement in
                        try statement.bind(name, at: 1)
                        try statement.run()
                    }
                }
                return true
            }
        }
    }

    /// Closes every connection (finalizing its statements), also when one fails to close (the
    /// first failure is thrown). Further calls throw ``ArborError/Code/closed``; closing twice
    /// is harmless.
    ///
    /// - Complexity: O(``readerLimit``).
    public func close() async throws {
        // On the writer queue, behind the writes in flight: closing waits for them (one may wait
        // out the busy timeout for another process's lock), and closing the last connection
        // checkpoints the WAL, with fsyncs; neither may hold a thread of the Swift pool.
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            writerQueue.async {
                continuation.resume(with: Result { try self.closeConnections() })
            }
        }
    }

    private func closeConnections() throws {
        do {
            // Every reading connection is closed, even if one fails to; the first failure is thrown.
            var failure: (any Error)?
            for slot in readers {
                slot.state.withLock { state in
                    defer { state = (nil, true) }
                    do { try state.connection?.close() } catch { failure = failure ?? error }
                }
            }
            try connection.withLock { connection in
                defer { connection = nil }
                try connection?.close()
            }
            if let failure { throw failure }
        } catch var error as ArborError {
            error.operation = "close"
            throw error
        }
    }
}

/// One of a store's reading connections, opened on first use (``SQLiteBackend/readerLimit``).
final class ReadingConnection: Sendable {
    let state = Mutex<(connection: SQLiteConnection?, isClosed: Bool)>((nil, false))
}
