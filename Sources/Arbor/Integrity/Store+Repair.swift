/// What ``Store/repair(from:progress:)`` did.
public struct RepairReport: Sendable {
    /// Objects written from the replica: the damaged ones it held intact, and what they name
    /// that the store lacked.
    public var objectsWritten = 0
    public var bytesWritten = 0
    /// Verifications run: one, then one more after each round of writes.
    public var passes = 0
    /// Damage left, each with why the replica could not mend it (at most
    /// ``Store/verifyDamageLimit`` listed; ``verification`` counts all of it).
    public var unrepaired: [VerifyReport.Damage] = []
    /// The last verification: ``VerifyReport/isIntact`` when nothing is left to mend.
    public var verification = VerifyReport()
    public var seconds: Double = 0

    /// Whether the store is intact after the repair.
    public var isIntact: Bool { verification.isIntact }
}

extension Store {
    /// Mends this store's damage from `replica`, a store that holds the same versions (another
    /// replica, or a backup): verifies this store, fetches every missing or corrupt object from
    /// `replica`, checks it against its hash, and writes it over the damaged one
    /// (``Backend/replace(_:)``), together with what it names that this store lacks,
    /// children first. Then verifies again, since a node that could not be read hid what is below
    /// it, and mends what that finds, until a verification finds nothing new to fetch.
    ///
    /// Writes nothing but objects whose bytes match their hashes, so it never changes what a
    /// version holds, and moves no ref: a damaged object that `replica` lacks or holds damaged too
    /// is left as it is, and listed in ``RepairReport/unrepaired`` with the reason. So is an
    /// object that is malformed whatever replica it comes from (its bytes match its hash but do
    /// not parse, or are not in canonical shape): those need the versions that name them
    /// replaced, not their bytes. Run again, a repair that was stopped writes only what is
    /// still damaged.
    ///
    /// Only objects that read damaged or are missing are written. In a store that keeps deltas,
    /// an object kept as a delta against a damaged object reads damaged too, and is written
    /// whole; the others against an object mended read through its new bytes and stay deltas.
    ///
    /// - Complexity: one verification (O(*N*) object reads for the *N* objects reachable) per
    ///   pass, usually two passes: what a fetched object names is checked as it is fetched, so
    ///   damage hidden behind damage is found in the same round. Holds in memory the objects a
    ///   round writes: to replace most of a store, clone the replica instead.
    public func repair(from replica: Store, progress: TransferProgressHandler? = nil) async throws -> RepairReport {
        let started = ContinuousClock.now
        var report = RepairReport()
        // Why each damaged object fetched once is not fetched again: a pass that finds only
        // these has nothing left to mend.
        var reasons = [Hash: String]()
        var written = Set<Hash>()
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
                let closure = try await closure(of: wanted, from: replica)
                objects = closure.objects
                for (hash, reason) in closure.refused { reasons[hash] = reason }
                for hash in wanted where reasons[hash] == nil { reasons[hash] = "written from the replica" }
            }
            // With nothing new to write, another verification would find what this one found.
            objects.removeAll { written.contains($0.hash) }
            if objects.isEmpty {
                report.verification = walk.report
                for item in damage where report.unrepaired.count < Store.verifyDamageLimit {
                    let reason = item.kind == .nonCanonical
                        ? "not in canonical shape; a replica holds the same bytes"
                        : written.contains(item.hash) ? "written from the replica and damaged all the same: what is wrong is in the object or in what names it, on every replica"
                        : reasons[item.hash] ?? "not fetched"
                    report.unrepaired.append(.init(kind: item.kind, hash: item.hash, detail: "\(item.detail); \(reason)"))
                }
                report.seconds = started.secondsUntilNow
                return report
            }
            for batch in objects.batches(within: backend.writeBatchLimit) {
                try await backend.replace(Array(batch))
                report.objectsWritten += batch.count
                report.bytesWritten += batch.reduce(0) { $0 + $1.bytes.count }
            }
            written.formUnion(objects.lazy.map(\.hash))
        }
    }

    /// `hashes` read from `replica` and checked, with every object they name, at any depth, that
    /// this store does not hold, in an order that gives each object after those it names; and
    /// why each of `hashes` (or of what they name) that `replica` could not give intact is left out.
    private func closure(of hashes: [Hash], from replica: Store) async throws -> (objects: [(hash: Hash, bytes: [UInt8])], refused: [Hash: String]) {
        var fetched = [Hash: [UInt8]]()
        var names = [Hash: [Hash]]()
        var refused = [Hash: String]()
        var queued = Set(hashes)
        var pending = hashes
        while !pending.isEmpty {
            var named = [Hash]()
            for chunk in pending.chunks(of: Transfer.requestSize) {
                var objects: [Hash: [UInt8]]
                var damaged = [Hash: String]()
                do {
                    objects = try await replica.backend.get(chunk)
                } catch let error as ArborError where error.code == .corruptObject {
                    // An adapter that refuses a batch for one damaged object: each on its own.
                    (objects, damaged) = try await replica.backend.getOneAtATime(chunk)
                }
                for hash in chunk {
                    if let reason = damaged[hash] {
                        refused[hash] = "the replica's copy is damaged too (\(reason))"
                    } else if let bytes = objects[hash] {
                        guard Hash.of(bytes) == hash else {
                            refused[hash] = "the replica's copy is damaged too (its bytes do not match the hash)"
                            continue
                        }
                        fetched[hash] = bytes
                        // What it names, if it parses: one that does not is written all the same,
                        // and the next verification says so.
                        let links = (try? ObjectLinks(bytes))?.named ?? []
                        names[hash] = links
                        for link in links where queued.insert(link).inserted { named.append(link) }
                    } else {
                        refused[hash] = "the replica does not hold it"
                    }
                }
            }
            // What this store lacks or holds damaged is fetched too: damage that missing or
            // corrupt objects hid would otherwise take a verification of the whole store per
            // level (a history of corrupt versions, one per version).
            pending = try await damagedAmong(named)
        }
        // Children first: a depth-first walk that gives each object after everything it names.
        var ordered = [(hash: Hash, bytes: [UInt8])]()
        ordered.reserveCapacity(fetched.count)
        var placed = Set<Hash>()
        for start in fetched.keys.sorted() where !placed.contains(start) {
            var stack = [(hash: start, next: 0)]
            placed.insert(start)
            while let top = stack.last {
                let links = names[top.hash] ?? []
                if top.next < links.count {
                    stack[stack.count - 1].next += 1
                    let link = links[top.next]
                    if fetched[link] != nil, placed.insert(link).inserted { stack.append((link, 0)) }
                } else {
                    stack.removeLast()
                    if let bytes = fetched[top.hash] { ordered.append((top.hash, bytes)) }
                }
            }
        }
        return (ordered, refused)
    }

    /// Those of `hashes` that this store lacks, or holds with bytes that do not match their hash,
    /// read in requests sized by the objects' sizes, as a verification reads blobs.
    private func damagedAmong(_ hashes: [Hash]) async throws -> [Hash] {
        guard !hashes.isEmpty else { return [] }
        var damaged = [Hash]()
        var requests = BlobRequestSizer()
        let sizes = try await backend.objectSizes(hashes)
        try await requests.inRequests(hashes, sizes: sizes, fetch: { request in
            do {
                return try await backend.get(request)
            } catch let error as ArborError where error.code == .corruptObject {
                // An adapter that refuses a batch for one damaged object; what it refuses is left out.
                return try await backend.getOneAtATime(request).objects
            }
        }) { request, objects in
            for hash in request where objects[hash].map({ Hash.of($0) != hash }) ?? true { damaged.append(hash) }
        }
        return damaged
    }
}

extension Array where Element == (hash: Hash, bytes: [UInt8]) {
    /// The objects in order, in consecutive batches within `limit`'s count and bytes (a batch
    /// ends with the object that reaches the bytes).
    func batches(within limit: WriteBatchLimit) -> [ArraySlice<Element>] {
        var result = [ArraySlice<Element>]()
        var start = startIndex, bytes = 0
        for index in indices {
            bytes += self[index].bytes.count
            if index - start + 1 >= limit.objects || bytes >= limit.bytes {
                result.append(self[start...index])
                (start, bytes) = (index + 1, 0)
            }
        }
        if start < endIndex { result.append(self[start...]) }
        return result
    }
}

extension ObjectLinks {
    /// Every object this one names: children, blobs, a commit's root and parents, a head set's heads.
    var named: [Hash] {
        var result = children.map(\.hash)
        result += blobs
        if let root { result.append(root) }
        result += parents
        result += heads
        return result
    }
}
