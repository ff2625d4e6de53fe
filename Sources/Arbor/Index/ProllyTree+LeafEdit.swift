/// A node made by an edit, as the level above files it.
struct NewNode {
    var hash: Hash
    var lastKey: [UInt8]
    var recordCount: UInt64
}

extension ProllyTree {
    /// Rewrites the leaves that `edits` touch, as bytes: the entries a leaf keeps are copied as
    /// they lie in its encoding (entries are encoded back to back, each on its own), so an old
    /// leaf is neither decoded into entries nor encoded again, and only new entries are
    /// encoded. Returns the old leaves replaced and the new leaves that replace them, made in
    /// `source` (``NodeSource/createLeaves(_:)``).
    ///
    /// The same cut as ``rewrite(level:edits:root:rootHash:source:replaced:)`` makes at a
    /// branch level: in a canonical tree only a leaf's last entry can end it, so old entries
    /// are copied in runs and only new keys are hashed.
    static func rewriteLeaves(
        edits: [IndexEdit], root: IndexNode, rootHash: Hash, source: NodeSource,
        replaced: inout [(key: [UInt8], old: IndexPayload)]
    ) async throws -> (removed: [(lastKey: [UInt8]?, hash: Hash)], added: [NewNode]) {
        var removed = [(lastKey: [UInt8]?, hash: Hash)]()
        var drafts = [(bytes: [UInt8], lastKey: [UInt8], count: Int)]()
        var cursor = LeafCursor(source: source, root: root, rootHash: rootHash)
        var draft = LeafDraft()
        var next = 0
        while next < edits.count {
            try await cursor.seek(edits[next].key)
            while true {
                let leaf = try await cursor.leaf()
                removed.append((leaf.count == 0 ? nil : leaf.key(at: leaf.count - 1), cursor.leafHash))
                let isLast = !cursor.hasNext
                let lastEndsLeaf = leaf.count > 0 && leaf.endsNode(leaf.count - 1)
                var position = 0
                func copyOld(upTo end: Int) {
                    guard end > position else { return }
                    draft.append(entries: position..<end, of: leaf)
                    if end == leaf.count && lastEndsLeaf { drafts.append(draft.finish()) }
                    position = end
                }
                // Edits up to this leaf's last key belong here; past the level's last key, all do
                // (and an empty leaf, which only the empty tree has, takes them all).
                let bounded = !isLast && leaf.count > 0
                while next < edits.count, !bounded || leaf.compareKey(leaf.count - 1, to: edits[next].key) >= 0 {
                    let (found, isEqual) = leaf.firstEntry(notBelow: edits[next].key)
                    copyOld(upTo: max(found, position))
                    if isEqual && found >= position {
                        replaced.append((edits[next].key, try leaf.payload(at: found)))
                        position = found + 1
                    }
                    if let payload = edits[next].payload {
                        draft.append(key: edits[next].key, payload: payload)
                        if isBoundary(edits[next].key, level: 0) { drafts.append(draft.finish()) }
                    }
                    next += 1
                }
                copyOld(upTo: leaf.count)
                if draft.isEmpty { break }
                if isLast {
                    drafts.append(draft.finish())
                    break
                }
                // The run ends without a boundary: it continues into the next leaf.
                guard try await cursor.advance() else { break }
            }
        }
        let hashes = try source.createLeaves(drafts.map(\.bytes))
        let added = zip(drafts, hashes).map { NewNode(hash: $1, lastKey: $0.lastKey, recordCount: UInt64($0.count)) }
        return (removed, added)
    }

    /// Loads, level by level and in one batch per level, every node on the paths to `keys`,
    /// leaves as bytes, so that the edit itself runs from memory (one round trip per level on
    /// remote engines).
    static func prefetch(_ keys: [[UInt8]], root: IndexNode, source: NodeSource) async throws {
        guard root.level > 0 else { return }
        let parents = try await nodes(covering: keys[...], root: root, level: 1, source: source)
        let leaves = try children(covering: parents)
        for (leaf, hash) in zip(try await source.nodeBytes(leaves.map(\.hash)), leaves.map(\.hash)) where leaf.level != 0 {
            throw wrongLevel(hash, leaf.level, under: 1)
        }
    }
}

/// The bytes of a leaf being made: its entries as they will lie, then its header in front.
struct LeafDraft {
    private var body = ByteWriter(capacity: 4_096)
    private var count = 0
    /// The last entry's key, or the old leaf and entry it is copied from (copied out only if it
    /// stays last).
    private enum LastKey {
        case key([UInt8])
        case entry(NodeBytes, Int)
    }
    private var lastKey = LastKey.key([])

    var isEmpty: Bool { count == 0 }

    /// Appends the entries `range` of `leaf`, as they lie in it.
    mutating func append(entries range: Range<Int>, of leaf: NodeBytes) {
        body.bytes.append(contentsOf: leaf.entryBytes(range))
        count += range.count
        lastKey = .entry(leaf, range.upperBound - 1)
    }

    /// Appends one entry, encoded as ``IndexNode/encoded()`` encodes a leaf's.
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
        lastKey = .key(key)
    }

    /// The leaf's bytes, exactly sized, its last key and its entry count; the draft starts over.
    mutating func finish() -> (bytes: [UInt8], lastKey: [UInt8], count: Int) {
        var leaf = ByteWriter(capacity: 2 + varintSize(UInt64(count)) + body.bytes.count)
        leaf.byte(objectFormatMarker)
        leaf.byte(ObjectKind.leaf.rawValue)
        leaf.varint(count)
        leaf.bytes.append(contentsOf: body.bytes)
        let key = switch lastKey {
        case .key(let key): key
        case .entry(let leaf, let index): leaf.key(at: index)
        }
        defer {
            body.bytes.removeAll(keepingCapacity: true)
            count = 0
            lastKey = .key([])
        }
        return (leaf.bytes, key, count)
    }
}

/// A position among the leaves of a tree: the leaf one level below a ``LevelCursor`` on the
/// leaves' parents, or the root when it is a leaf. Leaves are read as bytes, never decoded.
struct LeafCursor {
    private let source: NodeSource
    private let rootIsLeaf: Bool
    private var parents: LevelCursor
    private var index = 0
    private(set) var leafHash: Hash

    init(source: NodeSource, root: IndexNode, rootHash: Hash) {
        self.source = source
        rootIsLeaf = root.level == 0
        parents = LevelCursor(source: source, root: root, rootHash: rootHash, level: min(root.level, 1))
        leafHash = rootHash
    }

    /// Moves to the leaf that covers `key`: the first whose last key is at least `key`, or the
    /// last leaf.
    mutating func seek(_ key: [UInt8]) async throws {
        guard !rootIsLeaf else { return }
        try await parents.seek(key)
        index = parents.node.childIndex(covering: key)
        try settle()
    }

    var hasNext: Bool { !rootIsLeaf && (index < parents.node.entries.count - 1 || parents.hasNext) }

    /// Moves to the next leaf. Returns `false` past the last.
    mutating func advance() async throws -> Bool {
        guard !rootIsLeaf else { return false }
        if index < parents.node.entries.count - 1 {
            index += 1
        } else {
            guard try await parents.advance() else { return false }
            index = 0
        }
        try settle()
        return true
    }

    /// The current leaf's bytes, checked to be a leaf.
    func leaf() async throws -> NodeBytes {
        let leaf = try await source.nodeBytes(leafHash)
        guard leaf.level == 0 else { throw ProllyTree.wrongLevel(leafHash, leaf.level, under: 1) }
        return leaf
    }

    private mutating func settle() throws {
        guard case .node(let hash, _) = parents.node.entries[index].payload, parents.node.level == 1 else {
            throw ArborError(.corruptObject, "malformed index: a branch entry does not name a node one level down")
        }
        leafHash = hash
    }
}
