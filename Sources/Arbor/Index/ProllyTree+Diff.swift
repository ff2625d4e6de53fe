/// One key whose payload differs between two trees.
struct IndexDifference {
    var key: [UInt8]
    var old: IndexPayload?
    var new: IndexPayload?
}

extension ProllyTree {
    /// The keys whose payloads differ between the trees at `old` and `new`, in key order.
    ///
    /// Both sides are walked as sequences of subtrees; equal subtrees at the head of both
    /// sequences are skipped unread, and only differing nodes are expanded. Because the tree's
    /// shape depends only on its contents, unchanged regions line up as identical subtrees.
    ///
    /// - Complexity: O(k log n) node reads for `k` differences; none when the roots are equal.
    static func diff(_ old: Hash, _ new: Hash, source: NodeSource) async throws -> [IndexDifference] {
        guard old != new else { return [] }
        // Nodes are read as bytes and compared in place; only differing entries are decoded.
        // An item is a subtree not yet read, or entry `index` of the node in `nodes[slot]`.
        enum Item {
            case node(Hash, level: Int)
            case entry(slot: Int, index: Int)
            var level: Int { if case .node(_, let level) = self { level } else { -1 } }
        }
        var nodes = [NodeBytes]()
        let oldRoot = try await source.nodeBytes(old)
        let newRoot = try await source.nodeBytes(new)
        // Stacks: the head of each sequence is the last element.
        // Sized once for a few levels of children: growing a stack step by step reallocated it
        // on every diff, and large allocations are slow in a heap of millions of small ones.
        var left = [Item](), right = [Item]()
        left.reserveCapacity(256)
        right.reserveCapacity(256)
        left.append(.node(old, level: oldRoot.level))
        right.append(.node(new, level: newRoot.level))
        var differences = [IndexDifference]()

        func expand(_ stack: inout [Item]) async throws {
            guard case .node(let hash, let level) = stack.removeLast() else { return }
            let node = try await source.nodeBytes(hash)
            guard node.level == level else { throw wrongLevel(hash, node.level, under: level + 1) }
            if level == 0 {
                nodes.append(node)
                for index in stride(from: node.count - 1, through: 0, by: -1) { stack.append(.entry(slot: nodes.count - 1, index: index)) }
            } else {
                for index in stride(from: node.count - 1, through: 0, by: -1) { stack.append(.node(try node.child(at: index), level: level - 1)) }
            }
        }
        func difference(_ item: (slot: Int, index: Int), old isOld: Bool) throws -> IndexDifference {
            let node = nodes[item.slot]
            let payload = try node.payload(at: item.index)
            return IndexDifference(key: node.key(at: item.index), old: isOld ? payload : nil, new: isOld ? nil : payload)
        }

        while true {
            switch (left.last, right.last) {
            case (nil, nil):
                return differences
            case (.entry(let slot, let index)?, nil):
                differences.append(try difference((slot, index), old: true))
                left.removeLast()
            case (.node?, nil):
                try await expand(&left)
            case (nil, .entry(let slot, let index)?):
                differences.append(try difference((slot, index), old: false))
                right.removeLast()
            case (nil, .node?):
                try await expand(&right)
            case (.entry(let a, let i)?, .entry(let b, let j)?):
                let order = nodes[a].compareKey(i, with: nodes[b], j)
                if order < 0 {
                    differences.append(try difference((a, i), old: true))
                    left.removeLast()
                } else if order > 0 {
                    differences.append(try difference((b, j), old: false))
                    right.removeLast()
                } else {
                    if !nodes[a].hasSamePayload(i, as: nodes[b], j) {
                        differences.append(IndexDifference(key: nodes[a].key(at: i), old: try nodes[a].payload(at: i), new: try nodes[b].payload(at: j)))
                    }
                    left.removeLast()
                    right.removeLast()
                }
            case (let a?, let b?):
                if case .node(let x, _) = a, case .node(let y, _) = b, x == y {
                    left.removeLast()
                    right.removeLast()
                    continue
                }
                let (levelA, levelB) = (a.level, b.level)
                if levelA >= levelB { try await expand(&left) }
                if levelB >= levelA { try await expand(&right) }
            }
        }
    }
}
