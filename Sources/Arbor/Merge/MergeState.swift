/// The records a merge works on: the three versions of every record either side changed since
/// the ancestor, and the merged result as it is built.
struct MergeState {
    /// Every key either side changed, in key order.
    private(set) var changed = [RecordKey]()
    private var base = [RecordKey: Record]()
    private var ours = [RecordKey: Record]()
    private var theirs = [RecordKey: Record]()
    /// What each key holds at ours' head, for every key in `merged`.
    private var inOurs = [RecordKey: Record?]()
    /// The merged state of the keys decided so far (`nil`: deleted); other keys are as in ours.
    var merged = [RecordKey: Record?]()
    /// Blob objects of large merged records, to write with the commit.
    private(set) var blobs = [(hash: Hash, bytes: [UInt8])]()
    private let oursRoot: Hash
    private let theirsRoot: Hash

    private init(oursRoot: Hash, theirsRoot: Hash) {
        self.oursRoot = oursRoot
        self.theirsRoot = theirsRoot
    }

    /// Diffs both sides against the ancestor's root and decodes the changed records.
    ///
    /// - Complexity: O(k log n) node reads for `k` changed records.
    static func load(base baseRoot: Hash, ours: Version, theirs: Version, store: Store, source: NodeSource) async throws -> MergeState {
        var state = MergeState(oursRoot: ours.root, theirsRoot: theirs.root)
        let oursDiff = try await ProllyTree.diff(baseRoot, ours.root, source: source)
        let theirsDiff = try await ProllyTree.diff(baseRoot, theirs.root, source: source)
        var keys = Set<[UInt8]>()
        func entries(_ differences: [IndexDifference], _ side: KeyPath<IndexDifference, IndexPayload?>) -> [(key: [UInt8], payload: IndexPayload)] {
            differences.compactMap { difference in difference[keyPath: side].map { (difference.key, $0) } }
        }
        for record in try await store.decode(entries(oursDiff, \.old) + entries(theirsDiff, \.old)) { state.base[record.key] = record }
        let oursNew = try await store.decode(entries(oursDiff, \.new))
        let theirsNew = try await store.decode(entries(theirsDiff, \.new))
        for difference in oursDiff + theirsDiff { keys.insert(difference.key) }
        state.changed = try keys.sorted { compareKeys($0, $1) < 0 }.map { try RecordKey(indexBytes: $0[...]) }
        let oursChanged = Set(try oursDiff.map { try RecordKey(indexBytes: $0.key[...]) })
        let theirsChanged = Set(try theirsDiff.map { try RecordKey(indexBytes: $0.key[...]) })
        for key in state.changed {
            if !oursChanged.contains(key) { state.ours[key] = state.base[key] }
            if !theirsChanged.contains(key) { state.theirs[key] = state.base[key] }
        }
        for record in oursNew { state.ours[record.key] = record }
        for record in theirsNew { state.theirs[record.key] = record }
        for key in state.changed { state.inOurs[key] = .some(state.ours[key]) }
        return state
    }

    func recordMerge(_ key: RecordKey) -> RecordMerge {
        RecordMerge(key: key, base: base[key], ours: ours[key], theirs: theirs[key])
    }

    /// Restores ownership in the merged records: a child a merged record names but the merge
    /// deleted is restored (from ours, else theirs), and a record that some version of a
    /// changed record owned and no merged record owns any more is deleted, with what it owns.
    ///
    /// - Complexity: O(c log n) node reads for `c` records restored or orphaned; none when the
    ///   sides' trees agree.
    mutating func enforceOwnership(store: Store, source: NodeSource) async throws {
        var candidates = Set<RecordKey>()
        for key in changed {
            for record in [base[key], ours[key], theirs[key]] { candidates.formUnion(record?.childKeys ?? []) }
        }
        while true {
            var held = Set<RecordKey>()
            for case let (_, record?) in merged { held.formUnion(record.childKeys) }
            let dangling = held.filter { if case .some(.none) = merged[$0] { true } else { false } }.sorted()
            if !dangling.isEmpty {
                let fromOurs = try await store.records(dangling, root: oursRoot, source: source)
                let fromTheirs = try await store.records(dangling, root: theirsRoot, source: source)
                for key in dangling {
                    guard let record = fromOurs[key] ?? fromTheirs[key] ?? base[key] else {
                        throw ArborError(.invalidInput, "the merge keeps a record naming child \(key), which neither side holds")
                    }
                    merged[key] = .some(record)
                    candidates.formUnion(record.childKeys)
                }
                continue
            }
            let unheld = candidates.subtracting(held)
            let unknown = unheld.filter { merged[$0] == nil }.sorted()
            if !unknown.isEmpty {
                let found = try await store.records(unknown, root: oursRoot, source: source)
                for key in unknown {
                    inOurs[key] = .some(found[key])
                    merged[key] = .some(found[key])
                }
            }
            let orphans = unheld.filter { if case .some(.some) = merged[$0] { true } else { false } }.sorted()
            if orphans.isEmpty { return }
            for key in orphans {
                if case .some(.some(let record)) = merged[key] { candidates.formUnion(record.childKeys) }
                merged[key] = .some(nil)
            }
        }
    }

    /// The index edits that turn ours' index into the merged one, in key order; large records'
    /// blobs go to ``blobs``.
    mutating func edits() -> [IndexEdit] {
        var edits = [IndexEdit]()
        for (key, record) in merged where inOurs[key] == nil || inOurs[key]! != record {
            edits.append(.setting(key, to: record, blobs: &blobs))
        }
        return edits.sorted { compareKeys($0.key, $1.key) < 0 }
    }
}
