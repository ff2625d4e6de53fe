extension Store {
    /// Commits `changes` as one new version and makes it a head.
    ///
    /// The version builds on `parents` (by default the newest head, or nothing in an empty store).
    /// Objects are written children first and the heads ref last, by compare-and-swap: a crash
    /// leaves the store as it was, and a concurrent commit on the same parent leaves two heads.
    ///
    /// Its time is later than that of every version the store holds (a hybrid logical clock
    /// that observes the heads), so most-recent merges prefer it even from a replica whose wall
    /// clock runs behind.
    ///
    /// Ownership is applied: children a saved value held in the parent version and no longer
    /// holds, and everything a deleted value owned, are deleted by the same commit.
    ///
    /// Once its heads moved, it checks that its objects are there and writes back any that a
    /// garbage collection removed meanwhile (``writeBackRemoved(_:)``).
    ///
    /// - Complexity: O(k log n) index nodes read and written for `k` changed records in a store
    ///   of `n` records, plus the records orphaned by the change; one existence check of the
    ///   nodes written.
    @discardableResult
    public func commit(_ changes: ChangeSet, message: String = "", parents explicitParents: [Hash]? = nil) async throws -> Version {
        let parents: [Version]
        // A hybrid clock observes every version the store holds, whose newest are its heads: a
        // replica whose wall clock runs behind then still stamps its change after one it has
        // received, also when the change builds on an older version.
        let heads = try await heads()
        if let explicitParents {
            // Distinct, as the format says, and no more than a version can name and still be
            // read (a version the decoder refused, once a head, would make the store unreadable).
            var seen = Set<Hash>()
            let distinct = explicitParents.filter { seen.insert($0).inserted }
            guard distinct.count <= Version.Content.maximumParents else {
                throw ArborError(.invalidInput, "a version has at most \(Version.Content.maximumParents) parents, not \(distinct.count); nothing was written")
            }
            parents = try await namedVersions(distinct)
        } else {
            parents = heads.first.map { [$0] } ?? []
        }
        let baseRoot = parents.first?.root ?? Store.emptyRoot.hash
        let source = makeSource()

        let plan = CommitPlan(changes)
        try await plan.checkChildrenExist(base: baseRoot, store: self, source: source)

        // Apply the changes; the editor reports what each touched key held in the base version.
        var blobs = [(hash: Hash, bytes: [UInt8])]()
        var replaced = [(key: [UInt8], old: IndexPayload)]()
        var root = try await ProllyTree.apply(try plan.edits(blobs: &blobs), to: baseRoot, source: source, replaced: &replaced)

        // Records the base versions owned and the commit no longer keeps go with it, with all
        // they own. Usually there are none, and this costs nothing more.
        let orphans = try await plan.orphans(replaced: replaced, base: baseRoot, store: self, source: source)
        if !orphans.isEmpty {
            let deletions = orphans.map { IndexEdit(key: $0.indexBytes, payload: nil) }.sorted { compareKeys($0.key, $1.key) < 0 }
            root = try await ProllyTree.apply(deletions, to: root, source: source)
        }

        let recordCount = try await source.nodeBytes(root).recordCount()
        var objects = blobs + source.newObjects(reachableFrom: root)
        if root == Store.emptyRoot.hash { objects.append(Store.emptyRoot) }
        let content = Version.Content(
            root: root, parents: parents.map(\.id), time: nextTime(after: (parents + heads).map(\.time)),
            replica: configuration.replica, message: message, recordCount: recordCount)
        let bytes = content.encoded()
        let id = Hash.of(bytes)
        objects.append((id, bytes))
        // The nodes the edit replaced go as deltas against their replacements where the backend
        // keeps deltas, in the same write (a commit that then fails to land leaves them against
        // nodes that are garbage, which a collection makes whole again before removing them).
        let restatements = source.notesSuperseded ? source.restatements(written: Set(objects.map(\.hash))) : []
        try await backend.put(objects, restating: restatements)
        try await updateHeads(removing: Set(parents.map(\.id)), adding: id)
        await writeBackRemoved(objects)
        return Version(id: id, content: content)
    }

    /// Writes back those of `objects`, which a version just made a head needs, that are no
    /// longer there. A put finds an object present that is garbage (an earlier attempt at the
    /// same change left it: content addressing), and a collection sweeping meanwhile may remove
    /// it before the heads move: the collection writes it back itself, but only when it next
    /// marks, a grace period after its last batch, and until then the version would not read.
    /// Best effort: the version has landed, and an error here must not say otherwise.
    ///
    /// - Complexity: one existence check of the `k` objects; a put of those missing.
    func writeBackRemoved(_ objects: [(hash: Hash, bytes: [UInt8])]) async {
        // Outside the calling task: a commit cancelled as (or after) its heads moved has landed
        // all the same, and a backend may refuse every call of a cancelled task (PostgreSQL does).
        await Task.detached { [backend] in
            guard let present = try? await backend.contains(objects.map(\.hash)) else { return }
            let missing = objects.filter { !present.contains($0.hash) }
            guard !missing.isEmpty else { return }
            try? await backend.put(missing)
        }.value
    }

    /// Commits a single value tree, on `parents` as ``commit(_:message:parents:)`` takes them.
    ///
    /// To change a value read at some version without undoing a change committed since, build
    /// on the version it was read at: `save(edited, parents: [read.id])`. A concurrent commit
    /// then leaves two heads, which ``mergeHeads(strategy:)`` merges property by property; built
    /// on the newest head instead, the save would write back the value as it was read.
    @discardableResult
    public func save<Value: Storable>(_ value: Value, message: String = "", parents: [Hash]? = nil) async throws -> Version {
        var changes = ChangeSet()
        try changes.save(value)
        return try await commit(changes, message: message, parents: parents)
    }
}

/// What a change set does, worked out before the index is touched.
struct CommitPlan {
    /// The final state of a key the change set names.
    struct Entry {
        /// The key as the index sorts it (``RecordKey/indexBytes``), made once: it becomes the
        /// index edit's key.
        let indexKey: [UInt8]
        private let state: State

        private enum State {
            case saved(ChangeSet.EncodedRecord)
            case deleted(RecordKey)
        }

        init(_ record: ChangeSet.EncodedRecord) {
            indexKey = record.key.indexBytes
            state = .saved(record)
        }

        init(deleting key: RecordKey) {
            indexKey = key.indexBytes
            state = .deleted(key)
        }

        /// The record saved, or `nil` for a deletion.
        var record: ChangeSet.EncodedRecord? {
            if case .saved(let record) = state { return record }
            return nil
        }

        var key: RecordKey {
            switch state {
            case .saved(let record): record.key
            case .deleted(let key): key
            }
        }
    }

    /// The final state of every key the change set names, one entry per key in the index's
    /// order (so the edits need no sorting), with ownership inside the set applied: a value
    /// saved twice drops the children its first save held. A sorted array rather than a
    /// dictionary: a large import holds one entry per record, and a dictionary's buckets took
    /// twice the room of these entries and their keys.
    private(set) var final: [Entry]
    /// Records of the base version that an earlier change in the set adopted as children and a
    /// later one dropped: they are orphaned too.
    private var droppedBaseRecords = [RecordKey]()

    /// - Complexity: O(*c* log *c*) for the *c* records the set names.
    init(_ changes: ChangeSet) {
        var entries = [Entry]()
        entries.reserveCapacity(changes.changes.reduce(0) { count, change in
            if case .save(_, let nested) = change { return count + 1 + nested.count }
            return count + 1
        })
        for change in changes.changes {
            switch change {
            case .save(let root, let nested):
                entries.append(Entry(root))
                for record in nested { entries.append(Entry(record)) }
            case .delete(let key):
                entries.append(Entry(deleting: key))
            }
        }
        entries.sort { compareKeys($0.indexKey, $1.indexKey) < 0 }
        // Usually every key is named once, and the sorted entries are the plan. A key named
        // twice needs the changes in their order: later ones win, and may drop what earlier
        // ones owned.
        let namesAKeyTwice = zip(entries, entries.dropFirst()).contains { $0.indexKey == $1.indexKey }
        final = namesAKeyTwice ? [] : entries
        if namesAKeyTwice {
            entries = []
            applyInOrder(changes)
        }
    }

    /// Works the plan out change by change, for a set that names a key more than once.
    ///
    /// A child that an earlier state of a record held and a later one does not (at any depth
    /// of a saved tree, or of a deleted record) is dropped, unless it is saved again after; once
    /// every change is applied, a dropped child that no record of the set's final state holds
    /// goes, with what it alone owns. So the order of the saves in a move does not matter: the
    /// old owner saved without the child before or after the new owner saved with it.
    private mutating func applyInOrder(_ changes: ChangeSet) {
        var states = [RecordKey: ChangeSet.EncodedRecord?]()
        var dropped = Set<RecordKey>()
        func drop(childrenOf earlier: ChangeSet.EncodedRecord, keeping kept: Set<RecordKey>) {
            for child in earlier.childKeys where !kept.contains(child) { dropped.insert(child) }
        }
        for change in changes.changes {
            switch change {
            case .save(let root, let nested):
                let tree = [root] + nested
                let keys = Set(tree.lazy.map(\.key))
                for record in tree {
                    if case .some(.some(let earlier)) = states.updateValue(record, forKey: record.key) {
                        drop(childrenOf: earlier, keeping: keys)
                    }
                    dropped.remove(record.key)
                }
            case .delete(let key):
                if case .some(.some(let earlier)) = states.updateValue(nil, forKey: key) {
                    drop(childrenOf: earlier, keeping: [])
                }
                dropped.remove(key)
            }
        }
        // How many records of the final state hold each child: a dropped child goes only when
        // none does, and a record that goes no longer holds its own children.
        var holders = [RecordKey: Int]()
        for case let record?? in states.values {
            for child in record.childKeys { holders[child, default: 0] += 1 }
        }
        var unheld = dropped.filter { holders[$0, default: 0] == 0 }.sorted()
        var gone = Set<RecordKey>()
        while let key = unheld.popLast() {
            guard holders[key, default: 0] == 0, gone.insert(key).inserted else { continue }
            switch states[key] {
            case .some(.some(let record)):
                states[key] = .some(nil)
                for child in record.childKeys {
                    holders[child, default: 1] -= 1
                    if holders[child] == 0 { unheld.append(child) }
                }
            case .some(.none):
                break
            case .none:
                // A record of the base version: it goes with what it owns there (``orphans``).
                droppedBaseRecords.append(key)
            }
        }
        final = states.map { key, record in record.map(Entry.init) ?? Entry(deleting: key) }
            .sorted { compareKeys($0.indexKey, $1.indexKey) < 0 }
    }

    /// The final state of `key`, or `nil` when the set does not name it.
    ///
    /// - Complexity: O(log *c*).
    func entry(for key: RecordKey) -> Entry? {
        let indexKey = key.indexBytes
        var low = 0
        var high = final.count
        while low < high {
            let middle = (low + high) / 2
            if compareKeys(final[middle].indexKey, indexKey) < 0 { low = middle + 1 } else { high = middle }
        }
        guard low < final.count, final[low].indexKey == indexKey else { return nil }
        return final[low]
    }

    /// Every child a saved record names must exist once the commit is applied: saved in this
    /// set, or present in the base and not deleted here. Only children from outside the set
    /// (raw records naming existing ones) cost a lookup.
    func checkChildrenExist(base: Hash, store: Store, source: NodeSource) async throws {
        var outside = Set<RecordKey>()
        for case let record? in final.lazy.map(\.record) {
            for child in record.childKeys {
                switch entry(for: child).map({ $0.record != nil }) {
                case true?: continue
                case false?: throw ArborError(.invalidInput, "\(record.key) names child \(child), which this commit deletes")
                case nil: outside.insert(child)
                }
            }
        }
        guard !outside.isEmpty else { return }
        let found = try await store.records(Array(outside), root: base, source: source)
        if let absent = outside.sorted().first(where: { found[$0] == nil }) {
            throw ArborError(.invalidInput, "a saved record names child \(absent), which does not exist")
        }
    }

    /// The index edits, in key order; large records go to `blobs`. Throws
    /// ``ArborError/Code/invalidInput`` for a record larger than ``Store/maximumRecordSize``, or
    /// for a deleted key that no record could have (saved keys were checked when saved).
    func edits(blobs: inout [(hash: Hash, bytes: [UInt8])]) throws -> [IndexEdit] {
        var edits = [IndexEdit]()
        edits.reserveCapacity(final.count)
        for entry in final {
            guard let record = entry.record else {
                // A key no record can have (a type name with NUL) could share its index key
                // with another.
                try entry.key.validate()
                edits.append(IndexEdit(key: entry.indexKey, payload: nil))
                continue
            }
            edits.append(try .settingRecord(record.key, at: entry.indexKey, toEncoded: record.bytes, blobs: &blobs))
        }
        return edits
    }

    /// The base records the commit orphans, with everything they own: children that the base
    /// version of a saved or deleted record held and that the commit neither keeps nor saves.
    func orphans(
        replaced: [(key: [UInt8], old: IndexPayload)], base: Hash, store: Store, source: NodeSource
    ) async throws -> [RecordKey] {
        // A child that a record of the set's final state holds stays, whoever held it before:
        // one record of the set may drop it as another adopts it.
        let heldBySet = Set(final.lazy.compactMap(\.record).flatMap(\.childKeys))
        var candidates = droppedBaseRecords.filter { entry(for: $0) == nil && !heldBySet.contains($0) }
        let blobHashes = replaced.compactMap { if case .blob(let hash) = $0.old { hash } else { nil } }
        let blobs = blobHashes.isEmpty ? [:] : try await ObjectFetch.verified(blobHashes, from: store.backend)
        for (keyBytes, old) in replaced {
            let oldChildren: [RecordKey]
            do {
                switch old {
                case .inline(let bytes): oldChildren = try RecordCoding.childKeys(bytes)
                case .blob(let hash): oldChildren = try RecordCoding.childKeys(try Blob.decode(blobs[hash]!))
                case .node: continue
                }
            } catch let error as ArborError {
                let key = (try? RecordKey(indexBytes: keyBytes[...]))?.description ?? "a record"
                throw ArborError(.corruptObject, "the base version of \(key) cannot be decoded: \(error.message)", backend: store.backend.engineName, operation: "commit")
            }
            for child in oldChildren where entry(for: child) == nil && !heldBySet.contains(child) {
                candidates.append(child)
            }
        }
        guard !candidates.isEmpty else { return [] }
        // Everything the orphans own goes too, down to records the set names (saved: moved
        // elsewhere, with their own dropped children among `replaced`; deleted: likewise) or
        // holds, which stay with what they own.
        var orphaned = try await store.records(candidates, root: base, source: source)
        var frontier = orphaned.values.flatMap(\.childKeys)
        while true {
            let next = Set(frontier).filter { orphaned[$0] == nil && entry(for: $0) == nil && !heldBySet.contains($0) }
            guard !next.isEmpty else { break }
            let loaded = try await store.records(Array(next), root: base, source: source)
            orphaned.merge(loaded) { $1 }
            frontier = loaded.values.flatMap(\.childKeys)
        }
        return Array(orphaned.keys)
    }
}
