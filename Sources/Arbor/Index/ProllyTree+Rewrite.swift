/// A node made by an edit, as the level above files it.
struct NewNode {
    var hash: Hash
    var lastKey: [UInt8]
    var recordCount: UInt64
}

extension ProllyTree {
    /// Rewrites the nodes of one level that `edits` touch, as bytes. Returns the old nodes
    /// replaced and the new nodes that replace them, made in `source` (``NodeSource/createNodes(_:)``).
    ///
    /// The entries a node keeps are copied as they lie in its encoding (entries are encoded back
    /// to back, each on its own, the same at every level), so an old node is neither decoded into
    /// entries nor encoded again: only new entries are encoded. In a canonical tree only a
    /// node's last entry can be a boundary, so old entries are copied in runs and only new keys
    /// are hashed.
    static func rewrite(
        level: Int, edits: [IndexEdit], root: NodeBytes, rootHash: Hash, source: NodeSource,
        replaced: inout [(key: [UInt8], old: IndexPayload)]
    ) async throws -> (removed: [(lastKey: [UInt8]?, hash: Hash)], added: [NewNode]) {
        var removed = [(lastKey: [UInt8]?, hash: Hash)]()
        var oldNodes = [(hash: Hash, node: NodeBytes)]()
        var drafts = [(bytes: [UInt8], lastKey: [UInt8], count: UInt64)]()
        var cursor = LevelCursor(source: source, root: root, rootHash: rootHash, level: level)
        var draft = NodeDraft(level: level)
        var next = 0
        while next < edits.count {
            try await cursor.seek(edits[next].key)
            let (first, seeking) = (cursor.nodeHash, next)
            while true {
                let node = cursor.node
                removed.append((node.count == 0 ? nil : node.key(at: node.count - 1), cursor.nodeHash))
                if source.notesSuperseded { oldNodes.append((cursor.nodeHash, node)) }
                let isLast = !cursor.hasNext
                // An empty node is the empty tree's one leaf, last of its level; filed anywhere
                // else (a damaged or hostile tree), it would take edits that belong further on.
                if node.count == 0 && !isLast {
                    throw ArborError(
                        .corruptObject, "malformed index: node \(cursor.nodeHash) is empty but not the last of level \(level)",
                        backend: source.backend.engineName, operation: "edit")
                }
                let lastEndsNode = node.count > 0 && node.endsNode(node.count - 1)
                var position = 0
                func copyOld(upTo end: Int) throws {
                    guard end > position else { return }
                    try draft.append(entries: position..<end, of: node)
                    if end == node.count && lastEndsNode { drafts.append(draft.finish()) }
                    position = end
                }
                // Edits up to this node's last key belong here; past the level's last key, all do
                // (and an empty leaf, which only the empty tree has, takes them all).
                let bounded = !isLast
                while next < edits.count, !bounded || node.compareKey(node.count - 1, to: edits[next].key) >= 0 {
                    let (found, isEqual) = node.lowerBound(edits[next].key)
                    try copyOld(upTo: max(found, position))
                    if isEqual && found >= position {
                        if level == 0 { replaced.append((edits[next].key, try node.payload(at: found))) }
                        position = found + 1
                    }
                    if let payload = edits[next].payload {
                        draft.append(key: edits[next].key, payload: payload)
                        if isBoundary(edits[next].key, level: level) { drafts.append(draft.finish()) }
                    }
                    next += 1
                }
                try copyOld(upTo: node.count)
                if draft.isEmpty { break }
                if isLast {
                    drafts.append(draft.finish())
                    break
                }
                // The run ends without a boundary: it continues into the next node.
                guard try await cursor.advance() else { break }
            }
            // A seek lands on the node whose parent files it under a key at least the edit's,
            // which in an intact tree is its last key: the edit is used there. In a damaged or
            // hostile tree it may not be, and seeking again would land there again forever.
            guard next > seeking else {
                throw ArborError(
                    .corruptObject, "malformed index: node \(first) ends below the key its parent files it under",
                    backend: source.backend.engineName, operation: "edit")
            }
        }
        let hashes = try source.createNodes(drafts.map(\.bytes))
        if source.notesSuperseded { noteSuperseded(oldNodes, by: drafts.map(\.lastKey), hashes, in: source) }
        let added = zip(drafts, hashes).map { NewNode(hash: $1, lastKey: $0.lastKey, recordCount: $0.count) }
        return (removed, added)
    }

    /// Tells `source` which new nodes (up to two) hold the keys of each old node replaced, to
    /// restate it against one of them when the edit is written (``NodeSource/restatements(written:)``).
    /// Both lists are in key order; a new node holds the keys after the previous one's last key
    /// up to its own.
    private static func noteSuperseded(
        _ oldNodes: [(hash: Hash, node: NodeBytes)], by lastKeys: [[UInt8]], _ hashes: [Hash], in source: NodeSource
    ) {
        var next = 0
        for (hash, node) in oldNodes where node.count > 0 {
            while next < lastKeys.count, node.compareKey(0, to: lastKeys[next]) > 0 { next += 1 }
            var candidates = [Hash]()
            var index = next
            while index < lastKeys.count, candidates.count < 2 {
                candidates.append(hashes[index])
                if node.compareKey(node.count - 1, to: lastKeys[index]) <= 0 { break }
                index += 1
            }
            source.noteSuperseded(hash, node, by: candidates)
        }
    }

    /// Loads, level by level and in one batch per level, every node on the paths to `keys`, so
    /// that the edit itself runs from memory (one round trip per level on remote engines).
    static func prefetch(_ keys: [[UInt8]], root: NodeBytes, source: NodeSource) async throws {
        _ = try await leaves(covering: keys, root: root, source: source)
    }
}

/// The bytes of a node being made at one level: its entries as they will lie, then its
/// header in front.
struct NodeDraft {
    let level: Int
    private var body = ByteWriter(capacity: 4_096)
    private var count = 0
    /// Records below the entries so far: one per leaf entry, a child's count per branch entry.
    private var records: UInt64 = 0
    /// The last entry's key, or the old node and entry it is copied from (copied out only if it
    /// stays last).
    private enum LastKey {
        case key([UInt8])
        case entry(NodeBytes, Int)
    }
    private var lastKey = LastKey.key([])

    init(level: Int) { self.level = level }

    var isEmpty: Bool { count == 0 }

    /// Appends the entries `range` of `node` (of this draft's level), as they lie in it.
    mutating func append(entries range: Range<Int>, of node: NodeBytes) throws {
        body.bytes.append(contentsOf: node.entryBytes(range))
        count += range.count
        records = records.addingSaturated(level == 0 ? UInt64(range.count) : try node.recordCount(of: range))
        lastKey = .entry(node, range.upperBound - 1)
    }

    /// Appends one entry, encoded as ``IndexNode/encoded()`` encodes it.
    mutating func append(key: [UInt8], payload: IndexPayload) {
        body.varint(key.count)
        body.bytes.append(contentsOf: key)
        switch payload {
        case .inline(let bytes):
            body.byte(0)
            body.varint(bytes.count)
            body.bytes.append(contentsOf: bytes)
        case .blob(let hash):
            body.byte(1)
            hash.append(to: &body.bytes)
        case .node(let hash, let count):
            hash.append(to: &body.bytes)
            body.varint(count)
        }
        count += 1
        records = records.addingSaturated(payload.recordCount)
        lastKey = .key(key)
    }

    /// The node's bytes, exactly sized, its last key and the records below it; the draft starts over.
    mutating func finish() -> (bytes: [UInt8], lastKey: [UInt8], count: UInt64) {
        var node = ByteWriter(capacity: 3 + varintSize(UInt64(level)) + varintSize(UInt64(count)) + body.bytes.count)
        node.byte(objectFormatMarker)
        node.byte(level == 0 ? ObjectKind.leaf.rawValue : ObjectKind.branch.rawValue)
        if level > 0 { node.varint(level) }
        node.varint(count)
        node.bytes.append(contentsOf: body.bytes)
        let key = switch lastKey {
        case .key(let key): key
        case .entry(let node, let index): node.key(at: index)
        }
        defer {
            body.bytes.removeAll(keepingCapacity: true)
            count = 0
            records = 0
            lastKey = .key([])
        }
        return (node.bytes, key, records)
    }
}
