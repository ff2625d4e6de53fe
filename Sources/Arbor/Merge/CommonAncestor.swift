/// The common ancestor of two versions, and the versions only one side has.
///
/// Found by walking both histories at once, newest first (commit times are a hybrid logical
/// clock, so every version is visited after all versions that build on it): a version reached
/// from both sides is a candidate, and everything below a candidate is marked stale. The walk
/// stops when only stale versions are left, so it reads the versions since the fork and not
/// the whole history.
///
/// A criss-cross history has several candidates, none an ancestor of another. `ancestor` is
/// then the newest of them by commit time, ties broken by the greater hash, and the merge works
/// from the merge of all of them, built up to ``Store/virtualAncestorDepth`` levels deep
/// (``Store/virtualAncestor(_:known:)``): choices that depend only on the (immutable) history,
/// so every replica makes the same ones.
struct CommonAncestor {
    /// The chosen ancestor, or `nil` when the histories share no version.
    var ancestor: Version?
    /// Every best common ancestor, newest first.
    var candidates: [Version]
    /// The versions reachable from ours and not from theirs, newest first.
    var oursOnly: [Version]
    /// The versions reachable from theirs and not from ours, newest first.
    var theirsOnly: [Version]

    private static let oursFlag: UInt8 = 1, theirsFlag: UInt8 = 2, staleFlag: UInt8 = 4
    /// Marks a version waiting in the queue: kept with the flags, so one table serves both.
    private static let queuedFlag: UInt8 = 8

    /// - Complexity: O(v) version reads for the `v` versions made since the fork (plus any
    ///   older versions with times later than the fork's).
    static func find(_ ours: Version, _ theirs: Version, store: Store) async throws -> CommonAncestor {
        var result = CommonAncestor(ancestor: nil, candidates: [], oursOnly: [], theirsOnly: [])
        guard ours.id != theirs.id else {
            result.ancestor = ours
            result.candidates = [ours]
            return result
        }
        var flags: [Hash: UInt8] = [ours.id: oursFlag | queuedFlag, theirs.id: theirsFlag | queuedFlag]
        var queue = NewestFirstQueue()
        queue.push(ours)
        queue.push(theirs)
        // Queued versions not yet marked stale: the walk ends when there are none.
        var live = 2
        var reader = HistoryReader(store.backend)
        var unseen = [Hash]()
        while live > 0, let version = queue.pop() {
            var flag = flags[version.id]! & ~queuedFlag
            if flag & staleFlag == 0 {
                live -= 1
                switch flag {
                case oursFlag: result.oursOnly.append(version)
                case theirsFlag: result.theirsOnly.append(version)
                default:
                    result.candidates.append(version)
                    flag |= staleFlag
                }
            }
            flags[version.id] = flag
            unseen.removeAll(keepingCapacity: true)
            for parent in version.parents {
                let before: UInt8
                if let known = flags[parent] { before = known } else { before = 0; unseen.append(parent) }
                flags[parent] = before | flag
                if before & queuedFlag != 0 && before & staleFlag == 0 && flag & staleFlag != 0 { live -= 1 }
            }
            guard !unseen.isEmpty else { continue }
            for parent in try await store.versions(unseen, reader: &reader) {
                let parentFlags = flags[parent.id]!
                guard parentFlags & queuedFlag == 0 else { continue }
                flags[parent.id] = parentFlags | queuedFlag
                queue.push(parent)
                if parentFlags & staleFlag == 0 { live += 1 }
            }
        }
        result.ancestor = result.candidates.first
        return result
    }
}
