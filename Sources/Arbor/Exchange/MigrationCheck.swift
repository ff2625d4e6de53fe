import Foundation

/// The proof that a migration copied a store faithfully: same heads, every object intact and
/// from the source, and the index of every head complete.
struct MigrationCheck {
    let source: any Backend
    let target: any Backend
    let latestOnly: Bool

    func run(_ report: inout MigrationReport) async throws {
        let started = ContinuousClock.now
        let sourceState = try await Transfer.headState(of: source)
        let targetState = try await Transfer.headState(of: target)
        let targetVersions = try await versions(targetState.heads, in: target)
        var allowedNew = Set<Hash>()
        if latestOnly {
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

        // Every object the target holds matches its hash and comes from the source.
        var objects = 0
        var bytes = 0
        try await target.enumerateHashes(batchSize: Transfer.requestSize) { batch in
            let fetched = try await target.get(batch)
            for hash in batch {
                guard let object = fetched[hash] else { throw failure("object \(hash) is listed but cannot be read") }
                guard Hash.of(object) == hash else { throw failure("object \(hash) does not match its hash") }
                bytes += object.count
            }
            let inSource = try await source.contains(batch.filter { !allowedNew.contains($0) })
            if let foreign = batch.first(where: { !allowedNew.contains($0) && !inSource.contains($0) }) {
                throw failure("object \(foreign) is not in the source")
            }
            objects += batch.count
        }

        // The index of every head is complete.
        for version in targetVersions {
            var index = IndexCheck(backend: target)
            try await index.check(root: version.root)
        }
        report.verified = true
        report.objectsChecked = objects
        report.bytesChecked = bytes
        report.verifySeconds = started.secondsUntilNow
    }

    private func versions(_ ids: [Hash], in backend: any Backend) async throws -> [Version] {
        let objects = try await ObjectFetch.verified(ids, from: backend)
        return try ids.map { Version(id: $0, content: try Version.Content.decode(objects[$0] ?? [])) }
    }

    private func failure(_ message: String) -> ArborError {
        ArborError(.corruptObject, "verification failed: \(message)", backend: target.engineName, operation: "verify")
    }
}

/// Walks one index from its root and checks that every node and blob is present, matches its
/// hash, and is of the kind, level and record count its parent says.
///
/// - Complexity: O(*s*) reads for an index of *s* objects, in requests of up to a thousand
///   siblings; O(height × 1,024) objects in memory.
struct IndexCheck {
    let backend: any Backend
    private(set) var objects = 0

    init(backend: any Backend) { self.backend = backend }

    mutating func check(root: Hash) async throws {
        let bytes = try await ObjectFetch.verified([root], from: backend)[root] ?? []
        let links = try read(root, bytes, expecting: nil)
        guard links.kind == .leaf || links.kind == .branch else {
            throw ArborError(.corruptObject, "object \(root) is a \(links.kind.name), not an index node", backend: backend.engineName, operation: "verify")
        }
        try await check([(root, links)])
    }

    private func read(_ hash: Hash, _ bytes: [UInt8], expecting kind: ObjectKind?) throws -> ObjectLinks {
        try ObjectLinks.read(hash, bytes, expecting: kind, in: backend, operation: "verify")
    }

    /// Checks sibling nodes of one level, and everything below them.
    private mutating func check(_ group: [(hash: Hash, links: ObjectLinks)]) async throws {
        objects += group.count
        let level = group[0].links.kind == .leaf ? 0 : group[0].links.level
        if level == 0 {
            let blobs = group.flatMap(\.links.blobs)
            let fetched = try await ObjectFetch.verified(blobs, from: backend)
            for blob in blobs { _ = try read(blob, fetched[blob] ?? [], expecting: .blob) }
            objects += blobs.count
            return
        }
        let children = group.flatMap { node in node.links.children.map { (parent: node.hash, child: $0) } }
        for chunk in children.chunks(of: Transfer.groupSize) {
            let fetched = try await ObjectFetch.verified(chunk.map(\.child.hash), from: backend)
            let childGroup = try chunk.map { entry -> (hash: Hash, links: ObjectLinks) in
                let links = try read(entry.child.hash, fetched[entry.child.hash] ?? [], expecting: level == 1 ? .leaf : .branch)
                let count = links.kind == .leaf ? links.recordCount : links.children.reduce(0) { $0.addingSaturated($1.count) }
                guard links.kind == .leaf || links.level == level - 1, count == entry.child.count else {
                    throw ArborError(.corruptObject, "index node \(entry.child.hash) does not fit below \(entry.parent) (level or record count)", backend: backend.engineName, operation: "verify")
                }
                return (entry.child.hash, links)
            }
            try await check(childGroup)
        }
    }
}
