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
    /// Index nodes the target was asked to keep as deltas (``restateReplacedNodes(of:roots:)``).
    var restatements = 0
    var versionsDone = 0
    var versionsTotal = 0
    /// Records of the index walks in progress, and how many of them are copied or found present:
    /// the fraction of the `versionsInStep` versions being copied that is done.
    private var recordsCovered: UInt64 = 0
    private var recordsInStep: UInt64 = 0
    private var versionsInStep = 0

    /// At most this many hashes go into one request.
    static let requestSize = 1_000
    /// How many large records to read at once, from the sizes read so far.
    private var blobRequests = BlobRequestSizer()

    /// A transfer that writes batches of `batchSize` objects, or as many as the target prefers
    /// (``Backend/writeBatchLimit``) when `nil`, within the target's limit in bytes.
    init(from source: any Backend, to target: any Backend, progress: TransferProgressHandler?, batchSize: Int? = nil) {
        self.source = source
        self.target = target
        let limit = target.writeBatchLimit
        self.writer = OrderedObjectWriter(backend: target, maxObjects: max(1, batchSize ?? limit.objects), maxBytes: max(1, limit.bytes))
        self.progressHandler = progress
    }

    var seconds: Double {
        started.secondsUntilNow
    }

    // MARK: Asking and fetching

    /// The source's refs (claims aside) that ``exchange(claiming:alsoCopying:)`` reproduced in
    /// the target, as it read them.
    var sourceRefsCopied: [String: Hash] = [:]
    /// The source's heads whose state ``copyLatest()`` copied, as it read them.
    var sourceHeadsCopied: [Hash] = []
    /// Whether the target held no objects when the transfer began (a migration into a new
    /// store). Then what it holds is what this transfer wrote: the target is asked only about
    /// objects the transfer may have written (``LandedObjects``), and the walk against each
    /// version's base skips most of those without asking.
    var targetStartedEmpty = false {
        didSet { writer.landed = targetStartedEmpty ? LandedObjects() : nil }
    }

    /// The claim on the target while an exchange copies (``TransferReservation``).
    var claim: KeptClaim?

    /// The subset of `hashes` the target holds or is about to hold.
    func targetHas(_ hashes: [Hash]) async throws -> Set<Hash> {
        var present = Set(hashes.filter(writer.isQueued))
        var ask = hashes.filter { !present.contains($0) }
        // The writer keeps the filter exactly when the target started empty.
        if let landed = writer.landed { ask.removeAll { !landed.mayContain($0) } }
        for chunk in ask.chunks(of: Transfer.requestSize) {
            // Every request is a safe point to stop at: the target's refs change last.
            try Task.checkCancellation()
            rounds += 1
            present.formUnion(try await target.contains(chunk))
        }
        return present
    }

    /// Objects of the source, checked against their hashes.
    func fetch(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try await fetch(hashes, from: source)
    }

    /// `hashes` from `backend`, checked against their hashes, in requests of ``requestSize``,
    /// each counted in ``rounds`` with `countingRounds`.
    private func fetch(_ hashes: [Hash], from backend: any Backend, countingRounds: Bool = false) async throws -> [Hash: [UInt8]] {
        var result = [Hash: [UInt8]](minimumCapacity: hashes.count)
        for chunk in hashes.chunks(of: Transfer.requestSize) {
            try Task.checkCancellation()
            if countingRounds { rounds += 1 }
            result.merge(try await ObjectFetch.verified(chunk, from: backend)) { first, _ in first }
        }
        return result
    }

    /// Objects the target holds (the versions where the source's history meets it), from the
    /// target, checked against their hashes: the source's copy of one may be damaged (a
    /// version older than what the exchange brings, which it need not read but for its time
    /// and root), and the target's is the one its heads build on.
    func fetchHeld(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try await fetch(hashes, from: target, countingRounds: true)
    }

    // MARK: History

    /// The versions reachable from `heads` that the target lacks, parents before children, and
    /// the versions the target has where that history meets it.
    ///
    /// The source's history is walked ahead of the target's answers: each request asks the
    /// target about every version walked since the last, and the walk goes twice as far before
    /// each next one. A target far behind costs O(log v) rounds for `v` missing versions, at most
    /// twice the source reads; a target one version behind, the two rounds it always cost.
    ///
    /// - Complexity: O(v) source commit reads, in O(log v) requests when the source implements
    ///   ``Backend/ancestry(of:limit:)``.
    func missingVersions(from heads: [Hash]) async throws -> (versions: [Hash], boundary: Set<Hash>) {
        var reader = HistoryReader(source)
        var times = [Hash: HybridTime]()
        var parentsOf = [Hash: [Hash]]()
        // What the target said of each version asked about: true when it has it.
        var held = [Hash: Bool]()
        let present = try await targetHas(heads)
        for head in heads { held[head] = present.contains(head) }
        var seen = Set(heads)
        var expand = heads.filter { !present.contains($0) }
        var askAfter = 1
        while !expand.isEmpty {
            // Walk on from the versions known to be missing, through versions not yet asked
            // about, until `askAfter` of those are collected. A version walked ahead of the
            // answers that cannot be read is not an error yet: the target may hold it.
            var unasked = [Hash]()
            var generation = expand
            var unread = [Hash]()
            var ahead = false
            while !generation.isEmpty, !ahead || unasked.count < askAfter {
                let objects = ahead ? try await reader.intactObjects(generation) : try await reader.objects(generation)
                var next = [Hash]()
                for hash in generation {
                    let links: ObjectLinks
                    do {
                        links = try self.links(of: hash, objects[hash] ?? [], expecting: .commit)
                    } catch _ where ahead {
                        unread.append(hash)
                        continue
                    }
                    times[hash] = links.time
                    parentsOf[hash] = links.parents
                    for parent in links.parents where seen.insert(parent).inserted {
                        unasked.append(parent)
                        next.append(parent)
                    }
                }
                generation = next
                ahead = true
            }
            let had = try await targetHas(unasked)
            for hash in unasked { held[hash] = had.contains(hash) }
            // The walk ran ahead through versions that turned out to be held (and so are all their
            // ancestors): forget those; go on from the missing ones it did not read.
            expand = (generation + unread).filter { held[$0] == false }
            askAfter = min(askAfter * 2, Transfer.requestSize)
        }
        for hash in Array(times.keys) where held[hash] != false {
            times[hash] = nil
            parentsOf[hash] = nil
        }
        var boundary = Set<Hash>()
        for parents in parentsOf.values { boundary.formUnion(parents.filter { held[$0] == true }) }
        // A commit's time is later than its parents' (hybrid clock), so time order is a
        // parents-first order; check it rather than trust it, since it keeps the target whole.
        // Against the parents the target holds too (one request): the heads of the target are
        // pruned by time, and a head older than its parent would hide that parent from it.
        var parentTimes = times
        if !boundary.isEmpty {
            let commits = try await fetchHeld(Array(boundary))
            for hash in boundary { parentTimes[hash] = try links(of: hash, commits[hash] ?? [], expecting: .commit).time }
        }
        for (child, parents) in parentsOf {
            for parent in parents where parentTimes[parent].map({ !($0 < times[child]!) }) ?? false {
                throw ArborError(.corruptObject, "commit \(child) is not later than its parent \(parent)", backend: source.engineName, operation: "exchange")
            }
        }
        let order = times.keys.sorted { (times[$0]!, $0) < (times[$1]!, $1) }
        return (order, boundary)
    }

    /// Copies the versions `ids` (parents before children), each with the index it needs.
    /// `present` are versions the target holds whole; each version's index is walked against the
    /// index of a parent the target holds (one of `present`, or copied before it), whose nodes
    /// need no asking.
    func copyVersions(_ ids: [Hash], present: Set<Hash>) async throws {
        versionsTotal = ids.count
        // The roots of versions known to be in the target; bounded, since it is only a shortcut.
        var roots = [Hash: Hash]()
        var copied = Set<Hash>()
        // A target that keeps deltas restates once a chunk's trees landed, so that the space
        // the replaced nodes free is used again by the next chunks (a file does not shrink, and
        // would otherwise grow to the whole history's size first): chunks then hold about
        // `restatingBytes` of objects, from 1 version up to the usual 256, by what the last one
        // wrote (starting at 4).
        let restating = target.acceptsRestatements
        var chunkSize = restating ? 4 : 256
        var next = 0
        while next < ids.count {
            let chunk = Array(ids[next..<min(next + chunkSize, ids.count)])
            next += chunk.count
            let bytesBefore = writer.bytesWritten
            // A chunk of versions at a time, with one request for each kind of object every
            // version needs first (its commit, its base's commit, its root and the base's root):
            // a long history of small versions costs a few requests per chunk, not per version.
            let commits = try await fetch(chunk)
            var versions = [(id: Hash, bytes: [UInt8], links: ObjectLinks, records: UInt64)]()
            for id in chunk {
                let bytes = commits[id] ?? []
                let links = try links(of: id, bytes, expecting: .commit)
                versions.append((id, bytes, links, try Version.Content.decode(bytes).recordCount))
                roots[id] = links.root
            }
            let inChunk = Set(chunk)
            func baseVersion(_ links: ObjectLinks) -> Hash? {
                links.parents.first { copied.contains($0) || present.contains($0) || inChunk.contains($0) }
            }
            let unknownBases = Set(versions.compactMap { baseVersion($0.links) }.filter { roots[$0] == nil })
            // Those the target held before the copy are read from it (``fetchHeld(_:)``).
            let heldBases = unknownBases.filter { present.contains($0) && !copied.contains($0) && !inChunk.contains($0) }
            let fetchedBases = try await fetch(Array(unknownBases.subtracting(heldBases))).merging(try await fetchHeld(Array(heldBases))) { $1 }
            for (hash, bytes) in fetchedBases {
                roots[hash] = try links(of: hash, bytes, expecting: .commit).root
            }
            let versionRoots = versions.compactMap(\.links.root)
            let rootsPresent = try await targetHas(versionRoots)
            var nodes = Set(versionRoots.filter { !rootsPresent.contains($0) })
            for version in versions where version.links.root.map({ !rootsPresent.contains($0) }) ?? false {
                if let base = baseVersion(version.links).flatMap({ roots[$0] }) { nodes.insert(base) }
            }
            let prefetched = try await fetch(Array(nodes))
            // The indexes of the whole chunk are walked together, a level at a time: a request
            // per level for all of them, not per level of each (see `copyWalks`).
            var walks = [Walk]()
            var rootsCopied = Set<Hash>()
            recordsCovered = 0
            recordsInStep = 0
            versionsInStep = versions.count
            for version in versions {
                let root = version.links.root ?? Store.emptyRoot.hash
                // Versions of one chunk often share a root (a merge that changed nothing else).
                guard !rootsPresent.contains(root), rootsCopied.insert(root).inserted else { continue }
                let base = baseVersion(version.links).flatMap { roots[$0] }
                if let walk = try await startWalk(root: root, records: version.records, base: base, prefetched: prefetched) { walks.append(walk) }
                recordsInStep = recordsInStep.addingSaturated(version.records)
            }
            try await checkRecordCounts(
                versions.map { ($0.id, $0.links.root ?? Store.emptyRoot.hash, $0.records) },
                counted: Dictionary(walks.map { ($0.group[0].hash, $0.group[0].links.recordCount) }) { first, _ in first })
            try await copyWalks(walks)
            if restating {
                try await writer.finish()
                try await restateReplacedNodes(of: versions.map(\.links), roots: &roots)
                let landed = writer.bytesWritten - bytesBefore
                if landed < Self.restatingBytes / 4 { chunkSize = min(chunkSize * 2, 256) }
                if landed > Self.restatingBytes * 2 { chunkSize = max(chunkSize / 2, 1) }
            }
            // After its restatements: a version the target holds is one a rerun skips.
            for version in versions {
                try await writer.add(version.id, version.bytes)
                copied.insert(version.id)
            }
            versionsDone += versions.count
            versionsInStep = 0
            reportProgress(force: false)
            if roots.count > 10_000 { roots = roots.filter { copied.contains($0.key) && inChunk.contains($0.key) } }
        }
    }

    /// About how many bytes of objects a transfer into a store that keeps deltas writes
    /// between two restatings (``copyVersions(_:present:)``).
    static let restatingBytes = 64 << 20

    /// Restates, in the target, the nodes that each of `versions` (their commits' links, parents
    /// first) replaced in its parents' trees, as a commit there would have
    /// (``ReplacedNodeRestater``): a store that keeps deltas keeps them however its versions
    /// arrived. Every tree involved must be in the target; `roots` gives the parents' roots, and
    /// gets those it lacked, read from the target. Adds to ``restatements``.
    ///
    /// Run before the versions' commits are written: a rerun of a transfer stopped meanwhile
    /// copies those versions again, finds their trees there, and restates them.
    ///
    /// - Complexity: a request for the parents' commits, and the restater's work per parent.
    func restateReplacedNodes(of versions: [ObjectLinks], roots: inout [Hash: Hash]) async throws {
        // Parents outside the chunk, whose roots are known, are in the target whole by now
        // (earlier chunks', or where the histories meet): read from it (``fetchHeld(_:)``),
        // as the source's copy of one may be damaged.
        let unknown = Set(versions.flatMap(\.parents)).filter { roots[$0] == nil }
        for (hash, bytes) in try await fetchHeld(Array(unknown)) {
            roots[hash] = try links(of: hash, bytes, expecting: .commit).root ?? Store.emptyRoot.hash
        }
        let restater = ReplacedNodeRestater(backend: target)
        for version in versions {
            restatements += try await restater.restate(treeOf: version.root ?? Store.emptyRoot.hash, parents: version.parents, roots: roots)
        }
    }

    // MARK: Index trees

    /// At most this many sibling nodes are fetched and walked together.
    static let groupSize = 1_024
    /// ``groupSize``, smaller in tests, to make walks split into pieces on small stores.
    var groupSize = Transfer.groupSize

    /// The nodes of the walks in progress and the nodes they are about to walk (those of every
    /// call of `copyWalks` on the stack), each `true` once added with its subtree. Walks at
    /// different levels (versions of one chunk whose indexes differ in height) can reach one
    /// node by two ways, and the way that comes second must not add it again: by then its batch
    /// may have landed and the writer no longer knows it. Bounded by the stack: per level, a
    /// group and the children it wants.
    private var groupsPending = [Hash: Bool]()

    /// A fetched object and its links.
    typealias Fetched = (hash: Hash, bytes: [UInt8], links: ObjectLinks)

    /// Copies the index below `root` that the target lacks. `base` is the root of an index the
    /// target holds whole (a parent's), or `nil`.
    ///
    /// Against a base, the walk goes level by level through the nodes that differ from it: a
    /// child that the base's replaced nodes also have is in the target already, so only the
    /// nodes of the change are asked about — O(k log n) for k changed records — rather than
    /// every sibling of every changed node.
    func copyTree(root: Hash, records: UInt64, base: Hash? = nil) async throws {
        recordsInStep = max(records, 1)
        recordsCovered = 0
        versionsInStep = 1
        defer { versionsInStep = 0 }
        if let walk = try await startWalk(root: root, records: records, base: base, prefetched: [:]) { try await copyWalks([walk]) }
    }

    /// Sibling nodes of one index at one level that the target lacks, and the nodes of the
    /// same level of an index the target holds (or that is copied before them) that they are
    /// walked against: what those name needs no asking.
    struct Walk {
        var group: [Fetched]
        var old: [Fetched]
        /// For nodes of `group` below a node copied with them: the key each one's first key must
        /// be past, the key its parent files its previous sibling under (or, for a first child,
        /// its parent's own such key), so that siblings do not overlap.
        var lowerKeys: [Hash: ArraySlice<UInt8>] = [:]
        var level: Int { group[0].links.kind == .leaf ? 0 : group[0].links.level }

        /// What the nodes of this walk's level name: blobs for leaves, children for branches.
        func names(_ nodes: [Fetched]) -> [Hash] {
            level == 0 ? nodes.flatMap(\.links.blobs) : nodes.flatMap { $0.links.children.map(\.hash) }
        }

        /// What the base's nodes name, each with how a base branch files it: its record count
        /// and its key's digest (`nil` when not read). A blob counts one record.
        func baseFiling() -> [Hash: (count: UInt64, key: Int?)] {
            var filing = [Hash: (count: UInt64, key: Int?)]()
            filing.reserveCapacity(old.reduce(0) { $0 + $1.links.children.count + $1.links.blobs.count })
            for node in old {
                for blob in node.links.blobs { filing[blob] = (1, nil) }
                let digests = node.links.childKeyDigests
                for (index, child) in node.links.children.enumerated() {
                    filing[child.hash] = (child.count, index < digests.count ? digests[index] : nil)
                }
            }
            return filing
        }
    }

    /// Throws unless each version says as many records as its index holds, as `verify` checks:
    /// the roots walked are `counted` (and checked by ``startWalk(root:records:base:prefetched:)``);
    /// the others, which the target holds or another version shares, are read from the source.
    func checkRecordCounts(_ versions: [(id: Hash, root: Hash, records: UInt64)], counted: [Hash: UInt64]) async throws {
        var counts = counted
        for (hash, bytes) in try await fetch(Array(Set(versions.map(\.root).filter { counts[$0] == nil }))) {
            // A root the target holds is not walked: it must at least be an index node (a
            // hostile version could name its parent's commit, or a blob, as its root).
            let links = try links(of: hash, bytes, expecting: nil)
            guard links.isIndexNode else {
                throw ArborError(.corruptObject, "object \(hash) is a \(links.kind.name), not an index root", backend: source.engineName, operation: "exchange")
            }
            counts[hash] = links.recordCount
        }
        for version in versions where counts[version.root].map({ $0 != version.records }) ?? false {
            throw ArborError(
                .corruptObject, "version \(version.id) says \(version.records) records; its index root \(version.root) holds \(counts[version.root] ?? 0)",
                backend: source.engineName, operation: "exchange")
        }
    }

    /// The walk that copies the index below `root` against the index below `base`, or `nil` when
    /// the target holds `root` or it is on its way. Throws if the root does not hold `records`.
    private func startWalk(root: Hash, records: UInt64, base: Hash?, prefetched: [Hash: [UInt8]]) async throws -> Walk? {
        guard !writer.isQueued(root) else { return nil }
        if prefetched[root] == nil {
            guard try await targetHas([root]).isEmpty else { return nil }
        }
        let wanted = (base.map { [root, $0] } ?? [root]).filter { prefetched[$0] == nil }
        let fetched = wanted.isEmpty ? prefetched : try await fetch(wanted).merging(prefetched) { fetched, _ in fetched }
        let links = try links(of: root, fetched[root] ?? [], expecting: nil, keys: true)
        guard links.isIndexNode else {
            throw ArborError(.corruptObject, "object \(root) is a \(links.kind.name), not an index root", backend: source.engineName, operation: "exchange")
        }
        guard links.recordCount == records else {
            throw ArborError(.corruptObject, "index root \(root) holds \(links.recordCount) records; its version says \(records)", backend: source.engineName, operation: "exchange")
        }
        var old = [Fetched]()
        if let base, base != root {
            let baseLinks = try self.links(of: base, fetched[base] ?? [], expecting: nil, keys: true)
            // Only a base of the same height lines up level by level.
            if baseLinks.kind == links.kind && baseLinks.level == links.level { old = [(base, [], baseLinks)] }
        }
        return Walk(group: [(root, fetched[root] ?? [], links)], old: old)
    }

    /// Copies what the walks' nodes name that the target lacks, level by level, then the nodes
    /// themselves: children before their parents, always.
    ///
    /// Several walks (the indexes of a chunk of versions) go together: each level costs one
    /// request to the target and one to the source for all of them, in groups of up to
    /// ``groupSize`` nodes. Groups keep the walks' order, so a walk against an index copied
    /// in the same step finds that index's nodes written before it names them.
    private func copyWalks(_ walks: [Walk]) async throws {
        guard !walks.isEmpty else { return }
        // What this call registers (not what a call below it on the stack did) it forgets on return.
        var registered = [Hash]()
        func register(_ hashes: some Sequence<Hash>) {
            for hash in hashes where groupsPending[hash] == nil {
                groupsPending[hash] = false
                registered.append(hash)
            }
        }
        defer { for hash in registered { groupsPending[hash] = nil } }
        for walk in walks { register(walk.group.lazy.map(\.hash)) }
        // What each walk's base nodes name, and how they file each child: a child the new nodes
        // name too is not asked for, and must be filed alike (one table for both).
        let known = walks.map { $0.baseFiling() }
        var asks = Set<Hash>()
        for (walk, known) in zip(walks, known) { asks.formUnion(walk.names(walk.group).filter { known[$0] == nil }) }
        let have = try await targetHas(Array(asks))
        var seen = Set<Hash>()
        var blobs = [Hash]()
        // Each walk's children to copy, in pieces of at most `groupSize`, each with the base's
        // nodes it replaces.
        var pieces = [(level: Int, wanted: [Hash], old: [Hash])]()
        // How the nodes to copy are filed by their parents: a node must hold that many records
        // and end on that key (as a digest), or lookups, which go down by the branches' keys and
        // counts, and diffs, which go along the leaves, would answer differently in the target.
        // Those checks wait for the nodes' bytes. A node the base holds too is not read: it must
        // be filed as the base files it. (A node the target held already is neither read nor
        // compared: `verify` checks every node.)
        var filedAs = [Hash: (parent: Hash, count: UInt64, key: Int?, level: Int, lower: ArraySlice<UInt8>?)]()
        for (walk, known) in zip(walks, known) {
            if walk.level == 0 {
                for blob in walk.names(walk.group) where known[blob] == nil && !have.contains(blob) && seen.insert(blob).inserted {
                    blobs.append(blob)
                }
                recordsCovered = walk.group.reduce(recordsCovered) { $0.addingSaturated($1.links.recordCount) }
                continue
            }
            let children = walk.group.flatMap(\.links.children)
            var wanted = [Hash]()
            for node in walk.group {
                for (index, child) in node.links.children.enumerated() {
                    let key = index < node.links.childKeyDigests.count ? node.links.childKeyDigests[index] : nil
                    let filed = known[child.hash]
                    if let filed, filed.count != child.count || (filed.key != nil && key != nil && filed.key != key) {
                        throw ArborError(
                            .corruptObject, "index node \(node.hash) files node \(child.hash) otherwise than the index it was changed from does (\(filed.count == child.count ? "under another key" : "with \(child.count) records, not \(filed.count)"))",
                            backend: source.engineName, operation: "exchange")
                    }
                    if filed != nil || have.contains(child.hash) {
                        recordsCovered = recordsCovered.addingSaturated(child.count)
                    } else if seen.insert(child.hash).inserted {
                        wanted.append(child.hash)
                        let lower = node.links.lowerKey(ofChild: index, in: node.bytes, inherited: walk.lowerKeys[node.hash])
                        filedAs[child.hash] = (node.hash, child.count, key, walk.level - 1, lower)
                    } else if let first = filedAs[child.hash], first.count == child.count, first.key == key, first.level == walk.level - 1 {
                        // Named again (by another node, or twice by one), and filed alike: copied once.
                        recordsCovered = recordsCovered.addingSaturated(child.count)
                    } else {
                        // Checked against its first filing only, it would land filed otherwise here.
                        throw ArborError(
                            .corruptObject, "index node \(node.hash) files node \(child.hash) otherwise than \(filedAs[child.hash].map { "node \($0.parent)" } ?? "a leaf names it as a large record") does",
                            backend: source.engineName, operation: "exchange")
                    }
                }
            }
            // The base's nodes these replace, to walk the next level against. Old leaves would
            // only tell which blobs need no asking: not worth reading them.
            var replaced = [Hash]()
            if walk.level > 1 {
                let current = Set(children.map(\.hash))
                replaced = walk.old.flatMap { $0.links.children.map(\.hash) }.filter { !current.contains($0) }
            }
            var start = 0
            while start < wanted.count {
                let end = min(start + groupSize, wanted.count)
                // The replaced nodes in proportion to this piece (with a node to spare on each
                // side): a misalignment only costs questions, never a skipped node.
                var old = [Hash]()
                if !replaced.isEmpty {
                    let from = max(0, start * replaced.count / wanted.count - 1)
                    let to = min(replaced.count, end * replaced.count / wanted.count + 1)
                    old = Array(replaced[from..<to])
                }
                pieces.append((walk.level, Array(wanted[start..<end]), old))
                start = end
            }
        }
        for piece in pieces { register(piece.wanted) }
        // Each request's blobs go to the writer before the next is read: a group of leaves may
        // name thousands of them, of up to 256 MiB each.
        let sizes = blobs.isEmpty ? nil : try await source.objectSizes(blobs)
        try await blobRequests.inRequests(blobs, sizes: sizes, fetch: fetch) { request, fetched in
            for blob in request {
                let bytes = fetched[blob] ?? []
                _ = try links(of: blob, bytes, expecting: .blob)
                try await writer.add(blob, bytes)
            }
        }
        // Consecutive pieces, up to `groupSize` nodes, make one group: one fetch, one walk below.
        // A node that an earlier group copied, with its subtree, is not walked again.
        func dropAdded(_ index: Int) { pieces[index].wanted.removeAll { groupsPending[$0] == true } }
        var next = 0
        while next < pieces.count {
            dropAdded(next)
            guard !pieces[next].wanted.isEmpty else {
                next += 1
                continue
            }
            var end = next + 1
            var size = pieces[next].wanted.count
            while end < pieces.count {
                dropAdded(end)
                guard size + pieces[end].wanted.count <= groupSize else { break }
                size += pieces[end].wanted.count
                end += 1
            }
            let group = pieces[next..<end].filter { !$0.wanted.isEmpty }
            let fetched = try await fetch(group.flatMap { $0.wanted + $0.old })
            // The nodes to copy are checked against their parents; the base's, which the target
            // holds, only serve to skip questions.
            func fetchedNodes(_ hashes: [Hash], below level: Int, copied: Bool) throws -> [Fetched] {
                try hashes.map { hash -> Fetched in
                    let bytes = fetched[hash] ?? []
                    let childLinks = try links(of: hash, bytes, expecting: level == 1 ? .leaf : .branch, keys: true)
                    if childLinks.kind == .branch && childLinks.level != level - 1 {
                        throw ArborError(.corruptObject, "index node \(hash) is at level \(childLinks.level) below a node at level \(level)", backend: source.engineName, operation: "exchange")
                    }
                    if copied, let filed = filedAs[hash] {
                        guard childLinks.recordCount == filed.count else {
                            throw ArborError(.corruptObject, "index node \(hash) holds \(childLinks.recordCount) records; node \(filed.parent) says \(filed.count)", backend: source.engineName, operation: "exchange")
                        }
                        guard filed.key.map({ $0 == childLinks.lastKeyDigest }) ?? true else {
                            throw ArborError(.corruptObject, "index node \(hash): its last key is not the key node \(filed.parent) files it under", backend: source.engineName, operation: "exchange")
                        }
                        // Past its previous sibling's key too, or lookups and listings disagree.
                        guard childLinks.startsPast(filed.lower, in: bytes) else {
                            throw ArborError(.corruptObject, "index node \(hash): its first key is not past the key node \(filed.parent) files its previous sibling under", backend: source.engineName, operation: "exchange")
                        }
                    }
                    return (hash, bytes, childLinks)
                }
            }
            try await copyWalks(try group.map { piece in
                Walk(group: try fetchedNodes(piece.wanted, below: piece.level, copied: true), old: try fetchedNodes(piece.old, below: piece.level, copied: false),
                     lowerKeys: Dictionary(piece.wanted.compactMap { hash in filedAs[hash]?.lower.map { (hash, $0) } }, uniquingKeysWith: { first, _ in first }))
            })
            next = end
        }
        for walk in walks {
            for node in walk.group where groupsPending[node.hash] != true {
                try await writer.add(node.hash, node.bytes)
                groupsPending[node.hash] = true
            }
        }
        reportProgress(force: false)
    }

    /// The links of an object fetched from the source, checked to be of the expected kind (with
    /// `keys`, an index node's key digests too).
    func links(of hash: Hash, _ bytes: [UInt8], expecting kind: ObjectKind?, keys: Bool = false) throws -> ObjectLinks {
        try ObjectLinks.read(hash, bytes, expecting: kind, keys: keys, in: source, operation: "exchange")
    }

    // MARK: Progress

    func reportProgress(force: Bool) {
        guard let progressHandler else { return }
        let now = ContinuousClock.now
        guard force || now - lastReport >= .milliseconds(100) else { return }
        lastReport = now
        let partial = Double(recordsCovered) / Double(max(recordsInStep, 1))
        let fraction = versionsTotal == 0 ? 1 : min(1, (Double(versionsDone) + min(partial, 1) * Double(versionsInStep)) / Double(versionsTotal))
        progressHandler(TransferProgress(
            versionsDone: versionsDone, versionsTotal: versionsTotal, objects: writer.objectsWritten,
            bytes: writer.bytesWritten, seconds: seconds, fractionDone: fraction))
    }
}
