/// How a merge settles a conflict: the same property changed differently on both sides, or a
/// record deleted on one side and changed on the other.
///
/// Every strategy but ``manual`` makes a merge commit; ``manual`` makes none and hands the
/// conflicts back as data. A type can override the strategy with ``MergeResolvers``.
public enum MergeStrategy: String, Sendable, CaseIterable {
    /// The side whose change is newer wins, per record, by the commit time (a hybrid logical
    /// clock) of the newest version on that side that changed the record. Ties are broken by
    /// the version hash, then by the values, so both directions of a merge agree.
    case mostRecent = "most-recent"
    /// The first head given to the merge wins.
    case ours
    /// The second head given to the merge wins.
    case theirs
    /// No commit: the merge returns its conflicts.
    case manual
}
