extension Transfer {
    /// The head set `backend`'s `heads` ref names: the ref's value and the heads, or `nil` and
    /// none for a store without versions. `refs`, when given, are the refs just read.
    ///
    /// A head set that is missing because the ref moved on meanwhile (a collector removes
    /// superseded head sets) is not an error: the ref is read again.
    static func headState(of backend: any Backend, refs: [String: Hash]? = nil) async throws -> (ref: Hash?, heads: [Hash]) {
        var known = refs
        var attempt = 0
        while true {
            attempt += 1
            let current: [String: Hash]
            if let known { current = known } else { current = try await backend.refs() }
            known = nil
            guard let ref = current[RefName.heads] else { return (nil, []) }
            let bytes: [UInt8]
            do {
                bytes = try await ObjectFetch.verified([ref], from: backend)[ref] ?? []
            } catch let error as ArborError where error.code == .missingObject && attempt <= 100 {
                if try await backend.ref(RefName.heads) != ref { continue }
                throw error
            }
            do {
                let links = try ObjectLinks(bytes)
                guard links.kind == .headSet else { throw ArborError(.corruptObject, "it is a \(links.kind.name)") }
                return (ref, links.heads)
            } catch let error as ArborError {
                throw ArborError(error.code, "the head set \(ref) cannot be read: \(error.message)", backend: backend.engineName, operation: "heads")
            }
        }
    }

    /// Makes the target's heads the union of its heads and `incoming`, less every version that
    /// another of them descends from; by compare-and-swap, retried so that heads committed
    /// concurrently stay.
    ///
    /// `copied` are incoming heads the target lacked before this transfer: nothing the target
    /// had descends from them. `boundary` are versions the target had where the copied history
    /// met it: they and all their ancestors are no longer heads. `missing` are all the versions
    /// copied: but for the copied heads, ancestors of one, so never heads afterwards (a
    /// concurrent writer may have landed some as heads, and a damaged target may name one it
    /// lacked). `start` is the target's heads ref and heads when the transfer began: once the ref
    /// moved, a concurrent writer may also have built on a copied head (only a head that came
    /// since the start can: the target lacked the copied versions then), and that is checked.
    ///
    /// - Complexity: none when the copied history builds only on the target's heads and brings
    ///   no other version it had (an exchange from a replica ahead), however old its heads;
    ///   otherwise O(v) commit reads for the `v` versions of the target newer than the oldest
    ///   head involved. Once the heads moved, also the versions of heads that came since, back to
    ///   the oldest copied head.
    func adoptHeads(
        _ incoming: [Hash], copied: Set<Hash>, missing: Set<Hash>, boundary: Set<Hash>, start: (ref: Hash?, heads: Set<Hash>)
    ) async throws -> [Hash] {
        var contention = RefContention()
        // Commits are immutable: what one attempt loaded serves the next (under contention an
        // attempt is often retried, and the walk is most of its cost).
        var commits = [Hash: ObjectLinks]()
        var reader = HistoryReader(target)
        while true {
            let (ref, current) = try await Transfer.headState(of: target)
            let candidates = Set(current).union(incoming).subtracting(copied)
            // Once the heads moved, a concurrent writer (another exchange) may have landed part
            // of the copied history as heads, or built on a copied head.
            let raced = ref != start.ref && !copied.isEmpty
            let ancestors: Set<Hash>
            if ref == start.ref && boundary.isSubset(of: current) && candidates.isSubset(of: current) {
                // The copied history met the target only at its heads, and brought no head the
                // target had but as a head (nor had it landed objects without their heads):
                // no version it holds builds on a head, so a head is an ancestor of what came
                // only if that history built on it. No walk: a head left behind long ago (a
                // branch nobody builds on) would otherwise have every exchange walk back to it.
                ancestors = Set(current).intersection(boundary)
            } else {
                ancestors = try await Transfer.ancestors(among: candidates, of: candidates, walkingAlso: boundary, reader: &reader, commits: &commits)
            }
            // A copied version that is not an incoming head is an ancestor of one, whoever made
            // it a head: a concurrent writer, or a damaged target whose heads named a version
            // it lacked (a collection that removed it under a slow writer). The walk above
            // cannot see that: it starts from candidates, and the copied heads are none.
            var heads = candidates.subtracting(ancestors).subtracting(missing)
            var added = copied
            if raced {
                let arrived = heads.subtracting(start.heads)
                added.subtract(try await Transfer.ancestors(among: added, of: arrived, reader: &reader, commits: &commits))
            }
            heads.formUnion(added)
            if heads == Set(current) { return current.sorted() }
            let bytes = try HeadSet.encode(heads)
            let hash = Hash.of(bytes)
            try await target.put([(hash, bytes)])
            // Before every swap (contention can retry for long): a collection may have removed
            // what the copy found present or wrote, and the heads must not name it. Run again,
            // the exchange copies what is gone.
            if let claim, let lapse = claim.lapse {
                throw ArborError(
                    lapse.code, "the exchange could not claim the target, or renew its claim, in time\(lapse.cause.map { " (\($0.message))" } ?? ""): the heads were not moved; run it again",
                    backend: target.engineName, operation: "exchange", underlying: lapse.cause)
            }
            if try await target.compareAndSwap(ref: RefName.heads, expected: ref, new: hash) { return heads.sorted() }
            await contention.backOff()
        }
    }

    /// The members of `candidates` that are ancestors of a version in `descendants` or in
    /// `boundary` (or are themselves in `boundary`), all in `reader`'s backend.
    ///
    /// Walks back from the parents of `descendants` and from `boundary`, but never below the
    /// oldest candidate: an ancestor is always older than its descendants.
    ///
    /// `commits` holds the links of commits loaded before, and receives those loaded now.
    static func ancestors(
        among candidates: Set<Hash>, of descendants: Set<Hash>, walkingAlso boundary: Set<Hash> = [],
        reader: inout HistoryReader, commits: inout [Hash: ObjectLinks]
    ) async throws -> Set<Hash> {
        guard !candidates.isEmpty, !descendants.isEmpty || !boundary.isEmpty,
              candidates.count > 1 || !boundary.isEmpty || !descendants.subtracting(candidates).isEmpty else { return [] }
        let backend = reader.backend
        func load(_ hashes: some Sequence<Hash>) async throws {
            let wanted = hashes.filter { commits[$0] == nil }
            for chunk in wanted.chunks(of: Transfer.requestSize) {
                let objects = try await reader.objects(chunk)
                for hash in chunk {
                    commits[hash] = try ObjectLinks.read(hash, objects[hash] ?? [], expecting: .commit, in: backend, operation: "heads")
                }
            }
        }
        try await load(candidates.union(descendants))
        let oldest = candidates.compactMap { commits[$0]?.time }.min()!
        var ancestors = Set<Hash>()
        var visited = Set<Hash>()
        var frontier = boundary.union(descendants.flatMap { commits[$0]?.parents ?? [] })
        while !frontier.isEmpty {
            try await load(frontier)
            var next = Set<Hash>()
            for hash in frontier where visited.insert(hash).inserted {
                guard let links = commits[hash], links.time >= oldest else { continue }
                if candidates.contains(hash) { ancestors.insert(hash) }
                next.formUnion(links.parents)
            }
            frontier = next.subtracting(visited)
        }
        return ancestors
    }
}
