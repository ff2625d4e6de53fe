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
    /// `source` keeps the nodes read on each side for which `rememberNew` (the new side) is
    /// true; the old side's always (``diff(_:_:source:batchSize:remember:rememberNew:_:)``).
    ///
    /// - Complexity: O(k log n) node reads for `k` differences; none when the roots are equal.
    static func diff(_ old: Hash, _ new: Hash, source: NodeSource, rememberNew: Bool = true) async throws -> [IndexDifference] {
        var differences = [IndexDifference]()
        try await diff(old, new, source: source, batchSize: .max, rememberNew: rememberNew) { differences.append(contentsOf: $0) }
        return differences
    }

    /// The keys whose payloads differ between the trees at `old` and `new`, in key order, handed
    /// to `body` in batches of up to `batchSize` as the walk finds them.
    ///
    /// With `remember`, `source` keeps every node read for the rest of its operation (a merge
    /// diffs twice against one base); without, memory holds one batch, the leaves whose entries
    /// are still to be compared and the stacks of subtrees still to be walked, whatever the
    /// number of differences. `rememberNew`, when given, says it for the new side alone (a
    /// merge edits ours' tree after its diffs, and reads theirs' no more).
    ///
    /// - Complexity: O(k log n) node reads for `k` differences.
    static func diff(
        _ old: Hash, _ new: Hash, source: NodeSource, batchSize: Int, remember: Bool = true, rememberNew: Bool? = nil,
        _ body: ([IndexDifference]) async throws -> Void
    ) async throws {
        guard old != new else { return }
        let rememberOld = remember
        let rememberNew = rememberNew ?? remember
        // Nodes are read as bytes and compared in place; only differing entries are decoded.
        // An item is a subtree not yet read, or entry `index` of the leaf in `nodes[slot]`. A leaf's
        // entries are stacked last first, so the walk is done with it when it takes its last.
        enum Item {
            case node(Hash, level: Int)
            case entry(slot: Int, index: Int)
            var level: Int { if case .node(_, let level) = self { level } else { -1 } }
        }
        // A leaf's slot is emptied once its entries are taken, and used again for the next leaf.
        var nodes = [NodeBytes?]()
        var freeSlots = [Int]()
        let oldRoot = try await source.nodeBytes(old, remember: rememberOld)
        let newRoot = try await source.nodeBytes(new, remember: rememberNew)
        // The roots, read for their levels, are not read again when the walk reaches them.
        var roots = [old: oldRoot, new: newRoot]
        // Stacks: the head of each sequence is the last element.
        // Sized once for a few levels of children: growing a stack step by step reallocated it
        // on every diff, and large allocations are slow in a heap of millions of small ones.
        var left = [Item](), right = [Item]()
        left.reserveCapacity(256)
        right.reserveCapacity(256)
        left.append(.node(old, level: oldRoot.level))
        right.append(.node(new, level: newRoot.level))
        var differences = [IndexDifference]()

        func emit(_ difference: IndexDifference) async throws {
            differences.append(difference)
            if differences.count >= batchSize {
                try await body(differences)
                differences.removeAll(keepingCapacity: true)
            }
        }
        func expand(_ stack: inout [Item], remember: Bool) async throws {
            guard case .node(let hash, let level) = stack.removeLast() else { return }
            let node: NodeBytes
            if let root = roots.removeValue(forKey: hash) { node = root } else { node = try await source.nodeBytes(hash, remember: remember) }
            guard node.level == level else { throw wrongLevel(hash, node.level, under: level + 1) }
            if level == 0 {
                // An empty leaf (the empty tree) has no entry to take, so it takes no slot.
                guard node.count > 0 else { return }
                let slot: Int
                if let free = freeSlots.popLast() { slot = free } else { slot = nodes.count; nodes.append(nil) }
                nodes[slot] = node
                for index in stride(from: node.count - 1, through: 0, by: -1) { stack.append(.entry(slot: slot, index: index)) }
            } else {
                for index in stride(from: node.count - 1, through: 0, by: -1) { stack.append(.node(try node.child(at: index), level: level - 1)) }
            }
        }
        func difference(_ item: (slot: Int, index: Int), old isOld: Bool) throws -> IndexDifference {
            let node = nodes[item.slot]!
            let payload = try node.payload(at: item.index)
            return IndexDifference(key: node.key(at: item.index), old: isOld ? payload : nil, new: isOld ? nil : payload)
        }
        /// Takes the entry at the head of `stack`, and its leaf when it was the leaf's last.
        func pop(_ stack: inout [Item]) {
            if case .entry(let slot, let index) = stack.removeLast(), index == nodes[slot]!.count - 1 {
                nodes[slot] = nil
                freeSlots.append(slot)
            }
        }

        while true {
            switch (left.last, right.last) {
            case (nil, nil):
                if !differences.isEmpty { try await body(differences) }
                return
            case (.entry(let slot, let index)?, nil):
                try await emit(try difference((slot, index), old: true))
                pop(&left)
            case (.node?, nil):
                try await expand(&left, remember: rememberOld)
            case (nil, .entry(let slot, let index)?):
                try await emit(try difference((slot, index), old: false))
                pop(&right)
            case (nil, .node?):
                try await expand(&right, remember: rememberNew)
            case (.entry(let a, let i)?, .entry(let b, let j)?):
                let (leafA, leafB) = (nodes[a]!, nodes[b]!)
                let order = leafA.compareKey(i, with: leafB, j)
                if order < 0 {
                    try await emit(try difference((a, i), old: true))
                    pop(&left)
                } else if order > 0 {
                    try await emit(try difference((b, j), old: false))
                    pop(&right)
                } else {
                    if !leafA.hasSamePayload(i, as: leafB, j) {
                        try await emit(IndexDifference(key: leafA.key(at: i), old: try leafA.payload(at: i), new: try leafB.payload(at: j)))
                    }
                    pop(&left)
                    pop(&right)
                }
            case (let a?, let b?):
                if case .node(let x, _) = a, case .node(let y, _) = b, x == y {
                    left.removeLast()
                    right.removeLast()
                    continue
                }
                let (levelA, levelB) = (a.level, b.level)
                if levelA >= levelB { try await expand(&left, remember: rememberOld) }
                if levelB >= levelA { try await expand(&right, remember: rememberNew) }
            }
        }
    }
}
