/// What a merge did.
public enum MergeOutcome: Sendable {
    /// One head already contained the other: the result is that head, and no commit was made.
    case fastForward(Version)
    /// A merge commit was made.
    case merged(Version, MergeReport)
    /// The strategy was ``MergeStrategy/manual`` and the heads conflict: no commit was made.
    case conflicts([MergeConflict])

    /// The resulting version, or `nil` when the merge stopped at conflicts.
    public var version: Version? {
        switch self {
        case .fastForward(let version), .merged(let version, _): version
        case .conflicts: nil
        }
    }
}
