extension ProllyTree {
    /// The payload stored under one key: a direct descent, without the batching machinery.
    ///
    /// - Complexity: O(log n) node reads, one per level.
    static func lookup(_ key: [UInt8], root: Hash, source: NodeSource) async throws -> IndexPayload? {
        // Through the nodes' bytes: one entry per level is wanted, not every entry decoded.
        var hash = root
        var parentLevel: Int?
        while true {
            let step = try await source.pointStep(hash, toward: key)
            if let parentLevel, step.level != parentLevel - 1 { throw wrongLevel(hash, step.level, under: parentLevel) }
            switch step {
            case .leaf(let payload): return payload
            case .branch(let node): (hash, parentLevel) = (try node.child(covering: key), node.level)
            }
        }
    }

    /// The payload stored under `key` in each of the trees `roots`, descending all of them
    /// together: one batch of node reads per level (one round trip on remote engines), not one
    /// per tree and level. Nodes are not kept by `source`'s operation (its store's cache may
    /// keep them): a record's history reads the trees of thousands of versions.
    ///
    /// - Complexity: O(r log n) node reads for `r` roots, in O(log n) batches.
    static func lookup(_ key: [UInt8], inEach roots: some Sequence<Hash>, source: NodeSource) async throws -> [Hash: IndexPayload?] {
        var result = [Hash: IndexPayload?]()
        // Each tree's descent: its root, the node it has reached, and the level that node must be.
        var descents = Set(roots).map { (root: $0, node: $0, level: Int?.none) }
        while !descents.isEmpty {
            let nodes = try await source.nodeBytes(descents.map(\.node), remember: false)
            var next = [(root: Hash, node: Hash, level: Int?)]()
            for (descent, node) in zip(descents, nodes) {
                if let level = descent.level, node.level != level { throw wrongLevel(descent.node, node.level, under: level + 1) }
                if node.level == 0 {
                    result[descent.root] = .some(try node.payload(for: key))
                } else {
                    next.append((descent.root, try node.child(covering: key), node.level - 1))
                }
            }
            descents = next
        }
        return result
    }

    /// The leaves that cover `keys` (sorted), each with the keys it covers, fetching each
    /// level's nodes in one batch (one round trip per level on remote engines), as bytes.
    ///
    /// - Complexity: O(k log n) node reads for `k` keys.
    static func leaves(
        covering keys: [[UInt8]], root: NodeBytes, source: NodeSource
    ) async throws -> [(leaf: NodeBytes, keys: ArraySlice<[UInt8]>)] {
        var frontier = [(leaf: root, keys: keys[...])]
        while let level = frontier.first?.leaf.level, level > 0 {
            var next = [(hash: Hash, keys: ArraySlice<[UInt8]>)]()
            for (node, nodeKeys) in frontier {
                let groups = partition(nodeKeys, lastIndex: node.count - 1, childIndex: node.childIndex(covering:)) {
                    node.compareKey($0, to: $1) >= 0
                }
                for (index, childKeys) in groups { next.append((try node.child(at: index), childKeys)) }
            }
            let nodes = try await source.nodeBytes(next.map(\.hash))
            for (node, child) in zip(nodes, next) where node.level != level - 1 {
                throw wrongLevel(child.hash, node.level, under: level)
            }
            frontier = zip(nodes, next).map { (leaf: $0, keys: $1.keys) }
        }
        return frontier
    }

    /// Splits `keys` (sorted) among the children of a branch whose last entry is `lastIndex`:
    /// each child that covers some of them, by index, with the keys it covers. `reaches(i, key)`
    /// tells whether entry `i`'s key is at least `key`.
    ///
    /// - Complexity: O(k + c log e) for `k` keys spread over `c` children of `e` entries.
    @inline(__always)
    private static func partition(
        _ keys: ArraySlice<[UInt8]>, lastIndex: Int, childIndex: ([UInt8]) -> Int, reaches: (Int, [UInt8]) -> Bool
    ) -> [(index: Int, keys: ArraySlice<[UInt8]>)] {
        var groups = [(index: Int, keys: ArraySlice<[UInt8]>)]()
        var start = keys.startIndex
        while start < keys.endIndex {
            let index = childIndex(keys[start])
            // The last child also covers every key past the node's last key.
            var end = start + 1
            while end < keys.endIndex, index == lastIndex || reaches(index, keys[end]) { end += 1 }
            groups.append((index, keys[start..<end]))
            start = end
        }
        return groups
    }

    /// A tree whose node `hash` is not one level below its parent: no descent may mix levels.
    static func wrongLevel(_ hash: Hash, _ level: Int, under parentLevel: Int) -> ArborError {
        ArborError(.corruptObject, "malformed index: node \(hash) is at level \(level) under a branch at level \(parentLevel)")
    }

    /// The payloads stored under `keys` (sorted), fetching each level's nodes in one batch.
    ///
    /// Like a point read, it searches the nodes' bytes (``NodeBytes``) and decodes only the
    /// entries it finds.
    ///
    /// - Complexity: O(k log n) node reads for `k` keys in a tree of `n` records.
    static func lookup(_ keys: [[UInt8]], root rootHash: Hash, source: NodeSource) async throws -> [[UInt8]: IndexPayload] {
        guard !keys.isEmpty else { return [:] }
        let frontier = try await leaves(covering: keys, root: try await source.nodeBytes(rootHash), source: source)
        var result = [[UInt8]: IndexPayload]()
        for (leaf, leafKeys) in frontier {
            for key in leafKeys { if let payload = try leaf.payload(for: key) { result[key] = payload } }
        }
        return result
    }

    /// Calls `body` with every entry whose key starts with `prefix`, in key order, one leaf at a time.
    ///
    /// Without `remember`, `source`'s operation keeps none of the nodes (as a diff that does not
    /// remember): a scan of a whole store holds one branch's children per level.
    ///
    /// - Complexity: O(log n + m) node reads for `m` matching records; the leaves of each branch
    ///   are fetched in one batch.
    static func scan(
        prefix: [UInt8], root rootHash: Hash, source: NodeSource, remember: Bool = true, _ body: ([IndexEntry]) async throws -> Void
    ) async throws {
        let root = try await source.nodes([rootHash], remember: remember)[0]
        try await scan(node: root, prefix: prefix, source: source, remember: remember, body)
    }

    /// Returns `false` once past the prefix, so callers stop walking.
    @discardableResult
    private static func scan(
        node: IndexNode, prefix: [UInt8], source: NodeSource, remember: Bool, _ body: ([IndexEntry]) async throws -> Void
    ) async throws -> Bool {
        if node.level == 0 {
            let matching = node.entries.filter { $0.key.starts(with: prefix) }
            if !matching.isEmpty { try await body(matching) }
            if let last = node.lastKey, compareKeys(last, prefix) > 0, !last.starts(with: prefix) { return false }
            return true
        }
        // Children that may hold the prefix: from the first whose last key reaches the prefix
        // to the first whose last key is past every key with the prefix.
        var wanted = [Hash]()
        var index = node.childIndex(covering: prefix)
        while index < node.entries.count {
            guard case .node(let child, _) = node.entries[index].payload else { break }
            wanted.append(child)
            let key = node.entries[index].key
            if compareKeys(key, prefix) > 0 && !key.starts(with: prefix) { break }
            index += 1
        }
        for (hash, child) in zip(wanted, try await source.nodes(wanted, remember: remember)) {
            // As every descent checks: a branch that skipped levels would list what lookups refuse.
            if child.level != node.level - 1 { throw wrongLevel(hash, child.level, under: node.level) }
            if try await !scan(node: child, prefix: prefix, source: source, remember: remember, body) { return false }
        }
        return true
    }

    /// Calls `body` with every entry, in key order.
    static func forEachEntry(root: Hash, source: NodeSource, _ body: ([IndexEntry]) async throws -> Void) async throws {
        try await scan(prefix: [], root: root, source: source, body)
    }
}
