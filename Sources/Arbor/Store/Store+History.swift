extension Store {
    /// The versions reachable from `heads` (default: the store's heads), newest first, each
    /// after every version that builds on it.
    ///
    /// - Complexity: O(v) version reads for `v` versions listed; parents are fetched in batches.
    public func log(from heads: [Hash]? = nil, limit: Int = .max) async throws -> [Version] {
        var result = [Version]()
        try await log(from: heads, limit: limit, batchSize: .max) { result = $0 }
        return result
    }

    /// The versions ``log(from:limit:)`` lists, handed to `body` in that order, in batches of 1
    /// to `batchSize`, as the history is walked: a history of millions of versions is shown or
    /// processed without holding it whole.
    ///
    /// - Complexity: O(v) version reads for `v` versions listed; parents are fetched in batches.
    ///   Memory for one batch, the versions waiting their turn (about one per branch being
    ///   walked) and the ids of those seen.
    public func log(
        from heads: [Hash]? = nil, limit: Int = .max, batchSize: Int, _ body: ([Version]) async throws -> Void
    ) async throws {
        guard batchSize > 0 else { throw ArborError(.invalidInput, "a log's batch size must be at least 1, not \(batchSize)") }
        let start: [Version]
        if let heads {
            // Each once, however often given.
            var given = Set<Hash>()
            start = try await namedVersions(heads.filter { given.insert($0).inserted })
        } else {
            start = try await self.heads()
        }
        var pending = NewestFirstQueue()
        for version in start { pending.push(version) }
        var seen = Set(start.map(\.id))
        var batch = [Version]()
        var listed = 0
        var reader = HistoryReader(backend)
        while listed < limit, let next = pending.pop() {
            batch.append(next)
            listed += 1
            if batch.count == batchSize {
                try await body(batch)
                batch.removeAll(keepingCapacity: true)
            }
            // The last version listed needs no parents read.
            let unseen = listed < limit ? next.parents.filter { seen.insert($0).inserted } : []
            if !unseen.isEmpty {
                for parent in try await versions(unseen, reader: &reader) { pending.push(parent) }
            }
        }
        if !batch.isEmpty { try await body(batch) }
    }

    /// The versions in which the record `key` changed (was added, modified or removed),
    /// newest first, at most `limit` of them. A merge is listed only if the record differs from
    /// every one of its parents.
    ///
    /// - Complexity: O(v log n) node reads for the `v` versions of history walked, in
    ///   O(v / 1,024 × log n) batches (round trips on remote engines): the whole history, or with
    ///   `limit`, until that many changes are found. Memory for the changes found and the
    ///   versions ``log(from:limit:batchSize:_:)`` holds.
    public func history(of key: RecordKey, from heads: [Hash]? = nil, limit: Int = .max) async throws -> [Version] {
        guard limit > 0 else { return [] }
        struct Enough: Error {}
        let source = makeSource()
        let keyBytes = key.indexBytes
        var rootOf = [Hash: Hash]()
        var payloadAtRoot = [Hash: IndexPayload?]()
        var result = [Version]()
        do {
            try await log(from: heads, batchSize: 1_024) { chunk in
                for version in chunk { rootOf[version.id] = version.root }
                // Parents listed in a later batch are read here (once), not awaited.
                let outside = Set(chunk.flatMap(\.parents)).filter { rootOf[$0] == nil }
                for version in try await self.versions(Array(outside)) { rootOf[version.id] = version.root }
                // The trees of these versions and of their parents, looked up together.
                let roots = chunk.flatMap { [$0.root] + $0.parents.map { rootOf[$0]! } }.filter { payloadAtRoot[$0] == nil }
                payloadAtRoot.merge(try await ProllyTree.lookup(keyBytes, inEach: roots, source: source)) { kept, _ in kept }
                for version in chunk {
                    let current = payloadAtRoot[version.root]!
                    if changedFromParents(current, version.parents.lazy.map { payloadAtRoot[rootOf[$0]!]! }) { result.append(version) }
                }
                if result.count >= limit { throw Enough() }
                // A version comes after every version that builds on it: once listed, its root
                // and payload are needed no more (unless a version still to come shares the
                // root), so a walk of millions of versions holds only those it has yet to list.
                for version in chunk { rootOf[version.id] = nil }
                let stillNeeded = Set(rootOf.values)
                for version in chunk where !stillNeeded.contains(version.root) { payloadAtRoot[version.root] = nil }
            }
        } catch is Enough {}
        return Array(result.prefix(limit))
    }

    /// How the records differ from version `old` (`nil`: the empty store) to version `new`,
    /// down to the property, in key order.
    ///
    /// - Complexity: O(k log n) node reads for `k` changed records; none when the roots match.
    public func diff(from old: Hash?, to new: Hash) async throws -> [RecordChange] {
        var changes = [RecordChange]()
        try await diff(from: old, to: new, batchSize: 4_096) { changes.append(contentsOf: $0) }
        return changes
    }

    /// How the records differ from version `old` (`nil`: the empty store) to version `new`,
    /// handed to `body` in key order, in batches of 1 to `batchSize` changes, as they are
    /// found: a diff of millions of records is shown or processed without holding it whole.
    /// Versions with the same records call `body` never.
    ///
    /// - Complexity: O(k log n) node reads for `k` changed records; none when the roots match.
    ///   Memory for one batch and a few nodes per level of the index, whatever `k`.
    public func diff(
        from old: Hash?, to new: Hash, batchSize: Int, _ body: ([RecordChange]) async throws -> Void
    ) async throws {
        guard batchSize > 0 else { throw ArborError(.invalidInput, "a diff's batch size must be at least 1, not \(batchSize)") }
        var oldRoot = Store.emptyRoot.hash
        if let old { oldRoot = try await version(old).root }
        let newRoot = try await version(new).root
        try await ProllyTree.diff(oldRoot, newRoot, source: makeSource(), batchSize: batchSize, remember: false) { differences in
            let before = try await decode(differences.compactMap { difference in difference.old.map { (difference.key, $0) } })
            let after = try await decode(differences.compactMap { difference in difference.new.map { (difference.key, $0) } })
            var beforeByKey = [RecordKey: Record](before.map { ($0.key, $0) }, uniquingKeysWith: { $1 })
            var afterByKey = [RecordKey: Record](after.map { ($0.key, $0) }, uniquingKeysWith: { $1 })
            var changes = [RecordChange]()
            changes.reserveCapacity(differences.count)
            for difference in differences {
                let key = try RecordKey(indexBytes: difference.key[...])
                changes.append(RecordChange(key: key, old: beforeByKey.removeValue(forKey: key), new: afterByKey.removeValue(forKey: key)))
            }
            try await body(changes)
        }
    }

    /// What version `id` changed relative to its first parent (or to the empty store).
    public func changes(in id: Hash) async throws -> [RecordChange] {
        try await diff(from: try await version(id).parents.first, to: id)
    }
}

/// Whether a version changed what it holds as `value` (`nil`: absent), its parents holding
/// `parents`: it differs from every one of them, or, without parents, it is there at all. A
/// merge that took the value from one parent did not change it.
func changedFromParents<Value: Equatable>(_ value: Value?, _ parents: some Collection<Value?>) -> Bool {
    parents.isEmpty ? value != nil : parents.allSatisfy { $0 != value }
}
