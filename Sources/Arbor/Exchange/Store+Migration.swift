extension Store {
    /// Copies this whole store into `target`, a store without versions on any backend, and
    /// proves the copy.
    ///
    /// By default every version is copied (an exchange into the empty target), with every ref:
    /// besides the heads, any ref another tool made that names a version or a head set is
    /// copied with its history, once the heads are set. With `latestOnly`, only the state of
    /// each current head: each becomes a version without parents, with the same index root,
    /// time, replica and message (so a different hash), and no other ref.
    /// Memory for the objects stays bounded by the height of the index and one batch, whatever
    /// the store's size; the walk of the history keeps a few hundred bytes per version (a
    /// history of a million versions takes about 300 MB).
    ///
    /// A target that holds objects but no versions (a migration that was interrupted) is
    /// resumed: what already landed is not copied again. A target that holds the finished copy
    /// (a migration stopped after its copy set the heads) is verified, and nothing copied. Any
    /// other target with versions is refused with ``ArborError/Code/alreadyExists`` and left
    /// untouched.
    ///
    /// With `verify`, afterwards: every ref of the target must name what the source's does
    /// (claims of exchanges aside; with `latestOnly`: heads with the same roots), every object of the target must
    /// match its hash and (but for the new commits) be in the source, and every object an object
    /// of the target names must be in the target, so everything the heads reach is there. (A head
    /// set, or a commit without parents, that the source lacks passes as left over by an
    /// interrupted attempt, latest-only or not, whose source has since collected or built on it:
    /// nothing reaches it, and what it names is checked as any name is.) Failures
    /// throw ``ArborError/Code/corruptObject``, or ``ArborError/Code/missingObject`` for an
    /// object named but absent. Into a target that held no objects, the copy records what it
    /// writes (a digest of the objects, and what they name), and the verification checks that the
    /// target's objects match their hashes and have that digest, without asking the source or
    /// parsing them again (an engine that hashes, PostgreSQL, checks them where they are:
    /// ``Backend/enumerateHashesCheckedByEngine(batchSize:_:)``); only when the digests differ is
    /// the target read and checked whole.
    ///
    /// Cancelling the task stops the migration at its next request with `CancellationError`.
    /// During the copy, nothing is half-applied and running it again finishes the job; during
    /// the verification, the copy is complete and its heads are set (``verify(progress:)`` on
    /// the target checks it).
    ///
    /// - Complexity: O(*N*) objects read and written for the *N* objects the history needs
    ///   (with `latestOnly`, the objects of the heads' indexes); to verify, one pass over the
    ///   target's objects (``Backend/enumerateObjects(batchSize:_:)``), with O(*N*) existence
    ///   checks in the source in batches for a resumed migration (in the target too past 200,000
    ///   objects, ``LinkCheck``'s memory limit).
    /// Whether the store holds a ref that names a version (exchanges' claims and collections'
    /// markers aside): what ``migrate(to:latestOnly:verify:progress:)`` refuses in a target,
    /// unless it holds a finished copy of the source.
    ///
    /// - Complexity: one read of the refs.
    public func holdsVersions() async throws -> Bool {
        try await !backend.refsBesidesClaims().isEmpty
    }

    @discardableResult
    public func migrate(
        to target: Store, latestOnly: Bool = false, verify: Bool = true, progress: TransferProgressHandler? = nil
    ) async throws -> MigrationReport {
        // Claims of exchanges into the target (killed ones leave theirs) are not versions.
        let targetRefs = try await target.backend.refsBesidesClaims()
        // Refs besides the heads (no Arbor API writes one; other tools may): copied with their
        // history by a migration of all history, left out by a latest-only one.
        let otherRefs = latestOnly ? [:] : try await backend.refsBesidesClaims().filter { $0.key != RefName.heads }
        if !targetRefs.isEmpty {
            // A migration whose copy finished, stopped before it said so (a kill, a dropped
            // connection, Ctrl-C while verifying): run again, it verifies and copies nothing.
            guard let matched = try await finishedCopy(in: target, refs: targetRefs, latestOnly: latestOnly) else {
                throw ArborError(
                    .alreadyExists, "the target store is not empty (it has \(targetRefs.count == 1 ? "a ref" : "\(targetRefs.count) refs")): migrate and clone copy into a store without versions (an earlier copy of this store is brought up to date by an exchange)",
                    backend: target.backend.engineName, operation: "migrate")
            }
            var report = MigrationReport(latestOnly: latestOnly)
            // A copy stopped after it set its heads may lack some of the other refs, whose
            // history it copied before: made now.
            if !otherRefs.isEmpty { _ = try await Transfer(from: backend, to: target.backend, progress: nil).exchange(alsoCopying: otherRefs) }
            report.heads = try await target.headState().heads.sorted()
            report.exchange.heads = report.heads
            report.exchange.alreadyInSync = true
            if verify {
                // Checked against the source as it matched the copy: one written to since (the
                // count of the target's objects before takes minutes on a large store) has moved
                // on, and is said to have.
                var check = MigrationCheck(source: backend, target: target.backend, latestOnly: latestOnly)
                check.copied = latestOnly ? (refs: nil, heads: matched.heads) : (refs: matched.refs, heads: nil)
                try await check.run(&report, progress: progress)
            }
            return report
        }
        let transfer = Transfer(from: backend, to: target.backend, progress: progress)
        // A new store (rather than an interrupted migration to resume) needs no questions.
        transfer.targetStartedEmpty = try await target.backend.holdsNoObjects()
        // Then what it holds afterwards should be exactly what the copy wrote: the copy records
        // what that is, and the verification need not ask the source about each object.
        if verify && transfer.targetStartedEmpty { transfer.writer.record = CopyRecord(key: .random(), target: target.backend) }
        var report = MigrationReport(latestOnly: latestOnly)
        if latestOnly {
            report.exchange = try await transfer.copyLatest()
        } else {
            report.exchange = try await transfer.exchange(alsoCopying: otherRefs)
        }
        report.heads = report.exchange.heads
        report.copySeconds = report.exchange.seconds
        if verify {
            var check = MigrationCheck(source: backend, target: target.backend, latestOnly: latestOnly, record: transfer.writer.record)
            // The source's refs as the copy found them: a source written to meanwhile has moved
            // on, and the copy is checked against the state it copied.
            check.copied = latestOnly ? (refs: nil, heads: transfer.sourceHeadsCopied) : (refs: transfer.sourceRefsCopied, heads: nil)
            try await check.run(&report, progress: progress)
        }
        return report
    }
}

extension Store {
    /// Whether `target`, whose refs are `refs`, holds what a migration of this store would have
    /// made: the same refs, or with `latestOnly` a heads ref alone whose versions have no parents
    /// and the roots of this store's heads. Returns this store's refs, or heads, that it matched.
    fileprivate func finishedCopy(in target: Store, refs: [String: Hash], latestOnly: Bool) async throws -> (refs: [String: Hash], heads: [Hash])? {
        let ownRefs = try await backend.refsBesidesClaims()
        // The heads are set before the other refs: a copy may have stopped in between.
        guard latestOnly else {
            guard refs[RefName.heads] == ownRefs[RefName.heads] && refs.allSatisfy({ ownRefs[$0.key] == $0.value }) else { return nil }
            return (ownRefs, [])
        }
        guard refs.count == 1, refs[RefName.heads] != nil else { return nil }
        let copied = try await target.heads()
        guard copied.allSatisfy(\.parents.isEmpty) else { return nil }
        let own = try await heads()
        guard copied.map(\.root).sorted() == own.map(\.root).sorted() else { return nil }
        return (ownRefs, own.map(\.id))
    }
}

/// What a migration did.
public struct MigrationReport: Sendable {
    /// Whether only the heads' state was copied.
    public var latestOnly: Bool
    /// Versions, objects and bytes copied.
    public var exchange = ExchangeReport()
    /// The target's heads afterwards.
    public var heads: [Hash] = []
    /// Whether the copy was verified, and how many objects and bytes of the target were checked.
    public var verified = false
    public var objectsChecked = 0
    public var bytesChecked = 0
    public var copySeconds: Double = 0
    public var verifySeconds: Double = 0
    /// Whether the source's refs moved on while it was copied or verified (it was written to):
    /// the copy holds, and was verified to hold, the state the source had when the copy read its
    /// refs; an exchange brings it up to date.
    public var sourceChangedSinceCopy = false

    init(latestOnly: Bool) { self.latestOnly = latestOnly }
}

extension Transfer {
    /// Copies the index of each source head and a parentless version of it, and makes those the
    /// target's heads.
    func copyLatest() async throws -> ExchangeReport {
        do {
            let (_, heads) = try await Transfer.headState(of: source)
            sourceHeadsCopied = heads
            let commits = try await fetch(heads)
            var newHeads = Set<Hash>()
            versionsTotal = heads.count
            for head in heads {
                var content = try Version.Content.decode(commits[head] ?? [])
                try await checkRecordCounts([(head, content.root, content.recordCount)], counted: [:])
                try await copyTree(root: content.root, records: content.recordCount)
                content.parents = []
                let bytes = content.encoded()
                let id = Hash.of(bytes)
                try await writer.add(id, bytes)
                newHeads.insert(id)
                versionsDone += 1
            }
            try await writer.finish()
            let headSet = try HeadSet.encode(newHeads)
            let headSetHash = Hash.of(headSet)
            if !newHeads.isEmpty {
                try await target.put([(headSetHash, headSet)])
                guard try await target.compareAndSwap(ref: RefName.heads, expected: nil, new: headSetHash) else {
                    throw ArborError(.alreadyExists, "another writer gave the target versions during the migration", backend: target.engineName, operation: "migrate")
                }
            }
            return finalReport(versions: newHeads.count, heads: newHeads.sorted())
        } catch {
            await writer.cancel()
            throw error
        }
    }
}

extension Backend {
    /// Whether the store holds no objects at all; reads at most one hash.
    ///
    /// - Complexity: one listing request, stopped at its first hash.
    public func holdsNoObjects() async throws -> Bool {
        do {
            try await enumerateHashes(batchSize: 1) { batch in if !batch.isEmpty { throw FoundOne() } }
            return true
        } catch is FoundOne {
            return false
        }
    }
}

/// Stops an enumeration at its first hash.
private struct FoundOne: Error {}
