/// How a merge settles a conflict: the same property changed differently on both sides, a
/// record deleted on one side and changed on the other, or a child the two sides placed in
/// different places (where it goes).
///
/// Every strategy but ``manual`` makes a merge commit; ``manual`` makes none and hands the
/// conflicts back as data. A type can override the strategy with ``MergeResolvers``.
public enum MergeStrategy: String, Sendable, CaseIterable {
    /// The side whose change is newer wins, per property, by the commit time (a hybrid logical
    /// clock) of the newest version on that side that changed that property (for a record
    /// deleted on one side, that changed or deleted the record). Ties are broken by the version
    /// hash, then by the values, so both directions of a merge agree.
    case mostRecent = "most-recent"
    /// The first version given to ``Store/merge(_:_:strategy:)`` wins; in
    /// ``Store/sync(with:strategy:progress:)``, the side of the store that syncs. Among heads
    /// merged by ``Store/mergeHeads(strategy:)``, which have no order, the one whose hash sorts first.
    case ours
    /// The second version given to the merge wins; in a sync, the other store's side.
    case theirs
    /// No commit: the merge returns its conflicts.
    case manual
}
