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
        enum Item {
            case node(Hash, level: Int)
            case entry(IndexEntry)
            var level: Int { if case .node(_, let level) = self { level } else { -1 } }
        }
        let oldRoot = try await source.node(old)
        let newRoot = try await source.node(new)
        // Stacks: the head of each sequence is the last element.
        var left: [Item] = [.node(old, level: oldRoot.level)]
        var right: [Item] = [.node(new, level: newRoot.level)]
        var differences = [IndexDifference]()

        func expand(_ stack: inout [Item]) async throws {
            guard case .node(let hash, _) = stack.removeLast() else { return }
            let node = try await source.node(hash)
            for entry in node.entries.reversed() {
                if node.level == 0 {
                    stack.append(.entry(entry))
                } else if case .node(let child, _) = entry.payload {
                    stack.append(.node(child, level: node.level - 1))
                }
            }
        }

        while true {
            switch (left.last, right.last) {
            case (nil, nil):
                return differences
            case (.some(let item), nil):
                if case .entry(let entry) = item {
                    differences.append(IndexDifference(key: entry.key, old: entry.payload, new: nil))
                    left.removeLast()
                } else { try await expand(&left) }
            case (nil, .some(let item)):
                if case .entry(let entry) = item {
                    differences.append(IndexDifference(key: entry.key, old: nil, new: entry.payload))
                    right.removeLast()
                } else { try await expand(&right) }
            case (.some(.entry(let a)), .some(.entry(let b))):
                let order = compareKeys(a.key, b.key)
                if order < 0 {
                    differences.append(IndexDifference(key: a.key, old: a.payload, new: nil))
                    left.removeLast()
                } else if order > 0 {
                    differences.append(IndexDifference(key: b.key, old: nil, new: b.payload))
                    right.removeLast()
                } else {
                    if a.payload != b.payload { differences.append(IndexDifference(key: a.key, old: a.payload, new: b.payload)) }
                    left.removeLast()
                    right.removeLast()
                }
            case (.some(let a), .some(let b)):
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
