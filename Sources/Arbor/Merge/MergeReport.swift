/// What a merge commit combined.
public struct MergeReport: Hashable, Sendable {
    /// The common ancestor the merge worked from, or `nil` for unrelated histories. For a
    /// criss-cross history, the merge of the candidate ancestors (a commit no ref names).
    public var ancestor: Hash?
    /// Every record either side changed since the ancestor, in key order.
    public var changed: [RecordKey]
    /// The conflicts the strategy (or a type's resolver) settled, in key and property order.
    public var resolved: [MergeConflict]

    /// The changed records that merged without a conflict.
    public var clean: [RecordKey] {
        let conflicting = Set(resolved.map(\.key))
        return changed.filter { !conflicting.contains($0) }
    }
}
