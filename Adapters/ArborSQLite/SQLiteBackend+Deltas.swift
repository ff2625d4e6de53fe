import Arbor

/// Objects kept as deltas (``Backend/restate(_:)``, format version 2).
///
/// ```
/// CREATE TABLE deltas (hash BLOB PRIMARY KEY, base BLOB NOT NULL, size INTEGER NOT NULL,
///                      delta BLOB NOT NULL) WITHOUT ROWID;
/// CREATE INDEX deltas_by_base ON deltas (base);
/// CREATE TABLE delta_heights (hash BLOB PRIMARY KEY, height INTEGER NOT NULL) WITHOUT ROWID;
/// ```
///
/// An object is in `objects` (whole) or in `deltas` (its bytes are `delta` applied to `base`'s
/// bytes, `size` of them), never both. A base may itself be a delta: reads follow the chain to a
/// whole object. `delta_heights` bounds the chains: an object's height is the most steps any
/// delta takes to reach it, and an object is restated only if its height stays below
/// ``maximumDeltaChain`` (its dependents then take one step more). Heights only grow, so they
/// are an upper bound once objects are put whole again or removed.
extension SQLiteBackend {
    /// The most steps from a delta to the whole object its chain ends at: an old version's node
    /// reads through at most this many lookups.
    public static let maximumDeltaChain = 16

    static let deltaSchema = """
        CREATE TABLE deltas (hash BLOB PRIMARY KEY, base BLOB NOT NULL, size INTEGER NOT NULL, delta BLOB NOT NULL) WITHOUT ROWID;
        CREATE INDEX deltas_by_base ON deltas (base);
        CREATE TABLE delta_heights (hash BLOB PRIMARY KEY, height INTEGER NOT NULL) WITHOUT ROWID;
        """

    /// ``Configuration/restatesReplacedNodes``, on a store that can be written. (``restate(_:)``
    /// keeps deltas whatever this says.)
    public var acceptsRestatements: Bool { configuration.restatesReplacedNodes && hasDeltaTables && !isReadOnly }

    /// Keeps each restated object as its delta, in one write transaction, where its base is
    /// whole, the delta makes exactly the object's bytes (compared with the bytes stored) and the
    /// chain stays within ``maximumDeltaChain``; the others stay whole.
    ///
    /// - Complexity: O(*k* log *n*) for *k* restatements, reading each object and its base.
    public func restate(_ restatements: [Restatement]) async throws {
        try checkWritable("restate")
        guard hasDeltaTables, !restatements.isEmpty else { return }
        try await onWriter("restate") { db in
            try db.transaction(immediate: true) {
                var bases = [Hash: [UInt8]?]()
                for restatement in restatements where restatement.hash != restatement.base {
                    guard let old = try Self.wholeBytes(restatement.hash, db) else { continue }
                    let baseBytes: [UInt8]?
                    if let known = bases[restatement.base] { baseBytes = known } else {
                        baseBytes = try Self.wholeBytes(restatement.base, db)
                        bases[restatement.base] = baseBytes
                    }
                    guard let baseBytes, (try? ObjectDelta.apply(restatement.delta, to: baseBytes)) == old else { continue }
                    let height = try Self.height(of: restatement.hash, db)
                    guard height < Self.maximumDeltaChain else { continue }
                    try db.withStatement("INSERT INTO deltas (hash, base, size, delta) VALUES (?1, ?2, ?3, ?4)") { statement in
                        try statement.bind(restatement.hash, at: 1)
                        try statement.bind(restatement.base, at: 2)
                        try statement.bind(old.count, at: 3)
                        try statement.bind(restatement.delta, at: 4)
                        try statement.run()
                    }
                    try Self.run("DELETE FROM objects WHERE hash = ?1", restatement.hash, db)
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
        }
    }

    /// The bytes of each of `hashes` the store holds as a delta (or whole, if it became whole
    /// meanwhile), read through its chain in one snapshot. Throws
    /// ``ArborError/Code/corruptObject`` for a chain that breaks (a base gone, a delta that is
    /// not one, a chain past any the store makes).
    /// The caller holds a snapshot (a read transaction, or the write transaction it runs in).
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
        guard hasDeltaTables, !hashes.isEmpty else { return [:] }
        return try withReader("get") { db in try db.readSnapshot(statements: 2) { try materialize(hashes, db) } }
    }

    private func materialize(_ hash: Hash, _ db: SQLiteConnection, known: inout [Hash: [UInt8]], steps: Int) throws -> [UInt8]? {
        if let bytes = known[hash] { return bytes }
        if let bytes = try Self.wholeBytes(hash, db) {
            known[hash] = bytes
            return bytes
        }
        guard let (base, delta) = try Self.delta(of: hash, db) else { return nil }
        // Twice the bound: heights are upper bounds, but a longer chain (or a loop) is damage.
        guard steps < 2 * Self.maximumDeltaChain else {
            throw ArborError(.corruptObject, "\(configuration.path): object \(hash) is a delta whose chain of bases runs past \(2 * Self.maximumDeltaChain) steps", backend: engineName, operation: "get")
        }
        guard let baseBytes = try materialize(base, db, known: &known, steps: steps + 1) else {
            throw ArborError(.corruptObject, "\(configuration.path): object \(hash) is a delta against \(base), which the store does not hold", backend: engineName, operation: "get")
        }
        let bytes: [UInt8]
        do { bytes = try ObjectDelta.apply(delta, to: baseBytes) } catch let error as ArborError {
            throw ArborError(.corruptObject, "\(configuration.path): object \(hash) is a damaged delta: \(error.message)", backend: engineName, operation: "get", underlying: error)
        }
        known[hash] = bytes
        return bytes
    }

    /// Makes whole every delta whose base is among `hashes`, which are about to be removed, so
    /// that no chain breaks. Runs inside the caller's write transaction.
    func detachDependents(of hashes: [Hash], _ db: SQLiteConnection) throws {
        var dependents = [Hash]()
        for hash in hashes {
            try db.withStatement("SELECT hash FROM deltas WHERE base = ?1") { statement in
                try statement.bind(hash, at: 1)
                while try statement.step() {
                    if let dependent = Hash(bytes: statement.bytes(0)) { dependents.append(dependent) }
                }
            }
        }
        guard !dependents.isEmpty else { return }
        let bytes = try materialize(dependents, db)
        for dependent in dependents {
            guard let whole = bytes[dependent] else { continue }
            try Self.run("DELETE FROM deltas WHERE hash = ?1", dependent, db)
            try db.withStatement("INSERT OR IGNORE INTO objects (hash, bytes) VALUES (?1, ?2)") { statement in
                try statement.bind(dependent, at: 1)
                try statement.bind(whole, at: 2)
                try statement.run()
            }
        }
    }

    /// How many objects the store keeps as deltas: for tests and diagnostics.
    func deltaCount() throws -> Int {
        guard hasDeltaTables else { return 0 }
        return try withReader("count") { db in
            try db.withStatement("SELECT count(*) FROM deltas") { statement in try statement.step() ? statement.integer(0) : 0 }
        }
    }

    /// Whether the store holds any delta: writes skip their delta bookkeeping when not.
    static func holdsDeltas(_ db: SQLiteConnection) throws -> Bool {
        try db.withStatement("SELECT EXISTS (SELECT 1 FROM deltas)") { statement in
            try statement.step() && statement.integer(0) == 1
        }
    }

    static func wholeBytes(_ hash: Hash, _ db: SQLiteConnection) throws -> [UInt8]? {
        try db.withStatement("SELECT bytes FROM objects WHERE hash = ?1") { statement in
            try statement.bind(hash, at: 1)
            return try statement.step() ? statement.bytes(0) : nil
        }
    }

    private static func delta(of hash: Hash, _ db: SQLiteConnection) throws -> (base: Hash, delta: [UInt8])? {
        try db.withStatement("SELECT base, delta FROM deltas WHERE hash = ?1") { statement in
            try statement.bind(hash, at: 1)
            guard try statement.step() else { return nil }
            let base = statement.bytes(0)
            guard let hash = Hash(bytes: base) else {
                throw ArborError(.corruptObject, "the deltas table names a base of \(base.count) bytes, not a hash", backend: "sqlite", operation: "get")
            }
            return (hash, statement.bytes(1))
        }
    }

    private static func height(of hash: Hash, _ db: SQLiteConnection) throws -> Int {
        try db.withStatement("SELECT height FROM delta_heights WHERE hash = ?1") { statement in
            try statement.bind(hash, at: 1)
            return try statement.step() ? statement.integer(0) : 0
        }
    }

    static func run(_ sql: String, _ hash: Hash, _ db: SQLiteConnection) throws {
        try db.withStatement(sql) { statement in
            try statement.bind(hash, at: 1)
            try statement.run()
        }
    }
}
