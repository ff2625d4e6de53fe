import Foundation

/// The proof that a migration copied a store faithfully: same heads, every object of the target
/// intact and from the source, and every object it names in the target.
struct MigrationCheck {
    let source: any Backend
    let target: any Backend
    let latestOnly: Bool
    /// The digest of the objects the copy wrote into a target that held none before it, or
    /// `nil`: then each object of the target is asked of the source.
    var written: ObjectSetDigest? = nil

    /// Proves the copy `report` describes, and records the proof in it. `progress` hears of the
    /// objects checked (``TransferProgress/Phase/verifying``), the fraction done measured against
    /// the objects the copy wrote.
    func run(_ report: inout MigrationReport, progress: TransferProgressHandler? = nil) async throws {
        let started = ContinuousClock.now
        let sourceState = try await Transfer.headState(of: source)
        let targetState = try await Transfer.headState(of: target)
        var allowedNew = Set<Hash>()
        if latestOnly {
            let targetVersions = try await versions(targetState.heads, in: target)
            let sourceRoots = try await versions(sourceState.heads, in: source).map(\.root).sorted()
            guard sourceRoots == targetVersions.map(\.root).sorted() else {
                throw failure("the target's heads have other index roots than the source's heads")
            }
            allowedNew = Set(targetState.heads)
            if let ref = targetState.ref { allowedNew.insert(ref) }
        } else {
            guard sourceState.ref == targetState.ref else {
                throw failure("the heads ref names \(targetState.ref.map(\.description) ?? "nothing") in the target but \(sourceState.ref.map(\.description) ?? "nothing") in the source")
            }
        }

        // One pass over the target proves the copy: every object it holds matches its hash and
        // is the source's, and every object it names is in the target, so everything the heads
        // reach is there. What an index node says of its children (levels, counts) is then the
        // source's own word, which `verify` checks, not the copy's.
        //
        // An object is the source's when the source says it holds it; or, for a target that
        // held nothing before the copy, when the target's objects (but its head set, compared
        // above) are exactly those the copy wrote, each read from the source and checked against
        // its hash: their digests match. Should they not (another writer's objects, say), the
        // pass is made again asking the source.
        var pass = try await checkTarget(askingSource: written == nil, except: targetState.ref, mayBeNew: allowedNew,
                                         progress: progress, started: started, versions: report.exchange.versions,
                                         expected: report.exchange.objects + 1)  // and the new head set
        if let written, pass.digest != written {
            pass = try await checkTarget(askingSource: true, except: targetState.ref, mayBeNew: allowedNew,
                                         progress: progress, started: started, versions: report.exchange.versions,
                                         expected: pass.objects)
        }
        report.verified = true
        report.objectsChecked = pass.objects
        report.bytesChecked = pass.bytes
        report.verifySeconds = started.secondsUntilNow
    }

    /// What a pass over the target found: the objects, their bytes, and (without asking the
    /// source) the digest of all but the head set.
    private struct Pass {
        var objects = 0
        var bytes = 0
        var digest: ObjectSetDigest?
    }

    /// Goes once over the target's objects, checking each against its hash, what each names
    /// against the target, and (`askingSource`) each but those of `mayBeNew` against the source;
    /// without asking, it adds up the digest of all but `except`. `progress` hears of the
    /// objects checked, the fraction measured against `expected`.
    private func checkTarget(
        askingSource: Bool, except: Hash?, mayBeNew: Set<Hash>, progress: TransferProgressHandler?,
        started: ContinuousClock.Instant, versions: Int, expected: Int
    ) async throws -> Pass {
        var pass = Pass(digest: askingSource ? nil : written.map { ObjectSetDigest(key: $0.key) })
        var links = LinkCheck(target: target)
        var lastReport = ContinuousClock.now
        func reportProgress(force: Bool) {
            guard let progress, force || lastReport.duration(to: .now) >= .milliseconds(100) else { return }
            lastReport = .now
            progress(TransferProgress(versionsDone: versions, versionsTotal: versions, objects: pass.objects, bytes: pass.bytes,
                                      seconds: started.secondsUntilNow, fractionDone: min(1, Double(pass.objects) / Double(max(expected, 1))),
                                      phase: .verifying))
        }
        func account(_ checked: CheckedBatch) async throws {
            pass.objects += checked.hashes.count
            pass.bytes += checked.bytes
            if let digest = checked.digest { pass.digest?.merge(digest) }
            try await links.add(checked.hashes, naming: checked.named)
            reportProgress(force: false)
        }
        // Each batch is checked by a task of its own while the target reads the next batch, and
        // the source answers for it while its bytes are hashed and parsed: on two engines (often
        // two processes) and the hashing, the work overlaps.
        let digestKey = pass.digest?.key
        var inFlight: Task<CheckedBatch, any Error>?
        defer { inFlight?.cancel() }
        try await target.enumerateObjects(batchSize: Transfer.requestSize) { batch in
            let previous = inFlight
            inFlight = Task { [self] in
                try await check(batch, askingSource: askingSource, mayBeNew: mayBeNew, digestKey: digestKey, except: except)
            }
            if let previous { try await account(try await previous.value) }
        }
        if let last = inFlight { try await account(try await last.value) }
        try await links.resolve()
        reportProgress(force: true)
        return pass
    }

    /// A batch of the target's objects, checked: their hashes, what they name outside the batch,
    /// their bytes, and their digest when one was asked for.
    private struct CheckedBatch {
        var hashes: [Hash]
        var named: Set<Hash>
        var bytes: Int
        var digest: ObjectSetDigest?
    }

    /// Checks a batch of the target's objects: each matches its hash, parses, and (`askingSource`)
    /// is in the source, but for those of `mayBeNew`. With `digestKey`, the digest of all but
    /// `except` comes back.
    private func check(
        _ batch: [(hash: Hash, bytes: [UInt8])], askingSource: Bool, mayBeNew: Set<Hash>, digestKey: ObjectSetDigest.Key?, except: Hash?
    ) async throws -> CheckedBatch {
        let hashes = batch.map(\.hash)
        let asked = askingSource ? hashes.filter { !mayBeNew.contains($0) } : []
        async let inSource = asked.isEmpty ? [] : source.contains(asked)
        let inBatch = Set(hashes)
        var named = Set<Hash>()
        var bytes = 0
        var digest = digestKey.map { ObjectSetDigest(key: $0) }
        for (hash, object) in batch {
            guard Hash.of(object) == hash else { throw failure("object \(hash) does not match its hash") }
            let links: ObjectLinks
            do {
                links = try ObjectLinks(object)
            } catch let error as ArborError {
                throw failure("object \(hash) does not parse (\(error.message))")
            }
            for link in links.all where !inBatch.contains(link) { named.insert(link) }
            bytes += object.count
            if hash != except { digest?.insert(hash) }
        }
        let found = try await inSource
        if let foreign = asked.first(where: { !found.contains($0) }) {
            throw failure("object \(foreign) is not in the source")
        }
        return CheckedBatch(hashes: hashes, named: named, bytes: bytes, digest: digest)
    }

    private func versions(_ ids: [Hash], in backend: any Backend) async throws -> [Version] {
        let objects = try await ObjectFetch.verified(ids, from: backend)
        return try ids.map { Version(id: $0, content: try Version.Content.decode(objects[$0] ?? [])) }
    }

    private func failure(_ message: String) -> ArborError {
        ArborError(.corruptObject, "verification failed: \(message)", backend: target.engineName, operation: "verify")
    }
}

/// Whether every object that the objects of a store name is in the store, found over one pass
/// through its objects: each name is checked against the objects seen so far, or those seen
/// after it, in memory. Only past ``memoryLimit`` hashes of either kind is the store asked.
///
/// - Complexity: O(*n*) set operations for *n* objects and names; O(`memoryLimit`) memory, and
///   no request to the store unless that is exceeded.
struct LinkCheck {
    let target: any Backend
    /// At most this many hashes are kept of the objects seen, and of the names not yet matched:
    /// about 25 MB each (a hash takes about 50 bytes in a set). A store of 1,000,000 records of
    /// ~100 bytes, in commits of 100,000, has 275,000 objects.
    var memoryLimit = 500_000
    private var seen = Set<Hash>()
    private var pending = Set<Hash>()

    init(target: any Backend) {
        self.target = target
    }

    /// Adds a batch of objects, `hashes`, which name the objects `named`.
    mutating func add(_ hashes: [Hash], naming named: Set<Hash>) async throws {
        if seen.count + hashes.count <= memoryLimit { seen.formUnion(hashes) }
        if !pending.isEmpty { pending.subtract(hashes) }
        for link in named where !seen.contains(link) { pending.insert(link) }
        if pending.count > memoryLimit { try await resolve() }
    }

    /// Asks the store about every name not matched yet; throws ``ArborError/Code/missingObject``
    /// for one it lacks.
    mutating func resolve() async throws {
        for chunk in Array(pending).chunks(of: Transfer.requestSize) {
            let present = try await target.contains(chunk)
            if let missing = chunk.first(where: { !present.contains($0) }) {
                throw ArborError(.missingObject, "verification failed: object \(missing), named by an object of the store, is not in it",
                                 backend: target.engineName, operation: "verify")
            }
        }
        pending.removeAll()
    }
}
