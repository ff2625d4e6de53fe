import Foundation
import Synchronization

/// What ``Store/collectGarbage(gracePeriod:longestWaitForExchanges:progress:)`` did.
public struct GarbageCollectionReport: Sendable {
    /// Objects reachable from the refs (kept).
    public var reachableObjects = 0
    /// Objects removed, and their bytes.
    public var removedObjects = 0
    public var removedBytes = 0
    /// Objects found unreachable at first but reachable after the grace period or during the
    /// sweep (written by commits in flight), and kept.
    public var keptLate = 0
    /// Removed objects that a commit landing during the sweep turned out to use, written back.
    public var rescued = 0
    /// Removed objects written back unchecked, because an exchange into the store still claimed
    /// it once the collection had waited its longest for exchanges, or was cancelled while it
    /// waited: any of them may be one that exchange found present. A later collection removes
    /// those that are garbage.
    public var restoredForExchange = 0
    /// Whether the sweep stopped, or never began, because an exchange into the store was in
    /// flight: a later collection removes what this one left.
    public var stoppedForExchange = false
    public var seconds: Double = 0
}

extension Store {
    /// Removes the objects no ref reaches, safely while other tasks or processes commit.
    ///
    /// 1. Marks everything reachable from the refs (reading it all, as ``verify(progress:)``
    ///    does), and refuses a damaged store: what a damaged object names cannot be known.
    /// 2. Lists the other objects, waits `gracePeriod`, and marks again from the refs as they
    ///    are then (reading only what is new): objects a commit in flight had written — before
    ///    it moved the heads — are reachable by now and kept.
    /// 3. Removes the rest in batches, top down (what names an object before it, so that an
    ///    interrupted sweep leaves the rest whole), keeping their bytes until the sweep ends. After
    ///    each batch, and once more `gracePeriod` after the last, it marks again from the refs;
    ///    an object a commit that landed meanwhile re-used (content addressing makes an old,
    ///    unreachable object look present to a writer) is written back, and one it reached
    ///    that is still there is kept. (A commit also writes back, once its heads moved, what
    ///    it needs that is gone, so its version need not wait for this marking to read.) While a
    ///    batch is in flight, from its delete to that marking, a ``SweepMarker`` says so: a read
    ///    that finds an object missing meanwhile waits for the batch and reads again.
    ///
    /// Safe as long as no commit or merge takes longer than `gracePeriod` from finding an object
    /// present (or writing it) to moving its heads: they take milliseconds to seconds. An
    /// exchange moves the target's heads only when its whole copy is done, however long that
    /// takes, so one running longer than ``Configuration/exchangeClaimDelay`` claims the store (a
    /// `transfers/` ref): a collection that sees a claim before its sweep removes nothing; one
    /// that sees a claim after a batch stops its sweep
    /// (``GarbageCollectionReport/stoppedForExchange``); and once its grace period after the last
    /// batch is over, it goes on marking, writing back what each exchange claiming the store
    /// re-used as its heads move, until those exchanges are done (a killed one's claim lapses
    /// within three minutes), for at most `longestWaitForExchanges` or until it is cancelled: it
    /// then writes back everything it removed, unchecked (``GarbageCollectionReport/restoredForExchange``),
    /// rather than wait longer for an exchange that may still need it. An exchange shorter than its delay relies on the grace period, as a
    /// commit does, and one claims within 25 seconds after its delay or fails: so exchanges are
    /// safe with a grace period longer than the delay plus 25 seconds (26 seconds by default).
    /// Only one collection should run at a time. Objects removed are kept in memory until the
    /// sweep ends, to be written back: a collection interrupted during the sweep cannot write back
    /// what a writer re-used meanwhile.
    ///
    /// Cancelling the task stops the collection between batches: before the sweep nothing is
    /// removed; during it, the batches removed are checked once more a grace period later (the
    /// collection still waits that long; with exchanges then claiming the store, it writes back
    /// all it removed instead of waiting for them) and what a writer re-used is written back;
    /// then it throws `CancellationError`. A sweep stopped by an
    /// error is finished the same way when the store can still be reached.
    ///
    /// Once the sweep is settled, the store is listed again: an object written during the
    /// collection that nothing reaches (an exchange that found removed objects present, wrote
    /// what names them, and failed before its heads moved) has what it names written back, so
    /// that the exchange run again, finding it present, leaves the store whole.
    ///
    /// - Complexity: O(*N*) reads for the *N* reachable objects, O(*G*) deletes for *G*
    ///   unreachable ones, two listings of the store; O(*N* + *G*) hashes in memory, and the
    ///   bytes of the removed objects.
    @discardableResult
    public func collectGarbage(
        gracePeriod: Duration = .seconds(60), longestWaitForExchanges: Duration = .seconds(600), progress: TransferProgressHandler? = nil
    ) async throws -> GarbageCollectionReport {
        try await collectGarbage(
            gracePeriod: gracePeriod, progress: progress, sweepBatch: Transfer.requestSize, longestWaitForExchanges: longestWaitForExchanges)
    }

    /// ``collectGarbage(gracePeriod:longestWaitForExchanges:progress:)``, removing `sweepBatch` objects at a time (tests
    /// use small batches to land a commit between any two). After its sweep, calls that fail are
    /// tried again for `patience` (a claim's lifetime: by then no exchange that could not renew
    /// its claim moves its heads; tests of a connection that stays down shorten it).
    func collectGarbage(
        gracePeriod: Duration, progress: TransferProgressHandler?, sweepBatch: Int, patience: Duration = TransferReservation.lifetime,
        longestWaitForExchanges: Duration = .seconds(600)
    ) async throws -> GarbageCollectionReport {
        let started = ContinuousClock.now
        var walk = IntegrityWalk(backend: backend, progress: progress)
        try await walk.run(countingUnreachable: false)
        // A non-canonical index is complete: marking reaches all it names all the same.
        guard walk.report.isComplete else {
            throw ArborError(
                .corruptObject,
                "the store is damaged (\(walk.report.missingCount) missing, \(walk.report.corruptCount) corrupt objects; run verify): nothing was removed",
                backend: backend.engineName, operation: "gc")
        }
        var candidates = [Hash]()
        try await backend.enumerateHashes(batchSize: Transfer.requestSize) { [reached = walk.reached] batch in
            candidates += batch.filter { !reached.contains($0) }
        }
        var report = GarbageCollectionReport()
        if !candidates.isEmpty {
            try await Task.sleep(for: gracePeriod)
            try await walk.run(countingUnreachable: false)
            let late = candidates.count
            candidates.removeAll { walk.reached.contains($0) }
            report.keptLate = late - candidates.count

            // Cancelled while marking: nothing is removed yet, and nothing will be.
            try Task.checkCancellation()
            var removed = [Hash: [UInt8]]()
            walk.marksForSweep()
            // Once something is removed, the last check below must run however the sweep ends:
            // a cancellation stops it between batches, an error (a dropped connection) anywhere.
            var stopped: (any Error)?
            // An exchange in flight claims the store (TransferReservation): what it found present
            // or wrote is unreachable until its heads move, however long it runs. A claim seen
            // before the sweep stops it before it removes anything; one first seen after a batch
            // may have found objects of that batch present, as may an exchange that claims the
            // store later (it claims only once it has run for a while), so the last marking waits
            // for the exchanges claiming the store after the batch or after the grace period.
            var claimants: Set<String>?
            var rescuedBytes = 0
            // Markers of batches not known to be settled: made (or perhaps made), not removed.
            var unsettled = [SweepMarker]()
            await SweepMarker.removeLapsed(on: backend)
            do {
                report.stoppedForExchange = try await !TransferReservation.live(on: backend).isEmpty
                let batches = report.stoppedForExchange ? [] : try await topDown(candidates).chunks(of: max(sweepBatch, 1))
                for (index, chunk) in batches.enumerated() {
                    if Task.isCancelled { throw CancellationError() }
                    // What a commit that landed during the sweep reaches is no longer garbage.
                    let batch = chunk.filter { !walk.reached.contains($0.hash) }
                    report.keptLate += chunk.count - batch.count
                    guard !batch.isEmpty else { continue }
                    // Kept before the delete: one that fails partway may have removed some.
                    // (Not an object that does not match its hash: there is nothing to write back.)
                    for (hash, bytes) in batch { if let bytes { removed[hash] = bytes } }
                    // Readers that find an object of the batch missing wait for its write-back
                    // (a batch cut short leaves its marker to the marking below).
                    let marker = SweepMarker(on: backend)
                    unsettled.append(marker)
                    try await marker.make()
                    try await backend.delete(batch.map(\.hash))
                    forgetCached(batch.map(\.hash))
                    report.removedBytes += batch.reduce(0) { $0 + ($1.bytes?.count ?? 0) }
                    report.removedObjects += batch.count
                    let written = try await rescue(&walk, from: &removed)
                    (report.rescued, rescuedBytes) = (report.rescued + written.objects, rescuedBytes + written.bytes)
                    // This batch's marker, and any an earlier batch could not remove.
                    unsettled = await SweepMarker.remove(unsettled)
                    let live = try await TransferReservation.live(on: backend)
                    if !live.isEmpty {
                        claimants = live
                        report.stoppedForExchange = index < batches.count - 1
                        break
                    }
                }
            } catch {
                stopped = error
            }
            if !removed.isEmpty {
                // A writer that found an object present just before its batch was deleted may
                // move its heads up to a grace period later. The wait and the marking after it
                // run in a task of its own, so that a cancelled collection still waits and still
                // writes back: a backend may refuse every call of a cancelled task (PostgreSQL does).
                let restart = stopped != nil
                // Cancelled (now, or as it waits): it stops waiting for exchanges.
                let interruption = InterruptionFlag()
                let listed = Set(candidates)
                let (marked, rescued, restored, gone, unwritten) = await withTaskCancellationHandler {
                  await Task.detached { [self, walk, removed, claimants, unsettled, interruption, listed] in
                    var unsettled = unsettled, walk = walk, removed = removed
                    // A marking an error stopped midway left objects counted as reached whose
                    // links were never followed: mark again from scratch.
                    if restart { walk = .sweepMarking(backend) }
                    var rescued = (objects: 0, bytes: 0)
                    var restored = (objects: 0, bytes: 0)
                    func markAndWriteBack() async throws {
                        let written = try await rescue(&walk, from: &removed)
                        rescued = (rescued.objects + written.objects, rescued.bytes + written.bytes)
                        // Batches cut short are settled.
                        unsettled = await SweepMarker.remove(unsettled)
                    }
                    // A batch cut short is settled at once too, not only a grace period later:
                    // readers wait for its marker only so long (SweepMarker.lifetime).
                    if !unsettled.isEmpty {
                        do { try await markAndWriteBack() } catch { walk = .sweepMarking(backend) }
                    }
                    try? await Task.sleep(for: gracePeriod)
                    // The exchanges claiming the store after the batch, and those claiming it now:
                    // one claims only once it has run for its delay (Store.Configuration.
                    // exchangeClaimDelay), and may have found objects of a batch present before
                    // it did. Claims that cannot be read count as live until a claim's lifetime
                    // has passed since they were last read: none made before can be live then.
                    var awaited = claimants ?? []
                    var claimsRead = false
                    var lastRead = ContinuousClock.now
                    let waitStarted = ContinuousClock.now
                    while true {
                        do {
                            let live = try await TransferReservation.live(on: backend)
                            awaited = claimsRead ? awaited.intersection(live) : awaited.union(live)
                            (claimsRead, lastRead) = (true, .now)
                        } catch {
                            if !Self.mayPass(error) || ContinuousClock.now - lastRead >= patience { break }
                        }
                        if claimsRead && awaited.isEmpty { break }
                        // Waited its longest, or cancelled: everything removed goes back, since
                        // an exchange still claiming the store may have found any of it present.
                        if !awaited.isEmpty, interruption.isSet || ContinuousClock.now - waitStarted >= longestWaitForExchanges,
                           let written = try? await writeBackAll(removed) {
                            restored = written
                            removed = [:]
                            break
                        }
                        // Marking as the exchanges land writes back what each needs as soon as
                        // its heads move, not only once the last is done. A marking that fails
                        // (a dropped connection) is done again from scratch: one cut short leaves
                        // objects counted as reached whose links were never followed.
                        do { try await markAndWriteBack() } catch { walk = .sweepMarking(backend) }
                        // Often at first, when most exchanges end; then once a second.
                        try? await Task.sleep(for: ContinuousClock.now - waitStarted < .seconds(10) ? .milliseconds(250) : .seconds(1))
                    }
                    // The last marking must happen: without it, what a writer re-used stays
                    // removed. Tried again from scratch, for `patience`.
                    var failure: (any Error)?
                    let deadline = ContinuousClock.now + patience
                    while true {
                        do {
                            try await markAndWriteBack()
                            failure = nil
                            break
                        } catch {
                            failure = error
                            walk = .sweepMarking(backend)
                            if !Self.mayPass(error) || ContinuousClock.now >= deadline { break }
                            try? await Task.sleep(for: .seconds(1))
                        }
                    }
                    // Objects written during the collection that nothing reaches (an exchange that
                    // found removed objects present, wrote what names them, and failed before its
                    // heads moved or its claim was seen) would be left without what they name, and
                    // an exchange run again finds them present and takes all they name to be there.
                    if failure == nil, !removed.isEmpty {
                        do {
                            let written = try await writeBackNamedByStrays(reached: walk.reached, listed: listed, removed: &removed)
                            rescued = (rescued.objects + written.objects, rescued.bytes + written.bytes)
                        } catch {
                            failure = error
                        }
                    }
                    // Those never settled, or not removed, lapse: readers stop waiting for them.
                    _ = await SweepMarker.remove(unsettled)
                    return (walk, rescued, restored, Array(removed.keys), failure.map { ($0, removed.count) })
                  }.value
                } onCancel: {
                    interruption.set()
                }
                walk = marked
                report.rescued += rescued.objects
                rescuedBytes += rescued.bytes
                report.restoredForExchange = restored.objects
                rescuedBytes += restored.bytes
                // Again: a read that fetched an object just before its batch was deleted may have
                // cached it since.
                forgetCached(gone)
                if let (error, count) = unwritten {
                    // Only a task that made a backend call cancel it could cancel the last phase.
                    if error is CancellationError { throw error }
                    let cause = (error as? ArborError)?.message ?? "\(error)"
                    throw ArborError(
                        (error as? ArborError)?.code ?? .engine,
                        "the collection could not mark the store once more after its sweep, to write back what writers re-used (\(count) removed objects were not checked): \(cause)\(stopped.map { "; it had stopped: \($0)" } ?? ""); run `verify`, which names any object missing",
                        backend: backend.engineName, operation: "gc", underlying: error)
                }
            } else if !unsettled.isEmpty {
                // Nothing removed is left to write back (all of it was, or had no bytes).
                _ = await SweepMarker.remove(unsettled)
            }
            report.removedObjects -= report.rescued + report.restoredForExchange
            report.removedBytes -= rescuedBytes
            if let stopped { throw stopped }
        }
        report.reachableObjects = walk.reached.count
        report.seconds = started.secondsUntilNow
        return report
    }

    /// `hashes` with their bytes (those no longer there left out), in the order a sweep removes
    /// them: whatever names an object before it — head sets, then versions newest first (a
    /// version is newer than its parents), index nodes from the top level down, blobs last. So a
    /// sweep interrupted at any point leaves whole whatever it has not removed: an exchange that
    /// finds an object present takes everything it names to be there too.
    ///
    /// An object that does not match its hash (an adapter that checks, as JSON does, refuses to
    /// read it) comes first (it may name others), without bytes: garbage all the same, which
    /// must not stop the sweep, and nothing to write back.
    private func topDown(_ hashes: [Hash]) async throws -> [(hash: Hash, bytes: [UInt8]?)] {
        var ranked = [(rank: (kind: Int, order: UInt64, counter: UInt32), hash: Hash, bytes: [UInt8]?)]()
        ranked.reserveCapacity(hashes.count)
        for chunk in hashes.chunks(of: Transfer.requestSize) {
            let (fetched, refused) = try await backend.getTellingRefusals(chunk)
            for hash in chunk where refused[hash] != nil { ranked.append(((-1, 0, 0), hash, nil)) }
            for (hash, bytes) in fetched { ranked.append((Self.sweepRank(bytes), hash, bytes)) }
        }
        ranked.sort { $0.rank != $1.rank ? $0.rank < $1.rank : $0.hash < $1.hash }
        return ranked.map { ($0.hash, $0.bytes) }
    }

    /// Whether trying again may succeed where `error` failed: a dropped connection, a disk
    /// that was full, an engine that was busy; not a closed store, nor a damaged one.
    private static func mayPass(_ error: any Error) -> Bool {
        guard let code = (error as? ArborError)?.code else { return !(error is CancellationError) }
        return [.connection, .io, .engine].contains(code)
    }

    /// Where an object goes in a sweep (``topDown(_:)``): before everything it can name. By
    /// kind, then within it: versions by time, newest first; nodes by level, top first. A
    /// write-back goes in the reverse order.
    private static func sweepRank(_ bytes: [UInt8]) -> (kind: Int, order: UInt64, counter: UInt32) {
        let links = try? ObjectLinks(bytes)
        return switch links?.kind {
        case .headSet?: (0, 0, 0)
        case .commit?: (1, UInt64.max - (links?.time.milliseconds ?? 0), UInt32.max - (links?.time.counter ?? 0))
        case .branch?, .leaf?: (2, UInt64(Swift.max(0, 64 - (links?.level ?? 0))), 0)
        case .blob?: (3, 0, 0)
        case nil: (4, 0, 0)
        }
    }

    /// Drops `hashes` from this store's caches, which would otherwise go on answering for what
    /// is gone. Other stores on the same backend (other processes too) are not told: they may
    /// still answer from their caches for objects that were deleted.
    private func forgetCached(_ hashes: some Collection<Hash>) {
        cache.forget(hashes)
        bytesCache.forget(hashes)
        versionCache.forget(hashes)
        inPlace.verified.forget(hashes)
    }

    /// Writes back every one of `removed`, children first (``childrenFirst(_:)``), in requests
    /// of ``Transfer/requestSize``: one cut short leaves nothing present without what it names.
    /// Returns how many, and their bytes.
    private func writeBackAll(_ removed: [Hash: [UInt8]]) async throws -> (objects: Int, bytes: Int) {
        let objects = Self.childrenFirst(removed.map { ($0.key, $0.value) })
        for chunk in objects.chunks(of: Transfer.requestSize) { try await backend.put(Array(chunk)) }
        return (objects.count, objects.reduce(0) { $0 + $1.bytes.count })
    }

    /// `objects` in the order a write-back goes: the reverse of a sweep's (``sweepRank(_:)``),
    /// so that what names an object comes after it.
    private static func childrenFirst(_ objects: [(hash: Hash, bytes: [UInt8])]) -> [(hash: Hash, bytes: [UInt8])] {
        objects.map { (rank: sweepRank($0.bytes), object: $0) }
            .sorted { $0.rank != $1.rank ? $0.rank > $1.rank : $0.object.hash < $1.object.hash }
            .map(\.object)
    }

    /// Writes back every removed object named by an object that is present now, that nothing
    /// reaches, and that was written during the collection (it was not listed, or was removed
    /// and written again), with the removed objects below it, children first. Returns how many, and their bytes.
    ///
    /// - Complexity: one listing of the store's hashes, and a read of each such object.
    private func writeBackNamedByStrays(
        reached: Set<Hash>, listed: Set<Hash>, removed: inout [Hash: [UInt8]]
    ) async throws -> (objects: Int, bytes: Int) {
        var strays = [Hash]()
        // Also one the sweep removed and a writer wrote again (it found it missing and what it
        // names present): listed, but present now only as that writer's.
        try await backend.enumerateHashes(batchSize: Transfer.requestSize) { [removed] batch in
            strays += batch.filter { !reached.contains($0) && (!listed.contains($0) || removed[$0] != nil) }
        }
        var pending = [Hash]()
        for chunk in strays.chunks(of: Transfer.requestSize) {
            let objects = try await backend.getTellingRefusals(chunk).objects
            for bytes in objects.values { pending += ((try? ObjectLinks(bytes).all) ?? []).filter { removed[$0] != nil } }
        }
        var closure = Set<Hash>()
        while let hash = pending.popLast() {
            guard closure.insert(hash).inserted, let bytes = removed[hash] else { continue }
            pending += ((try? ObjectLinks(bytes).all) ?? []).filter { removed[$0] != nil }
        }
        let objects = Self.childrenFirst(closure.compactMap { hash in removed[hash].map { (hash, $0) } })
        for chunk in objects.chunks(of: Transfer.requestSize) { try await backend.put(Array(chunk)) }
        for (hash, _) in objects { removed[hash] = nil }
        return (objects.count, objects.reduce(0) { $0 + $1.bytes.count })
    }

    /// Marks again from the refs; writes back every removed object the refs now reach, with the
    /// removed objects below it, and marks what is still there below them reached, so that no
    /// later batch removes it. Returns how many were written back, and their bytes.
    ///
    /// What goes back goes in one put, children first (blobs, index nodes from the leaves up,
    /// versions oldest first, head sets): written a level at a time from the top, an object would
    /// be present for a while without what it names, which an exchange takes to be there.
    private func rescue(_ walk: inout IntegrityWalk, from removed: inout [Hash: [UInt8]]) async throws -> (objects: Int, bytes: Int) {
        try await walk.run(countingUnreachable: false)
        // Every object found missing, not only those a report lists.
        var restore = walk.takeMissing().filter { removed[$0] != nil }
        var closure = [Hash]()
        var queued = Set(restore)
        while !restore.isEmpty {
            closure += restore
            // The walk could not read below them. What they name is written back if it was
            // removed, else marked reached and followed.
            var named = restore.flatMap { (try? ObjectLinks(removed[$0] ?? []).all) ?? [] }
            restore = []
            while !named.isEmpty {
                let fresh = named.filter { walk.markReached($0) }
                restore += fresh.filter { removed[$0] != nil && queued.insert($0).inserted }
                named = []
                for chunk in fresh.filter({ removed[$0] == nil }).chunks(of: Transfer.requestSize) {
                    for bytes in try await backend.get(chunk).values { named += (try? ObjectLinks(bytes).all) ?? [] }
                }
            }
        }
        let objects = Self.childrenFirst(closure.compactMap { hash in removed[hash].map { (hash, $0) } })
        if !objects.isEmpty { try await backend.put(objects) }
        // Only now: a put that fails leaves them to be written back by a later marking.
        for (hash, _) in objects { removed[hash] = nil }
        let rescued = objects.map(\.hash)
        let bytes = objects.reduce(0) { $0 + $1.bytes.count }
        walk.clearMissing(rescued)
        return (rescued.count, bytes)
    }
}

/// Set once the task that waits on it is cancelled (a cancellation handler sets it), for work
/// running in a detached task to see.
private final class InterruptionFlag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
