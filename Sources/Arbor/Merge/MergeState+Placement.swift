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

    /// Puts `children` back where the ancestor held them, where that record is merged (and not
    /// as a resolver returned it: what it left out goes), in the ancestor's order
    /// (``PropertyValue/restoring(_:from:)``): into the entry that held each where the record
    /// kept it (a lane, a dictionary's key or pair), at the ancestor's index in its array (at
    /// most the end); else with the entry that wrapped it, under the ancestor's name where that
    /// name holds nothing, or as the property that held it alone. Returns those put back.
    ///
    /// - Complexity: O(m) for the `m` changed records' bytes (once per merge), plus decoding
    ///   each holder once and O(e) for the `e` elements of its arrays.
    mutating func placeBack(_ children: [RecordKey], store: Store) throws -> Set<RecordKey> {
        let holders = try holdersAtAncestor()
        var byHolder = [RecordKey: Set<RecordKey>]()
        for child in children { if let holder = holders[child] { byHolder[holder, default: []].insert(child) } }
        var placed = Set<RecordKey>()
        for (holderKey, group) in byHolder {
            guard !settledByResolver.contains(holderKey), case .some(.some(let holder)) = merged[holderKey],
                  let baseBytes = base[holderKey] else { continue }
            let before = try store.decodeRecord(baseBytes, of: holderKey)
            var properties = holder.properties
            for (name, value) in before.properties where value.holdsChildren {
                // In the ancestor's order, each where the ancestor held it: back into the entry
                // that held it, where the merged record kept that entry without it (a lane, a
                // dictionary's key whose value is an array), else with the entry that wrapped it.
                for child in value.childKeys where group.contains(child) && !placed.contains(child) {
                    let now = properties[name] ?? .null
                    guard !now.childKeys.contains(child), let restored = now.restoring(child, from: value) else { continue }
                    properties[name] = restored
                    placed.insert(child)
                }
            }
            if properties != holder.properties { merged[holderKey] = .some(Record(key: holderKey, properties: properties)) }
        }
        return placed
    }

    /// The record that held each child at the ancestor, of the changed records' children.
    ///
    /// - Complexity: O(m) for the `m` changed records' bytes, once per merge.
    mutating func holdersAtAncestor() throws -> [RecordKey: RecordKey] {
        if let ancestorHolders { return ancestorHolders }
        var holders = [RecordKey: RecordKey]()
        for key in changed { for child in try base[key].map(RecordCoding.childKeys) ?? [] { holders[child] = key } }
        ancestorHolders = holders
        return holders
    }

    /// The records one side deleted, which the other kept as they were, above records (at the
    /// ancestor) that the first side deleted too and the other changed: a value tree is one
    /// value, so a change to a record it holds is a change to it. Each is a conflict as deleted
    /// and changed, and goes as the records changed below it go: where the merge keeps one of
    /// them, the holder is kept (and its other children, restored); else deleted. Before, the
    /// holder went cleanly, and the changed record, kept by the strategy, went as an orphan
    /// all the same.
    /// `deletedAndChanged` are the records in such a conflict of their own, deleted by the side
    /// given; the result maps each holder to the side that deleted it and the changed records
    /// below it, in key order.
    ///
    /// - Complexity: O(m) for the `m` changed records' bytes, plus O(d) for the depth `d` of
    ///   each changed record below such holders.
    mutating func deletesMeetingChangesBelow(
        _ deletedAndChanged: [(key: RecordKey, deleting: RecordMerge.Side)]
    ) throws -> [RecordKey: (deleting: RecordMerge.Side, changed: [RecordKey])] {
        guard !deletedAndChanged.isEmpty else { return [:] }
        let holders = try holdersAtAncestor()
        var result = [RecordKey: (deleting: RecordMerge.Side, changed: [RecordKey])]()
        for (key, deleting) in deletedAndChanged.sorted(by: { $0.key < $1.key }) {
            var holder = holders[key]
            // Each holder once: stored holders that hold each other (a damaged or hostile
            // replica's) would otherwise be walked without end.
            var walked: Set<RecordKey> = [key]
            while let current = holder, walked.insert(current).inserted, case .some(.none) = merged[current], base[current] != nil,
                  (deleting == .ours ? ours[current] : theirs[current]) == nil,
                  (deleting == .ours ? theirs[current] : ours[current]) != nil {
                result[current, default: (deleting, [])].changed.append(key)
                holder = holders[current]
            }
        }
        return result
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
    /// walked in turns, the one that has reached fewer records going on, until one walk ends:
    /// that walk reached every cycle.
    /// A cycle can pass through records no side changed (a folder moved into a subfolder of the
    /// folder the other side moved into it); those are read from ours' index. The cycles are
    /// the strongly connected components of what that walk reached, which depend on the merged
    /// records alone, not on which walk ended first: both directions of a merge find the same.
    ///
    /// - Complexity: O(m) for `m` merged records when one side moved nothing into a record; else
    ///   O(s log n) node reads for the `s` records below the children moved, on the side whose
    ///   moved records hold fewer.
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
        // Each step expands up to `step` records of the walk that has reached fewer: the walks
        // cost about twice the smaller one, however wide or deep either is.
        let step = 1_024
        var walks = [(reached: notInOurs, frontier: notInOurs.sorted()[...]), (reached: notInTheirs, frontier: notInTheirs.sorted()[...])]
        var finished: Set<RecordKey>?
        while finished == nil {
            let index = walks[0].reached.count <= walks[1].reached.count ? 0 : 1
            let batch = walks[index].frontier.prefix(step)
            walks[index].frontier = walks[index].frontier.dropFirst(batch.count)
            let unread = batch.filter { merged[$0] == nil && unchanged[$0] == nil }
            if !unread.isEmpty {
                let found = try await store.records(Array(unread), root: oursRoot, source: source)
                for key in unread { unchanged[key] = found[key]?.childKeys ?? [] }
            }
            var next = [RecordKey]()
            for key in batch {
                for child in children(key) where walks[index].reached.insert(child).inserted { next.append(child) }
            }
            walks[index].frontier += next
            if walks[index].frontier.isEmpty { finished = walks[index].reached }
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
        // In an order of their own, not the walk's: undoing one may change what another can do.
        return cycles.sorted { $0.moves[0].hold < $1.moves[0].hold }
    }

    /// Undoes `move`: its holder lets the child go (from its arrays, with the entry that wraps
    /// it; a property that holds it alone is set as a side that did not make the move has it,
    /// ``valueAsASideLeftIt(_:of:without:)``), and the child goes back where the ancestor held
    /// it (``placeBack(_:store:)``), if it can. Returns `nil` if the holder cannot let it go
    /// alone (it shares an entry with other children), else whether the child has a holder (went
    /// back, or another record holds it). With `withEntry`, such an entry goes whole: its other
    /// children are left to ownership (back where the ancestor held them, if both sides keep
    /// them, else away).
    mutating func undo(_ move: Hold, withEntry: Bool = false, store: Store) throws -> Bool? {
        guard case .some(.some(let holder)) = merged[move.holder], let value = holder.properties[move.property] else { return nil }
        var properties = holder.properties
        if let without = value.droppingElement(move.child, wholeEntries: true), !without.childKeys.contains(move.child) {
            properties[move.property] = without
        } else if withEntry, let without = value.droppingEntries(holding: move.child), !without.childKeys.contains(move.child) {
            properties[move.property] = without
        } else if value.childKeys == [move.child] {
            if let asLeft = try valueAsASideLeftIt(move.property, of: move.holder, without: move.child) {
                properties[move.property] = asLeft
            } else {
                // Both sides made this move (another closed the cycle): the ancestor's value,
                // unless it holds the child or a record the merge deleted.
                let before = try base[move.holder].map { try store.decodeRecord($0, of: move.holder) }
                let old = before?.properties[move.property] ?? .null
                let gone = old.childKeys.contains { $0 == move.child || merged[$0] == .some(nil) }
                properties[move.property] = gone ? .null : old
            }
        } else {
            return nil
        }
        merged[move.holder] = .some(Record(key: move.holder, properties: properties))
        // Still held elsewhere (a holder that could not let it go shares it): nothing to put back.
        if merged.values.contains(where: { $0?.childKeys.contains(move.child) == true }) { return true }
        return try placeBack([move.child], store: store).contains(move.child)
    }

    /// Whether `move` can be undone (``undo(_:withEntry:store:)``: `nil` if not), and whether
    /// its child then goes back where the ancestor held it.
    func undoing(_ move: Hold, withEntry: Bool, store: Store) throws -> Bool? {
        var trial = self
        return try trial.undo(move, withEntry: withEntry, store: store)
    }

    /// The move of `cycle` to undo, of those not in `undone` (and whether with the entry that
    /// holds it, where no move can be undone alone): first one whose child keeps a holder (goes
    /// back where the ancestor held it, or another record holds it); then one the side `preferring` did not make (ours or theirs,
    /// as the strategy takes), or without a side (most-recent) the one made longest ago by
    /// `stamps` (the newest change of the holder's property on a side that made the move; none
    /// known: oldest); then by holder, child and property. Depends on the three versions alone,
    /// so both directions of a merge agree. `nil` when every move was undone already.
    func moveToUndo(
        in cycle: HolderCycle, preferring side: RecordMerge.Side?, stamps: [Hold: ChangeStamp], excluding undone: Set<Hold>, store: Store
    ) throws -> (hold: Hold, withEntry: Bool)? {
        // Moves undone alone first; where none can be, with the entries that hold them.
        for withEntry in [false, true] {
            var ranked = [(hold: Hold, placed: Bool, taken: Bool, stamp: ChangeStamp?)]()
            for move in cycle.moves where !undone.contains(move.hold) {
                let taken = switch side {
                case .ours: move.inOurs
                case .theirs: move.inTheirs
                case nil: false
                }
                guard let placed = try undoing(move.hold, withEntry: withEntry, store: store) else { continue }
                ranked.append((move.hold, placed, taken, stamps[move.hold]))
            }
            let best = ranked.min { a, b in
                if a.placed != b.placed { return a.placed }
                if a.taken != b.taken { return !a.taken }
                if a.stamp != b.stamp {
                    guard let x = a.stamp else { return true }
                    guard let y = b.stamp else { return false }
                    return x < y
                }
                return a.hold < b.hold
            }
            if let best { return (best.hold, withEntry) }
        }
        return nil
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
