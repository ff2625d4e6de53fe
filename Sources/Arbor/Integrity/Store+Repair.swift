/// What ``Store/repair(from:progress:)`` did.
public struct RepairReport: Sendable {
    /// Objects written from the replica: the damaged ones it held intact, and what they name
    /// that the store lacked or held damaged.
    public var objectsWritten = 0
    public var bytesWritten = 0
    /// Verifications run: one, then one more after each round of writes.
    public var passes = 0
    /// Damage left, one entry per object, each with why it could not be mended (at most
    /// ``Store/verifyDamageLimit`` listed; ``verification`` counts every finding).
    public var unrepaired: [VerifyReport.Damage] = []
    /// The last verification: ``VerifyReport/isIntact`` when nothing is left to mend.
    public var verification = VerifyReport()
    public var seconds: Double = 0

    /// Whether the store is intact after the repair.
    public var isIntact: Bool { verification.isIntact }
}

extension Store {
    /// Mends this store's damage from `replica`, a store that holds the same versions (another
    /// replica, or a backup, on any engine): verifies this store, fetches every missing or
    /// corrupt object from `replica`, checks it against its hash, and writes it over the damaged
    /// one (``Backend/replace(_:)``), together with everything it names, at any depth, that this
    /// store lacks or holds damaged, each object after what it names. What a damaged object hid
    /// from the verification is read and followed in the same round. Then verifies again, and
    /// mends what that finds, until a verification finds nothing new to fetch.
    ///
    /// Writes nothing but objects whose bytes match their hashes, so it never changes what a
    /// version holds, and moves no ref. Left as they are, and listed in
    /// ``RepairReport/unrepaired`` with the reason: a damaged object that `replica` lacks or
    /// holds damaged too, and an object that names one (written, it would be present with its
    /// children missing, which an exchange takes as whole); an object malformed on every replica
    /// (its bytes match its hash but do not parse, disagree with what names them, or are not in
    /// canonical shape), which needs the versions that name it replaced, not its bytes. A repair
    /// that was stopped is finished by running it again.
    ///
    /// Only objects that read damaged or are missing are written. In a store that keeps deltas,
    /// an object kept as a delta against a damaged object reads damaged too, and is written
    /// whole; deltas against intact objects stay deltas.
    ///
    /// Garbage collection refuses a damaged store: repair it first.
    ///
    /// - Complexity: one verification (O(*N*) object reads for the *N* objects reachable) per
    ///   pass: one when there is nothing to write, else two (the second checks what the first
    ///   round wrote; a third only where that round found more to write, as when the store changed
    ///   meanwhile). A round reads what damage hid (a history hidden behind a damaged head set through
    ///   ``Backend/ancestry(of:limit:)``, many generations per request where the backend follows
    ///   parents itself), and holds the objects it writes in memory: to replace most of a
    ///   store, clone the replica instead.
    public func repair(from replica: Store, progress: TransferProgressHandler? = nil) async throws -> RepairReport {
        let started = ContinuousClock.now
        var report = RepairReport()
        // Why each damaged object fetched once is not fetched again: a pass that finds only
        // these has nothing left to mend.
        var reasons = [Hash: String]()
        var written = Set<Hash>()
        var blocked = Set<Hash>()
        while true {
            var walk = IntegrityWalk(backend: backend, progress: progress)
            walk.decodesRecords = true
            walk.checksEveryFiling = true
            walk.recordsDamage = true
            try await walk.run()
            report.passes += 1
            let damage = walk.takeDamage()
            var wanted = [Hash]()
            var seen = Set<Hash>()
            for item in damage where item.kind != .nonCanonical && reasons[item.hash] == nil && seen.insert(item.hash).inserted {
                wanted.append(item.hash)
            }
            var objects = [(hash: Hash, bytes: [UInt8])]()
            if !wanted.isEmpty {
                let round = try await repairRound(of: wanted, from: replica, reached: walk.reached)
                objects = round.objects
                for (hash, reason) in round.refused { reasons[hash] = reason }
                let missing = Set(damage.lazy.filter { $0.kind == .missing }.map(\.hash))
                for hash in round.sound {
                    reasons[hash] = missing.contains(hash)
                        ? "present now: written since the verification"
                        : "its bytes here match its hash: what is wrong is in the object or in what names it, on every replica"
                }
                for (hash, lacking) in round.blocked {
                    reasons[hash] = "left as it is: it names \(lacking), which neither store can give intact"
                    blocked.insert(hash)
                }
                for hash in wanted where reasons[hash] == nil { reasons[hash] = "written from the replica" }
            }
            // With nothing new to write, another verification would find what this one found.
            objects.removeAll { written.contains($0.hash) }
            if objects.isEmpty {
                report.verification = walk.report
                var listed = Set<Hash>()
                // One entry per object: a node filed wrongly by several parents is one object.
                for item in damage where report.unrepaired.count < Store.verifyDamageLimit && listed.insert(item.hash).inserted {
                    let reason = item.kind == .nonCanonical
                        ? "not in canonical shape; a replica holds the same bytes"
                        : written.contains(item.hash) ? "written from the replica and damaged all the same: what is wrong is in the object or in what names it, on every replica"
                        : reasons[item.hash] ?? "not fetched"
                    report.unrepaired.append(.init(kind: item.kind, hash: item.hash, detail: "\(item.detail); \(reason)"))
                }
                report.seconds = started.secondsUntilNow
                return report
            }
            // In order, in batches within the store's limit, as a transfer writes.
            let limit = backend.writeBatchLimit
            let writer = OrderedObjectWriter(backend: backend, maxObjects: max(1, limit.objects), maxBytes: max(1, limit.bytes), replacing: true)
            for object in objects { try await writer.add(object.hash, object.bytes) }
            try await writer.finish()
            report.objectsWritten += writer.objectsWritten
            report.bytesWritten += writer.bytesWritten
            written.formUnion(objects.lazy.map(\.hash))
            // What this round wrote may be what a blocked object was waiting for (a delta that
            // read damaged through a base now mended): the next pass asks again.
            for hash in blocked { reasons[hash] = nil }
            blocked = []
        }
    }

    /// What a round of a repair found for the damaged objects `hashes`: the objects to write, in
    /// an order that gives each after everything it names; why each object `replica` could not
    /// give intact is left out; those of `hashes` whose bytes here match their hash (malformed on
    /// every replica: nothing to fetch); and the objects left out because something they name
    /// can be had from neither store, each with what that is.
    struct RepairRound {
        var objects: [(hash: Hash, bytes: [UInt8])] = []
        var refused: [Hash: String] = [:]
        var sound: [Hash] = []
        var blocked: [Hash: Hash] = [:]
    }

    /// A round of a repair: `hashes`, found damaged by a verification that reached `reached`,
    /// read from `replica` where this store holds them damaged or not at all, with every object
    /// they name, at any depth, that this store lacks or holds damaged. What they name that the
    /// verification never reached (damage hid it) is read here and followed, so that damage
    /// behind damage is found in the same round, not by a verification of the whole store per
    /// layer (a history of corrupt versions, one per version).
    private func repairRound(of hashes: [Hash], from replica: Store, reached: Set<Hash>) async throws -> RepairRound {
        var round = RepairRound()
        var fetched = [Hash: [UInt8]]()
        var names = [Hash: [Hash]]()
        let wanted = Set(hashes)
        var queued = wanted
        var toCheck = hashes
        // Commits a head set or commit here names, read through a history reader: a history
        // hidden behind damage is read many generations per request where the backend follows
        // parents itself (PostgreSQL), not one.
        var versionsToCheck = [Hash]()
        var toFetch = [Hash]()
        var history = HistoryReader(backend)
        while !toCheck.isEmpty || !versionsToCheck.isEmpty || !toFetch.isEmpty {
            var named = [Hash]()
            var namedVersions = [Hash]()
            var damagedHere = [Hash]()
            /// Notes what `links` names to read here next: commits apart from the rest.
            func follow(_ links: ObjectLinks?) {
                let versions = links.map { $0.kind == .commit ? $0.parents : $0.kind == .headSet ? $0.heads : [] } ?? []
                for link in links?.all ?? [] where queued.insert(link).inserted {
                    if versions.contains(link) { namedVersions.append(link) } else { named.append(link) }
                }
            }
            func checkHere(_ hash: Hash, _ bytes: [UInt8]?) {
                guard let bytes, Hash.of(bytes) == hash else { return damagedHere.append(hash) }
                if wanted.contains(hash) { return round.sound.append(hash) }
                // Sound, and walked by the verification: so is what it names.
                guard !reached.contains(hash) else { return }
                // Followed, and its links kept (not its bytes): what it names may be missing
                // for good, and then so may be what names it.
                let links = try? ObjectLinks(bytes)
                names[hash] = links?.all ?? []
                follow(links)
            }
            try await Self.read(toCheck, from: backend) { hash, bytes, _ in checkHere(hash, bytes) }
            // The history here, to its end or its damage, before the trees its versions name:
            // those are then read together, level by level, not version by version.
            var versions = versionsToCheck + namedVersions
            namedVersions = []
            while !versions.isEmpty {
                for chunk in versions.chunks(of: Transfer.requestSize) {
                    let read = try await backend.getTellingRefusals(chunk) { try await history.uncheckedObjects($0) }.objects
                    for hash in chunk { checkHere(hash, read[hash]) }
                }
                (versions, namedVersions) = (namedVersions, [])
            }
            try await Self.read(toFetch, from: replica.backend) { hash, bytes, refusal in
                if let refusal {
                    round.refused[hash] = "the replica's copy is damaged too (\(refusal))"
                } else if let bytes {
                    guard Hash.of(bytes) == hash else {
                        round.refused[hash] = "the replica's copy is damaged too (its bytes do not match the hash)"
                        return
                    }
                    fetched[hash] = bytes
                    // What it names, if it parses: one that does not is written all the same,
                    // and the next verification says so.
                    let links = try? ObjectLinks(bytes)
                    names[hash] = links?.all ?? []
                    follow(links)
                } else {
                    round.refused[hash] = "the replica does not hold it"
                }
            }
            (toCheck, versionsToCheck, toFetch) = (named, namedVersions, damagedHere)
        }
        // Children first: a depth-first walk that gives each object after everything it names,
        // and leaves out one that names, directly or through objects here that it names, what
        // neither store can give: written, it would be present with a descendant missing, which
        // an exchange takes as whole.
        round.objects.reserveCapacity(fetched.count)
        var placed = Set<Hash>()
        for start in fetched.keys.sorted() where !placed.contains(start) {
            var stack = [(hash: start, next: 0)]
            placed.insert(start)
            while let top = stack.last {
                let links = names[top.hash] ?? []
                if top.next < links.count {
                    stack[stack.count - 1].next += 1
                    let link = links[top.next]
                    if names[link] != nil, placed.insert(link).inserted { stack.append((link, 0)) }
                    continue
                }
                stack.removeLast()
                if let lacking = links.lazy.compactMap({ link in round.refused[link] != nil ? link : round.blocked[link] }).first {
                    round.blocked[top.hash] = lacking
                } else if let bytes = fetched[top.hash] {
                    round.objects.append((top.hash, bytes))
                }
            }
        }
        return round
    }

    /// Reads `hashes` from `backend` in requests sized by the objects' sizes, as a verification
    /// reads blobs, and calls `body` with each: its bytes, `nil` if the store lacks it, or why the
    /// adapter refused it (one that refuses a batch for a damaged object is read one at a time).
    private static func read(_ hashes: [Hash], from backend: any Backend, _ body: (Hash, [UInt8]?, String?) throws -> Void) async throws {
        guard !hashes.isEmpty else { return }
        var requests = BlobRequestSizer()
        // As a verification asks: an engine may fail to tell the size of a damaged object.
        let sizes = (try? await backend.objectSizes(hashes)) ?? nil
        var present = hashes
        if sizes == nil {
            // Requests grow from the sizes read, so absent objects (a missing subtree) would be
            // asked one at a time: they are set apart first, in one request per thousand.
            var held = Set<Hash>()
            for chunk in hashes.chunks(of: Transfer.requestSize) { held.formUnion(try await backend.contains(chunk)) }
            present = hashes.filter(held.contains)
            for hash in hashes where !held.contains(hash) { try body(hash, nil, nil) }
        }
        var refused = [Hash: String]()
        try await requests.inRequests(present, sizes: sizes, fetch: { request in
            let (objects, reasons) = try await backend.getTellingRefusals(request)
            refused.merge(reasons) { first, _ in first }
            return objects
        }) { request, objects in
            for hash in request { try body(hash, objects[hash], refused[hash]) }
        }
    }
}
