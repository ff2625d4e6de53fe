import Foundation

extension Store {
    /// The replica name every merge commit is signed with, whichever replica makes it.
    static let mergeReplica = "merge"

    /// Merges version `theirs` into version `ours` and updates the head set: the two are
    /// replaced by the result (unless the strategy stopped at conflicts). A fast-forward changes
    /// the heads only when the version passed by was a head.
    ///
    /// Finds the common ancestor (``MergeReport/ancestor``), diffs both sides against it and
    /// merges record by record, property by property. Conflicts are settled by `strategy`
    /// (default: the configuration's), or by a type's override in the configuration's
    /// ``Configuration/mergeResolvers``. An explicit ``MergeStrategy/manual`` stops at every
    /// conflict; a configured one lets the overrides settle theirs first. When one side contains the other the result is a
    /// fast-forward and nothing is written.
    ///
    /// The merge commit depends only on the two heads and the strategy: its parents are sorted,
    /// its time is derived from theirs (`HybridTime.next(after:now:)` at the epoch), its replica
    /// is `"merge"` and its message names the parents. So every replica that merges the same
    /// heads makes the same commit, byte for byte; with ``MergeStrategy/mostRecent`` also in
    /// either order, but for one case: when both sides spell one property name in new, different
    /// Unicode forms, the merge keeps the first side's spelling (``mergeHeads(strategy:)`` orders
    /// the heads by hash, so replicas agree). Records and values compare by their bytes, so one
    /// side's change of a name's spelling alone is a change, and is kept.
    ///
    /// - Complexity: O(k log n) index nodes read and written for `k` records changed on either
    ///   side in a store of `n` records, plus O(v) version reads for the `v` versions since the
    ///   fork (and, for conflicts settled by ``MergeStrategy/mostRecent``, O(c log n) reads per
    ///   such version for `c` conflicting records). Where both sides moved records into others,
    ///   the check for holder cycles reads the records below the moved ones, on the side whose
    ///   moved records hold fewer: O(s log n) for `s` such records.
    @discardableResult
    public func merge(_ ours: Hash, _ theirs: Hash, strategy: MergeStrategy? = nil) async throws -> MergeOutcome {
        let sides = try await namedVersions([ours, theirs])
        let rule = MergeRule(asked: strategy, configuration: configuration)
        // No head of this set builds on another, so none builds on what builds on its heads.
        let startHeads = Set(try await headState().heads)
        let written = WrittenObjects()
        let outcome = try await merge(sides[0], sides[1], rule: rule, written: written, restating: .inItsWrite)
        if case .fastForward(let result) = outcome {
            // The heads move only when the side passed by was one of them: a fast-forward
            // between older versions ends on an ancestor of a head, never a head itself.
            let passed = result.id == ours ? theirs : ours
            guard passed != result.id, try await headState().heads.contains(passed) else { return outcome }
            try await updateHeads(
                removing: [passed], adding: result.id, existing: result.time, settled: startHeads.contains(result.id) ? startHeads : [])
        } else if let result = outcome.version {
            try await updateHeads(
                removing: Set([ours, theirs]).subtracting([result.id]), adding: result.id, existing: result.time,
                settled: startHeads.isSuperset(of: [ours, theirs]) ? startHeads : [])
            await writeBackRemoved(written.objects)
        }
        return outcome
    }

    /// Merges all heads into one and makes it the only head (by compare-and-swap, retried:
    /// heads added concurrently stay). Heads are merged in pairs in hash order, then the results
    /// in pairs, to one (a tournament), so every replica with the same heads reaches the same
    /// version. (Arbor before November 2026 folded the heads into the result one at a time:
    /// from four heads on, a replica running it makes other merge commits, and a further merge
    /// joins the two.) Returns `nil` for an empty store, and `.fastForward` of the head when
    /// there is one head.
    ///
    /// Heads have no order of their own, so with ``MergeStrategy/ours`` and
    /// ``MergeStrategy/theirs`` the "first" head is the one whose hash sorts first: use
    /// ``sync(with:strategy:progress:)`` to prefer one replica's side, or ``MergeStrategy/mostRecent``.
    ///
    /// - Complexity: that of ``merge(_:_:strategy:)`` for each of the `h - 1` pairs; each
    ///   record changed since the heads' ancestor is diffed O(log h) times.
    @discardableResult
    public func mergeHeads(strategy: MergeStrategy? = nil) async throws -> MergeOutcome? {
        try await mergeHeads(strategy: strategy, preferring: [])
    }

    /// ``mergeHeads(strategy:)``; with ``MergeStrategy/ours`` or ``MergeStrategy/theirs`` and
    /// heads both in and out of `preferred`, those in it are "ours": each side is merged to one
    /// version, then the two, ours first. So too with ``MergeStrategy/manual`` and two heads,
    /// whose conflicts then name `preferred`'s side ours (a clean merge of two heads is the same
    /// commit either way round; of more, the pairs would differ from other replicas').
    func mergeHeads(strategy: MergeStrategy?, preferring preferred: Set<Hash>) async throws -> MergeOutcome? {
        let (_, ids) = try await headState()
        let rule = MergeRule(asked: strategy, configuration: configuration)
        let ours = ids.filter(preferred.contains)
        let takesSides = [MergeStrategy.ours, .theirs].contains(rule.strategy) || configuration.mergeResolvers.takesSides
            || (rule.strategy == .manual && ids.count == 2)
        let sides = takesSides && !ours.isEmpty && ours.count < ids.count
            ? [ours, ids.filter { !preferred.contains($0) }] : [ids]
        // The tournament's merges restate once it has reached one version: a later pair's
        // conflicts may stop it after its first merges were written.
        let restatements = CollectedRestatements()
        let (folded, merges, written) = try await foldHeads(sides, rule: rule, keepingWritten: true, restating: .collected(restatements))
        guard let outcome = folded else { return nil }
        if let result = outcome.version {
            // Before the heads move, as a commit's: if they then fail to, the collection that
            // removes the merges makes these nodes whole again.
            if !restatements.items.isEmpty { try await backend.restate(restatements.items) }
            // The merges of the tournament are deterministic too: another task or replica that
            // merged some of these heads may have made one of them a head meanwhile.
            try await updateHeads(removing: Set(ids).union(merges).subtracting([result.id]), adding: result.id, existing: result.time)
            await writeBackRemoved(written)
        }
        return outcome
    }

    /// The conflicts a ``MergeStrategy/manual`` merge of the current heads would stop at;
    /// no ref changes. Empty when the heads merge cleanly. With manual the configured strategy,
    /// the configured per-type overrides settle theirs first, as ``mergeHeads(strategy:)`` does.
    ///
    /// With three or more heads, the clean merges of the first pairs are written as objects
    /// (unreferenced, as any interrupted write) to compute the next.
    public func conflicts() async throws -> [MergeConflict] {
        let (_, ids) = try await headState()
        // What mergeHeads() would stop at when manual is the configured strategy (the overrides
        // settling theirs); every conflict otherwise.
        let rule = MergeRule(strategy: .manual, overridesUnderManual: configuration.mergeStrategy == .manual)
        if case .conflicts(let conflicts)? = try await foldHeads([ids], rule: rule).outcome { return conflicts }
        return []
    }

    /// Merges each of `sides` to one version by a tournament over its heads in hash order, then
    /// those versions, in the order of `sides`, the same way; with the outcome, every merge
    /// commit the tournament made on the way, and the objects it wrote.
    private func foldHeads(
        _ sides: [[Hash]], rule: MergeRule, keepingWritten: Bool = false, restating: MergeRestating = .keepWhole
    ) async throws -> (outcome: MergeOutcome?, merges: Set<Hash>, written: [(hash: Hash, bytes: [UInt8])]) {
        var fold = HeadFold()
        if keepingWritten { fold.written = WrittenObjects() }
        fold.restating = restating
        var results = [Version]()
        for side in sides {
            guard let result = try await fold.tournament(try await versions(side.sorted()), rule: rule, store: self) else {
                return (fold.conflicts.map { .conflicts($0) }, fold.merges, [])
            }
            results.append(result)
        }
        guard let result = try await fold.tournament(results, rule: rule, store: self) else { return (fold.conflicts.map { .conflicts($0) }, fold.merges, []) }
        return (fold.outcome(result), fold.merges, fold.written?.objects ?? [])
    }

    /// Merges two versions and writes the merge commit's objects; the head set is left alone.
    ///
    /// `virtualAncestors` are those merged before in the same operation.
    func merge(_ ours: Version, _ theirs: Version, strategy: MergeStrategy, virtualAncestors: VirtualAncestors = VirtualAncestors()) async throws -> MergeOutcome {
        try await merge(ours, theirs, rule: MergeRule(strategy: strategy), virtualAncestors: virtualAncestors)
    }

    /// ``merge(_:_:strategy:virtualAncestors:)`` by `rule`.
    /// `written`, when given, collects the objects the merge writes. `restating` says what
    /// becomes of the nodes it replaced, on a backend that keeps deltas.
    func merge(
        _ ours: Version, _ theirs: Version, rule: MergeRule, virtualAncestors: VirtualAncestors = VirtualAncestors(),
        written: WrittenObjects? = nil, restating: MergeRestating = .keepWhole
    ) async throws -> MergeOutcome {
        let strategy = rule.strategy
        let ancestry = try await CommonAncestor.find(ours, theirs, store: self)
        if ancestry.ancestor?.id == theirs.id { return .fastForward(ours) }
        if ancestry.ancestor?.id == ours.id { return .fastForward(theirs) }
        let source = makeSource()
        let base = try await virtualAncestor(ancestry, known: virtualAncestors)
        let baseRoot = base?.root ?? Store.emptyRoot.hash
        var state = try await MergeState.load(base: baseRoot, ours: ours, theirs: theirs, store: self, source: source)

        // Merge every changed record; collect what conflicts.
        var pending = [(merge: RecordMerge, result: RecordMerge.Result)]()
        for key in state.changed {
            let recordMerge = try state.recordMerge(key, store: self)
            let result = recordMerge.merge()
            if result.conflicts.isEmpty { state.merged[key] = .some(result.merged) } else { pending.append((recordMerge, result)) }
        }
        // A record one side deleted and the other moved conflicts as one deleted and changed: the
        // move changed where it is. (Found once every record was decoded, so a damaged one is
        // named as such.)
        let deletedAndMoved = try state.deletesMeetingMoves()
        for key in deletedAndMoved.keys.sorted() where state.merged[key] != nil {
            let recordMerge = try state.recordMerge(key, store: self)
            state.merged[key] = nil
            pending.append((recordMerge, recordMerge.wholeRecordConflict()))
        }
        // A record one side deleted, whose records below it the other side changed, conflicts as
        // one deleted and changed (the value it is the root of changed), and goes as they go.
        let changedBelow = try state.deletesMeetingChangesBelow(pending.compactMap { merge, result in
            guard result.conflicts.first?.property == nil, deletedAndMoved[merge.key] == nil, merge.base != nil,
                  (merge.ours == nil) != (merge.theirs == nil) else { return nil }
            return (merge.key, merge.ours == nil ? .ours : .theirs)
        })
        var holderConflicts = [MergeConflict]()
        for key in changedBelow.keys.sorted() { holderConflicts += try state.recordMerge(key, store: self).wholeRecordConflict().conflicts }
        // A child the sides placed in different places conflicts too, over where it goes.
        let contested = try state.findContestedChildren(store: self)
        let conflicts = Set(pending.flatMap(\.result.conflicts) + contested + holderConflicts).sorted(by: MergeConflict.canonicalOrder)
        if strategy == .manual, !rule.overridesUnderManual, !conflicts.isEmpty { return .conflicts(conflicts) }

        // Settle them: a type's override, else the strategy.
        var manual = [MergeConflict]()
        var recent = [(merge: RecordMerge, result: RecordMerge.Result)]()
        // What resolvers return replaces the records and their children, whatever the strategy
        // settles for those keys and in whatever order: it is applied last.
        var resolved = [RecordKey: Record]()
        for (recordMerge, result) in pending {
            let rule = configuration.mergeResolvers.rule(for: recordMerge.key.type)
            switch (rule, recordMerge.ours != nil && recordMerge.theirs != nil) {
            case (.resolver(let resolve)?, true):
                let records = try await resolve(self, recordMerge.key, base?.root, ours.root, theirs.root)
                for record in records {
                    try record.validateForStorage()
                    resolved[record.key] = record
                }
            default:
                var effective = strategy
                if case .strategy(let override)? = rule { effective = override }
                switch effective {
                case .ours: state.merged[recordMerge.key] = .some(recordMerge.settle(result) { _ in .ours })
                case .theirs: state.merged[recordMerge.key] = .some(recordMerge.settle(result) { _ in .theirs })
                case .mostRecent: recent.append((recordMerge, result))
                case .manual: manual += result.conflicts
                }
            }
        }
        // Where a contested child goes is the merge's to say, not a type's: a configured manual
        // stops there too.
        if strategy == .manual { manual += contested }
        // A holder deleted above records the other side changed goes as they go, unless its type
        // (or the configured strategy) says manual: then the merge stops at it too.
        for key in changedBelow.keys.sorted() {
            var effective = strategy
            if case .strategy(let override)? = configuration.mergeResolvers.rule(for: key.type) { effective = override }
            if effective == .manual { manual += holderConflicts.filter { $0.key == key } }
        }
        if !manual.isEmpty { return .conflicts(Set(manual).sorted(by: MergeConflict.canonicalOrder)) }
        if !recent.isEmpty {
            // Each conflict goes to the side that made its change last: a property's change, or
            // for a record deleted on one side the record's; for one moved, also the change of
            // the property the move put it in.
            var wanted = Dictionary(recent.map { ($0.merge.key, Set($0.result.conflicts.map(\.property))) }, uniquingKeysWith: { $0.union($1) })
            // A record deleted with holders above it that the other side kept (``changedBelow``):
            // the deleting side's stamp is its last deletion on that chain, so that the record
            // goes as its holders would by their own stamps, not by its own alone.
            var holdersAbove = [RecordKey: [RecordKey]]()
            for (holder, below) in changedBelow { for changed in below.changed { holdersAbove[changed, default: []].append(holder) } }
            for (merge, _) in recent {
                if let place = deletedAndMoved[merge.key]?.place { wanted[place.record, default: []].insert(place.property) }
                for holder in holdersAbove[merge.key] ?? [] { wanted[holder, default: []].insert(nil) }
            }
            // What the keys hold at the base and at both heads is known from the diffs.
            let known = state.payloads(of: Array(wanted.keys))
            let oursTimes = try await changeStamps(of: wanted, in: ancestry.oursOnly, head: ours, inherited: ancestry.ancestor, source: source, known: known)
            let theirsTimes = try await changeStamps(of: wanted, in: ancestry.theirsOnly, head: theirs, inherited: ancestry.ancestor, source: source, known: known)
            for (recordMerge, result) in recent {
                let (oursStamps, theirsStamps) = (oursTimes[recordMerge.key] ?? [:], theirsTimes[recordMerge.key] ?? [:])
                let moved = deletedAndMoved[recordMerge.key]
                // The moving side's stamp: its last change of the record, or of the move's place.
                let movedAt = moved.flatMap { move in (move.deleting == .ours ? theirsTimes : oursTimes)[move.place.record]?[move.place.property] }
                state.merged[recordMerge.key] = .some(recordMerge.settle(result) { conflict in
                    var (o, t) = (oursStamps[conflict.property]!, theirsStamps[conflict.property]!)
                    if conflict.property == nil, let moved, let movedAt {
                        if moved.deleting == .ours { t = max(t, movedAt) } else { o = max(o, movedAt) }
                    }
                    if conflict.property == nil, let holders = holdersAbove[recordMerge.key] {
                        let deleting = recordMerge.ours == nil
                        for holder in holders {
                            guard let stamp = (deleting ? oursTimes : theirsTimes)[holder]?[nil] else { continue }
                            if deleting { o = max(o, stamp) } else { t = max(t, stamp) }
                        }
                    }
                    if o != t { return o > t ? .ours : .theirs }
                    return Self.valueOrder(conflict.theirs, conflict.ours) ? .ours : .theirs
                })
            }
        }
        for (key, record) in resolved { state.merged[key] = .some(record) }
        state.settledByResolver = Set(resolved.keys)
        // A holder deleted on one side above records the other changed is kept, as the changing
        // side has it, where the merge keeps one of them: a strategy settled those, each by its
        // own change, and the holder follows (its other children are restored with it).
        for (key, below) in changedBelow where !resolved.keys.contains(key) {
            guard below.changed.contains(where: { if case .some(.some) = state.merged[$0] { true } else { false } }) else { continue }
            let recordMerge = try state.recordMerge(key, store: self)
            state.merged[key] = .some(below.deleting == .ours ? recordMerge.theirs : recordMerge.ours)
        }
        // A record the merge deletes that the other side moved: its new holder lets it go, or
        // taking ownership back would restore it.
        try state.letGo(Set(deletedAndMoved.keys.filter { state.merged[$0] == .some(nil) }))

        // A child both sides moved goes where the side a strategy takes put it.
        let side: RecordMerge.Side? = switch strategy {
        case .ours: .ours
        case .theirs: .theirs
        default: nil
        }
        try await state.enforceOwnership(store: self, source: source, preferring: side)
        // Moves on both sides can close a cycle of holders (each side moved a folder into the
        // other): a manual merge stops at it, the others undo one move of each cycle.
        var undone = Set<MergeState.Hold>()
        while case let cycles = try await state.holderCycles(store: self, source: source), !cycles.isEmpty {
            if strategy == .manual { return .conflicts(try state.conflicts(over: cycles, store: self)) }
            let stamps = side == nil ? try await moveStamps(cycles, state: state, ancestry: ancestry, ours: ours, theirs: theirs, source: source) : [:]
            for cycle in cycles {
                guard let move = try state.moveToUndo(in: cycle, preferring: side, stamps: stamps, excluding: undone, store: self) else {
                    throw ArborError(.invalidInput, "the merge cannot settle where records \(cycle.moves.map(\.hold.child)) go: undoing the moves that put them in each other leaves them so")
                }
                undone.insert(move.hold)
                _ = try state.undo(move.hold, withEntry: move.withEntry, store: self)
            }
            try await state.enforceOwnership(store: self, source: source, preferring: side)
        }
        let root = try await ProllyTree.apply(try state.edits(), to: ours.root, source: source)

        let recordCount = try await source.nodeBytes(root).recordCount()
        var objects = state.blobs + source.newObjects(reachableFrom: root)
        if root == Store.emptyRoot.hash { objects.append(Store.emptyRoot) }
        let parents = [ours.id, theirs.id].sorted()
        let content = Version.Content(
            root: root, parents: parents,
            time: HybridTime.next(after: [ours.time, theirs.time], now: Date(timeIntervalSince1970: 0)),
            replica: Store.mergeReplica, message: "Merge \(parents[0].abbreviated()) and \(parents[1].abbreviated())",
            recordCount: recordCount)
        let bytes = content.encoded()
        let id = Hash.of(bytes)
        objects.append((id, bytes))
        // The nodes of ours' tree it replaced, as a commit's: not for a merge that may not land
        // (a virtual ancestor, one computed for its conflicts), whose nodes as bases would leave
        // real ones as deltas of garbage.
        func restatements() -> [Restatement] { source.notesSuperseded ? source.restatements(written: Set(objects.map(\.hash))) : [] }
        switch restating {
        case .keepWhole:
            try await backend.put(objects)
        case .inItsWrite:
            try await backend.put(objects, restating: restatements())
        case .collected(let collected):
            collected.items += restatements()
            try await backend.put(objects)
        }
        written?.add(objects)
        let report = MergeReport(ancestor: base?.id, changed: state.changed, resolved: conflicts)
        return .merged(Version(id: id, content: content), report)
    }

    /// The version a merge works from: the common ancestor, or for a criss-cross history the
    /// merge of all candidates (in hash order, with ``MergeStrategy/mostRecent``), written as
    /// an unreferenced commit. Every replica computes the same one. If the candidates cannot
    /// be merged (a type overridden to ``MergeStrategy/manual``), the newest candidate.
    func virtualAncestor(_ ancestry: CommonAncestor, known: VirtualAncestors) async throws -> Version? {
        // Below `virtualAncestorDepth` levels of recursion the newest candidate stands in: in a
        // history where many replicas merge each other all the time, every level has several
        // candidates down to the first version, and a merge would cost the whole history.
        guard ancestry.candidates.count > 1, known.depth < Store.virtualAncestorDepth else { return ancestry.ancestor }
        let candidates = ancestry.candidates.sorted { $0.id < $1.id }
        // The same candidates at the same depth give the same virtual ancestor (it depends on the
        // history alone), and in such histories the same sets come back again and again.
        let key = VirtualAncestors.Key(candidates: candidates.map(\.id), depth: known.depth)
        if let merged = known.byCandidates[key] { return merged ?? ancestry.ancestor }
        known.depth += 1
        defer { known.depth -= 1 }
        var current = candidates[0]
        for next in candidates.dropFirst() {
            guard let version = try await merge(current, next, strategy: .mostRecent, virtualAncestors: known).version else {
                known.byCandidates[key] = .some(nil)
                return ancestry.ancestor
            }
            current = version
        }
        known.byCandidates[key] = current
        return current
    }

    /// When each move of `cycles` was made: the newest change, on a side that made it, of the
    /// property the move put its child in (``changeStamps(of:in:head:inherited:source:known:)``).
    private func moveStamps(
        _ cycles: [MergeState.HolderCycle], state: MergeState, ancestry: CommonAncestor, ours: Version, theirs: Version, source: NodeSource
    ) async throws -> [MergeState.Hold: ChangeStamp] {
        let moves = cycles.flatMap(\.moves)
        func wanted(_ made: (MergeState.HolderCycle.Move) -> Bool) -> [RecordKey: Set<String?>] {
            Dictionary(moves.filter(made).map { ($0.hold.holder, Set([$0.hold.property])) }, uniquingKeysWith: { $0.union($1) })
        }
        let (oursWanted, theirsWanted) = (wanted(\.inOurs), wanted(\.inTheirs))
        let known = state.payloads(of: Array(Set(oursWanted.keys).union(theirsWanted.keys)))
        let oursTimes = try await changeStamps(of: oursWanted, in: ancestry.oursOnly, head: ours, inherited: ancestry.ancestor, source: source, known: known)
        let theirsTimes = try await changeStamps(of: theirsWanted, in: ancestry.theirsOnly, head: theirs, inherited: ancestry.ancestor, source: source, known: known)
        var stamps = [MergeState.Hold: ChangeStamp]()
        for move in moves {
            let made = [move.inOurs ? oursTimes : [:], move.inTheirs ? theirsTimes : [:]].compactMap { $0[move.hold.holder]?[move.hold.property] }
            stamps[move.hold] = made.max()
        }
        return stamps
    }

    /// How many levels deep a criss-cross merge builds virtual ancestors from the merges of
    /// their candidates; below that, the newest candidate is the base.
    static let virtualAncestorDepth = 2

    /// A deterministic order of two different values (`nil` first), for ties of `mostRecent`.
    static func valueOrder(_ a: PropertyValue?, _ b: PropertyValue?) -> Bool {
        switch (a, b) {
        case (nil, nil): false
        case (nil, _): true
        case (_, nil): false
        case (let x?, let y?): PropertyValue.canonicalBytes(of: x).lexicographicallyPrecedes(PropertyValue.canonicalBytes(of: y))
        }
    }

    /// When each of `wanted` last changed on one side: for a record's name `nil`, the time and
    /// id of the newest of `versions` (that side's own versions, newest first) whose record
    /// differs from every one of its parents; for a property's name, the newest whose value of
    /// that property does (a merge commit that took the property from a parent did not change
    /// it, though its record differs from both). Where none does, the side holds what it
    /// inherited from below the fork (a criss-cross merge's base is then not the version the
    /// side's value came from): `inherited`'s stamp, the newest common ancestor, an upper bound
    /// of when that changed (the head's, later than anything on the side, let a value set long
    /// before the fork beat the other side's newer change); `head`'s without one. `known`
    /// gives, for some roots, the payload of every wanted record the root holds: those roots
    /// are not looked up.
    ///
    /// - Complexity: O(c log n) node reads per version walked, for `c` records, but for the
    ///   roots known; records are decoded only at the versions that change them.
    func changeStamps(
        of wanted: [RecordKey: Set<String?>], in versions: [Version], head: Version, inherited: Version? = nil, source: NodeSource,
        known: [Hash: [[UInt8]: IndexPayload]] = [:]
    ) async throws -> [RecordKey: [String?: ChangeStamp]] {
        let keyBytes = Set(wanted.keys.map(\.indexBytes)).sorted { compareKeys($0, $1) < 0 }
        var pending = [[UInt8]: (key: RecordKey, parts: Set<String?>)]()
        for (key, parts) in wanted where !parts.isEmpty { pending[key.indexBytes] = (key, parts) }
        var result = [RecordKey: [String?: ChangeStamp]]()
        var atRoot = known
        func payloads(_ root: Hash) async throws -> [[UInt8]: IndexPayload] {
            if let known = atRoot[root] { return known }
            let found = try await ProllyTree.lookup(keyBytes, root: root, source: source)
            atRoot[root] = found
            return found
        }
        for version in versions where !pending.isEmpty {
            let here = try await payloads(version.root)
            var parentPayloads = [[[UInt8]: IndexPayload]]()
            for parent in try await self.versions(version.parents) { parentPayloads.append(try await payloads(parent.root)) }
            let stamp = ChangeStamp(time: version.time, id: version.id)
            // The records this version changes, stamped whole; their properties are decoded next.
            var changed = [(bytes: [UInt8], key: RecordKey)]()
            for (bytes, entry) in pending where changedFromParents(here[bytes], parentPayloads.lazy.map { $0[bytes] }) {
                if entry.parts.contains(nil) {
                    result[entry.key, default: [:]][String?.none] = stamp
                    pending[bytes]?.parts.remove(nil)
                }
                if pending[bytes]?.parts.isEmpty == true { pending[bytes] = nil } else { changed.append((bytes, entry.key)) }
            }
            guard !changed.isEmpty else { continue }
            let sides = [here] + parentPayloads
            for (bytes, key) in changed {
                // One record's versions at a time: conflicting records may be large.
                let blobHashes = sides.compactMap { if case .blob(let hash)? = $0[bytes] { hash } else { nil } }
                let blobs = blobHashes.isEmpty ? [:] : try await ObjectFetch.verified(blobHashes, from: backend)
                let properties = try sides.map { side in
                    try side[bytes].map { try decodeRecord(try recordBytes($0, of: key, blobs: blobs), of: key).properties } ?? [:]
                }
                let (now, before) = (properties[0], properties.dropFirst())
                for case let name? in pending[bytes]?.parts ?? [] where changedFromParents(now[name], before.lazy.map { $0[name] }) {
                    result[key, default: [:]][name] = stamp
                    pending[bytes]?.parts.remove(name)
                }
                if pending[bytes]?.parts.isEmpty == true { pending[bytes] = nil }
            }
        }
        let unchanged = inherited ?? head
        for (key, parts) in pending.values {
            for part in parts { result[key, default: [:]][part] = ChangeStamp(time: unchanged.time, id: unchanged.id) }
        }
        return result
    }
}

/// What a merge does with the index nodes it replaced, on a backend that keeps deltas
/// (``Backend/acceptsRestatements``).
enum MergeRestating {
    /// Keeps them whole: the merge may not land.
    case keepWhole
    /// Restates them in its write, as a commit does: the merge lands if it completes.
    case inItsWrite
    /// Adds the restatements to `collected`, for the caller to make once it knows the merge lands.
    case collected(CollectedRestatements)
}

/// Restatements merges handed over (``MergeRestating/collected(_:)``).
final class CollectedRestatements {
    var items = [Restatement]()
}

/// The objects merges wrote, to write back once the heads moved (``Store/writeBackRemoved(_:)``):
/// index nodes and commits, not large records' blobs, which can be hundreds of MB each (a
/// collection's own later marking writes those back).
final class WrittenObjects {
    private(set) var objects = [(hash: Hash, bytes: [UInt8])]()

    func add(_ written: [(hash: Hash, bytes: [UInt8])]) {
        objects += written.filter { ObjectKind.of($0.bytes) != .blob }
    }
}

/// The virtual ancestors one merge operation has made, by their candidates (sorted ids) and the
/// depth of recursion they were made at; `nil` where the candidates conflict. Kept for one
/// operation only: a virtual ancestor's objects are garbage once it ends.
final class VirtualAncestors {
    struct Key: Hashable {
        var candidates: [Hash]
        var depth: Int
    }
    var byCandidates: [Key: Version?] = [:]
    /// Levels of virtual ancestors being built, one inside the other.
    var depth = 0
}

/// A merge's strategy, and whether per-type overrides still settle conflicts when it is
/// ``MergeStrategy/manual``: they do when the strategy is the configured default, not when a
/// caller asked for manual explicitly (to see every conflict).
struct MergeRule {
    var strategy: MergeStrategy
    var overridesUnderManual = false

    init(strategy: MergeStrategy, overridesUnderManual: Bool = false) {
        (self.strategy, self.overridesUnderManual) = (strategy, overridesUnderManual)
    }

    /// The rule of a merge asked for with `asked` (`nil`: the configured strategy, whose
    /// per-type overrides then apply also under manual).
    init(asked: MergeStrategy?, configuration: Store.Configuration) {
        self.init(strategy: asked ?? configuration.mergeStrategy, overridesUnderManual: asked == nil)
    }
}

/// The merges of a tournament of heads, and what they did.
private struct HeadFold {
    var ancestor: Hash?
    var changed = Set<RecordKey>()
    var resolved = [MergeConflict]()
    var merged = false
    /// The merge commits made so far.
    var merges = Set<Hash>()
    /// The conflicts a manual merge stopped at, when one did.
    var conflicts: [MergeConflict]?
    let virtualAncestors = VirtualAncestors()
    /// The objects the tournament's merges wrote, when they are to be written back.
    var written: WrittenObjects?
    /// What its merges do with the nodes they replaced.
    var restating = MergeRestating.keepWhole

    /// Merges `round` to one version: neighbours in pairs, then the results in pairs. Folding
    /// one head at a time into the result made each merge diff everything merged so far: 3,000
    /// heads took 51 s, quadratic in the heads; this is O(h log h) records diffed. `nil` when a
    /// merge stopped at conflicts (in ``conflicts``) or `round` is empty.
    mutating func tournament(_ round: [Version], rule: MergeRule, store: Store) async throws -> Version? {
        var round = round
        guard !round.isEmpty else { return nil }
        while round.count > 1 {
            var next = [Version]()
            next.reserveCapacity((round.count + 1) / 2)
            for index in stride(from: 0, to: round.count, by: 2) {
                guard index + 1 < round.count else { next.append(round[index]); continue }
                switch try await store.merge(round[index], round[index + 1], rule: rule, virtualAncestors: virtualAncestors, written: written, restating: restating) {
                case .fastForward(let version):
                    next.append(version)
                case .merged(let version, let report):
                    next.append(version)
                    merges.insert(version.id)
                    merged = true
                    ancestor = report.ancestor
                    changed.formUnion(report.changed)
                    resolved += report.resolved
                case .conflicts(let found):
                    conflicts = found
                    return nil
                }
            }
            round = next
        }
        return round[0]
    }

    /// The outcome of the whole fold, ending on `result`.
    func outcome(_ result: Version) -> MergeOutcome {
        guard merged else { return .fastForward(result) }
        return .merged(result, MergeReport(ancestor: ancestor, changed: changed.sorted(), resolved: resolved.sorted(by: MergeConflict.canonicalOrder)))
    }
}
