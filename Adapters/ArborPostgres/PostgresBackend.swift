import Arbor
import Dispatch

/// A store in a PostgreSQL database: three tables in the connection's current schema.
///
/// ```
/// arbor_meta     (key text primary key, value text not null)   format = arbor-postgres-store, version = 1
/// arbor_objects  (hash bytea primary key, bytes bytea not null) one row per object
/// arbor_refs     (name text primary key, hash bytea not null)   one row per ref
/// ```
///
/// Hashes and objects travel as binary `bytea` parameters and results; batches go as one
/// `bytea[]` parameter in PostgreSQL's binary array format (`= ANY($1)`, `unnest`), so no SQL is
/// ever built from data. A batch `put` is one transaction. Refs change by compare-and-swap in a
/// single statement, which PostgreSQL makes atomic across every process using the database.
///
/// The URL is handed to libpq as a connection URI, so its query parameters work as usual
/// (`sslmode=require`, `connect_timeout=5`, `options=-csearch_path%3Dmyschema` to keep the store
/// in another schema). Messages show the URL with its password replaced by `***`.
public final class PostgresBackend: Backend {
    /// Where the database is and how many connections to keep.
    ///
    /// Its description, debug description and reflection show the URL with the password
    /// replaced by `***`.
    public struct Configuration: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        /// `postgres://user:password@host:port/database` (also `postgresql://`), with optional
        /// libpq query parameters.
        public var url: String
        /// The most connections this backend opens at once (they are opened on demand).
        public var maximumConnections: Int
        /// Seconds to wait for the server when connecting (unless the URL sets `connect_timeout`).
        public var connectTimeout: Int
        /// Seconds a call waits for a lock another session holds (an administrator's `LOCK
        /// TABLE`, a transaction left open, another writer's write of the same objects) before
        /// it fails with ``ArborError/Code/engine``, changing nothing; 0 waits without bound. Up
        /// to 2,147,483. Unless the server, the database, the role or the URL
        /// (`options=-c%20lock_timeout%3D…`) sets `lock_timeout`, to 0 (no limit) included.
        public var lockTimeout: Int

        public init(url: String, maximumConnections: Int = 4, connectTimeout: Int = 10, lockTimeout: Int = 300) {
            self.url = url
            self.maximumConnections = maximumConnections
            self.connectTimeout = connectTimeout
            self.lockTimeout = lockTimeout
        }

        /// The URL with the password replaced by `***`.
        public var redactedURL: String { target.redacted }
        var target: ConnectionTarget { ConnectionTarget(url: url, connectTimeout: connectTimeout, lockTimeout: lockTimeout) }

        public var description: String { "PostgresBackend.Configuration(\(redactedURL))" }
        public var debugDescription: String { description }
        public var customMirror: Mirror {
            Mirror(self, children: [
                "url": redactedURL, "maximumConnections": maximumConnections, "connectTimeout": connectTimeout, "lockTimeout": lockTimeout,
            ])
        }
    }

    static let formatName = "arbor-postgres-store"
    static let formatVersion = "1"
    static let engine = "postgres"

    /// The largest object stored: PostgreSQL's 1 GB limit on one allocation, less what lz4's
    /// compression of a value asks beyond its size (`n/255 + 24` bytes: the objects table
    /// compresses with lz4 where the server has it) and room for the `bytea[]` parameter's
    /// header (an object this large goes in a statement of its own).
    static let largestObject = (1 << 30) / 256 * 255 - (1 << 20)
    /// Objects per statement: keeps each `bytea[]` parameter well below PostgreSQL's 1 GB limit.
    static let objectsPerStatement = 10_000
    /// Bytes per statement (an object larger than this goes alone). The parameter and libpq's
    /// copy of it in its output buffer are most of a write's memory: 4 MB rather than 32 took
    /// 43 MB off the peak heap of a migration of 1,000,000 records into PostgreSQL (198 → 155 MB),
    /// and its copy ran 8% faster.
    static let bytesPerStatement = 4 << 20

    public let engineName = "postgres"
    public let configuration: Configuration
    private let pool: ConnectionPool

    /// Whether the server scans a range of the objects table's pages by itself (a TID range
    /// scan, PostgreSQL 14 and later), which ``enumerateObjects(batchSize:_:)`` uses.
    private let scansPageRanges: Bool

    private init(configuration: Configuration, connection: PGConnection) {
        self.configuration = configuration
        scansPageRanges = connection.serverVersion >= 14_00_00
        pool = ConnectionPool(target: configuration.target, maximumConnections: configuration.maximumConnections, first: connection)
    }

    // MARK: Creating and opening

    /// Creates the Arbor tables in an existing database. Throws ``ArborError/Code/alreadyExists``
    /// (leaving everything as it is) if the database already holds an Arbor store or tables of
    /// the same names, ``ArborError/Code/notFound`` if the database does not exist,
    /// ``ArborError/Code/connection`` or ``ArborError/Code/permissionDenied`` if the server
    /// cannot be reached or refuses the login.
    ///
    /// This variant blocks the calling thread while it talks to the server; from async code the
    /// `async` overload is chosen, which does that on a dispatch queue.
    public static func create(_ configuration: Configuration) throws -> PostgresBackend {
        let connection = try PGConnection(configuration.target, operation: "create")
        try Schema.create(on: connection)
        return PostgresBackend(configuration: configuration, connection: connection)
    }

    /// Opens the Arbor store in a database. Throws ``ArborError/Code/notFound`` if the database
    /// holds no Arbor store (or does not exist), ``ArborError/Code/unsupportedFormat`` if it holds
    /// another program's tables or a store of another format version.
    ///
    /// This variant blocks the calling thread while it talks to the server; from async code the
    /// `async` overload is chosen, which does that on a dispatch queue.
    public static func open(_ configuration: Configuration) throws -> PostgresBackend {
        let connection = try PGConnection(configuration.target, operation: "open")
        try Schema.check(on: connection)
        return PostgresBackend(configuration: configuration, connection: connection)
    }

    /// ``create(_:)-(Configuration)``, with the blocking work on a dispatch queue.
    public static func create(_ configuration: Configuration) async throws -> PostgresBackend {
        try await offThePool { try create(configuration) }
    }

    /// ``open(_:)-(Configuration)``, with the blocking work on a dispatch queue.
    public static func open(_ configuration: Configuration) async throws -> PostgresBackend {
        try await offThePool { try open(configuration) }
    }

    private static func offThePool(_ body: @escaping @Sendable () throws -> PostgresBackend) async throws -> PostgresBackend {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }

    // MARK: Objects

    private func checkOpen(_ operation: String) throws {
        if pool.isClosed { throw ArborError(.closed, "the store is closed", backend: engineName, operation: operation) }
    }

    public func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try await lookUp(hashes, Statements.get, "get", into: [:]) { rows, result in rows.collectObjects(into: &result) }
    }

    /// Runs `statement` (the rows of the objects among $1) over `hashes`, each once, a statement
    /// per ``objectsPerStatement`` of them on one connection; `collect` adds each statement's
    /// rows to the result, which starts as `empty`.
    private func lookUp<Value: Sendable>(
        _ hashes: [Hash], _ statement: PreparedStatement, _ operation: String, into empty: Value,
        _ collect: @escaping @Sendable (PGResult, inout Value) -> Void
    ) async throws -> Value {
        try checkOpen(operation)
        if hashes.isEmpty { return empty }
        let unique = Array(Set(hashes))
        return try await pool.withConnection(operation, rerunsOnALostConnection: true) { connection in
            var result = empty
            for start in stride(from: 0, to: unique.count, by: Self.objectsPerStatement) {
                let chunk = unique[start..<min(start + Self.objectsPerStatement, unique.count)]
                collect(try connection.execute(statement, [.hashArray(chunk)], operation: operation), &result)
            }
            return result
        }
    }

    /// The objects among `hashes` and up to `limit` objects in all of them and their ancestors,
    /// in one recursive query: the server reads each commit's parents from its bytes (the
    /// commit layout of FORMAT.md, section 6.4) and follows them, a generation per step. An
    /// object that is not a commit is returned but not followed.
    public func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]] {
        try checkOpen("get")
        if hashes.isEmpty { return [:] }
        let unique = Array(Set(hashes))
        guard unique.count <= Self.objectsPerStatement else { return try await get(unique) }
        return try await pool.withConnection("get", rerunsOnALostConnection: true) { connection in
            let rows = try connection.execute(Statements.ancestry, [.hashArray(unique), .int64(Int64(max(limit, unique.count)))], operation: "get")
            var result = [Hash: [UInt8]](minimumCapacity: rows.rowCount)
            rows.collectObjects(into: &result)
            return result
        }
    }

    /// The sizes of the objects among `hashes` that the store holds: `octet_length` of a value
    /// kept out of line reads its size from the pointer to it, not the value.
    public func objectSizes(_ hashes: [Hash]) async throws -> [Hash: Int]? {
        try await lookUp(hashes, Statements.sizes, "get", into: [Hash: Int]()) { rows, result in
            for row in 0..<rows.rowCount {
                if let hash = rows.hash(row, 0), let size = rows.int64(row, 1) { result[hash] = Int(size) }
            }
        }
    }

    public func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        try await lookUp(hashes, Statements.contains, "contains", into: Set<Hash>()) { rows, result in
            for row in 0..<rows.rowCount { if let hash = rows.hash(row, 0) { result.insert(hash) } }
        }
    }

    public func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try await write(objects, Statements.put, operation: "put")
    }

    /// Stores objects over what the store holds under their hashes (for repairs only), in one
    /// transaction, in statements as ``put(_:)`` makes them.
    ///
    /// - Complexity: O(*k* log *n*) for *k* objects in a store of *n*.
    public func replace(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try await write(objects, Statements.replace, operation: "replace")
    }

    /// Runs `statement` (`$1`: hashes, `$2`: bytes) over `objects`, in sorted statements of
    /// bounded size, in one transaction.
    private func write(_ objects: [(hash: Hash, bytes: [UInt8])], _ statement: PreparedStatement, operation: String) async throws {
        try checkOpen(operation)
        if objects.isEmpty { return }
        // Refused before anything is written: the server would refuse it mid-batch, and a length
        // past Int32 would not even make the statement's parameter.
        if let large = objects.first(where: { $0.bytes.count > Self.largestObject }) {
            throw ArborError(
                .invalidInput, "object \(large.hash) is \(large.bytes.count) bytes, more than one PostgreSQL value holds (about 1 GB); nothing was written",
                backend: engineName, operation: operation)
        }
        // Sorted and without duplicates: every writer takes the row locks of a batch in the same
        // order, so concurrent writers of overlapping batches wait for each other, never deadlock.
        var sorted = objects.sorted { $0.hash < $1.hash }
        var kept = 0
        for read in sorted.indices where kept == 0 || sorted[read].hash != sorted[kept - 1].hash {
            sorted[kept] = sorted[read]
            kept += 1
        }
        sorted.removeSubrange(kept...)
        var chunks = [Range<Int>]()
        var start = 0, bytes = 0
        for index in sorted.indices {
            if index > start && (index - start >= Self.objectsPerStatement || bytes + sorted[index].bytes.count > Self.bytesPerStatement) {
                chunks.append(start..<index)
                start = index
                bytes = 0
            }
            bytes += sorted[index].bytes.count + 40
        }
        chunks.append(start..<sorted.count)
        let batch = sorted, ranges = chunks
        try await pool.withConnection(operation) { connection in
            func insert(_ range: Range<Int>) throws {
                let slice = batch[range]
                let hashes = PGValue.hashArray(slice.lazy.map(\.hash))
                let payloads = PGValue.byteaArray(slice, byteCount: slice.reduce(0) { $0 + $1.bytes.count }) { object, buffer in
                    buffer.append(contentsOf: object.bytes)
                }
                try connection.execute(statement, [hashes, payloads], operation: operation)
            }
            if ranges.count == 1 {
                try insert(ranges[0])  // one statement is one transaction
            } else {
                try connection.transaction(operation: operation) { for range in ranges { try insert(range) } }
            }
        }
    }

    public func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        try await scanObjects(Statements.page, batchSize: batchSize, hashOf: { $0 }, body) { rows in try rows.hashes() }
    }

    /// Every object with its bytes, in batches of at most `batchSize`, in the order the objects
    /// table keeps them: a range of its pages per statement, each page read once. In hash order
    /// (through the primary key's index) a scan of a table larger than the shared buffers visits
    /// each page once per row on it, and after a bulk write (a migration's verification) sets
    /// each row's hint bits on a page evicted and written back in between: 1.4–1.6 s of server
    /// time against 0.2 s for 275,000 objects of 2.9 KB (PostgreSQL 15, 128 MB of shared buffers).
    ///
    /// Servers older than 14 (no TID range scans) enumerate in hash order. A rewrite of the
    /// table during the enumeration (`VACUUM FULL`, `CLUSTER`) moves its rows, so it is detected
    /// and thrown (``ArborError/Code/engine``) rather than skip or repeat objects.
    ///
    /// The scans bring objects up to ``enumerationInlineBytes`` with their rows, and only the
    /// size of larger ones, which are then read by hash, as many at once as
    /// ``enumerationBatchBytes`` holds: a page of the table holds a hundred rows of large
    /// objects kept out of line, and a range of pages sized for a batch of small rows held
    /// gigabytes of large ones. Ranges are sized by the bytes they bring, too, and each batch
    /// ends once it holds ``enumerationBatchBytes``.
    ///
    /// - Complexity: O(*n*) for *n* objects, in O(`batchSize`) memory.
    public func enumerateObjects(batchSize: Int, _ body: ([(hash: Hash, bytes: [UInt8])]) async throws -> Void) async throws {
        let limit = max(batchSize, 1)
        let deliver: ([EnumeratedObject]) async throws -> Void = { rows in try await self.deliver(rows, limit: limit, to: body) }
        guard scansPageRanges else {
            return try await scanObjects(Statements.pageObjects, batchSize: batchSize, hashOf: \.hash, deliver) { rows in try rows.enumeratedObjects() }
        }
        try await scanPageRanges(Statements.pageRange, batchSize: batchSize, bytes: { $0.bytes?.count ?? 0 }, deliver) { rows in try rows.enumeratedObjects() }
    }

    /// Objects larger than this come out of an enumeration's scan as their size alone, and are
    /// read by hash after. About PostgreSQL's threshold for keeping values out of line (2 KB):
    /// a page's rows then bring little more than the page, and a range is sized by its pages.
    static let enumerationInlineBytes = 2_000

    /// Hands `rows` to `body` in batches of at most `limit` objects that stop growing once they
    /// hold ``enumerationBatchBytes``, reading the objects the scan gave by size alone, as many
    /// at once as that holds. An object deleted since the scan is left out, as if the scan had
    /// come after the delete.
    private func deliver(
        _ rows: [EnumeratedObject], limit: Int, to body: ([(hash: Hash, bytes: [UInt8])]) async throws -> Void
    ) async throws {
        var batch = [(hash: Hash, bytes: [UInt8])](), batchBytes = 0
        func add(_ hash: Hash, _ bytes: [UInt8]) async throws {
            if batch.count == limit || (!batch.isEmpty && batchBytes + bytes.count > enumerationBatchBytes) {
                try await body(batch)
                (batch, batchBytes) = ([], 0)
            }
            batch.append((hash, bytes))
            batchBytes += bytes.count
        }
        var index = 0
        while index < rows.count {
            if let bytes = rows[index].bytes {
                try await add(rows[index].hash, bytes)
                index += 1
                continue
            }
            // A run of large objects, as many as a batch's bytes hold (one at least).
            var run = [Hash](), runBytes = 0
            while index < rows.count, rows[index].bytes == nil, run.count < limit,
                  run.isEmpty || runBytes + rows[index].size <= enumerationBatchBytes {
                run.append(rows[index].hash)
                runBytes += rows[index].size
                index += 1
            }
            let found = try await get(run)
            for hash in run { if let bytes = found[hash] { try await add(hash, bytes) } }
        }
        if !batch.isEmpty { try await body(batch) }
    }

    /// Every object's hash and size, each checked by the server (`sha256(bytes) = hash`), a
    /// range of the objects table's pages per statement as for
    /// ``enumerateObjects(batchSize:_:)``: only 41 bytes of each object travel. `false` from
    /// servers older than 14, which read the objects instead.
    ///
    /// - Complexity: O(*n*) for *n* objects, in O(`batchSize`) memory.
    public func enumerateHashesCheckedByEngine(batchSize: Int, _ body: ([(hash: Hash, size: Int)]) async throws -> Void) async throws -> Bool {
        guard scansPageRanges else { return false }
        try await scanPageRanges(Statements.pageRangeChecked, batchSize: batchSize, body) { rows in
            try (0..<rows.rowCount).map { row in
                guard let hash = rows.hash(row, 0) else {
                    throw ArborError(.corruptObject, "an object's key is not a 32-byte hash", backend: Self.engine, operation: "enumerate")
                }
                guard rows.bool(row, 2) == true else {
                    throw ArborError(.corruptObject, "object \(hash) does not match its hash", backend: Self.engine, operation: "enumerate")
                }
                return (hash, Int(rows.int64(row, 1) ?? 0))
            }
        }
        return true
    }

    /// Runs `statement` (the rows on pages [$1, $2) of the objects table) over the whole table,
    /// a range of pages at a time, sized to give about `batchSize` rows; `rows` reads a range's
    /// results, which go to `body` in batches of at most `batchSize`. A rewrite of the table
    /// meanwhile is thrown (``ArborError/Code/engine``).
    ///
    /// `bytes` tells the bytes a row brings: a range is then also sized to bring about
    /// ``enumerationBatchBytes``, from the last range's bytes per page (a table of small rows
    /// followed by denser larger ones would make ranges of hundreds of megabytes otherwise).
    private func scanPageRanges<Row: Sendable>(
        _ statement: PreparedStatement, batchSize: Int, bytes: (Row) -> Int = { _ in 0 }, _ body: ([Row]) async throws -> Void,
        rows: @escaping @Sendable (PGResult) throws -> [Row]
    ) async throws {
        try checkOpen("enumerate")
        let limit = max(batchSize, 1)
        let start = try await pool.withConnection("enumerate", rerunsOnALostConnection: true) { try Self.objectsTableExtent($0) }
        var end = start.pages
        var page: Int64 = 0
        // Pages per statement, sized from the rows per page seen so far to make about a batch.
        var span = Int64(max(1, limit / 64))
        var rowsSeen = 0
        while page < end {
            let range = (from: page, to: page + span)
            let (found, extent) = try await pool.withConnection("enumerate", rerunsOnALostConnection: true) { connection in
                let result = try connection.execute(statement, [.int64(range.from), .int64(range.to)], operation: "enumerate")
                return (try rows(result), try Self.objectsTableExtent(connection))
            }
            guard extent.file == start.file else {
                throw ArborError(.engine, "the objects table was rewritten (VACUUM FULL, CLUSTER or TRUNCATE) during the enumeration of \(configuration.redactedURL); run it again",
                                 backend: engineName, operation: "enumerate")
            }
            for first in stride(from: 0, to: found.count, by: limit) { try await body(Array(found[first..<min(first + limit, found.count)])) }
            rowsSeen += found.count
            page = range.to
            end = extent.pages  // rows added meanwhile at the end are read too
            let rangeBytes = found.reduce(0) { $0 + bytes($1) }
            let byBytes = rangeBytes == 0 ? Int64.max : max(1, Int64(enumerationBatchBytes) * (range.to - range.from) / Int64(rangeBytes))
            span = max(1, min(1 << 16, byBytes, rowsSeen == 0 ? span * 2 : Int64(limit) * page / Int64(rowsSeen)))
        }
    }

    /// The objects table's file (which a rewrite changes) and its length in pages.
    private static func objectsTableExtent(_ connection: PGConnection) throws -> (file: String, pages: Int64) {
        let rows = try connection.execute(
            "SELECT pg_relation_filenode('arbor_objects')::text, (pg_relation_size('arbor_objects') / current_setting('block_size')::int8)::text",
            operation: "enumerate")
        guard rows.rowCount == 1, let file = rows.text(0, 0), let pages = rows.text(0, 1).flatMap({ Int64($0) }) else {
            throw ArborError(.engine, "the server did not say how large the objects table is", backend: engine, operation: "enumerate")
        }
        return (file, pages)
    }

    /// Runs `statement` (up to a number of objects after a hash, in hash order, the hash first)
    /// page by page; `rows` reads a page's results.
    private func scanObjects<Row: Sendable>(
        _ statement: PreparedStatement, batchSize: Int, hashOf: (Row) -> Hash, _ body: ([Row]) async throws -> Void,
        rows: @escaping @Sendable (PGResult) throws -> [Row]
    ) async throws {
        try checkOpen("enumerate")
        let limit = max(batchSize, 1)
        var after: [UInt8] = []  // the empty bytea sorts before every hash
        while true {
            let cursor = after
            // Keyset pagination: each page is its own short statement, so no transaction or
            // connection is held while `body` runs.
            let page = try await pool.withConnection("enumerate", rerunsOnALostConnection: true) { connection in
                try rows(connection.execute(statement, [.bytes(cursor), .int64(Int64(limit))], operation: "enumerate"))
            }
            if !page.isEmpty { try await body(page) }
            guard page.count == limit, let last = page.last else { return }
            after = hashOf(last).bytes
        }
    }

    public func delete(_ hashes: [Hash]) async throws {
        try checkOpen("delete")
        if hashes.isEmpty { return }
        let unique = Array(Set(hashes)).sorted()
        try await pool.withConnection("delete") { connection in
            try connection.transaction(operation: "delete") {
                for start in stride(from: 0, to: unique.count, by: Self.objectsPerStatement) {
                    let chunk = unique[start..<min(start + Self.objectsPerStatement, unique.count)]
                    try connection.execute(Statements.delete, [.hashArray(chunk)], operation: "delete")
                }
            }
        }
    }

    // MARK: Refs

    public func refs() async throws -> [String: Hash] {
        try checkOpen("refs")
        return try await pool.withConnection("refs", rerunsOnALostConnection: true) { connection in
            let rows = try connection.execute(Statements.refs, [], operation: "refs")
            var result = [String: Hash]()
            for row in 0..<rows.rowCount {
                guard let name = rows.text(row, 0), let hash = rows.hash(row, 1) else {
                    throw ArborError(.corruptObject, "a row of arbor_refs does not hold a 32-byte hash", backend: Self.engine, operation: "refs")
                }
                result[name] = hash
            }
            return result
        }
    }

    public func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try checkOpen("compareAndSwap")
        try RefName.validate(name, backend: engineName)
        return try await pool.withConnection("compareAndSwap") { connection in
            // One statement each: PostgreSQL re-checks the WHERE clause on the newest row version
            // (and ON CONFLICT waits for a concurrent insert), so exactly one racer wins.
            switch (expected, new) {
            case (nil, let new?):
                return try connection.execute(Statements.insertRef, [.text(name), .bytes(new.bytes)], operation: "compareAndSwap").affectedRows == 1
            case (let expected?, let new?):
                return try connection.execute(Statements.updateRef, [.text(name), .bytes(expected.bytes), .bytes(new.bytes)], operation: "compareAndSwap").affectedRows == 1
            case (let expected?, nil):
                return try connection.execute(Statements.deleteRef, [.text(name), .bytes(expected.bytes)], operation: "compareAndSwap").affectedRows == 1
            case (nil, nil):
                return try connection.execute(Statements.refAbsent, [.text(name)], operation: "compareAndSwap").bytes(0, 0) == [1]
            }
        }
    }

    public func close() async throws {
        pool.close()
    }
}

/// The statements the backend prepares on each connection.
enum Statements {
    static let get = PreparedStatement(
        name: "arbor_get", sql: "SELECT hash, bytes FROM arbor_objects WHERE hash = ANY($1::bytea[])", types: [PGType.byteaArray])
    /// The asked objects first, then breadth first through commit parents: a commit is
    /// `a1 03`, its root (32 bytes), a parent count below 128 (one varint byte) at offset 34,
    /// and the parents from offset 35. The `CASE` keeps `get_byte` off objects too short or of
    /// another kind; `UNION` drops versions reached twice; `LIMIT` ends the recursion early.
    ///
    /// Written so that the planner looks each parent up by the primary key (`LIMIT 1` keeps the
    /// lookup a subquery): as a plain join it hashes the whole objects table instead. The
    /// planner expects a thousand parents per version, a cost that would make it JIT-compile
    /// the query (150 ms for a walk that takes one), so connections turn JIT off.
    static let ancestry = PreparedStatement(
        name: "arbor_ancestry",
        sql: """
            WITH RECURSIVE walk(hash, bytes) AS (
                SELECT hash, bytes FROM arbor_objects WHERE hash = ANY($1::bytea[])
              UNION
                SELECT o.hash, o.bytes FROM walk w
                CROSS JOIN LATERAL generate_series(0, CASE
                    WHEN octet_length(w.bytes) >= 35 AND substring(w.bytes FROM 1 FOR 2) = decode('a103', 'hex')
                    THEN least(get_byte(w.bytes, 34), (octet_length(w.bytes) - 35) / 32) - 1 ELSE -1 END) AS parent(i)
                CROSS JOIN LATERAL (
                    SELECT hash, bytes FROM arbor_objects WHERE hash = substring(w.bytes FROM 36 + 32 * parent.i FOR 32) LIMIT 1) AS o
            )
            SELECT hash, bytes FROM walk LIMIT $2
            """,
        types: [PGType.byteaArray, PGType.int8])
    static let sizes = PreparedStatement(
        name: "arbor_sizes", sql: "SELECT hash, octet_length(bytes)::int8 FROM arbor_objects WHERE hash = ANY($1::bytea[])", types: [PGType.byteaArray])
    static let contains = PreparedStatement(
        name: "arbor_contains", sql: "SELECT hash FROM arbor_objects WHERE hash = ANY($1::bytea[])", types: [PGType.byteaArray])
    static let put = PreparedStatement(
        name: "arbor_put",
        sql: "INSERT INTO arbor_objects (hash, bytes) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (hash) DO NOTHING",
        types: [PGType.byteaArray, PGType.byteaArray])
    static let replace = PreparedStatement(
        name: "arbor_replace",
        sql: "INSERT INTO arbor_objects (hash, bytes) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (hash) DO UPDATE SET bytes = excluded.bytes",
        types: [PGType.byteaArray, PGType.byteaArray])
    static let page = PreparedStatement(
        name: "arbor_page", sql: "SELECT hash FROM arbor_objects WHERE hash > $1 ORDER BY hash LIMIT $2", types: [PGType.bytea, PGType.int8])
    /// The objects on pages [$1, $2) of the table: a TID range scan (PostgreSQL 14+).
    /// (Objects larger than ``PostgresBackend/enumerationInlineBytes`` come as their size alone:
    /// `octet_length` of a value kept out of line reads its size from the pointer to it.)
    static let pageRange = PreparedStatement(
        name: "arbor_page_range",
        sql: "SELECT hash, \(inlineBytes), octet_length(bytes)::int8 FROM arbor_objects WHERE ctid >= ('(' || $1 || ',0)')::tid AND ctid < ('(' || $2 || ',0)')::tid",
        types: [PGType.int8, PGType.int8])
    /// The objects' bytes, where they are no larger than ``PostgresBackend/enumerationInlineBytes``.
    private static let inlineBytes = "CASE WHEN octet_length(bytes) <= \(PostgresBackend.enumerationInlineBytes) THEN bytes END"
    /// Each object's hash and size on pages [$1, $2), and whether its bytes hash to it.
    static let pageRangeChecked = PreparedStatement(
        name: "arbor_page_range_checked",
        sql: "SELECT hash, octet_length(bytes)::int8, sha256(bytes) = hash FROM arbor_objects WHERE ctid >= ('(' || $1 || ',0)')::tid AND ctid < ('(' || $2 || ',0)')::tid",
        types: [PGType.int8, PGType.int8])
    static let pageObjects = PreparedStatement(
        name: "arbor_page_objects", sql: "SELECT hash, \(inlineBytes), octet_length(bytes)::int8 FROM arbor_objects WHERE hash > $1 ORDER BY hash LIMIT $2",
        types: [PGType.bytea, PGType.int8])
    static let delete = PreparedStatement(
        name: "arbor_delete", sql: "DELETE FROM arbor_objects WHERE hash = ANY($1::bytea[])", types: [PGType.byteaArray])
    static let refs = PreparedStatement(name: "arbor_refs", sql: "SELECT name, hash FROM arbor_refs", types: [])
    static let insertRef = PreparedStatement(
        name: "arbor_ref_insert", sql: "INSERT INTO arbor_refs (name, hash) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        types: [PGType.text, PGType.bytea])
    static let updateRef = PreparedStatement(
        name: "arbor_ref_update", sql: "UPDATE arbor_refs SET hash = $3 WHERE name = $1 AND hash = $2",
        types: [PGType.text, PGType.bytea, PGType.bytea])
    static let deleteRef = PreparedStatement(
        name: "arbor_ref_delete", sql: "DELETE FROM arbor_refs WHERE name = $1 AND hash = $2", types: [PGType.text, PGType.bytea])
    static let refAbsent = PreparedStatement(
        name: "arbor_ref_absent", sql: "SELECT NOT EXISTS (SELECT 1 FROM arbor_refs WHERE name = $1)", types: [PGType.text])
}

/// Creating and recognising the tables.
enum Schema {
    static let tables = ["arbor_meta", "arbor_objects", "arbor_refs"]
    /// Serialises concurrent `create`s on one database (an arbitrary constant: "arbor" + 1).
    static let createLock: Int64 = 0x6172_626F_7200_0001

    /// Which of the Arbor tables exist in the current schema.
    static func existingTables(on connection: PGConnection, operation: String) throws -> [String] {
        let rows = try connection.execute(
            "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = current_schema()) AND c.relname = ANY(ARRAY['arbor_meta', 'arbor_objects', 'arbor_refs']) ORDER BY 1",
            operation: operation)
        return (0..<rows.rowCount).compactMap { rows.text($0, 0) }
    }

    static func marker(on connection: PGConnection, operation: String) throws -> (format: String?, version: String?) {
        // Another program's arbor_meta, without these columns, is no marker (rather than a
        // failed query): open says the database is not a store, create that it is taken.
        // From pg_attribute: information_schema shows only the columns the role may use, and a
        // role without rights on the table would read as another program's table.
        let columns = try connection.execute(
            "SELECT count(*)::int8 FROM pg_catalog.pg_attribute a WHERE a.attrelid = (SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = current_schema()) AND c.relname = 'arbor_meta') AND a.attname IN ('key', 'value') AND a.attnum > 0 AND NOT a.attisdropped",
            operation: operation)
        guard columns.int64(0, 0) == 2 else { return (nil, nil) }
        let rows = try connection.execute("SELECT key::text, value::text FROM arbor_meta WHERE key::text IN ('format', 'version')", operation: operation)
        var format: String?, version: String?
        for row in 0..<rows.rowCount {
            switch rows.text(row, 0) {
            case "format": format = rows.text(row, 1)
            case "version": version = rows.text(row, 1)
            default: break
            }
        }
        return (format, version)
    }

    static func create(on connection: PGConnection) throws {
        let redacted = connection.target.redacted
        try connection.transaction(operation: "create") {
            try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int64(createLock)], operation: "create")
            let existing = try existingTables(on: connection, operation: "create")
            if existing.contains("arbor_meta"), try marker(on: connection, operation: "create").format == PostgresBackend.formatName {
                throw ArborError(.alreadyExists, "an Arbor store already exists in the database at \(redacted); it was left untouched", backend: PostgresBackend.engine, operation: "create")
            }
            if !existing.isEmpty {
                throw ArborError(.alreadyExists, "the database at \(redacted) already has tables named \(existing.joined(separator: ", ")) that are not an Arbor store; nothing was changed", backend: PostgresBackend.engine, operation: "create")
            }
            for statement in [
                "CREATE TABLE arbor_meta (key text PRIMARY KEY, value text NOT NULL)",
                "CREATE TABLE arbor_objects (hash bytea PRIMARY KEY, bytes bytea NOT NULL)",
                "CREATE TABLE arbor_refs (name text PRIMARY KEY, hash bytea NOT NULL)",
            ] {
                try connection.execute(statement, operation: "create")
            }
            // Objects are mostly a few kilobytes, so PostgreSQL compresses them when it stores
            // them; lz4 does that several times faster than the default pglz (a migration into
            // PostgreSQL went from 98,000 to 160,000 records/s). Servers built without lz4 (or
            // older than 14) keep pglz: only the speed differs.
            let lz4 = try connection.execute(
                "SELECT name FROM pg_catalog.pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)",
                operation: "create")
            if lz4.rowCount == 1 {
                try connection.execute("ALTER TABLE arbor_objects ALTER COLUMN bytes SET COMPRESSION lz4", operation: "create")
            }
            try connection.execute(
                "INSERT INTO arbor_meta (key, value) VALUES ('format', $1), ('version', $2)",
                [.text(PostgresBackend.formatName), .text(PostgresBackend.formatVersion)], operation: "create")
        }
    }

    static func check(on connection: PGConnection) throws {
        let redacted = connection.target.redacted
        let engine = PostgresBackend.engine
        let existing = try existingTables(on: connection, operation: "open")
        guard existing.contains("arbor_meta") else {
            let others = try connection.execute(
                "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = current_schema()) AND c.relkind IN ('r', 'p', 'v', 'm') ORDER BY 1 LIMIT 6",
                operation: "open")
            let names = (0..<others.rowCount).compactMap { others.text($0, 0) }
            if !names.isEmpty {
                let shown = names.prefix(5).joined(separator: ", ") + (names.count > 5 ? ", …" : "")
                throw ArborError(.unsupportedFormat, "the database at \(redacted) is not an Arbor store: it holds tables of another program (\(shown)) and no arbor_meta table", backend: engine, operation: "open")
            }
            throw ArborError(.notFound, "no Arbor store in this database (\(redacted)); run arbor init with this URL to make one", backend: engine, operation: "open")
        }
        let (format, version) = try marker(on: connection, operation: "open")
        guard format == PostgresBackend.formatName else {
            throw ArborError(.unsupportedFormat, "the database at \(redacted) has an arbor_meta table without the Arbor store marker (format \(format.map { String(reflecting: $0) } ?? "missing")); it is not an Arbor store", backend: engine, operation: "open")
        }
        guard version == PostgresBackend.formatVersion else {
            throw ArborError(.unsupportedFormat, "the database at \(redacted) has Arbor store format version \(version ?? "?"); this Arbor reads version \(PostgresBackend.formatVersion)", backend: engine, operation: "open")
        }
        guard existing == Schema.tables else {
            throw ArborError(.unsupportedFormat, "the Arbor store at \(redacted) lacks the table(s) \(Set(Schema.tables).subtracting(existing).sorted().joined(separator: ", "))", backend: engine, operation: "open")
        }
    }
}
