import Arbor

/// Objects kept as deltas (``Backend/restate(_:)``, format version 3).
///
/// ```
/// CREATE TABLE objects (hash BLOB NOT NULL UNIQUE, bytes BLOB NOT NULL, base BLOB);
/// CREATE INDEX objects_by_base ON objects (base) WHERE base IS NOT NULL;
/// CREATE TABLE delta_heights (hash BLOB PRIMARY KEY, height INTEGER NOT NULL) WITHOUT ROWID;
/// ```
///
/// A row whose `base` is NULL holds its object whole; otherwise `bytes` is an ``ObjectDelta``
/// that makes the object from `base`'s bytes. A base may itself be a delta: reads follow the
/// chain to a whole object. A restated row is written anew (`INSERT OR REPLACE`, a new rowid at
/// the end of the table) rather than shrunk in place: the old row, alone on its page, frees that
/// page instead of rewriting it, and the hash index changes on a page the same transaction's
/// inserts dirty anyway.
///
/// `delta_heights` bounds the chains: an object's height is the most steps any delta takes to
/// reach it, and an object is restated only if its height stays below ``maximumDeltaChain``
/// (its dependents then take one step more). Heights only grow, so they are an upper bound
/// once objects are put whole again or removed.
extension SQLiteBackend {
    /// The most steps from a delta to the whole object its chain ends at: an old version's node
    /// reads through at most this many lookups.
    public static let maximumDeltaChain = 16

    static let deltaColumns = """
        CREATE INDEX IF NOT EXISTS objects_by_base ON objects (base) WHERE base IS NOT NULL;
        CREATE TABLE IF NOT EXISTS delta_heights (hash BLOB PRIMARY KEY, height INTEGER NOT NULL) WITHOUT ROWID;
        """

    /// ``Configuration/restatesReplacedNodes``, on a store that can be written. (``restate(_:)``
    /// keeps deltas whatever this says.)
    public var acceptsRestatements: Bool { configuration.restatesReplacedNodes && hasDeltaColumns && !isReadOnly }

    /// A row whole (`hash`, `bytes`, and `base` where the table has it), read as
    /// ``isDeltaRow(_:)`` tells. `*` rather than the columns: a store opened at version 1 may be
    /// brought to 3 by another process meanwhile, and SQLite then prepares the statement again
    /// with the new column, so this connection still tells deltas from whole objects. Two texts,
    /// so that a chain can be read while a lookup's statement is active (statements are cached
    /// by their text).
    static let readSQL = "SELECT * FROM objects WHERE hash = ?1"
    private static let chainSQL = "SELECT * FROM objects WHERE ?1 = hash"

    /// Whether the current row of a `SELECT *` of the objects table holds a delta (its `base`,
    /// the third column where there is one, is not NULL); its bytes are column 1 either way.
    static func isDeltaRow(_ statement: SQLiteStatement) -> Bool {
        statement.columnCount >= 3 && !statement.isNull(2)
    }

    /// Stores `objects`, then keeps each of `restatements` as its delta, in one write
    /// transaction: the hash index pages the inserts dirty take the restatements' changes too,
    /// and one commit syncs both.
    ///
    /// - Complexity: O((*k* + *r*) log *n*) for *k* objects and *r* restatements.
    public func put(_ objects: [(hash: Hash, bytes: [UInt8])], restating restatements: [Restatement]) async throws {
        try checkWritable("put")
        guard !objects.isEmpty || !restatements.isEmpty else { return try await onWriter("put") { _ in } }
        let sorted = objects.sorted { $0.hash < $1.hash }
        try await onWriter("put") { db in
            try db.transaction(immediate: true) {
                try self.insert(sorted, db)
                try self.restate(restatements, db)
            }
        }
    }

    /// Keeps each restated object as its delta, in one write transaction, where its base is
    /// whole, the delta makes exactly the object's bytes (compared with the bytes stored) and the
    /// chain stays within ``maximumDeltaChain``; the others stay whole.
    ///
    /// - Complexity: O(*k* log *n*) for *k* restatements, reading each object and its base.
    public func restate(_ restatements: [Restatement]) async throws {
        try checkWritable("restate")
        guard hasDeltaColumns, !restatements.isEmpty else { return }
        try await onWriter("restate") { db in
            try db.transaction(immediate: true) { try self.restate(restatements, db) }
        }
    }

    /// ``restate(_:)`` inside the caller's write transaction.
    private func restate(_ restatements: [Restatement], _ db: SQLiteConnection) throws {
        guard hasDeltaColumns else { return }
        try Restatement.forEachKeepable(
            restatements, maximumChain: Self.maximumDeltaChain,
            wholeBytes: { try wholeBytes($0, db) }, height: { try Self.height(of: $0, db) }
        ) { restatement, height in
            try db.withStatement("INSERT OR REPLACE INTO objects (hash, bytes, base) VALUES (?1, ?2, ?3)") { statement in
                try statement.bind(restatement.hash, at: 1)
                try statement.bind(restatement.delta, at: 2)
                try statement.bind(restatement.base, at: 3)
                try statement.run()
            }
            try db.withStatement("""
                INSERT INTO delta_heights (hash, height) VALUES (?1, ?2)
                ON CONFLICT (hash) DO UPDATE SET height = max(height, excluded.height)
                """) { statement in
                try statement.bind(restatement.base, at: 1)
                try statement.bind(height + 1, at: 2)
                try statement.run()
            }
        }
    }

    /// Inserts `objects` (in hash order) inside the caller's write transaction; one held as a
    /// delta is made whole again, as it is current again.
    func insert(_ objects: [(hash: Hash, bytes: [UInt8])], _ db: SQLiteConnection) throws {
        // Asked of the file where this backend opened it at version 1 (another process may have
        // brought it to version 3 since, and restated objects this put makes current again).
        let sql = try hasDeltaColumns || Self.hasBaseColumn(db)
            ? "INSERT INTO objects (hash, bytes) VALUES (?1, ?2) ON CONFLICT (hash) DO UPDATE SET bytes = excluded.bytes, base = NULL WHERE base IS NOT NULL"
            : "INSERT OR IGNORE INTO objects (hash, bytes) VALUES (?1, ?2)"
        try Self.run(sql, over: objects, db)
    }

    /// Runs `sql` (`?1`: an object's hash, `?2`: its bytes) once per object, in order.
    static func run(_ sql: String, over objects: [(hash: Hash, bytes: [UInt8])], _ db: SQLiteConnection) throws {
        try db.withStatement(sql) { statement in
            for object in objects {
                try statement.bind(object.hash, at: 1)
                try statement.bind(object.bytes, at: 2)
                try statement.run()
                statement.reset()
            }
        }
    }

    /// The bytes of each of `hashes` the store holds, made whole through its chain where it is
    /// a delta. The caller holds a snapshot (a read transaction, or the write transaction it runs
    /// in). Throws ``ArborError/Code/corruptObject`` for a chain that breaks (a base gone, a delta
    /// that is not one, a chain past any the store makes).
    func materialize(_ hashes: [Hash], _ db: SQLiteConnection) throws -> [Hash: [UInt8]] {
        var known = [Hash: [UInt8]]()
        var result = [Hash: [UInt8]](minimumCapacity: hashes.count)
        for hash in hashes where result[hash] == nil {
            if let bytes = try materialize(hash, db, known: &known, steps: 0) { result[hash] = bytes }
        }
        return result
    }

    /// ``materialize(_:_:)`` on a reading connection, in a snapshot of its own.
    func materialize(_ hashes: [Hash]) throws -> [Hash: [UInt8]] {
        guard !hashes.isEmpty else { return [:] }
        return try withReader("get") { db in try db.readSnapshot(statements: 2) { try materialize(hashes, db) } }
    }

    private func materialize(_ hash: Hash, _ db: SQLiteConnection, known: inout [Hash: [UInt8]], steps: Int) throws -> [UInt8]? {
        if let bytes = known[hash] { return bytes }
        guard let (base, stored) = try row(hash, db) else { return nil }
        guard let base else {
            known[hash] = stored
            return stored
        }
        // Twice the bound: heights are upper bounds, but a longer chain (or a loop) is damage.
        guard steps < 2 * Self.maximumDeltaChain else {
            throw ArborError(.corruptObject, "\(configuration.path): object \(hash) is a delta whose chain of bases runs past \(2 * Self.maximumDeltaChain) steps", backend: engineName, operation: "get")
        }
        guard let baseBytes = try materialize(base, db, known: &known, steps: steps + 1) else {
            throw ArborError(.corruptObject, "\(configuration.path): object \(hash) is a delta against \(base), which the store does not hold", backend: engineName, operation: "get")
        }
        let bytes: [UInt8]
        do { bytes = try ObjectDelta.apply(stored, to: baseBytes) } catch let error as ArborError {
            throw ArborError(.corruptObject, "\(configuration.path): object \(hash) is a damaged delta: \(error.message)", backend: engineName, operation: "get", underlying: error)
        }
        known[hash] = bytes
        return bytes
    }

    /// Makes whole every delta whose base is among `hashes`, which are about to be removed (and
    /// is not itself among them), in a file with the `base` column, so that no chain breaks. Runs inside the caller's write
    /// transaction. A dependent whose chain is already damaged cannot be made whole and stays as
    /// it is (it did not read before either): a collection must not stop at it forever.
    func detachDependents(of hashes: [Hash], _ db: SQLiteConnection) throws {
        let removed = Set(hashes)
        var dependents = [Hash]()
        try db.withStatement("SELECT hash FROM objects WHERE base = ?1") { statement in
            for hash in hashes {
                try statement.bind(hash, at: 1)
                while try statement.step() {
                    if let dependent = Hash(bytes: statement.bytes(0)), !removed.contains(dependent) { dependents.append(dependent) }
                }
                statement.reset()
            }
        }
        guard !dependents.isEmpty else { return }
        var whole = [Hash: [UInt8]]()
        for dependent in dependents {
            do { whole.merge(try materialize([dependent], db)) { $1 } } catch let error as ArborError where error.code == .corruptObject {
                continue
            }
        }
        try db.withStatement("UPDATE objects SET bytes = ?2, base = NULL WHERE hash = ?1") { statement in
            for dependent in dependents {
                guard let bytes = whole[dependent] else { continue }
                try statement.bind(dependent, at: 1)
                try statement.bind(bytes, at: 2)
                try statement.run()
                statement.reset()
            }
        }
    }

    /// The value of `key` in the store's `arbor_meta` table: for tests and diagnostics.
    func metaValue(_ key: String) throws -> String? {
        try withReader("meta") { db in
            try db.withStatement("SELECT value FROM arbor_meta WHERE key = ?1") { statement in
                try statement.bind(key, at: 1)
                return try statement.step() ? statement.text(0) : nil
            }
        }
    }

    /// How many objects the store keeps as deltas: for tests and diagnostics.
    func deltaCount() throws -> Int {
        guard hasDeltaColumns else { return 0 }
        return try withReader("count") { db in
            try db.withStatement("SELECT count(*) FROM objects WHERE base IS NOT NULL") { statement in try statement.step() ? statement.integer(0) : 0 }
        }
    }

    /// Whether the store keeps object `hash` as a delta: for tests and diagnostics.
    func isDelta(_ hash: Hash) throws -> Bool {
        guard hasDeltaColumns else { return false }
        return try withReader("get") { db in try row(hash, db)?.base != nil }
    }

    /// The stored bytes of `hash` if the store holds it whole.
    private func wholeBytes(_ hash: Hash, _ db: SQLiteConnection) throws -> [UInt8]? {
        guard let (base, bytes) = try row(hash, db), base == nil else { return nil }
        return bytes
    }

    /// Row `hash`: its base (`nil`: whole) and its stored bytes.
    private func row(_ hash: Hash, _ db: SQLiteConnection) throws -> (base: Hash?, bytes: [UInt8])? {
        try db.withStatement(Self.chainSQL) { statement in
            try statement.bind(hash, at: 1)
            guard try statement.step() else { return nil }
            guard Self.isDeltaRow(statement) else { return (nil, statement.bytes(1)) }
            let base = statement.bytes(2)
            guard let baseHash = Hash(bytes: base) else {
                throw ArborError(.corruptObject, "\(configuration.path): object \(hash) names a base of \(base.count) bytes, not a hash", backend: engineName, operation: "get")
            }
            return (baseHash, statement.bytes(1))
        }
    }

    private static func height(of hash: Hash, _ db: SQLiteConnection) throws -> Int {
        try db.withStatement("SELECT height FROM delta_heights WHERE hash = ?1") { statement in
            try statement.bind(hash, at: 1)
            return try statement.step() ? statement.integer(0) : 0
        }
    }
}
