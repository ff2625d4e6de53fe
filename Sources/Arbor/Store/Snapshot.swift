/// One version of a store opened for reading: its index root is resolved once, so every read
/// costs only its index lookups. Cheap to make, `Sendable`, and valid for as long as the store
/// is open and the version is kept — versions are immutable, but garbage collection removes
/// those no ref reaches.
///
/// ```swift
/// let snapshot = try await store.snapshot()          // the newest head
/// let task = try await snapshot.value(Task.self, id: "t1")
/// ```
public struct Snapshot: Sendable {
    /// The version read, or `nil` for a store without versions (every read finds nothing).
    public let version: Version?
    let store: Store
    let root: Hash

    /// The record `key`, or `nil`.
    ///
    /// - Complexity: O(log n) node reads, most of them from the store's cache of node bytes.
    /// Throws ``ArborError/Code/invalidInput`` for a key no record can have (a type name with
    /// NUL would share its index key with a record of another type and id).
    public func record(_ key: RecordKey) async throws -> Record? {
        try key.validate()
        let keyBytes = key.indexBytes
        guard let payload = try await ProllyTree.lookup(keyBytes, root: root, source: store.makeSource()) else { return nil }
        return try await store.decode(payload, of: key)
    }

    /// The records among `keys` that exist, fetched level by level in batches.
    ///
    /// - Complexity: O(k log n) node reads for `k` keys, one batch per tree level.
    public func records(_ keys: [RecordKey]) async throws -> [RecordKey: Record] {
        for key in keys { try key.validate() }
        return try await store.records(keys, root: root, source: store.makeSource())
    }

    /// Every record of `type`, in id order (a range scan of the index).
    ///
    /// - Complexity: O(log n + m) node reads for `m` records of the type.
    public func records(ofType type: String) async throws -> [Record] {
        try RecordKey(type: type, id: "").validate()
        return try await store.records(ofType: type, root: root, source: store.makeSource(), remember: false)
    }

    /// Every record — of `type`, or of every type — in key order (by type, then id), handed to
    /// `body` as the index is scanned, a leaf's records at a time (never none): a store of
    /// millions of records is listed holding a few nodes per level of its index.
    ///
    /// - Complexity: O(log n + m) node reads for `m` records listed.
    public func forEachRecord(ofType type: String? = nil, _ body: ([Record]) async throws -> Void) async throws {
        if let type { try RecordKey(type: type, id: "").validate() }
        try await store.forEachRecord(ofType: type, root: root, source: store.makeSource(), remember: false, body)
    }

    /// The value `id` of `type` with its whole tree, or `nil` if absent.
    public func value<Value: Storable>(_ type: Value.Type, id: Value.ID) async throws -> Value? {
        try await store.value(type, id: id, root: root)
    }

    /// Every value of `type`, in id order, with their trees.
    public func values<Value: Storable>(_ type: Value.Type) async throws -> [Value] {
        try await store.values(type, root: root)
    }
}

extension Store {
    /// Opens version `id` (default: the newest head) for reading.
    public func snapshot(at id: Hash? = nil) async throws -> Snapshot {
        let version: Version?
        if let id { version = try await self.version(id) } else { version = try await head() }
        return Snapshot(version: version, store: self, root: version?.root ?? Store.emptyRoot.hash)
    }

    /// Opens the version `text` names for reading, written as ``resolve(_:)`` takes it. `HEAD`
    /// of a store without versions is its empty state, as for ``snapshot(at:)`` without a hash,
    /// where ``resolve(_:)`` finds no version.
    ///
    /// - Complexity: that of ``resolve(_:)``.
    public func snapshot(at text: String) async throws -> Snapshot {
        if Store.namesTheNewestHead(text) { return try await snapshot() }
        let version = try await resolve(text)
        return Snapshot(version: version, store: self, root: version.root)
    }
}
