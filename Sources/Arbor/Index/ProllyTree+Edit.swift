/// One change at one level: set `key` to `payload`, or remove it when `payload` is `nil`.
struct IndexEdit {
    var key: [UInt8]
    var payload: IndexPayload?

    /// The edit that sets the record at `key` (``RecordKey/indexBytes``) to the one whose
    /// canonical bytes are `bytes` (`nil`: deletes it); a small record's payload shares `bytes`'
    /// storage, a large record's blob object goes to `blobs`.
    static func setting(_ key: [UInt8], toEncoded bytes: [UInt8]?, blobs: inout [(hash: Hash, bytes: [UInt8])]) -> IndexEdit {
        guard let bytes else { return IndexEdit(key: key, payload: nil) }
        let (payload, blob) = ProllyTree.payload(forRecord: bytes)
        if let blob { blobs.append(blob) }
        return IndexEdit(key: key, payload: payload)
    }

    /// ``setting(_:toEncoded:blobs:)`` for record `recordKey`, whose canonical `bytes` must fit
    /// in ``Store/maximumRecordSize``: every writer checks it (a commit, a merge), so that every
    /// engine can hold every record. Throws ``ArborError/Code/invalidInput`` otherwise.
    static func settingRecord(_ recordKey: RecordKey, at key: [UInt8], toEncoded bytes: [UInt8], blobs: inout [(hash: Hash, bytes: [UInt8])]) throws -> IndexEdit {
        guard bytes.count <= Store.maximumRecordSize else {
            throw ArborError(
                .invalidInput,
                "record \(recordKey) is \(bytes.count) bytes encoded, more than the \(Store.maximumRecordSize) (256 MiB) a record may be, so that every engine can hold it: keep large files outside the store and save a reference to them")
        }
        return setting(key, toEncoded: bytes, blobs: &blobs)
    }
}

extension ProllyTree {
    /// Applies `edits` (sorted by key, one per key) to the tree at `root` and returns the new root.
    ///
    /// Works level by level. On each level only the nodes that hold an edited key are rewritten,
    /// plus the following node whenever a rewritten run no longer ends on a boundary (its last key
    /// was removed). The rewritten nodes become the edits of the level above. So a commit of `k`
    /// changes reads and writes O(k log n) nodes, and the result is the same tree a rebuild from
    /// scratch would give.
    ///
    /// New nodes are kept in `source` until the caller writes them (``NodeSource/newObjects(reachableFrom:)``).
    static func apply(_ edits: [IndexEdit], to rootHash: Hash, source: NodeSource) async throws -> Hash {
        var replaced = [(key: [UInt8], old: IndexPayload)]()
        return try await apply(edits, to: rootHash, source: source, replaced: &replaced)
    }

    /// Like ``apply(_:to:source:)``, and appends to `replaced` the old payload of every edited
    /// key that existed, in key order: what a commit overwrote or deleted, at no extra read.
    static func apply(
        _ edits: [IndexEdit], to rootHash: Hash, source: NodeSource, replaced: inout [(key: [UInt8], old: IndexPayload)]
    ) async throws -> Hash {
        guard !edits.isEmpty else { return rootHash }
        let oldRoot = try await source.nodeBytes(rootHash)
        try await prefetch(edits.map(\.key), root: oldRoot, source: source)

        var levelEdits = edits
        var level = 0
        var newRoot: Hash
        while true {
            if levelEdits.isEmpty { return rootHash }
            let removed: [(lastKey: [UInt8]?, hash: Hash)]
            let added: [NewNode]
            if level > oldRoot.level {
                // Above the old root the old level held only the (now replaced) old root.
                removed = []
                added = try create(chunk(levelEdits.compactMap { edit in edit.payload.map { IndexEntry(key: edit.key, payload: $0) } }, level: level), in: source)
            } else {
                (removed, added) = try await rewrite(
                    level: level, edits: levelEdits, root: oldRoot, rootHash: rootHash, source: source, replaced: &replaced)
            }
            if level >= oldRoot.level && added.count <= 1 {
                newRoot = added.first?.hash ?? source.create(.empty)
                break
            }
            // At the old root's level an unchanged node must still be listed: no node above holds it.
            levelEdits = parentEdits(removed: removed, added: added, keepUnchanged: level >= oldRoot.level)
            level += 1
        }
        // The root is the lowest level with a single node: drop branches with one child.
        var root = try await source.nodeBytes(newRoot)
        while root.level > 0, root.count == 1 {
            newRoot = try root.child(at: 0)
            root = try await source.nodeBytes(newRoot)
        }
        return newRoot
    }

    /// The edits for level `L + 1` after level `L` replaced `removed` by `added` (both in key
    /// order), minus no-ops: a node rewritten identically changes nothing above it (unless
    /// `keepUnchanged`, for a level with no node above it yet).
    private static func parentEdits(
        removed: [(lastKey: [UInt8]?, hash: Hash)], added: [NewNode], keepUnchanged: Bool
    ) -> [IndexEdit] {
        let old = removed.compactMap { node in node.lastKey.map { (key: $0, hash: node.hash) } }
        var edits = [IndexEdit]()
        edits.reserveCapacity(old.count + added.count)
        var i = 0
        var j = 0
        while i < old.count || j < added.count {
            let order = i == old.count ? 1 : (j == added.count ? -1 : compareKeys(old[i].key, added[j].lastKey))
            if order < 0 {
                edits.append(IndexEdit(key: old[i].key, payload: nil))
                i += 1
                continue
            }
            let node = added[j]
            if order > 0 || old[i].hash != node.hash || keepUnchanged {
                edits.append(IndexEdit(key: node.lastKey, payload: .node(node.hash, count: node.recordCount)))
            }
            if order == 0 { i += 1 }
            j += 1
        }
        return edits
    }

    /// Records `nodes` in `source` (encoded and hashed on every core), as the level above files them.
    private static func create(_ nodes: [IndexNode], in source: NodeSource) throws -> [NewNode] {
        zip(nodes, try source.create(nodes)).map { NewNode(hash: $1, lastKey: $0.lastKey ?? [], recordCount: $0.recordCount) }
    }

    /// Splits a sorted run of entries into nodes at `level` by the boundary rule.
    static func chunk(_ entries: [IndexEntry], level: Int) -> [IndexNode] {
        var nodes = [IndexNode]()
        var run = [IndexEntry]()
        for entry in entries {
            run.append(entry)
            if isBoundary(entry.key, level: level) {
                nodes.append(IndexNode(level: level, entries: run.exactCopy()))
                run.removeAll(keepingCapacity: true)
            }
        }
        if !run.isEmpty { nodes.append(IndexNode(level: level, entries: run.exactCopy())) }
        return nodes
    }
}
