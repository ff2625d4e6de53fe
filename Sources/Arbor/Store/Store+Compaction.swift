/// What ``Store/compactHistory(progress:)`` did.
public struct CompactionReport: Sendable, Hashable {
    /// Versions whose trees were compared with their parents'.
    public var versions = 0
    /// Index nodes handed to the backend to keep as deltas. It keeps those that lose no byte and
    /// keep its chains within their bound; the others, and nodes already kept as deltas, stay
    /// as they are.
    public var restatements = 0
    public var seconds: Double = 0

    public init() {}
}

extension Store {
    /// Keeps the index nodes that each version of the heads' history replaced as deltas against
    /// their replacements, as commits on a store that keeps deltas do as they go: for a history
    /// written whole (before the store kept deltas, or by another engine) or brought whole.
    /// Every version reads as before, byte for byte; only the space the history takes changes.
    /// (Versions only other refs reach, which no Arbor API writes, are left as they are.)
    ///
    /// Oldest versions first, as commits went: each node is restated against its replacement
    /// while that is still whole, so chains grow from the newest node back. One cut short
    /// leaves every version readable; running it again finishes it, and ends with the same
    /// deltas (a second run redoes the work: each version's nodes are put again as a commit
    /// puts them, then restated against its child's). A commit that lands meanwhile on a head
    /// may find its replaced nodes whole again; a later compaction restates them.
    ///
    /// Throws ``ArborError/Code/invalidInput`` on a backend that keeps no deltas
    /// (``Backend/acceptsRestatements``).
    ///
    /// - Complexity: O(*k* log *n*) node reads, twice, per version that changed *k* records of
    ///   *n*, in slices of 10,000 records (memory for one slice's nodes, whatever the change; a
    ///   version that changed more keeps a few nodes whole at the slices' edges); the history's
    ///   ids, parents and roots in memory (about 300 bytes a version).
    public func compactHistory(progress: TransferProgressHandler? = nil) async throws -> CompactionReport {
        guard backend.acceptsRestatements else {
            throw ArborError(
                .invalidInput, "this store keeps every index node whole; open it so that it keeps deltas (sqlite: or lmdb: with --deltas) to compact it",
                backend: backend.engineName, operation: "compact")
        }
        let started = ContinuousClock.now
        var history = [(id: Hash, root: Hash, parents: [Hash])]()
        try await log(batchSize: 1_024) { batch in history += batch.map { ($0.id, $0.root, $0.parents) } }
        let roots = Dictionary(history.map { ($0.id, $0.root) }) { first, _ in first }
        let restater = ReplacedNodeRestater(backend: backend)
        var report = CompactionReport()
        // The log lists each version after every version that builds on it: reversed, parents first.
        for (done, version) in history.reversed().enumerated() {
            try Task.checkCancellation()
            report.restatements += try await restater.restate(treeOf: version.root, parents: version.parents, roots: roots)
            report.versions += 1
            if let progress {
                progress(TransferProgress(
                    versionsDone: done + 1, versionsTotal: history.count, objects: report.restatements, bytes: 0,
                    seconds: started.secondsUntilNow, fractionDone: Double(done + 1) / Double(history.count)))
            }
        }
        report.seconds = started.secondsUntilNow
        return report
    }
}
