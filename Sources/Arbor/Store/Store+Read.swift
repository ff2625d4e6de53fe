extension Store {
    /// Decodes index entries into records, fetching blob records in one batch.
    func decode(_ entries: [(key: [UInt8], payload: IndexPayload)]) async throws -> [Record] {
        try await recordBytes(entries).map { try decodeRecord($0.bytes, of: $0.key) }
    }

    /// The record `key` from its leaf payload (a point read, whose key is known already).
    func decode(_ payload: IndexPayload, of key: RecordKey) async throws -> Record {
        guard case .blob(let hash) = payload else { return try decode(payload, of: key, blobs: [:]) }
        return try decode(payload, of: key, blobs: try await ObjectFetch.verified([hash], from: backend))
    }

    private func decode(_ payload: IndexPayload, of key: RecordKey, blobs: [Hash: [UInt8]]) throws -> Record {
        try decodeRecord(try recordBytes(payload, of: key, blobs: blobs), of: key)
    }

    /// The canonical bytes of the records of `entries`, undecoded (a blob record's taken out
    /// of its blob, the blobs fetched in one batch): for work that holds many records and
    /// decodes each only when it needs it (``decodeRecord(_:of:)``).
    func recordBytes(_ entries: [(key: [UInt8], payload: IndexPayload)]) async throws -> [(key: RecordKey, bytes: [UInt8])] {
        let blobHashes = entries.compactMap { if case .blob(let hash) = $0.payload { hash } else { nil } }
        let blobs = blobHashes.isEmpty ? [:] : try await ObjectFetch.verified(blobHashes, from: backend)
        return try entries.map { entry in
            let key = try RecordKey(indexBytes: entry.key[...])
            return (key, try recordBytes(entry.payload, of: key, blobs: blobs))
        }
    }

    func recordBytes(_ payload: IndexPayload, of key: RecordKey, blobs: [Hash: [UInt8]]) throws -> [UInt8] {
        try naming(key) {
            switch payload {
            case .inline(let bytes): return bytes
            case .blob(let hash): return try Blob.decode(blobs[hash] ?? [])
            case .node: throw ArborError(.corruptObject, "a leaf entry names a node")
            }
        }
    }

    /// The record `key` from its canonical bytes.
    func decodeRecord(_ bytes: [UInt8], of key: RecordKey) throws -> Record {
        try naming(key) { Record(key: key, properties: try RecordCoding.decode(bytes)) }
    }

    /// Runs `body`, saying which record could not be decoded if it fails.
    private func naming<Result>(_ key: RecordKey, _ body: () throws -> Result) throws -> Result {
        do { return try body() } catch let error as ArborError {
            throw ArborError(.corruptObject, "record \(key) cannot be decoded: \(error.message)", backend: backend.engineName, operation: "read")
        }
    }

    /// Every record of `type` at `root`, in id order: one range scan of the index. With
    /// `remember`, `source` keeps the nodes read, for an operation that reads more of them (the
    /// children of the values); a bare listing keeps none.
    func records(ofType type: String, root: Hash, source: NodeSource, remember: Bool = true) async throws -> [Record] {
        var result = [Record]()
        try await forEachRecord(ofType: type, root: root, source: source, remember: remember) { result += $0 }
        return result
    }

    /// The records of `type` (every type: `nil`) at `root`, in key order, decoded a leaf at a
    /// time as the index is scanned (``ProllyTree/scan(prefix:root:source:remember:_:)``).
    func forEachRecord(
        ofType type: String?, root: Hash, source: NodeSource, remember: Bool, _ body: ([Record]) async throws -> Void
    ) async throws {
        try await ProllyTree.scan(prefix: type.map(RecordKey.typePrefix) ?? [], root: root, source: source, remember: remember) { entries in
            try await body(try await decode(entries.map { ($0.key, $0.payload) }))
        }
    }

    /// The records among `keys` present in the index at `root`.
    func records(_ keys: [RecordKey], root: Hash, source: NodeSource) async throws -> [RecordKey: Record] {
        guard !keys.isEmpty else { return [:] }
        let keyBytes = Set(keys.map(\.indexBytes)).sorted { compareKeys($0, $1) < 0 }
        let found = try await ProllyTree.lookup(keyBytes, root: root, source: source)
        let records = try await decode(found.map { ($0.key, $0.value) })
        return Dictionary(records.map { ($0.key, $0) }, uniquingKeysWith: { $1 })
    }

    /// The record `key` at version `version` (default: the newest head), or `nil`.
    ///
    /// - Complexity: O(log n) node reads.
    public func record(_ key: RecordKey, at version: Hash? = nil) async throws -> Record? {
        try await snapshot(at: version).record(key)
    }

    /// The records `keys` at a version, fetched level by level in batches.
    ///
    /// - Complexity: O(k log n) node reads for `k` keys.
    public func records(_ keys: [RecordKey], at version: Hash? = nil) async throws -> [RecordKey: Record] {
        try await snapshot(at: version).records(keys)
    }

    /// Every record of `type` at a version, in id order (a range scan of the index).
    ///
    /// - Complexity: O(log n + m) node reads for `m` records of the type.
    public func records(ofType type: String, at version: Hash? = nil) async throws -> [Record] {
        try await snapshot(at: version).records(ofType: type)
    }

    /// The value `id` of `type` at a version, with its whole tree, or `nil` if absent.
    public func value<Value: Storable>(_ type: Value.Type, id: Value.ID, at version: Hash? = nil) async throws -> Value? {
        try await snapshot(at: version).value(type, id: id)
    }

    func value<Value: Storable>(_ type: Value.Type, id: Value.ID, root: Hash) async throws -> Value? {
        let key = RecordKey(type: Value.typeName, id: try RecordEncoder.idString(encoding: id, typeName: Value.typeName))
        return try await value(type, key: key, root: root)
    }

    /// The value at `key` in the index at `root`, with its whole tree, or `nil` if absent.
    func value<Value: Storable>(_ type: Value.Type, key: RecordKey, root: Hash) async throws -> Value? {
        // Its records and another type's of the same default name are one set, which reads
        // would decode as either, where writes refuse the name.
        try DefaultTypeNames.refuseAmbiguity(of: Value.typeName)
        let source = makeSource()
        let tree = try await withChildren(try await records([key], root: root, source: source), root: root, source: source)
        guard tree[key] != nil else { return nil }
        return try decodeValue(type, key: key, tree: tree)
    }

    /// Every value of `type` at a version, in id order, with their trees.
    public func values<Value: Storable>(_ type: Value.Type, at version: Hash? = nil) async throws -> [Value] {
        try await snapshot(at: version).values(type)
    }

    func values<Value: Storable>(_ type: Value.Type, root: Hash) async throws -> [Value] {
        try DefaultTypeNames.refuseAmbiguity(of: Value.typeName)
        let source = makeSource()
        let roots = try await records(ofType: Value.typeName, root: root, source: source)
        let tree = try await withChildren(Dictionary(roots.map { ($0.key, $0) }, uniquingKeysWith: { $1 }), root: root, source: source)
        return try roots.map { try decodeValue(type, key: $0.key, tree: tree) }
    }

    private func decodeValue<Value: Storable>(_ type: Value.Type, key: RecordKey, tree: [RecordKey: Record]) throws -> Value {
        do { return try RecordDecoder.value(type, key: key, records: tree) } catch let error as DecodingError {
            // Without the decoding error itself, whose text may quote the stored value.
            throw ArborError(.coding, "record \(key) cannot be decoded as \(Value.self): \(Store.describe(error, in: tree[key], tree: tree))")
        }
    }

    /// `error`'s path and description, where the value stored at that path in `record` (and
    /// the child records of `tree`) is named by kind and size, not quoted: a type's own
    /// decoding (an enum's raw value) says "invalid String value" and the whole string, which
    /// may be large or secret.
    static func describe(_ error: DecodingError, in record: Record? = nil, tree: [RecordKey: Record] = [:]) -> String {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context), .dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            var description = context.debugDescription
            if let record {
                var budget = context.codingPath.count + 64
                for case .string(let text) in values(at: context.codingPath[...], in: .map(record.properties), tree: tree, budget: &budget) where !text.isEmpty {
                    description = description.replacingOccurrences(of: text, with: "(\(PropertyValue.string(text).kindAndSize))")
                }
            }
            return (path.isEmpty ? "" : "at \(path): ") + description
        @unknown default:
            return "a value that does not decode"
        }
    }

    /// The values `path` (property names, array indices, through child records) may name in
    /// `current`: an index into a dictionary stored as pairs counts its keys and values one
    /// after the other, as it decodes (``PropertyDecoder/flattening(_:)``), and such an array
    /// may be an array of arrays too. At most `budget` values are visited: a value nested so as
    /// to read both ways at every level (a hostile record's) would double them per level.
    private static func values(at path: ArraySlice<any CodingKey>, in current: PropertyValue, tree: [RecordKey: Record], budget: inout Int) -> [PropertyValue] {
        guard budget > 0 else { return [] }
        budget -= 1
        var current = current
        if case .child(let childKey) = current, let child = tree[childKey] { current = .map(child.properties) }
        guard let key = path.first else { return [current] }
        let rest = path.dropFirst()
        switch current {
        case .map(let values):
            guard let next = values[key.stringValue] else { return [] }
            return Self.values(at: rest, in: next, tree: tree, budget: &budget)
        case .array(let values):
            guard let index = key.intValue else { return [] }
            var found = values.indices.contains(index) ? Self.values(at: rest, in: values[index], tree: tree, budget: &budget) : []
            if let flat = PropertyDecoder.flattening(values), flat.indices.contains(index) {
                found += Self.values(at: rest, in: flat[index], tree: tree, budget: &budget)
            }
            return found
        default:
            return []
        }
    }

    /// `records` plus every record they own, loaded one ownership level per batch.
    /// Stops at ``RecordDecoder/maximumTreeDepth`` levels, past which no value decodes: a chain
    /// of child records made by hand (a hostile replica's) would otherwise cost a batch of reads
    /// per level, however long.
    func withChildren(_ records: [RecordKey: Record], root: Hash, source: NodeSource) async throws -> [RecordKey: Record] {
        var tree = records
        var frontier = records.values.flatMap(\.childKeys).filter { tree[$0] == nil }
        var levels = 0
        while !frontier.isEmpty {
            levels += 1
            guard levels <= RecordDecoder.maximumTreeDepth else {
                throw ArborError(.coding, "a value tree goes on past \(RecordDecoder.maximumTreeDepth) levels of child records, deeper than any value decodes", operation: "read")
            }
            let loaded = try await self.records(Array(Set(frontier)), root: root, source: source)
            tree.merge(loaded) { $1 }
            frontier = loaded.values.flatMap(\.childKeys).filter { tree[$0] == nil }
        }
        return tree
    }
}
