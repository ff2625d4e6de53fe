/// Works out after the fact the restatements a commit makes as it goes: the index nodes of a
/// parent's tree that a version's tree replaced, each as a delta against the new node that holds
/// most of its keys, handed to a backend that keeps deltas (``Backend/acceptsRestatements``).
///
/// A compaction runs it over a store's whole history (``Store/compactHistory(progress:)``), an
/// exchange or a migration over the versions it brought: a store that keeps deltas keeps them
/// however its versions arrived.
struct ReplacedNodeRestater {
    let backend: any Backend
    /// The most differences replayed at once; a larger change goes in slices of this many
    /// records, in key order, so that memory holds one slice's nodes whatever the change.
    var sliceSize = ReplacedNodeRestater.defaultSliceSize

    /// ``sliceSize`` by default: 10,000 records, whose replay holds at most about 70 MB of nodes.
    static let defaultSliceSize = 10_000

    /// Restates the nodes of the tree at `parentRoot` that the tree at `root` replaced, against
    /// the nodes of `root`'s tree that hold their keys, and returns how many restatements went to
    /// the backend (it keeps those that lose no byte and stay within its chain bound). Both
    /// trees must be in the store (a node either one lacks throws
    /// ``ArborError/Code/missingObject``).
    ///
    /// The differences, applied to the parent's tree, make the version's tree again (a tree's
    /// shape depends only on its records), and the editor notes each node it replaced with the
    /// new nodes that hold its keys, as a commit's does. Only new nodes the store holds become
    /// bases: those a slice makes that the version's tree lacks (nodes above the slice, or at
    /// its edges, which later slices change again) leave the nodes they replaced whole, as does
    /// a tree another chunking made. When one slice holds the whole change, the nodes it made
    /// are put again with the restatements, as a commit puts its nodes: one kept as a delta (a
    /// node an earlier version had, that a later one replaced, and this one brings back) is
    /// made whole again, so the newest version replayed reads its nodes whole. (So is one an
    /// earlier replay of this version's child restated: a second compaction redoes the work.)
    /// The backend checks each delta against the bytes it holds before it drops any: a replay
    /// can cost space, never data.
    ///
    /// - Complexity: O(*k* log *n*) node reads, twice, for *k* records that differ in trees of
    ///   *n*; an existence check and a restating write per slice; memory for one slice.
    func restate(replacedIn parentRoot: Hash, by root: Hash) async throws -> Int {
        // From or to an empty tree, no node has a replacement.
        guard backend.acceptsRestatements, parentRoot != root, parentRoot != Store.emptyRoot.hash, root != Store.emptyRoot.hash else { return 0 }
        // No cache: each node is read once for this pair, and a history is far larger than memory.
        let cache = NodeCache(capacity: 0)
        var count = 0
        try await ProllyTree.diff(parentRoot, root, source: NodeSource(backend: backend, cache: cache), batchSize: sliceSize, remember: false) { slice in
            try Task.checkCancellation()
            let editing = NodeSource(backend: backend, cache: cache)
            let rebuilt = try await ProllyTree.apply(slice.map { IndexEdit(key: $0.key, payload: $0.new) }, to: parentRoot, source: editing)
            let made = editing.newObjects(reachableFrom: rebuilt)
            let stored = try await backend.contains(made.map(\.hash))
            let restatements = editing.restatements(written: stored)
            // Put again only when the slice made the version's own tree (the whole change in
            // one slice): those nodes are reachable, so no collection removes one meanwhile; a
            // node a slice made at its edge may be garbage that one is removing.
            try await backend.put(rebuilt == root ? made.filter { stored.contains($0.hash) } : [], restating: restatements)
            count += restatements.count
        }
        return count
    }

    /// ``restate(replacedIn:by:)`` for a version of tree `root` against each of its `parents`
    /// whose root `roots` holds (a merge replaced nodes of both sides' trees).
    func restate(treeOf root: Hash, parents: [Hash], roots: [Hash: Hash]) async throws -> Int {
        var count = 0
        for parent in parents {
            guard let parentRoot = roots[parent] else { continue }
            count += try await restate(replacedIn: parentRoot, by: root)
        }
        return count
    }
}
