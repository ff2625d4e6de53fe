/// Where merged records hold their children: putting a child back where the ancestor held it,
/// and finding the holder cycles that moves on both sides can make.
extension MergeState {
    /// A merged record's hold on a child: `holder` holds `child` in `property`.
    struct Hold: Hashable, Comparable {
        var holder: RecordKey
        var child: RecordKey
        var property: String

        static func < (a: Hold, b: Hold) -> Bool {
            if a.holder != b.holder { return a.holder < b.holder }
            if a.child != b.child { return a.child < b.child }
            return a.property != b.property && utf8Less(a.property, b.property)
        }
    }

    /// A cycle of holders in the merged records (`a` holds `b`, which holds `a`): its holds that
    /// the ancestor did not have (the moves that closed it), each with the sides that made it.
    /// Such records hold each other and no record holds them: a value tree that never ends.
    struct HolderCycle {
        /// A hold that closed the cycle, and whether ours and theirs hold the child there.
        struct Move {
            var hold: Hold
            var inOurs: Bool
            var inTheirs: Bool
        }

        var moves: [Move]
    }

    /// Whether neither side deleted record `key`: each holds it, or neither changed it.
    func keptByBothSides(_ key: RecordKey) -> Bool {
        guard isChanged.contains(key) else { return true }
        return ours[key] != nil && theirs[key] != nil
    }

    /// Puts child `child` back where the ancestor held it, if that record is merged and holds
    /// nothing in its place: into its array at the ancestor's index (at most the end), with the
    /// entry that wrapped it, or into the property that held it alone. Returns whether it did.
    ///
    /// - Complexity: O(m) for the `m` changed records' bytes, plus decoding the holder.
    mutating func placeBack(_ child: RecordKey, store: Store) throws -> Bool {
        guard let (holderKey, baseBytes) = try ancestorHolder(of: child),
              case .some(.some(let holder)) = merged[holderKey] else { return false }
        let before = try store.decodeRecord(baseBytes, of: holderKey)
        for (name, value) in before.properties where value.childKeys.contains(child) {
            switch (value, holder.properties[name]) {
            case (.array(let old), .array(var now)?):
                guard !now.contains(where: { $0.childKeys.contains(child) }),
                      let index = old.firstIndex(where: { $0.childKeys.contains(child) }),
                      old[index].childKeys == [child] else { return false }
                now.insert(old[index], at: min(index, now.count))
                var properties = holder.properties
                properties[name] = .array(now)
                merged[holderKey] = .some(Record(key: holderKey, properties: properties))
                return true
            case (_, nil), (_, .null?):
                guard value.childKeys == [child] else { return false }
                var properties = holder.properties
                properties[name] = value
                merged[holderKey] = .some(Record(key: holderKey, properties: properties))
                return true
            default:
                return false
            }
        }
        return false
    }

    /// The record that held `child` at the ancestor, with its bytes there, among the changed
    /// records and those the merge holds unchanged: whichever of them held it. A child's holder
    /// that is neither still holds it.
    private func ancestorHolder(of child: RecordKey) throws -> (RecordKey, [UInt8])? {
        for key in changed {
            if let bytes = base[key], try RecordCoding.childKeys(bytes).contains(child) { return (key, bytes) }
        }
        for key in merged.keys.sorted() where !isChanged.contains(key) {
            if case .some(.some(let bytes)) = inOurs[key], try RecordCoding.childKeys(bytes).contains(child) { return (key, bytes) }
        }
        return nil
    }

    /// The children record `key` holds on each side (for a record no side changed, what it holds
    /// everywhere; for one a resolver added, nothing known).
    private func childrenOnSides(_ key: RecordKey) throws -> (ours: Set<RecordKey>, theirs: Set<RecordKey>) {
        if isChanged.contains(key) {
            return (Set(try ours[key].map(RecordCoding.childKeys) ?? []), Set(try theirs[key].map(RecordCoding.childKeys) ?? []))
        }
        let held = Set(try (inOurs[key] ?? nil).map(RecordCoding.childKeys) ?? [])
        return (held, held)
    }

    /// The children record `key` held at the ancestor (for one a resolver added, none known).
    private func childrenAtAncestor(_ key: RecordKey) throws -> Set<RecordKey> {
        let bytes = isChanged.contains(key) ? base[key] : (inOurs[key] ?? nil)
        return Set(try bytes.map(RecordCoding.childKeys) ?? [])
    }

    /// The holder cycles among the merged records, each with the moves that closed it.
    ///
    /// Neither side has a cycle, so every cycle has a hold that ours lacks and one that theirs
    /// lacks, and is reached from the children of either kind. The records below both kinds are
    /// walked a level at a time, together, until one walk ends: that walk reached every cycle.
    /// A cycle can pass through records no side changed (a folder moved into a subfolder of the
    /// folder the other side moved into it); those are read from ours' index. The cycles are
    /// the strongly connected components of what that walk reached, which depend on the merged
    /// records alone, not on which walk ended first: both directions of a merge find the same.
    ///
    /// - Complexity: O(m) for `m` merged records when one side moved nothing into a record; else
    ///   O(s log n) node reads for the `s` records below the children moved, on the side that
    ///   moved fewer.
    func holderCycles(store: Store, source: NodeSource) async throws -> [HolderCycle] {
        var notInOurs = Set<RecordKey>(), notInTheirs = Set<RecordKey>()
        for case let (key, record?) in merged {
            let children = Set(record.childKeys)
            guard !children.isEmpty else { continue }
            let sides = try childrenOnSides(key)
            notInOurs.formUnion(children.subtracting(sides.ours))
            notInTheirs.formUnion(children.subtracting(sides.theirs))
        }
        guard !notInOurs.isEmpty, !notInTheirs.isEmpty else { return [] }

        // What the records reached hold: from the merge, else read (unchanged on every side).
        var unchanged = [RecordKey: [RecordKey]]()
        func children(_ key: RecordKey) -> [RecordKey] {
            switch merged[key] {
            case .some(.some(let record)): record.childKeys
            case .some(.none): []
            case .none: unchanged[key] ?? []
            }
        }
        var walks = [(reached: notInOurs, frontier: notInOurs.sorted()), (reached: notInTheirs, frontier: notInTheirs.sorted())]
        var finished: Set<RecordKey>?
        while finished == nil {
            let unread = Set(walks.flatMap(\.frontier)).filter { merged[$0] == nil && unchanged[$0] == nil }.sorted()
            if !unread.isEmpty {
                let found = try await store.records(unread, root: oursRoot, source: source)
                for key in unread { unchanged[key] = found[key]?.childKeys ?? [] }
            }
            for index in walks.indices {
                var next = [RecordKey]()
                for key in walks[index].frontier {
                    for child in children(key) where walks[index].reached.insert(child).inserted { next.append(child) }
                }
                walks[index].frontier = next
                if next.isEmpty && finished == nil { finished = walks[index].reached }
            }
        }
        guard let reached = finished else { return [] }

        var cycles = [HolderCycle]()
        for component in Self.stronglyConnectedComponents(of: reached.sorted(), children: children) {
            let members = Set(component)
            var moves = [HolderCycle.Move]()
            for holderKey in component.sorted() {
                guard case .some(.some(let holder)) = merged[holderKey] else { continue }
                let before = try childrenAtAncestor(holderKey)
                let sides = try childrenOnSides(holderKey)
                for (name, value) in holder.properties {
                    for child in Set(value.childKeys) where members.contains(child) && !before.contains(child) {
                        moves.append(HolderCycle.Move(
                            hold: Hold(holder: holderKey, child: child, property: name),
                            inOurs: sides.ours.contains(child), inTheirs: sides.theirs.contains(child)))
                    }
                }
            }
            moves.sort { $0.hold < $1.hold }
            if !moves.isEmpty { cycles.append(HolderCycle(moves: moves)) }
        }
        return cycles
    }

    /// Undoes `move`: its holder lets the child go (from its arrays, with the entry that wraps
    /// it; a property that holds it alone goes back to the ancestor's value, or null), and the
    /// child goes back where the ancestor held it (``placeBack(_:store:)``), if it can. Returns
    /// whether the child went back.
    mutating func undo(_ move: Hold, store: Store) throws -> Bool {
        guard case .some(.some(let holder)) = merged[move.holder], let value = holder.properties[move.property] else { return false }
        var properties = holder.properties
        if let without = value.droppingElement(move.child, wholeEntries: true) {
            properties[move.property] = without
        } else {
            let before = try base[move.holder].map { try store.decodeRecord($0, of: move.holder) }
            let old = before?.properties[move.property] ?? .null
            properties[move.property] = old.childKeys.contains(move.child) ? .null : old
        }
        merged[move.holder] = .some(Record(key: move.holder, properties: properties))
        return try placeBack(move.child, store: store)
    }

    /// Whether `move`'s child can go back where the ancestor held it, once its holder lets it go.
    func canPlaceBack(_ move: Hold, store: Store) throws -> Bool {
        var trial = self
        return try trial.undo(move, store: store)
    }

    /// The move of `cycle` to undo, of those not in `undone`: first one whose child can go back
    /// where the ancestor held it; then one the side `preferring` did not make (ours or theirs,
    /// as the strategy takes), or without a side (most-recent) the one made longest ago by
    /// `stamps` (the newest change of the holder's property on a side that made the move; none
    /// known: oldest); then by holder, child and property. Depends on the three versions alone,
    /// so both directions of a merge agree. `nil` when every move was undone already.
    func moveToUndo(
        in cycle: HolderCycle, preferring side: RecordMerge.Side?, stamps: [Hold: ChangeStamp], excluding undone: Set<Hold>, store: Store
    ) throws -> Hold? {
        var ranked = [(hold: Hold, placed: Bool, taken: Bool, stamp: ChangeStamp?)]()
        for move in cycle.moves where !undone.contains(move.hold) {
            let taken = switch side {
            case .ours: move.inOurs
            case .theirs: move.inTheirs
            case nil: false
            }
            ranked.append((move.hold, try canPlaceBack(move.hold, store: store), taken, stamps[move.hold]))
        }
        return ranked.min { a, b in
            if a.placed != b.placed { return a.placed }
            if a.taken != b.taken { return !a.taken }
            if a.stamp != b.stamp {
                guard let x = a.stamp else { return true }
                guard let y = b.stamp else { return false }
                return x < y
            }
            return a.hold < b.hold
        }?.hold
    }

    /// The conflicts a manual merge reports for `cycles`: each property a move that closed one
    /// put a child in, with its values at the ancestor and on both sides.
    func conflicts(over cycles: [HolderCycle], store: Store) throws -> [MergeConflict] {
        var conflicts = Set<MergeConflict>()
        for move in cycles.flatMap(\.moves) {
            let merge = try recordMerge(move.hold.holder, store: store)
            let name = move.hold.property
            conflicts.insert(MergeConflict(
                key: move.hold.holder, property: name, base: merge.base?.properties[name],
                ours: merge.ours?.properties[name], theirs: merge.theirs?.properties[name]))
        }
        return conflicts.sorted(by: MergeConflict.canonicalOrder)
    }

    /// The strongly connected components of the graph on `nodes` (in this order) whose edges go
    /// from a node to `children(node)` within `nodes`, that hold a cycle: several nodes, or one
    /// that holds itself. Tarjan's algorithm, without recursion: a chain of holders can be long.
    ///
    /// - Complexity: O(v + e).
    static func stronglyConnectedComponents(of nodes: [RecordKey], children: (RecordKey) -> [RecordKey]) -> [[RecordKey]] {
        let inGraph = Set(nodes)
        var index = [RecordKey: Int](), lowLink = [RecordKey: Int](), onStack = Set<RecordKey>()
        var stack = [RecordKey](), components = [[RecordKey]]()
        var counter = 0
        for start in nodes where index[start] == nil {
            // Each frame: a node and the children it has left to visit.
            var frames = [(node: start, pending: children(start)[...])]
            index[start] = counter; lowLink[start] = counter; counter += 1
            stack.append(start); onStack.insert(start)
            while let frame = frames.last {
                let node = frame.node
                if let child = frame.pending.first {
                    frames[frames.count - 1].pending = frame.pending.dropFirst()
                    guard inGraph.contains(child) else { continue }
                    if index[child] == nil {
                        index[child] = counter; lowLink[child] = counter; counter += 1
                        stack.append(child); onStack.insert(child)
                        frames.append((child, children(child)[...]))
                    } else if onStack.contains(child) {
                        lowLink[node] = min(lowLink[node]!, index[child]!)
                    }
                    continue
                }
                frames.removeLast()
                if let parent = frames.last?.node { lowLink[parent] = min(lowLink[parent]!, lowLink[node]!) }
                guard lowLink[node] == index[node] else { continue }
                var component = [RecordKey]()
                while let top = stack.popLast() {
                    onStack.remove(top)
                    component.append(top)
                    if top == node { break }
                }
                if component.count > 1 || children(node).contains(node) { components.append(component) }
            }
        }
        return components
    }
}
