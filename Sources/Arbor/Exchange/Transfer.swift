import Foundation

/// Copies versions and the objects they need from one backend to another: the engine under
/// exchange, sync, clone and migration.
///
/// Whatever it writes goes children first (see ``OrderedObjectWriter``), so the target never
/// holds an object without the objects it names. That invariant is what lets a transfer skip
/// every subtree the target already has, and lets a transfer that was killed be run again:
/// it finds what landed, copies only the rest, and sets the refs last.
final class Transfer {
    let source: any Backend
    let target: any Backend
    let writer: OrderedObjectWriter
    private let progressHandler: TransferProgressHandler?
    private let started = ContinuousClock.now
    private var lastReport = ContinuousClock.now

    /// Requests that asked the target what it holds.
    private(set) var rounds = 0
    var versionsDone = 0
    var versionsTotal = 0
    private var recordsCovered: UInt64 = 0
    private var recordsInVersion: UInt64 = 0

    /// At most this many hashes go into one request.
    static let requestSize = 1_000

    init(from source: any Backend, to target: any Backend, progress: TransferProgressHandler?, batchSize: Int = 2_000) {
        self.source = source
        self.target = target
        self.writer = OrderedObjectWriter(backend: target, maxObjects: batchSize)
        self.progressHandler = progress
    }

    var seconds: Double {
        let elapsed = ContinuousClock.now - started
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    // MARK: Asking and fetching

    /// The subset of `hashes` the target holds or is about to hold.
    func targetHas(_ hashes: [Hash]) async throws -> Set<Hash> {
        var present = Set(hashes.filter(writer.isQueued))
        let ask = hashes.filter { !present.contains($0) }
        var start = 0
        while start < ask.count {
            let chunk = Array(ask[start..<min(start + Transfer.requestSize, ask.count)])
            rounds += 1
            present.formUnion(try await target.contains(chunk))
            start += chunk.count
        }
        return present
    }

    /// Objects of the source, checked against their hashes.
    func fetch(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        var result = [Hash: [UInt8]](minimumCapacity: hashes.count)
        var start = 0
        while start < hashes.count {
            let chunk = Array(hashes[start..<min(start + Transfer.requestSize, hashes.count)])
            result.merge(try await ObjectFetch.verified(chunk, from: source)) { first, _ in first }
            start += chunk.count
        }
        return result
    }

    // MARK: History

    /// The versions reachable from `heads` that the target lacks, parents before children, and
    /// the versions the target has where that history meets it.
    func missingVersions(from heads: [Hash]) async throws -> (versions: [Hash], boundary: Set<Hash>) {
        var times = [Hash: HybridTime]()
        var parentsOf = [Hash: [Hash]]()
        var boundary = Set<Hash>()
        let present = try await targetHas(heads)
        var frontier = heads.filter { !present.contains($0) }
        while !frontier.isEmpty {
            let objects = try await fetch(frontier)
            var parents = Set<Hash>()
            for hash in frontier {
                let links = try links(of: hash, objects[hash] ?? [], expecting: .commit)
                times[hash] = links.time
                parentsOf[hash] = links.parents
                parents.formUnion(links.parents)
            }
            let unseen = parents.filter { times[$0] == nil }
            let had = try await targetHas(Array(unseen))
            boundary.formUnion(had)
            frontier = unseen.filter { !had.contains($0) }.sorted()
        }
        // A commit's time is later than its parents' (hybrid clock), so time order is a
        // parents-first order; check it rather than trust it, since it keeps the target whole.
        for (child, parents) in parentsOf {
            for parent in parents where times[parent].map({ !($0 < times[child]!) }) ?? false {
                throw ArborError(.corruptObject, "commit \(child) is not later than its parent \(parent)", backend: source.engineName, operation: "exchange")
            }
        }
        let order = times.keys.sorted { (times[$0]!, $0) < (times[$1]!, $1) }
        return (order, boundary)
    }

    /// Copies the versions `ids` (parents before children), each with the index it needs.
    func copyVersions(_ ids: [Hash]) async throws {
        versionsTotal = ids.count
        var start = 0
        while start < ids.count {
            let chunk = Array(ids[start..<min(start + 256, ids.count)])
            let commits = try await fetch(chunk)
            for id in chunk {
                let bytes = commits[id] ?? []
                let links = try links(of: id, bytes, expecting: .commit)
                let content = try Version.Content.decode(bytes)
                try await copyTree(root: links.root ?? Store.emptyRoot.hash, records: content.recordCount)
                try await writer.add(id, bytes)
                versionsDone += 1
                recordsCovered = 0
                reportProgress(force: false)
            }
            start += chunk.count
        }
    }

    // MARK: Index trees

    /// At most this many sibling nodes are fetched and walked together.
    static let groupSize = 1_024

    /// A fetched object and its links.
    typealias Fetched = (hash: Hash, bytes: [UInt8], links: ObjectLinks)

    /// Copies the index below `root` that the target lacks.
    func copyTree(root: Hash, records: UInt64) async throws {
        recordsInVersion = max(records, 1)
        recordsCovered = 0
        guard try await targetHas([root]).isEmpty else { return }
        let bytes = try await fetch([root])[root] ?? []
        let links = try links(of: root, bytes, expecting: nil)
        guard links.kind == .leaf || links.kind == .branch else {
            throw ArborError(.corruptObject, "object \(root) is a \(links.kind.name), not an index root", backend: source.engineName, operation: "exchange")
        }
        try await copyGroup([(root, bytes, links)])
    }

    /// Copies sibling nodes of one level that the target lacks: first, level by level, what
    /// they name that the target lacks, then the nodes themselves.
    ///
    /// Walking a group of siblings at a time, rather than one node, asks the target and the
    /// source once per group instead of once per node: a few requests per thousand nodes.
    private func copyGroup(_ group: [Fetched]) async throws {
        let level = group[0].links.kind == .leaf ? 0 : group[0].links.level
        if level == 0 {
            let blobs = group.flatMap(\.links.blobs)
            if !blobs.isEmpty {
                let have = try await targetHas(blobs)
                var seen = Set<Hash>()
                let wanted = blobs.filter { !have.contains($0) && seen.insert($0).inserted }
                let fetched = try await fetch(wanted)
                for blob in wanted {
                    let bytes = fetched[blob] ?? []
                    _ = try links(of: blob, bytes, expecting: .blob)
                    try await writer.add(blob, bytes)
                }
            }
            recordsCovered += group.reduce(0) { $0 + $1.links.recordCount }
        } else {
            let children = group.flatMap(\.links.children)
            let have = try await targetHas(children.map(\.hash))
            var seen = Set<Hash>()
            var wanted = [Hash]()
            for child in children {
                if have.contains(child.hash) {
                    recordsCovered += child.count
                } else if seen.insert(child.hash).inserted {
                    wanted.append(child.hash)
                }
            }
            var start = 0
            while start < wanted.count {
                let chunk = Array(wanted[start..<min(start + Transfer.groupSize, wanted.count)])
                let fetched = try await fetch(chunk)
                let childGroup = try chunk.map { hash -> Fetched in
                    let bytes = fetched[hash] ?? []
                    let childLinks = try links(of: hash, bytes, expecting: level == 1 ? .leaf : .branch)
                    if childLinks.kind == .branch && childLinks.level != level - 1 {
                        throw ArborError(.corruptObject, "index node \(hash) is at level \(childLinks.level) below a node at level \(level)", backend: source.engineName, operation: "exchange")
                    }
                    return (hash, bytes, childLinks)
                }
                try await copyGroup(childGroup)
                start += chunk.count
            }
        }
        for node in group { try await writer.add(node.hash, node.bytes) }
        reportProgress(force: false)
    }

    /// The links of an object fetched from the source, checked to be of the expected kind.
    func links(of hash: Hash, _ bytes: [UInt8], expecting kind: ObjectKind?) throws -> ObjectLinks {
        try ObjectLinks.read(hash, bytes, expecting: kind, in: source, operation: "exchange")
    }

    // MARK: Progress

    func reportProgress(force: Bool) {
        guard let progressHandler else { return }
        let now = ContinuousClock.now
        guard force || now - lastReport >= .milliseconds(100) else { return }
        lastReport = now
        let partial = versionsTotal == 0 ? 0 : Double(recordsCovered) / Double(max(recordsInVersion, 1))
        let fraction = versionsTotal == 0 ? 1 : min(1, (Double(versionsDone) + min(partial, 1)) / Double(versionsTotal))
        progressHandler(TransferProgress(
            versionsDone: versionsDone, versionsTotal: versionsTotal, objects: writer.objectsWritten,
            bytes: writer.bytesWritten, seconds: seconds, fractionDone: fraction))
    }
}
