extension Store {
    /// Sends to `target` every version of this store that it lacks, with every object those
    /// versions need, and makes this store's heads heads of `target` (replacing the target's
    /// heads they descend from).
    ///
    /// The two stores negotiate from their heads, never by listing versions or objects: the
    /// history is walked back from this store's heads to the versions the target has; each
    /// missing version's index is walked from its root, asking the target in batches which
    /// nodes it already holds and skipping those subtrees. Objects are written children first,
    /// in batches, and the target's heads change last, by compare-and-swap. Every object read
    /// is checked against its hash, so a corrupt source object stops the exchange (naming it)
    /// before any ref changes.
    ///
    /// Once it has run for the target's ``Configuration/exchangeClaimDelay``, the exchange claims
    /// the target with a `transfers/` ref (FORMAT.md, section 8.1), so that a collection there
    /// (``collectGarbage(gracePeriod:longestWaitForExchanges:progress:)``) removes nothing the exchange found present or
    /// wrote; it drops the claim once the heads moved, or when it fails. One that could not claim
    /// the target in time fails without moving the heads.
    ///
    /// Idempotent and resumable: an exchange that fails, is cancelled (it stops at its next
    /// request with `CancellationError`) or is killed at any point can simply be run again; it
    /// finds what already landed and copies nothing twice. Stores that are already
    /// in sync find that out from their refs alone.
    ///
    /// The stores may be on any two backends; the exchange only uses the ``Backend`` protocol.
    ///
    /// `batchSize` is the most objects written to the target in one call (one transaction on the
    /// transactional engines); by default, as many as the target prefers (``Backend/writeBatchLimit``).
    ///
    /// - Complexity: O(m + k log n) objects read and written for `m` missing versions whose
    ///   indexes differ from what the target has in `k` records of `n`; O(height) memory besides
    ///   the list of missing versions.
    @discardableResult
    public func exchange(to target: Store, batchSize: Int? = nil, progress: TransferProgressHandler? = nil) async throws -> ExchangeReport {
        try await exchange(to: target, batchSize: batchSize, progress: progress, claimTiming: ClaimTiming(delay: target.configuration.exchangeClaimDelay))
    }

    /// ``exchange(to:batchSize:progress:)``, renewing its claim on the target as `claimTiming`
    /// says (tests shorten it).
    func exchange(to target: Store, batchSize: Int?, progress: TransferProgressHandler?, claimTiming: ClaimTiming) async throws -> ExchangeReport {
        try await Transfer(from: backend, to: target.backend, progress: progress, batchSize: batchSize).exchange(claiming: claimTiming)
    }

    /// The most objects an exchange or a migration writes in one call to a target that states
    /// no preference: ``WriteBatchLimit/standard``.
    public static let transferBatchSize = WriteBatchLimit.standard.objects

    /// Brings this store and `other` to the same heads: exchanges both ways, merges the heads
    /// here with `strategy` (default: this store's configured strategy) when there are several,
    /// and sends the merge to `other`. With ``MergeStrategy/ours`` this store's side wins, with
    /// ``MergeStrategy/theirs`` the other's. Afterwards both have the same single head, unless the
    /// strategy is ``MergeStrategy/manual`` and the heads conflict: then both keep the same
    /// several heads and the report lists the conflicts (this store's side as ours, where each
    /// store brought one head; else by hash order, as ``mergeHeads(strategy:)`` pairs them).
    ///
    /// Merges are deterministic, so replicas that sync in any order converge on the same hash.
    ///
    /// - Complexity: that of two exchanges, a merge and a third exchange of the merge commit.
    @discardableResult
    public func sync(with other: Store, strategy: MergeStrategy? = nil, progress: TransferProgressHandler? = nil) async throws -> SyncReport {
        // This store's side: its heads the other store does not have. (Once both hold both
        // sides, as after an interrupted sync, which was whose cannot be told: hash order.)
        let ownHeads = Set(try await headState().heads).subtracting(try await other.headState().heads)
        let sent = try await exchange(to: other, progress: progress)
        let received = try await other.exchange(to: self, progress: progress)
        var merge: MergeOutcome?
        if try await headState().heads.count > 1 {
            merge = try await mergeHeads(strategy: strategy, preferring: ownHeads)
        }
        let settled = try await exchange(to: other, progress: progress)
        return SyncReport(sent: sent, received: received, merge: merge, settled: settled)
    }
}

/// What a sync did.
public struct SyncReport: Sendable {
    /// The exchange from the store that synced to the other.
    public var sent: ExchangeReport
    /// The exchange back.
    public var received: ExchangeReport
    /// The merge of the heads, when there were several; `nil` when there was nothing to merge.
    public var merge: MergeOutcome?
    /// The exchange that sent the merge to the other store.
    public var settled: ExchangeReport

    /// The heads both stores have afterwards.
    public var heads: [Hash] { settled.heads }

    /// The conflicts a ``MergeStrategy/manual`` merge stopped at; empty otherwise.
    public var conflicts: [MergeConflict] {
        if case .conflicts(let conflicts)? = merge { return conflicts }
        return []
    }
}

extension Transfer {
    /// Copies what the target lacks of the source's history and adopts the source's heads.
    /// With `claiming`, claims the target while it copies (``TransferReservation``), so that a
    /// collection there removes nothing it finds present or writes.
    ///
    /// `alsoCopying` (a migration's): refs of the source besides its heads, each naming a
    /// version or a head set; their history is copied with the heads', and once the heads are
    /// set, each is made in the target (a ref it already holds must have the same value).
    func exchange(claiming claimTiming: ClaimTiming? = nil, alsoCopying otherRefs: [String: Hash] = [:]) async throws -> ExchangeReport {
        do {
            let source = source
            async let sourceRefs = source.refs()
            let targetRefs = try await target.refs()
            var report = ExchangeReport()
            let sourceHeadsRef = try await sourceRefs[RefName.heads]
            // A source without heads has nothing to bring, but for a migration's other refs (a
            // tag kept where the heads ref was removed): those are copied as with heads.
            if sourceHeadsRef == nil, otherRefs.isEmpty {
                report.alreadyInSync = targetRefs[RefName.heads] == nil
                report.heads = try await Transfer.headState(of: target, refs: targetRefs).heads
                report.seconds = seconds
                return report
            }
            let sourceHeads = sourceHeadsRef == nil ? [] : try await Transfer.headState(of: source, refs: try await sourceRefs).heads
            sourceRefsCopied = otherRefs
            sourceRefsCopied[RefName.heads] = sourceHeadsRef
            // In sync; but for other refs whose objects the target lacks (a tag made or moved
            // since an interrupted copy), which go the copy's way below.
            let namedByOthers = Array(Set(otherRefs.values))
            if targetRefs[RefName.heads] == sourceHeadsRef, try await targetHas(namedByOthers).count == namedByOthers.count {
                // What the target holds, it holds whole: copies go children first.
                try await makeRefs(otherRefs, present: targetRefs)
                report.alreadyInSync = true
                report.heads = sourceHeads
                report.seconds = seconds
                return report
            }
            // Read the target's heads first: a store of another format fails here, untouched.
            let start = try await Transfer.headState(of: target, refs: targetRefs)
            // Before the first question to the target (claiming at once, or after a delay that
            // the collection's grace period covers): what it answers is present must stay so.
            if let claimTiming { claim = try await KeptClaim.make(on: target, timing: claimTiming) }
            let (otherVersions, otherHeadSets) = try await versions(namedBy: otherRefs)
            let (missing, boundary) = try await missingVersions(from: sourceHeads + otherVersions)
            try await copyVersions(missing, present: boundary)
            for (hash, bytes) in otherHeadSets { try await writer.add(hash, bytes) }
            try await writer.finish()
            // A source head the other refs' history builds on (a tag on a draft over it) met the
            // copy at the boundary without being an ancestor of any incoming head: no source head
            // is, so none leaves the heads for being there.
            let heads = try await adoptHeads(
                sourceHeads, copied: Set(missing).intersection(sourceHeads), missing: Set(missing),
                boundary: otherVersions.isEmpty ? boundary : boundary.subtracting(sourceHeads),
                start: (start.ref, Set(start.heads)))
            try await makeRefs(otherRefs, present: targetRefs)
            await claim?.remove()
            return finalReport(versions: missing.count, heads: heads)
        } catch {
            await writer.cancel()
            await claim?.remove()
            throw error
        }
    }

    /// The versions that `refs` name, directly or through a head set, with the head sets
    /// themselves; throws ``ArborError/Code/unsupportedFormat`` for a ref that names anything
    /// else, which a migration does not know how to copy.
    private func versions(namedBy refs: [String: Hash]) async throws -> (versions: [Hash], headSets: [(Hash, [UInt8])]) {
        guard !refs.isEmpty else { return ([], []) }
        let objects = try await fetch(Array(Set(refs.values)))
        var versions = [Hash](), headSets = [(Hash, [UInt8])]()
        for (name, hash) in refs.sorted(by: { $0.key < $1.key }) {
            guard let bytes = objects[hash] else {
                throw ArborError(.missingObject, "the source's ref \(name) names \(hash), which it lacks", backend: source.engineName, operation: "migrate")
            }
            let links = try links(of: hash, bytes, expecting: nil)
            switch links.kind {
            case .commit: versions.append(hash)
            case .headSet:
                versions += links.heads
                headSets.append((hash, bytes))
            default:
                throw ArborError(
                    .unsupportedFormat, "the source's ref \(name) names a \(links.kind.name), not a version or a head set: a migration copies refs that name versions",
                    backend: source.engineName, operation: "migrate")
            }
        }
        return (versions, headSets)
    }

    /// Makes each of `refs` in the target, where it is not among `present` already (the target's
    /// refs when the transfer began): by compare-and-swap from nothing, so that a ref another
    /// writer made meanwhile is not overwritten. Throws ``ArborError/Code/alreadyExists`` for a
    /// ref the target holds with another value.
    private func makeRefs(_ refs: [String: Hash], present: [String: Hash]) async throws {
        for (name, hash) in refs.sorted(by: { $0.key < $1.key }) where present[name] != hash {
            if try await target.compareAndSwap(ref: name, expected: nil, new: hash) { continue }
            if try await target.ref(name) == hash { continue }
            throw ArborError(.alreadyExists, "the target's ref \(name) names another object than the source's", backend: target.engineName, operation: "migrate")
        }
    }

    /// The report of a finished transfer of `versions` versions that left the target at `heads`.
    func finalReport(versions: Int, heads: [Hash]) -> ExchangeReport {
        var report = ExchangeReport()
        report.versions = versions
        report.objects = writer.objectsWritten
        report.bytes = writer.bytesWritten
        report.rounds = rounds
        report.writeSeconds = writer.writeSeconds
        report.restatements = restatements
        report.heads = heads
        report.seconds = seconds
        reportProgress(force: true)
        return report
    }
}

/// When an exchange claims its target (``TransferReservation``): after `delay`, and by `delay`
/// plus `claimMargin` or it no longer trusts the copy; renewed every `renewal`, and no longer
/// trusted after `lapse` without a renewal.
struct ClaimTiming: Sendable {
    var delay: Duration
    /// Generous: under load, a claim can wait seconds for its turn to write.
    var claimMargin: Duration = .seconds(25)
    var renewal: Duration = TransferReservation.renewal
    /// The lifetime, less a margin for clocks that differ.
    var lapse: Duration = TransferReservation.lifetime - .seconds(40)

    /// By when, from the exchange's start, its claim must be made.
    var claimDeadline: Duration { delay + claimMargin }
}
