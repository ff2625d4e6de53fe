import Foundation

/// What ``Store/verify(progress:)`` found.
public struct VerifyReport: Sendable {
    /// One damaged object: what it is, and what is wrong with it.
    public struct Damage: Sendable, Hashable {
        public enum Kind: String, Sendable {
            /// Named by a ref, a version or an index node, but not in the store.
            case missing
            /// In the store, but its bytes do not match its hash, or do not parse as what names it.
            case corrupt
            /// An index node or a blob that parses and holds what its parent says, but not in the
            /// one shape format 1 gives these records (FORMAT.md section 7): reads find the
            /// records, yet a replica that holds the same records has another root, so comparing
            /// or diffing the two finds differences that are not there.
            case nonCanonical
        }
        public var kind: Kind
        public var hash: Hash
        /// What names it, and what is wrong.
        public var detail: String
    }

    /// Versions reachable from the refs.
    public var versions = 0
    /// Objects reachable from the refs, checked (damaged ones included).
    public var reachableObjects = 0
    public var reachableBytes = 0
    /// Objects in the store that nothing reachable names (garbage for ``Store/collectGarbage(gracePeriod:longestWaitForExchanges:progress:)``).
    public var unreachableObjects = 0
    /// Everything found damaged (at most ``Store/verifyDamageLimit`` listed; the counts are complete).
    public var damage: [Damage] = []
    public var missingCount = 0
    public var corruptCount = 0
    public var nonCanonicalCount = 0
    public var seconds: Double = 0

    /// Whether nothing reachable is missing, corrupt or non-canonical.
    public var isIntact: Bool { missingCount == 0 && corruptCount == 0 && nonCanonicalCount == 0 }
    /// Whether everything reachable is there and reads back, though perhaps not in canonical
    /// shape: all that a garbage collection needs.
    public var isComplete: Bool { missingCount == 0 && corruptCount == 0 }
}

extension Store {
    /// At most this many damaged objects are listed in a ``VerifyReport`` (all are counted).
    public static let verifyDamageLimit = 1_000

    /// Checks everything reachable from the refs: each object is present and matches its hash;
    /// the head set, every version, every index node and every record parse (each record
    /// decodes as reads decode it); index nodes sit at the level their
    /// parent says, with the record count and the last key it says (checked against every
    /// parent that files it, though each node is read once), and keep their keys in order; large
    /// records are blobs. And each index is in canonical shape (FORMAT.md section 7): only a
    /// node's last key may be a boundary at its level, every node but the last on its level ends
    /// on one, the root is no branch with one entry, and records are inline exactly when they are
    /// at most ``ProllyTree/inlineLimit`` bytes. Counts the objects nothing reachable names.
    /// Damage is reported, not thrown; failures of the backend itself (a lost connection) are thrown.
    ///
    /// - Complexity: O(*N*) object reads for the *N* objects reachable, each read once, in
    ///   requests of up to a thousand; memory O(*N*) hashes (32 bytes each) to read each once,
    ///   about 150 bytes more per index node (what each other filing of it must match), and
    ///   O(height × 1,024) objects.
    public func verify(progress: TransferProgressHandler? = nil) async throws -> VerifyReport {
        var walk = IntegrityWalk(backend: backend, progress: progress)
        walk.decodesRecords = true
        walk.checksEveryFiling = true
        try await walk.run()
        return walk.report
    }
}

/// The walk behind ``Store/verify(progress:)``.
struct IntegrityWalk: Sendable {
    let backend: any Backend
    let progress: TransferProgressHandler?
    var report = VerifyReport()
    /// Every object reached so far (checked or found damaged), so each is read once.
    private(set) var reached = Set<Hash>()
    /// The record count of each version root checked.
    private var rootCounts = [Hash: UInt64]()
    /// Index nodes walked as the last node on their level, which alone need not end on a
    /// boundary: where another version files one where it is not the last, it is not walked
    /// again, and its last key is checked then (``checkEndsOnBoundary(_:levels:)``).
    private var walkedAsLastOnLevel = Set<Hash>()
    /// How many large records to read at once, from the sizes read so far.
    private var blobRequests = BlobRequestSizer()
    private let started = ContinuousClock.now
    private var historyReader: HistoryReader
    /// Whether a cancelled task stops the walk (at its next read). A collection that has
    /// removed objects turns it off for its last marking, which must run all the same.
    private(set) var stopsWhenCancelled = true
    /// Whether every record is decoded, as reads decode it (verification). A collection, which
    /// needs only what objects name, and records name no objects, leaves them be.
    var decodesRecords = false
    /// Whether every parent's filing of an index node is checked against the node, not only the
    /// first one the walk met (verification): a node is read once, so what the later filings must
    /// match is kept from that read (``roles``), about 150 bytes a node. A collection skips it.
    var checksEveryFiling = false
    /// What the walk found of each index node it read, with ``checksEveryFiling``.
    private var roles = [Hash: NodeRole]()

    /// An index node as the walk found it: what every parent's filing of it must agree with.
    struct NodeRole {
        var level: Int
        var recordCount: UInt64
        var lastKeyDigest: Int?
        var firstKey: [UInt8]?

        init(_ node: ObjectLinks, _ bytes: [UInt8]) {
            (level, recordCount, lastKeyDigest) = (node.level, node.recordCount, node.lastKeyDigest)
            firstKey = node.firstKeyRange.map { Array(bytes[$0]) }
        }
    }

    init(backend: any Backend, progress: TransferProgressHandler?) {
        self.backend = backend
        self.progress = progress
        historyReader = HistoryReader(backend)
    }

    var seconds: Double { started.secondsUntilNow }

    /// Sets the walk up for a collection that removes objects: every marking runs to its end
    /// (one cut short would leave objects counted as reached whose links were never followed;
    /// the sweep stops between batches instead), and what is missing is recorded in full.
    mutating func marksForSweep() {
        stopsWhenCancelled = false
        recordsMissing = true
    }

    /// A fresh walk set up by ``marksForSweep()``.
    static func sweepMarking(_ backend: any Backend) -> IntegrityWalk {
        var walk = IntegrityWalk(backend: backend, progress: nil)
        walk.marksForSweep()
        return walk
    }

    /// Whether objects found missing are recorded in full (``takeMissing()``), beyond the
    /// ``Store/verifyDamageLimit`` a report lists: a collection writes back all it needs.
    private(set) var recordsMissing = false
    private var missing = [Hash]()

    /// The objects found missing since the last call (with ``recordsMissing``).
    mutating func takeMissing() -> [Hash] {
        defer { missing = [] }
        return missing
    }

    /// Whether every damaged object is recorded (``takeDamage()``), beyond the
    /// ``Store/verifyDamageLimit`` a report lists: a repair fetches all of them.
    var recordsDamage = false
    private var allDamage = [VerifyReport.Damage]()

    /// Every damaged object found (with ``recordsDamage``).
    mutating func takeDamage() -> [VerifyReport.Damage] {
        defer { allDamage = [] }
        return allDamage
    }

    /// Marks `hash` reached without reading it; `false` if it was already.
    mutating func markReached(_ hash: Hash) -> Bool { reached.insert(hash).inserted }

    /// Takes back the damage recorded for `hashes` found missing, once they are written back.
    mutating func clearMissing(_ hashes: [Hash]) {
        let gone = Set(hashes)
        let missing = report.damage.filter { $0.kind == .missing && gone.contains($0.hash) }.count
        report.damage.removeAll { $0.kind == .missing && gone.contains($0.hash) }
        report.missingCount -= missing
    }

    mutating func damaged(_ kind: VerifyReport.Damage.Kind, _ hash: Hash, _ detail: String) {
        switch kind {
        case .missing: report.missingCount += 1
        case .corrupt: report.corruptCount += 1
        case .nonCanonical: report.nonCanonicalCount += 1
        }
        if kind == .missing && recordsMissing { missing.append(hash) }
        if recordsDamage { allDamage.append(.init(kind: kind, hash: hash, detail: detail)) }
        if report.damage.count < Store.verifyDamageLimit { report.damage.append(.init(kind: kind, hash: hash, detail: detail)) }
    }

    /// Fetches `hashes` not reached before; returns the intact ones, recording the damaged.
    /// With `versions`, they are read through ``historyReader``: many generations per request
    /// where the backend can.
    mutating func fetch(_ hashes: [Hash], namedBy parent: String, versions: Bool = false) async throws -> [Hash: [UInt8]] {
        try await fetch(hashes, namedBy: { _ in parent }, versions: versions)
    }

    /// ``fetch(_:namedBy:versions:)``, with what names each object.
    mutating func fetch(_ hashes: [Hash], namedBy parentOf: (Hash) -> String, versions: Bool = false) async throws -> [Hash: [UInt8]] {
        // Before anything is counted as reached: a walk stopped here has marked nothing unread.
        if stopsWhenCancelled { try Task.checkCancellation() }
        var fresh = [Hash]()
        for hash in hashes where reached.insert(hash).inserted { fresh.append(hash) }
        var intact = [Hash: [UInt8]](minimumCapacity: fresh.count)
        for chunk in fresh.chunks(of: Transfer.requestSize) {
            // An adapter that checks what it reads (the JSON files) refuses a damaged object
            // and with it the batch: read one at a time, each refusal is damage to report.
            let (objects, refused) = versions
                ? try await backend.getTellingRefusals(chunk) { try await historyReader.uncheckedObjects($0) }
                : try await backend.getTellingRefusals(chunk)
            for hash in chunk {
                report.reachableObjects += 1
                if let reason = refused[hash] {
                    damaged(.corrupt, hash, "named by \(parentOf(hash)): \(reason)")
                    continue
                }
                guard let bytes = objects[hash] else {
                    damaged(.missing, hash, "named by \(parentOf(hash)), not in the store")
                    continue
                }
                report.reachableBytes += bytes.count
                guard Hash.of(bytes) == hash else {
                    damaged(.corrupt, hash, "named by \(parentOf(hash)): the bytes do not match the hash")
                    continue
                }
                intact[hash] = bytes
            }
        }
        return intact
    }

    /// Walks from the refs, reading only objects not reached before, so running it again after
    /// the refs moved reads only what is new. With `countingUnreachable`, then lists the store.
    mutating func run(countingUnreachable: Bool = true) async throws {
        let refs = try await backend.refsBesidesClaims()
        var heads = [Hash]()
        var preloaded = [Hash: [UInt8]]()
        for (name, hash) in refs.sorted(by: { $0.key < $1.key }) {
            let objects = try await fetch([hash], namedBy: "ref \(name)")
            guard let bytes = objects[hash] else { continue }
            guard let links = try? ObjectLinks(bytes) else {
                damaged(.corrupt, hash, "named by ref \(name): does not parse")
                continue
            }
            switch links.kind {
            case .headSet: heads += links.heads
            case .commit:
                heads.append(hash)
                preloaded[hash] = bytes
            default: damaged(.corrupt, hash, "named by ref \(name): a \(links.kind.name), not a head set or a version")
            }
        }

        // The history, generation by generation; then every version's index. (A version named
        // by two refs, or by a ref and the head set, is one version.)
        var frontier = Array(Set(heads)).sorted()
        var roots = [(version: Hash, root: Hash, records: UInt64)]()
        var seenVersions = Set(heads)
        while !frontier.isEmpty {
            let objects = try await fetch(frontier.filter { !reached.contains($0) }, namedBy: "the history", versions: true)
                .merging(preloaded) { fetched, _ in fetched }
            var next = [Hash]()
            for hash in frontier {
                guard let bytes = objects[hash] else { continue }
                guard let content = try? Version.Content.decode(bytes) else {
                    damaged(.corrupt, hash, "in the history: not a version")
                    continue
                }
                report.versions += 1
                roots.append((hash, content.root, content.recordCount))
                for parent in content.parents where seenVersions.insert(parent).inserted { next.append(parent) }
            }
            frontier = next
        }
        var done = 0
        for chunk in roots.chunks(of: 256) {
            try await checkIndexes(chunk)
            done += chunk.count
            if let progress {
                progress(TransferProgress(versionsDone: done, versionsTotal: roots.count, objects: report.reachableObjects,
                                          bytes: report.reachableBytes, seconds: seconds, fractionDone: Double(done) / Double(roots.count)))
            }
        }

        // What nothing reachable names.
        guard countingUnreachable else { return }
        try await backend.enumerateHashes(batchSize: Transfer.requestSize) { [reached] batch in
            report.unreachableObjects += batch.reduce(0) { $0 + (reached.contains($1) ? 0 : 1) }
        }
        report.seconds = seconds
    }

    /// Checks the indexes of several versions (each with the record count it states) together:
    /// their roots in one request, then what those name a level at a time, so a long history of
    /// small versions costs a few requests per level, not per version. Each node is read once
    /// across all versions.
    mutating func checkIndexes(_ versions: [(version: Hash, root: Hash, records: UInt64)]) async throws {
        // Each root once, named after the first version that has it.
        var fresh = [Hash]()
        var elsewhere = [Hash]()
        var versionOf = [Hash: Hash]()
        for entry in versions where versionOf[entry.root] == nil {
            versionOf[entry.root] = entry.version
            if rootCounts[entry.root] == nil { reached.contains(entry.root) ? elsewhere.append(entry.root) : fresh.append(entry.root) }
        }
        func namedBy(_ root: Hash) -> String { "version \(versionOf[root].map(\.description) ?? "?")" }
        // A root reached before as something else (a child of another index, or a blob) was
        // checked as that; read it again to count its records, and to find a root that is not
        // an index node at all. Rare: each node is still read once per role.
        if !elsewhere.isEmpty {
            // As in fetch, a refused root (already reported when first reached) is left out.
            let objects = try await backend.getTellingRefusals(elsewhere).objects
            for root in elsewhere {
                // Missing or not matching its hash: reported when first reached.
                guard let bytes = objects[root], Hash.of(bytes) == root else { continue }
                let links = try? ObjectLinks(bytes)
                guard let links, links.isIndexNode else {
                    damaged(.corrupt, versionOf[root] ?? root, "its index root \(root) is \(links.map { "a \($0.kind.name)" } ?? "not an object that parses"), not an index node")
                    continue
                }
                rootCounts[root] = links.recordCount
                // Its entries were checked where it was reached first; as a root, its width.
                checkIsNotOneEntryBranch(root, links, named: namedBy(root))
            }
        }
        let objects = try await fetch(fresh, namedBy: namedBy)
        var group = [CheckedNode]()
        for root in fresh {
            guard let bytes = objects[root], let node = node(root, bytes, named: namedBy(root)) else { continue }
            rootCounts[root] = node.recordCount
            if checksEveryFiling { roles[root] = NodeRole(node, bytes) }
            checkIsNotOneEntryBranch(root, node, named: namedBy(root))
            checkEntries(root, node, named: "named by \(namedBy(root))")
            walkedAsLastOnLevel.insert(root)
            group.append((root, node, bytes, nil, true))
        }
        // A root another version shares is checked once, but each version's count against it.
        for entry in versions {
            if let held = rootCounts[entry.root], held != entry.records {
                damaged(.corrupt, entry.version, "version says \(entry.records) records; its index holds \(held)")
            }
        }
        if !group.isEmpty { try await checkGroup(group) }
    }

    /// Parses an index node, recording it as corrupt if it does not parse.
    ///
    /// The node's links and key digests are read, not its entries decoded: the walk checks
    /// each node's level, counts and last key and follows its children. With
    /// ``decodesRecords``, each record is checked where it lies (``RecordCoding/check(_:)``),
    /// without building it.
    mutating func node(_ hash: Hash, _ bytes: [UInt8], named parent: String) -> ObjectLinks? {
        do {
            let links = try ObjectLinks(bytes, keys: true, shape: true, records: decodesRecords)
            guard links.isIndexNode else {
                throw ArborError(.corruptObject, "a \(links.kind.name)")
            }
            if let (entry, reason) = links.undecodableRecord {
                damaged(.corrupt, hash, "named by \(parent): its entry \(entry) holds a record that does not read back (\(reason))")
            }
            return links
        } catch {
            damaged(.corrupt, hash, "named by \(parent): not an index node (\((error as? ArborError)?.message ?? "\(error)"))")
            return nil
        }
    }

    /// Reports `root` if it is a branch with one entry: the root is the node of the lowest
    /// level with one node, which would be that entry's child.
    mutating func checkIsNotOneEntryBranch(_ root: Hash, _ node: ObjectLinks, named version: String) {
        guard node.kind == .branch, node.children.count == 1 else { return }
        damaged(.nonCanonical, root, "the index root of \(version) is a branch with one entry, where the root is its child")
    }

    /// Reports what the entries of index node `hash` show of a non-canonical shape (read with
    /// `shape`): a key before the last that ends a node, a large record held inline.
    mutating func checkEntries(_ hash: Hash, _ node: ObjectLinks, named parent: String) {
        if let entry = node.earlyBoundary {
            damaged(.nonCanonical, hash, "\(parent): the key of its entry \(entry) is a boundary at level \(node.level), which ends a node, yet entries follow it")
        }
        if let (entry, size) = node.oversizedInline {
            damaged(.nonCanonical, hash, "\(parent): its entry \(entry) holds a record of \(size) bytes inline, more than the \(ProllyTree.inlineLimit) a leaf holds inline (a larger one is a blob)")
        }
    }

    /// Why the record of a blob (its kind checked) would not read back, or `nil`.
    static func recordDamage(blob bytes: [UInt8]) -> String? {
        do {
            try bytes.withUnsafeBufferPointer { try RecordCoding.check(UnsafeBufferPointer(rebasing: $0[2...])) }
            return nil
        } catch {
            return (error as? ArborError)?.message ?? "\(error)"
        }
    }

    /// Whether `entry`, a parent's filing of a node, agrees with the node: its level, record
    /// count, last key (`lastKeyDigest`, the key it is filed under) and first key (`startsPast`
    /// the key its previous sibling is filed under). Records the damage where it does not.
    mutating func checkFiling(
        _ entry: FiledChild, level: Int, recordCount: UInt64, lastKeyDigest: Int?, startsPast: (ArraySlice<UInt8>) -> Bool
    ) -> Bool {
        guard level == entry.level, recordCount == entry.count else {
            damaged(.corrupt, entry.child, "below node \(entry.parent): level \(level) with \(recordCount) records, expected level \(entry.level) with \(entry.count)")
            return false
        }
        // Lookups go down by the branch keys, diffs along the leaves: both find the same
        // records only if each key is its child's last.
        guard entry.keyDigest.map({ $0 == lastKeyDigest }) ?? true else {
            damaged(.corrupt, entry.child, "below node \(entry.parent): its last key is not the key node \(entry.parent) files it under")
            return false
        }
        // And its keys come after its previous sibling's: else siblings overlap, and a key in
        // both is found in one by a lookup and twice by a listing.
        guard entry.lowerKey.map(startsPast) ?? true else {
            damaged(.corrupt, entry.child, "below node \(entry.parent): its first key is not past the key its previous sibling is filed under")
            return false
        }
        return true
    }

    /// ``checkFiling(_:level:recordCount:lastKeyDigest:startsPast:)`` for a filing of a node
    /// read before, against what that read found.
    mutating func check(_ entry: FiledChild, against role: NodeRole) {
        _ = checkFiling(entry, level: role.level, recordCount: role.recordCount, lastKeyDigest: role.lastKeyDigest) { lowerKey in
            role.firstKey.map { compareKeys($0[...], lowerKey) > 0 } ?? true
        }
    }

    /// A child as its parent files it: what the child must match.
    struct FiledChild {
        var parent: Hash
        var child: Hash
        var count: UInt64
        var level: Int
        /// The digest of the key it is filed under, which must be its last key (`nil` when
        /// keys were not read), and that key, in its parent's bytes.
        var keyDigest: Int?
        var key: ArraySlice<UInt8>?
        /// The key its first key must be past.
        var lowerKey: ArraySlice<UInt8>?
        /// Whether it is the last node on its level: the only one that need not end on a boundary.
        var isLastOnLevel: Bool
    }

    /// Reports `entry`'s child unless the key it is filed under, its last key, is a boundary at
    /// each of `levels`: a node that is not the last on its level ends on a boundary, and so
    /// does the last node below it on each level down, as they end on the same key.
    mutating func checkEndsOnBoundary(_ entry: FiledChild, levels: ClosedRange<Int>) {
        guard let key = entry.key else { return }
        // The highest such level names the node that is wrong; the ones below follow from it.
        guard let level = levels.reversed().first(where: { level in !key.withUnsafeBufferPointer { ProllyTree.isBoundary($0, level: level) } }) else {
            return
        }
        let which = level == entry.level ? "it does not end" : "the last node below it on level \(level) does not end"
        damaged(.nonCanonical, entry.child, "below node \(entry.parent): not the last node on level \(entry.level), yet \(which) on a boundary, so it should run on into the next node")
    }

    /// An index node whose own checks passed, with its bytes, the key its first key must be
    /// past (`nil` for a root) and whether it is the last node on its level: its children are
    /// checked against it.
    typealias CheckedNode = (hash: Hash, node: ObjectLinks, bytes: [UInt8], lowerKey: ArraySlice<UInt8>?, isLastOnLevel: Bool)

    /// Checks sibling nodes of one level and, level by level, what they name. Each node comes
    /// with its bytes and the key its first key must be past (`nil` for a root): the key its
    /// parent files its previous sibling under, or the parent's own such key for a first child.
    mutating func checkGroup(_ group: [CheckedNode]) async throws {
        var children = [FiledChild]()
        var blobs = [(parent: Hash, blob: Hash)]()
        for (hash, node, bytes, lowerKey, isLastOnLevel) in group {
            for (index, child) in node.children.enumerated() {
                // Keys are there when the node was read with them (``node(_:_:named:)``).
                children.append(FiledChild(
                    parent: hash, child: child.hash, count: child.count, level: node.level - 1,
                    keyDigest: index < node.childKeyDigests.count ? node.childKeyDigests[index] : nil,
                    key: index < node.childKeyRanges.count ? bytes[node.childKeyRanges[index]] : nil,
                    lowerKey: node.lowerKey(ofChild: index, in: bytes, inherited: lowerKey),
                    isLastOnLevel: isLastOnLevel && index == node.children.count - 1))
            }
            for blob in node.blobs { blobs.append((hash, blob)) }
        }
        // A request of about 16 MB at a time, each checked and let go before the next: a group
        // of leaves may name thousands of blobs, of up to 256 MiB each.
        var unread = blobs[...]
        var checkedBlobs = Set<Hash>()
        // Sizes only size the requests: where the engine fails to tell them (a damaged store),
        // the requests grow from the sizes read, and reading reports the damage.
        let sizes = blobs.isEmpty ? nil : (try? await backend.objectSizes(blobs.map(\.blob))) ?? nil
        while !unread.isEmpty {
            let request = unread.prefix(blobRequests.count(of: unread.lazy.map(\.blob), sizes: sizes))
            unread = unread.dropFirst(request.count)
            let leafOf = Dictionary(request.map { ($0.blob, $0.parent) }, uniquingKeysWith: { first, _ in first })
            let fetchedBlobs = try await fetch(request.map(\.blob), namedBy: { "leaf \(leafOf[$0].map(\.description) ?? "?")" })
            blobRequests.read(fetchedBlobs.values.lazy.map(\.count), requested: request.count)
            // Each blob once, though several leaves of the group may name it.
            for (parent, blob) in request where checkedBlobs.insert(blob).inserted {
                guard let bytes = fetchedBlobs[blob] else { continue }
                if ObjectKind.of(bytes) != .blob {
                    damaged(.corrupt, blob, "named by leaf \(parent) as a large record: not a blob")
                } else if decodesRecords, let reason = Self.recordDamage(blob: bytes) {
                    damaged(.corrupt, blob, "named by leaf \(parent) as a large record: its record does not read back (\(reason))")
                } else if ProllyTree.storesInline(recordSize: bytes.count - 2) {
                    damaged(.nonCanonical, blob, "named by leaf \(parent) as a large record: its record is \(bytes.count - 2) bytes, which a leaf holds inline (up to \(ProllyTree.inlineLimit))")
                }
            }
        }
        // A node read before, under another parent, is not read again; this filing of it must
        // still agree with it, as the first did.
        if checksEveryFiling {
            for entry in children { if reached.contains(entry.child), let role = roles[entry.child] { check(entry, against: role) } }
        }
        let unseen = children.filter { !reached.contains($0.child) }
        // Nodes that two parents of this group name (versions sharing them) are walked once.
        var walkedInGroup = Set<Hash>()
        for chunk in unseen.chunks(of: Transfer.groupSize) {
            let parentOf = Dictionary(chunk.map { ($0.child, $0.parent) }, uniquingKeysWith: { first, _ in first })
            let fetched = try await fetch(chunk.map(\.child), namedBy: { "index node \(parentOf[$0].map(\.description) ?? "?")" })
            var next = [CheckedNode]()
            for entry in chunk {
                guard let bytes = fetched[entry.child] else {
                    // Read in an earlier chunk of this group, under another parent.
                    if checksEveryFiling, let role = roles[entry.child] { check(entry, against: role) }
                    continue
                }
                guard let node = node(entry.child, bytes, named: "node \(entry.parent)") else { continue }
                guard checkFiling(entry, level: node.level, recordCount: node.recordCount, lastKeyDigest: node.lastKeyDigest, startsPast: {
                    node.startsPast($0, in: bytes)
                }) else { continue }
                guard walkedInGroup.insert(entry.child).inserted else { continue }
                if checksEveryFiling { roles[entry.child] = NodeRole(node, bytes) }
                checkEntries(entry.child, node, named: "below node \(entry.parent)")
                if entry.isLastOnLevel {
                    walkedAsLastOnLevel.insert(entry.child)
                } else {
                    checkEndsOnBoundary(entry, levels: entry.level...entry.level)
                }
                next.append((entry.child, node, bytes, entry.lowerKey, entry.isLastOnLevel))
            }
            if !next.isEmpty { try await checkGroup(next) }
        }
        // A node is walked once. Where that was as the last on its level, whose end was not
        // checked, and a parent names it here where it is not the last, its end is checked now
        // (on its level and each below, where the last node under it ends on the same key).
        for entry in children where !entry.isLastOnLevel {
            if walkedAsLastOnLevel.remove(entry.child) != nil { checkEndsOnBoundary(entry, levels: 0...entry.level) }
        }
    }
}
