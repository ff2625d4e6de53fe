extension Store {
    /// Commits `changes` as one new version and makes it a head.
    ///
    /// The version builds on `parents` (by default the newest head, or nothing in an empty store).
    /// Objects are written children first and the heads ref last, by compare-and-swap: a crash
    /// leaves the store as it was, and a concurrent commit on the same parent leaves two heads.
    ///
    /// - Complexity: O(k log n) index nodes read and written for `k` changed records in a store
    ///   of `n` records, plus the records owned by saved or deleted values.
    @discardableResult
    public func commit(_ changes: ChangeSet, message: String = "", parents explicitParents: [Hash]? = nil) async throws -> Version {
        let parents: [Version]
        if let explicitParents {
            parents = try await versions(explicitParents)
        } else {
            parents = try await head().map { [$0] } ?? []
        }
        let baseRoot = parents.first?.root ?? Store.emptyRoot.hash
        let source = makeSource()
        let resolved = try await resolve(changes, base: baseRoot, source: source)

        var blobs = [(hash: Hash, bytes: [UInt8])]()
        var edits = [IndexEdit]()
        edits.reserveCapacity(resolved.count)
        for (key, record) in resolved {
            guard let record else {
                edits.append(IndexEdit(key: key.indexBytes, payload: nil))
                continue
            }
            let (payload, blob) = ProllyTree.payload(forRecord: RecordCoding.encode(record.properties))
            if let blob { blobs.append(blob) }
            edits.append(IndexEdit(key: key.indexBytes, payload: payload))
        }
        edits.sort { compareKeys($0.key, $1.key) < 0 }

        let newRoot = try await ProllyTree.apply(edits, to: baseRoot, source: source)
        let recordCount = try await source.node(newRoot).recordCount
        var objects = blobs + source.newObjects(reachableFrom: newRoot)
        if newRoot == Store.emptyRoot.hash { objects.append(Store.emptyRoot) }

        let content = Version.Content(
            root: newRoot, parents: parents.map(\.id), time: nextTime(after: parents.map(\.time)),
            replica: configuration.replica, message: message, recordCount: recordCount)
        let bytes = content.encoded()
        let id = Hash.of(bytes)
        objects.append((id, bytes))
        try await backend.put(objects)
        try await updateHeads(removing: Set(parents.map(\.id)), adding: id)
        return Version(id: id, content: content)
    }

    /// Commits a single value tree.
    @discardableResult
    public func save<Value: Storable>(_ value: Value, message: String = "") async throws -> Version {
        var changes = ChangeSet()
        try changes.save(value)
        return try await commit(changes, message: message)
    }

    /// The final state of every key the change set touches (`nil`: deleted), with ownership
    /// applied: children a saved value no longer holds, and everything a deleted value owned,
    /// are deleted too.
    private func resolve(_ changes: ChangeSet, base: Hash, source: NodeSource) async throws -> [RecordKey: Record?] {
        // What every touched key owned before the commit, found in one batched walk: a key's
        // earlier change in this set replaces the base version (handled in order below).
        var roots = [RecordKey]()
        for change in changes.changes {
            switch change {
            case .save(let records): roots.append(records[0].key); roots += records.flatMap(\.childKeys)
            case .delete(let key): roots.append(key)
            }
        }
        let ownedAtBase = try await descendants(of: roots, base: base, source: source)

        var result = [RecordKey: Record?]()
        /// What `key` owns now: through this change set where it changed here, else at the base.
        func owned(by key: RecordKey) -> [RecordKey] {
            guard let changed = result[key] else { return ownedAtBase[key] ?? [] }
            var found = [RecordKey]()
            var seen: Set<RecordKey> = [key]
            var frontier = changed?.childKeys ?? []
            while let next = frontier.popLast() {
                guard seen.insert(next).inserted else { continue }
                found.append(next)
                if let record = result[next] {
                    frontier += record?.childKeys ?? []
                } else {
                    for owned in ownedAtBase[next] ?? [] where seen.insert(owned).inserted { found.append(owned) }
                }
            }
            return found
        }
        for change in changes.changes {
            switch change {
            case .save(let records):
                let kept = Set(records.map(\.key))
                for key in owned(by: records[0].key) where !kept.contains(key) { result[key] = .some(nil) }
                for record in records { result[record.key] = record }
            case .delete(let key):
                for key in owned(by: key) { result[key] = .some(nil) }
                result[key] = .some(nil)
            }
        }
        // Every child a saved record names must exist once the commit is applied.
        var missing = Set<RecordKey>()
        for case let (key, record?) in result {
            for child in record.childKeys where result[child] == nil {
                missing.insert(child)
                _ = key
            }
            for child in record.childKeys {
                if case .some(.none) = result[child] {
                    throw ArborError(.invalidInput, "\(record.key) names child \(child), which this commit deletes")
                }
            }
        }
        if !missing.isEmpty {
            let found = try await records(Array(missing), root: base, source: source)
            if let absent = missing.sorted().first(where: { found[$0] == nil }) {
                throw ArborError(.invalidInput, "a saved record names child \(absent), which does not exist")
            }
        }
        return result
    }

    /// For each of `roots`, the keys it owns directly or indirectly at `base`, loaded one
    /// ownership level per batch for all roots together.
    private func descendants(of roots: [RecordKey], base: Hash, source: NodeSource) async throws -> [RecordKey: [RecordKey]] {
        var result = [RecordKey: [RecordKey]]()
        var seen = [RecordKey: Set<RecordKey>]()
        var frontier = Set(roots).map { (root: $0, key: $0) }
        while !frontier.isEmpty {
            let found = try await records(Array(Set(frontier.map(\.key))), root: base, source: source)
            var next = [(root: RecordKey, key: RecordKey)]()
            for (root, key) in frontier {
                for child in found[key]?.childKeys ?? [] where seen[root, default: [root]].insert(child).inserted {
                    result[root, default: []].append(child)
                    next.append((root, child))
                }
            }
            frontier = next
        }
        return result
    }
}
