import Arbor
import ArborLMDB
import ArborSQLite
import CLMDB
import CSQLite
import Foundation

/// Arbor on SQLite and LMDB against the raw engine, side by side in one run:
/// (a) the floor: `records` rows of a 32-byte random key and a 100-byte value written in one
///     transaction (prepared insert / one write txn), then `reads` random point reads;
/// (b) Arbor: `records` records of ~100 bytes committed through `Store` in commits of `batch`,
///     then `reads` random point reads at the head through a `Snapshot` of it; on SQLite, the
///     same reads once more through a second backend with ``SQLiteBackend/Configuration/memoryMapSize``
///     set (capped by SQLite's build), after the first, so the page cache favours neither.
/// Prints seconds, the Arbor/raw ratios, and the on-disk size of both stores (sum of file sizes).
///
/// With `orderedIDs`, both sides write keys in the order they sort (the raw rows' keys count up,
/// the records' ids are zero-padded counters, as time-ordered ids would be); by default the keys
/// are random, as UUIDv4 ids are.
///
/// Both sides use the adapters' default durability (SQLite WAL with `synchronous = FULL`, LMDB
/// with sync on commit), so the raw floor pays one flush and Arbor one per transaction; the raw
/// engine is also timed in transactions of `batch` rows, as Arbor commits, and that ratio is
/// printed beside the floor's. On SQLite both write timings end with the WAL checkpointed into
/// the database (`wal_checkpoint(TRUNCATE)`), and both sizes are taken with no WAL, so neither
/// side leaves work outside its timer or counts a WAL the other has not. Raw SQLite reads with a
/// page cache as large as the memory budget of Arbor's reading store
/// (``Store/Configuration/cacheMemoryLimit``).
struct EngineBenchmark {
    var records: Int
    var batch: Int = 10_000
    var reads: Int = 100_000
    var orderedIDs = false

    struct Figures {
        var write: Double
        var read: Double
        var bytes: Int
        /// The raw engine only: the same rows written in transactions of `batch` rows.
        var batchedWrite: Double? = nil
    }

    func run(engines: [String]) async throws {
        print("engines: \(records) records, commits of \(batch), \(reads) random point reads, \(orderedIDs ? "ordered" : "random") ids")
        for engine in engines {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-engines-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let raw: Figures
            let arbor: Figures
            switch engine {
            case "sqlite", "sqlite-deltas":
                // sqlite-deltas: commits restate the nodes they replace (SQLiteBackend.Configuration.restatesReplacedNodes).
                let deltas = engine == "sqlite-deltas"
                raw = try RawSQLite.run(path: folder + "/raw.sqlite", rows: records, reads: reads, ordered: orderedIDs, batch: batch)
                let path = folder + "/arbor.sqlite"
                // The same reads once more through a second backend that maps the file.
                let mapped = { try SQLiteBackend.open(.init(path: path, memoryMapSize: 1 << 40)) as any Backend }
                arbor = try await runArbor(
                    try SQLiteBackend.create(.init(path: path, restatesReplacedNodes: deltas)), label: engine, alsoReadThrough: ("with mmap", mapped),
                    settle: { try RawSQLite.checkpoint(path) }
                ) {
                    print(String(format: "sqlite arbor files: database %.1f MB, WAL %.1f MB", Double(EngineBenchmark.size(of: [path])) / 1e6, Double(EngineBenchmark.size(of: [path + "-wal"])) / 1e6))
                    return EngineBenchmark.size(of: [path, path + "-wal", path + "-shm"])
                }
            case "lmdb", "lmdb-deltas":
                // lmdb-deltas: commits restate the nodes they replace (LMDBBackend.Configuration.restatesReplacedNodes).
                let deltas = engine == "lmdb-deltas"
                raw = try RawLMDB.run(path: folder + "/raw", rows: records, reads: reads, ordered: orderedIDs, batch: batch)
                let path = folder + "/arbor"
                arbor = try await runArbor(try LMDBBackend.create(.init(path: path, restatesReplacedNodes: deltas)), label: engine) {
                    EngineBenchmark.size(ofFolder: path)
                }
            default:
                print("unknown engine \(engine); available: sqlite, sqlite-deltas, lmdb, lmdb-deltas")
                continue
            }
            print(String(format: "%-6@ raw   bulk write %9.3f s   %6d point reads %8.3f s   on disk %8.1f MB   (in transactions of %d rows: write %.3f s)",
                         engine, raw.write, reads, raw.read, Double(raw.bytes) / 1e6, batch, raw.batchedWrite ?? .nan))
            print(String(format: "%-6@ arbor commit     %9.3f s   %6d point reads %8.3f s   on disk %8.1f MB",
                         engine, arbor.write, reads, arbor.read, Double(arbor.bytes) / 1e6))
            print(String(format: "%-6@ arbor/raw: write %.2fx (target 1.5x; %.2fx against raw transactions of %d)  reads %.2fx (target 2x)  size %.2fx (target 2x)",
                         engine, arbor.write / raw.write, arbor.write / (raw.batchedWrite ?? .nan), batch,
                         arbor.read / raw.read, Double(arbor.bytes) / Double(raw.bytes)))
        }
    }

    /// `settle`: work the engine still owes after the last commit (SQLite: the checkpoint the raw
    /// floor pays inside its timer), timed and added to the write.
    private func runArbor(
        _ backend: any Backend, label: String, alsoReadThrough other: (name: String, open: () throws -> any Backend)? = nil,
        settle: () throws -> Void = {}, size: () -> Int
    ) async throws -> Figures {
        let items = CommitBenchmark.items(records, ordered: orderedIDs)
        let store = Store(backend: backend, configuration: .init(replica: "bench"))
        var (write, head) = try await CommitBenchmark.commit(items, in: store, batch: batch)
        let settling = ContinuousClock.now
        try settle()
        write += (ContinuousClock.now - settling).seconds
        // Reads through a fresh Store, so the node cache starts cold as after opening a store.
        let reader = Store(backend: backend, configuration: .init(replica: "bench"))
        var generator = SystemRandomNumberGenerator()
        let keys = CommitBenchmark.randomKeys(reads, of: items, using: &generator)
        let read = try await timeReads(keys, at: head, through: reader)
        if let other {
            let backend = try other.open()
            let seconds = try await timeReads(keys, at: head, through: Store(backend: backend, configuration: .init(replica: "bench")))
            print(String(format: "%-6@ arbor %d point reads %@: %.3f s (%.2fx the reads below, which ran first)", label, reads, other.name, seconds, seconds / read))
            try await backend.close()
        }
        // The same number of reads at the version halfway back, of records it holds: on an
        // engine that keeps replaced nodes as deltas, these read through delta chains.
        let log = try await reader.log(from: [head.id])
        if log.count > 2 {
            let middle = log[log.count / 2]
            let older = CommitBenchmark.randomKeys(reads, of: Array(items.prefix(Int(middle.recordCount))), using: &generator)
            let seconds = try await timeReads(older, at: middle, through: Store(backend: backend, configuration: .init(replica: "bench")))
            print(String(format: "%-6@ arbor %d point reads at version %d of %d (%d records): %.3f s (%.2fx the reads at the head)",
                         label, reads, log.count - log.count / 2, log.count, middle.recordCount, seconds, seconds / read))
        }
        // What the core wrote, before the engine's own overhead: object count and bytes.
        var objects = 0, objectBytes = 0, largest = 0
        try await backend.enumerateHashes(batchSize: 10_000) { hashes in
            for bytes in try await backend.get(hashes).values {
                objects += 1
                objectBytes += bytes.count
                largest = max(largest, bytes.count)
            }
        }
        print(String(format: "%-6@ arbor objects: %d, %.1f MB of object bytes (mean %d, largest %d bytes)",
                     label, objects, Double(objectBytes) / 1e6, objectBytes / max(objects, 1), largest))
        try await store.close()
        return Figures(write: write, read: read, bytes: size())
    }

    /// Seconds to read every one of `keys` at `head` through `store`, each checked to exist.
    private func timeReads(_ keys: [RecordKey], at head: Version, through store: Store) async throws -> Double {
        let start = ContinuousClock.now
        try await Self.readEach(keys, from: try await store.snapshot(at: head.id))
        return (ContinuousClock.now - start).seconds
    }

    /// Reads every one of `keys` through `snapshot`, one point read each, checked to exist.
    static func readEach(_ keys: some Sequence<RecordKey>, from snapshot: Snapshot) async throws {
        for key in keys where try await snapshot.record(key) == nil {
            throw ArborError(.engine, "benchmark check failed: \(key) is missing")
        }
    }

    static func size(of files: [String]) -> Int {
        files.reduce(0) { total, file in
            total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.intValue ?? 0)
        }
    }

    static func size(ofFolder folder: String) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return size(of: names.map { folder + "/" + $0 })
    }

    /// `count` rows of 32-byte keys and 100-byte values; `ordered`: keys that count up (a random
    /// prefix, then the row's number, big-endian), in the order they sort.
    static func randomRows(_ count: Int, ordered: Bool = false) -> (keys: [[UInt8]], value: (Int) -> [UInt8]) {
        // A fast seeded generator: a byte at a time from the system generator is a syscall each.
        var generator = FastRandom(state: UInt64(UInt32.random(in: 0...UInt32.max)))
        func bytes(_ count: Int) -> [UInt8] {
            var result = [UInt8]()
            result.reserveCapacity(count + 8)
            while result.count < count { withUnsafeBytes(of: generator.next()) { result.append(contentsOf: $0) } }
            return Array(result.prefix(count))
        }
        let prefix = bytes(24)
        let keys = (0..<count).map { index in ordered ? prefix + withUnsafeBytes(of: UInt64(index).bigEndian, Array.init) : bytes(32) }
        let values = (0..<64).map { _ in bytes(100) }
        return (keys, { values[$0 % values.count] })
    }
}

/// The raw SQLite floor: the best table shape for rows this small (a `WITHOUT ROWID` table
/// keyed by a 32-byte blob), WAL, one prepared insert, the rows in one transaction (and again,
/// into another file, in transactions of `batch` rows); reads with one prepared select.
enum RawSQLite {
    static func run(path: String, rows: Int, reads: Int, ordered: Bool, batch: Int) throws -> EngineBenchmark.Figures {
        let (keys, value) = EngineBenchmark.randomRows(rows, ordered: ordered)
        let batchedWrite = try RawSQLiteFile(path: path + "-batched").write(keys, value, transactionRows: batch)
        let write = try RawSQLiteFile(path: path).write(keys, value, transactionRows: rows)
        // Read through a connection of its own, whose page cache starts empty, as Arbor's
        // reading connections and caches do (the writer's cache held the whole table).
        let read = try RawSQLiteFile(path: path, creating: false).read(keys, reads: reads)
        return .init(write: write, read: read, bytes: EngineBenchmark.size(of: [path, path + "-wal", path + "-shm"]), batchedWrite: batchedWrite)
    }

    /// Checkpoints the WAL of the database at `path` into it and truncates the WAL, through a
    /// connection of its own (as a writer's last commit leaves it, less what was checkpointed).
    static func checkpoint(_ path: String) throws {
        let file = try RawSQLiteFile(path: path, creating: false)
        try file.exec("PRAGMA wal_checkpoint(TRUNCATE)")
    }
}

/// One raw SQLite connection, closed when it goes.
final class RawSQLiteFile {
    let path: String
    let db: OpaquePointer
    private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(path: String, creating: Bool = true) throws {
        self.path = path
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | (creating ? SQLITE_OPEN_CREATE : 0)
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK, let handle else {
            sqlite3_close_v2(handle)
            throw ArborError(.engine, "raw sqlite: cannot open \(path)")
        }
        db = handle
        sqlite3_busy_timeout(db, 10_000)
    }

    deinit { sqlite3_close_v2(db) }

    func exec(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw ArborError(.engine, "raw sqlite: \(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw ArborError(.engine, "raw sqlite: \(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
        return statement
    }

    /// Seconds to write the rows in transactions of `transactionRows`, and to checkpoint the WAL
    /// into the database at the end (the timer stops with every row in the database file).
    func write(_ keys: [[UInt8]], _ value: (Int) -> [UInt8], transactionRows: Int) throws -> Double {
        // The page cache and checkpoint interval Arbor's writing connection has
        // (SQLiteBackend.Configuration.writerCacheSize, `wal_autocheckpoint = 8192`).
        try exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA cache_size = -32768; PRAGMA wal_autocheckpoint = 8192")
        try exec("CREATE TABLE kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID")
        let insert = try prepare("INSERT INTO kv (key, value) VALUES (?1, ?2)")
        defer { sqlite3_finalize(insert) }
        let start = ContinuousClock.now
        for first in stride(from: 0, to: keys.count, by: max(transactionRows, 1)) {
            try exec("BEGIN IMMEDIATE")
            for index in first..<min(first + transactionRows, keys.count) {
                let row = value(index)
                _ = keys[index].withUnsafeBytes { sqlite3_bind_blob(insert, 1, $0.baseAddress, 32, transient) }
                _ = row.withUnsafeBytes { sqlite3_bind_blob(insert, 2, $0.baseAddress, Int32($0.count), transient) }
                guard sqlite3_step(insert) == SQLITE_DONE else { throw ArborError(.engine, "raw sqlite insert: \(String(cString: sqlite3_errmsg(db)))") }
                sqlite3_reset(insert)
            }
            try exec("COMMIT")
        }
        try exec("PRAGMA wal_checkpoint(TRUNCATE)")
        return (ContinuousClock.now - start).seconds
    }

    /// Seconds for `reads` point reads of keys picked at random from `keys`, each value copied out.
    func read(_ keys: [[UInt8]], reads: Int) throws -> Double {
        // The memory Arbor's reading store may use for its caches (Store.Configuration.cacheMemoryLimit).
        try exec("PRAGMA cache_size = -\(Store.Configuration().cacheMemoryLimit / 1024)")
        let select = try prepare("SELECT value FROM kv WHERE key = ?1")
        defer { sqlite3_finalize(select) }
        var generator = SystemRandomNumberGenerator()
        let picks = (0..<reads).map { _ in keys[Int.random(in: 0..<keys.count, using: &generator)] }
        let readStart = ContinuousClock.now
        var total = 0
        for key in picks {
            _ = key.withUnsafeBytes { sqlite3_bind_blob(select, 1, $0.baseAddress, 32, transient) }
            guard sqlite3_step(select) == SQLITE_ROW else { throw ArborError(.engine, "raw sqlite: a key is missing") }
            // Copy the value out, as Arbor does.
            let count = Int(sqlite3_column_bytes(select, 0))
            if let base = sqlite3_column_blob(select, 0) { total += [UInt8](UnsafeRawBufferPointer(start: base, count: count)).count }
            sqlite3_reset(select)
        }
        let read = (ContinuousClock.now - readStart).seconds
        guard total == reads * 100 else { throw ArborError(.engine, "raw sqlite: read \(total) bytes, not \(reads * 100)") }
        return read
    }
}

/// The raw LMDB floor: one environment, `mdb_put` per row, the rows in one write transaction (and
/// again, into another environment, in transactions of `batch` rows); one read transaction per
/// point read (as Arbor's backend does per batch).
enum RawLMDB {
    static func run(path: String, rows: Int, reads: Int, ordered: Bool, batch: Int) throws -> EngineBenchmark.Figures {
        let (keys, value) = EngineBenchmark.randomRows(rows, ordered: ordered)
        let batchedWrite = try RawLMDBEnvironment(path: path + "-batched", rows: rows).write(keys, value, transactionRows: batch)
        let environment = try RawLMDBEnvironment(path: path, rows: rows)
        let write = try environment.write(keys, value, transactionRows: rows)
        let read = try environment.read(keys, reads: reads)
        return .init(write: write, read: read, bytes: EngineBenchmark.size(ofFolder: path), batchedWrite: batchedWrite)
    }
}

/// One raw LMDB environment with one database, closed when it goes.
final class RawLMDBEnvironment {
    let env: OpaquePointer
    private var dbi: MDB_dbi = 0

    static func check(_ call: String, _ code: Int32) throws {
        if code != 0 { throw ArborError(.engine, "raw lmdb: \(call): \(String(cString: mdb_strerror(code)))") }
    }

    init(path: String, rows: Int) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var handle: OpaquePointer?
        try Self.check("mdb_env_create", mdb_env_create(&handle))
        guard let handle else { throw ArborError(.engine, "raw lmdb: no environment") }
        do {
            try Self.check("mdb_env_set_maxdbs", mdb_env_set_maxdbs(handle, 4))
            try Self.check("mdb_env_set_mapsize", mdb_env_set_mapsize(handle, max(1 << 30, rows * 400)))
            try Self.check("mdb_env_open", mdb_env_open(handle, path, UInt32(MDB_NOTLS), 0o600))
        } catch {
            mdb_env_close(handle)
            throw error
        }
        env = handle
    }

    deinit { mdb_env_close(env) }

    /// Seconds to write the rows in write transactions of `transactionRows` rows each.
    func write(_ keys: [[UInt8]], _ value: (Int) -> [UInt8], transactionRows: Int) throws -> Double {
        let start = ContinuousClock.now
        for first in stride(from: 0, to: keys.count, by: max(transactionRows, 1)) {
            var txn: OpaquePointer?
            try Self.check("mdb_txn_begin", mdb_txn_begin(env, nil, 0, &txn))
            do {
                try Self.check("mdb_dbi_open", mdb_dbi_open(txn, "kv", UInt32(MDB_CREATE), &dbi))
                for index in first..<min(first + transactionRows, keys.count) {
                    let row = value(index)
                    let code = keys[index].withUnsafeBytes { k in
                        row.withUnsafeBytes { v in
                            var keyValue = MDB_val(mv_size: 32, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                            var dataValue = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                            return mdb_put(txn, dbi, &keyValue, &dataValue, 0)
                        }
                    }
                    try Self.check("mdb_put", code)
                }
            } catch {
                mdb_txn_abort(txn)
                throw error
            }
            try Self.check("mdb_txn_commit", mdb_txn_commit(txn))
        }
        return (ContinuousClock.now - start).seconds
    }

    /// Seconds for `reads` point reads of keys picked at random from `keys`, each value copied out.
    func read(_ keys: [[UInt8]], reads: Int) throws -> Double {
        var generator = SystemRandomNumberGenerator()
        let picks = (0..<reads).map { _ in keys[Int.random(in: 0..<keys.count, using: &generator)] }
        let readStart = ContinuousClock.now
        var total = 0
        for key in picks {
            var read: OpaquePointer?
            try Self.check("mdb_txn_begin", mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &read))
            var data = MDB_val()
            let code = key.withUnsafeBytes { k in
                var keyValue = MDB_val(mv_size: 32, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                return mdb_get(read, dbi, &keyValue, &data)
            }
            if code == 0, let base = data.mv_data { total += [UInt8](UnsafeRawBufferPointer(start: base, count: data.mv_size)).count }
            mdb_txn_abort(read)
            try Self.check("mdb_get", code)
        }
        let read = (ContinuousClock.now - readStart).seconds
        guard total == reads * 100 else { throw ArborError(.engine, "raw lmdb: read \(total) bytes, not \(reads * 100)") }
        return read
    }
}

/// SplitMix64: fast, seeded, good enough for benchmark keys.
struct FastRandom: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
