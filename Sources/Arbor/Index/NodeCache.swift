import Foundation
import Synchronization

/// A value a store caches, with the memory it takes, roughly: what bounds a cache in bytes.
protocol CacheCosted: Sendable {
    /// About how many bytes of memory the value holds.
    var cacheCost: Int { get }
}

/// A bounded cache of objects as a store uses them, shared by every operation of the store:
/// decoded index nodes (``NodeCache``), index nodes as point reads keep them (``NodeBytes``),
/// and versions.
///
/// Bounded twice: in values (`capacity`) and in bytes (`byteLimit`, by ``CacheCosted/cacheCost``),
/// so that a store of large records, whose nodes are large, uses no more memory than one of
/// small records. Objects are immutable, so a cached value can never be stale; only garbage
/// collection, which deletes objects, must ``forget(_:)`` them. Eviction is by generations: when
/// the young generation fills (half of either bound), it becomes the old one and the previous old
/// one is dropped; a hit in the old generation is promoted. That keeps the recently used values
/// at O(1) cost per access.
final class ObjectCache<Value: CacheCosted>: Sendable {
    private struct Generations {
        var young: [Hash: (value: Value, cost: Int)] = [:]
        var old: [Hash: (value: Value, cost: Int)] = [:]
        var youngBytes = 0
        var oldBytes = 0
    }

    private let generations = Mutex(Generations())
    let capacity: Int
    let byteLimit: Int

    init(capacity: Int, byteLimit: Int = .max) {
        self.capacity = capacity
        self.byteLimit = byteLimit
    }

    func value(_ hash: Hash) -> Value? {
        guard capacity > 0 else { return nil }
        return generations.withLock { state in
            if let entry = state.young[hash] { return entry.value }
            // A hit in the old generation moves to the young one, so it is counted once.
            guard let entry = state.old.removeValue(forKey: hash) else { return nil }
            state.oldBytes -= entry.cost
            insert(entry, hash, into: &state)
            return entry.value
        }
    }

    func insert(_ value: Value, for hash: Hash) {
        guard capacity > 0 else { return }
        // Costed outside the lock: costing a decoded node walks its entries.
        let entry = (value: value, cost: value.cacheCost)
        generations.withLock { insert(entry, hash, into: &$0) }
    }

    /// The values held and their cost in bytes, both generations together.
    var usage: (count: Int, bytes: Int) {
        generations.withLock { ($0.young.count + $0.old.count, $0.youngBytes + $0.oldBytes) }
    }

    /// Drops `hashes`, so that reading a deleted object fails as it does on the backend.
    ///
    /// - Complexity: O(*k*) for *k* hashes.
    func forget(_ hashes: some Sequence<Hash>) {
        guard capacity > 0 else { return }
        generations.withLock { state in
            for hash in hashes {
                if let entry = state.young.removeValue(forKey: hash) { state.youngBytes -= entry.cost }
                if let entry = state.old.removeValue(forKey: hash) { state.oldBytes -= entry.cost }
            }
        }
    }

    private func insert(_ entry: (value: Value, cost: Int), _ hash: Hash, into state: inout Generations) {
        // A value larger than a generation would evict everything else and still not fit.
        let generationBytes = max(byteLimit / 2, 1)
        guard entry.cost <= generationBytes, state.young[hash] == nil else { return }
        if let stale = state.old.removeValue(forKey: hash) { state.oldBytes -= stale.cost }
        if state.young.count >= max(capacity / 2, 1) || state.youngBytes + entry.cost > generationBytes {
            // The dropped old generation's table becomes the young one, emptied but not freed:
            // a new table would grow again by doubling, rehashing at every step.
            swap(&state.old, &state.young)
            state.young.removeAll(keepingCapacity: true)
            state.oldBytes = state.youngBytes
            state.youngBytes = 0
        }
        state.young[hash] = entry
        state.youngBytes += entry.cost
    }
}

/// The store's decoded index nodes.
typealias NodeCache = ObjectCache<IndexNode>

extension ObjectCache where Value == IndexNode {
    func node(_ hash: Hash) -> IndexNode? { value(hash) }
}

/// Reads and writes index nodes for one operation: verified reads, batched fetches, counting.
///
/// Not shared between tasks: each operation makes its own, on top of the store's ``NodeCache``.
/// It keeps every node it reads or makes until it ends, decoded or as bytes or both, so an
/// operation holds memory in proportion to the nodes it touches.
final class NodeSource {
    let backend: any Backend
    let cache: NodeCache
    /// Nodes fetched from the backend (cache misses) during this operation.
    private(set) var nodesRead = 0
    /// The bytes of the nodes this operation created, by hash, not yet written.
    private(set) var created: [Hash: [UInt8]] = [:]
    /// Every decoded node this operation created or read: it never decodes a node twice.
    private var local: [Hash: IndexNode] = [:]
    /// Every node this operation read as ``NodeBytes``: it never fetches a node twice, whatever
    /// the store's caches hold.
    private var localBytes: [Hash: NodeBytes] = [:]
    /// How many nodes this operation keeps as ``NodeBytes``, and decoded.
    var rememberedBytesCount: Int { localBytes.count }
    var rememberedNodesCount: Int { local.count }

    /// Whether edits note the nodes they replace, for the backend to keep as deltas
    /// (``Backend/acceptsRestatements``).
    let notesSuperseded: Bool
    /// The stored nodes edits replaced, each with the new nodes that hold its keys.
    private var superseded = [(hash: Hash, node: NodeBytes, candidates: [Hash])]()

    /// The store's nodes as point reads keep them (``nodeBytes(_:)``).
    let bytesCache: ObjectCache<NodeBytes>
    /// What the store keeps of the objects it read in place (``InPlaceReading``).
    let inPlace: InPlaceReadState

    /// Without `inPlace`, the source keeps no fingerprints and reads in place if the backend lends.
    init(
        backend: any Backend, cache: NodeCache, bytesCache: ObjectCache<NodeBytes> = ObjectCache(capacity: 0),
        inPlace: InPlaceReadState? = nil
    ) {
        self.backend = backend
        self.cache = cache
        self.notesSuperseded = backend.acceptsRestatements
        self.bytesCache = bytesCache
        self.inPlace = inPlace ?? InPlaceReadState(capacity: 0, byteLimit: 0, lender: backend as? any InPlaceReading)
        assert(self.inPlace.lender.map { $0 as AnyObject === backend as AnyObject } ?? true, "the lender is not the source's backend")
    }

    func node(_ hash: Hash) async throws -> IndexNode {
        if let node = local[hash] { return node }
        if hash == Store.emptyRoot.hash { return .empty }
        if let cached = cache.node(hash) { local[hash] = cached; return cached }
        return try await nodes([hash])[0]
    }

    /// Node `hash` as point reads and diffs use it (``NodeBytes``): from this operation's reads,
    /// from the store's cache of them, from this operation's new nodes, encoded again from a
    /// decoded node, or fetched, verified, checked and cached.
    ///
    /// Without `remember`, the node is not kept for the rest of the operation (the store's cache
    /// may keep it): for walks that read each node once over more nodes than memory should hold.
    func nodeBytes(_ hash: Hash, remember: Bool = true) async throws -> NodeBytes {
        if let node = try knownBytes(hash, remember: remember) { return node }
        return try await fetchBytes([hash], remember: remember)[0]
    }

    /// One level of a point read at node `hash`: the branch to search for the child that covers
    /// `key`, or the payload a leaf holds under `key`.
    enum PointStep {
        case branch(NodeBytes)
        case leaf(IndexPayload?)

        var level: Int {
            if case .branch(let node) = self { node.level } else { 0 }
        }

        /// The step at `node` toward `key`.
        init(_ node: NodeBytes, toward key: [UInt8]) throws {
            self = node.level > 0 ? .branch(node) : .leaf(try node.payload(for: key))
        }
    }

    /// One level of a point read (``ProllyTree/lookup(_:root:source:)``) at node `hash`, found
    /// as ``nodeBytes(_:)`` finds it but not remembered for this operation: a descent reads each
    /// node once, and filling this operation's table would cost it a dictionary, its growth and
    /// a retain per level for nothing. On a miss, a backend that lends its bytes in place
    /// (``InPlaceReading``) has the node checked and searched where it lies.
    func pointStep(_ hash: Hash, toward key: [UInt8]) async throws -> PointStep {
        let node: NodeBytes
        if let known = try knownBytes(hash, remember: false) {
            node = known
        } else if let lender = inPlace.lender {
            do {
                return try lentPointStep(hash, toward: key, from: lender)
            } catch let error as ArborError where error.code == .missingObject {
                // Fetched instead, which reads once more after a sweep's batch in flight.
                node = try await fetchBytes([hash], remember: false)[0]
            }
        } else {
            node = try await fetchBytes([hash], remember: false)[0]
        }
        return try PointStep(node, toward: key)
    }

    /// ``pointStep(_:toward:)`` on a node the backend lends. The first time the store reads a
    /// node this way, it checks it against its hash and as an index node (by the same reader as
    /// every decoder), and remembers its ``Fingerprint``; after that, a matching fingerprint
    /// stands for both checks, at a fraction of the cost of SHA-256, and the leaf's search stops
    /// at the key. A leaf is searched in place and only the payload found is copied. A branch is
    /// copied and cached (every read passes through the few there are), and now and then
    /// (``InPlaceReadState/admitsLeaf()``) a leaf too, so that a store whose leaves fit in the
    /// cache ends up reading them from there; whatever goes into the cache is checked against
    /// its hash first, since other operations build new nodes from it.
    private func lentPointStep(_ hash: Hash, toward key: [UInt8], from lender: any InPlaceReading) throws -> PointStep {
        // Read before the lend: the body must not call the backend.
        let engine = backend.engineName
        let remembered = inPlace.verified.value(hash)?.fingerprint
        let caches = bytesCache.capacity > 0
        var fingerprint: UInt64?
        let step = try lender.withObjectBytes(hash) { raw -> PointStep in
            guard let raw else { throw ObjectFetch.missing(hash, engine) }
            return try raw.withMemoryRebound(to: UInt8.self) { bytes -> PointStep in
                let copies = ObjectKind.of(bytes) != .leaf || (caches && inPlace.admitsLeaf())
                // Hashed when first read, and whenever copied into the cache; else fingerprinted.
                if remembered == nil || copies {
                    guard Hash.of(UnsafeRawBufferPointer(bytes)) == hash else { throw ObjectFetch.corrupt(hash, engine) }
                } else if Fingerprint.of(bytes) != remembered {
                    throw ObjectFetch.corrupt(hash, engine)
                }
                let step = try decoding(hash) { () throws -> PointStep in
                    guard !copies else {
                        let node = try NodeBytes(validating: Array(bytes))
                        bytesCache.insert(node, for: hash)
                        return try PointStep(node, toward: key)
                    }
                    // A leaf's kind: its header says level 0.
                    let (header, _, count) = try CanonicalReader.indexNode(bytes)
                    return .leaf(try NodeBytes.payload(inLeaf: header, count: count, for: key, checked: remembered == nil))
                }
                // Found sound: remembered by the fingerprint of what was checked.
                if remembered == nil { fingerprint = Fingerprint.of(bytes) }
                return step
            }
        }
        nodesRead += 1
        if remembered == nil, let fingerprint { inPlace.verified.insert(VerifiedObject(fingerprint: fingerprint), for: hash) }
        return step
    }

    /// The nodes `hashes` as ``NodeBytes``, in order, fetching every missing one in a single
    /// batch: one round trip per level of a batched lookup on remote engines.
    func nodeBytes(_ hashes: [Hash], remember: Bool = true) async throws -> [NodeBytes] {
        let known = try hashes.map { try knownBytes($0, remember: remember) }
        let missing = Array(Set(zip(hashes, known).compactMap { $1 == nil ? $0 : nil }))
        guard !missing.isEmpty else { return known.map { $0! } }
        let fetched = Dictionary(uniqueKeysWithValues: zip(missing, try await fetchBytes(missing, remember: remember)))
        return zip(hashes, known).map { $1 ?? fetched[$0]! }
    }

    /// Node `hash` as ``NodeBytes`` if it can be had without a fetch, remembered for the rest of
    /// the operation if `remember`; `nil` if it must be fetched.
    private func knownBytes(_ hash: Hash, remember: Bool = true) throws -> NodeBytes? {
        if hash == Store.emptyRoot.hash { return .empty }
        if let node = localBytes[hash] { return node }
        let node: NodeBytes
        if let cached = bytesCache.value(hash) {
            node = cached
        } else if let bytes = created[hash] {
            // Not in the store's cache: a node this operation made may never be written.
            node = try checked(bytes, hash)
        } else if let decoded = local[hash] ?? cache.node(hash) {
            // Decoded lately: the encoding is canonical, so encoding it again gives its bytes
            // without a round trip.
            node = try checked(decoded.encoded(), hash)
            bytesCache.insert(node, for: hash)
        } else {
            return nil
        }
        if remember { localBytes[hash] = node }
        return node
    }

    /// Fetches `hashes` (distinct) in one batch, verified and checked, into the store's cache of
    /// node bytes and (if `remember`) this operation's; returns them in order.
    private func fetchBytes(_ hashes: [Hash], remember: Bool = true) async throws -> [NodeBytes] {
        let fetched = try await ObjectFetch.verified(hashes, from: backend)
        nodesRead += hashes.count
        return try hashes.map { hash in
            let node = try checked(fetched[hash]!, hash)
            bytesCache.insert(node, for: hash)
            if remember { localBytes[hash] = node }
            return node
        }
    }

    private func checked(_ bytes: [UInt8], _ hash: Hash) throws -> NodeBytes {
        try decoding(hash) { try NodeBytes(validating: bytes) }
    }

    /// Runs `decode` on node `hash`, naming the node and the backend if it fails.
    private func decoding<Node>(_ hash: Hash, _ decode: () throws -> Node) throws -> Node {
        do { return try decode() } catch let error as ArborError {
            throw ArborError(.corruptObject, "index node \(hash) cannot be decoded: \(error.message)", backend: backend.engineName, operation: "read")
        }
    }

    /// The nodes `hashes` in order, fetching every missing one in a single batch.
    ///
    /// Without `remember`, the nodes are not kept for the rest of the operation (the store's
    /// cache may keep them), as ``nodeBytes(_:remember:)``.
    func nodes(_ hashes: [Hash], remember: Bool = true) async throws -> [IndexNode] {
        var found = [Hash: IndexNode]()
        var missing = [Hash]()
        for hash in hashes where found[hash] == nil {
            if hash == Store.emptyRoot.hash { found[hash] = .empty; continue }
            if let node = local[hash] ?? cache.node(hash) {
                found[hash] = node
            } else if let read = localBytes[hash] ?? bytesCache.value(hash) {
                // Read as bytes by this operation (a diff) or a point read: decode, do not fetch.
                let node = try decoding(hash) { try IndexNode.decode(read.bytes) }
                cache.insert(node, for: hash)
                if remember { local[hash] = node }
                found[hash] = node
            } else {
                missing.append(hash)
            }
        }
        if !missing.isEmpty {
            let fetched = try await ObjectFetch.verified(missing, from: backend)
            nodesRead += missing.count
            for hash in missing {
                let node = try decoding(hash) { try IndexNode.decode(fetched[hash]!) }
                cache.insert(node, for: hash)
                if remember { local[hash] = node }
                found[hash] = node
            }
        }
        return hashes.map { found[$0]! }
    }

    /// Records a new node and returns its hash; nothing is written until the caller writes
    /// ``newObjects(reachableFrom:)``.
    func create(_ node: IndexNode) -> Hash {
        let bytes = node.encoded()
        let hash = Hash.of(bytes)
        created[hash] = bytes
        local[hash] = node
        return hash
    }

    /// Records many new nodes at once, encoding and hashing them on every core: a large commit
    /// creates thousands, and this is pure CPU work. Returns their hashes in order.
    func create(_ nodes: [IndexNode]) throws -> [Hash] {
        for node in nodes { try checkSize(ofNewNode: node.encodedSize) }
        guard nodes.count >= 64 else { return nodes.map { create($0) } }
        let workers = max(1, min(ProcessInfo.processInfo.activeProcessorCount, 8))
        var results = [(hash: Hash, bytes: [UInt8])](repeating: (Store.emptyRoot.hash, []), count: nodes.count)
        results.withUnsafeMutableBufferPointer { buffer in
            // Each index is written by exactly one worker (worker, worker + workers, ...), and the
            // buffer outlives concurrentPerform, which returns only when every worker is done.
            nonisolated(unsafe) let output = buffer
            DispatchQueue.concurrentPerform(iterations: workers) { worker in
                for index in stride(from: worker, to: nodes.count, by: workers) {
                    let bytes = nodes[index].encoded()
                    output[index] = (Hash.of(bytes), bytes)
                }
            }
        }
        for (node, result) in zip(nodes, results) {
            created[result.hash] = result.bytes
            local[result.hash] = node
        }
        return results.map(\.hash)
    }

    /// Records new nodes made as bytes (``ProllyTree/rewrite(level:edits:root:rootHash:source:replaced:)``),
    /// hashing and checking them on every core; returns their hashes in order. They are kept as
    /// ``NodeBytes``, as point reads and diffs read nodes, and never decoded unless asked.
    func createNodes(_ nodes: [[UInt8]]) throws -> [Hash] {
        // Before parsing: a node past the maximum size is no sign of damage in the index edited.
        for bytes in nodes { try checkSize(ofNewNode: bytes.count) }
        var results = [(hash: Hash, node: Result<NodeBytes, any Error>)](
            repeating: (Store.emptyRoot.hash, .success(.empty)), count: nodes.count)
        @Sendable func make(_ index: Int) -> (hash: Hash, node: Result<NodeBytes, any Error>) {
            (Hash.of(nodes[index]), Result { try NodeBytes(validating: nodes[index]) })
        }
        if nodes.count < 64 {
            for index in nodes.indices { results[index] = make(index) }
        } else {
            results.withUnsafeMutableBufferPointer { buffer in
                // Each index is written by exactly one worker, as in `create(_:)`.
                nonisolated(unsafe) let output = buffer
                let workers = max(1, min(ProcessInfo.processInfo.activeProcessorCount, 8))
                DispatchQueue.concurrentPerform(iterations: workers) { worker in
                    for index in stride(from: worker, to: nodes.count, by: workers) { output[index] = make(index) }
                }
            }
        }
        for (bytes, result) in zip(nodes, results) {
            created[result.hash] = bytes
            do { localBytes[result.hash] = try result.node.get() } catch let error as ArborError {
                // Made from a damaged index (keys out of order, counts past any bound): name the cause.
                throw ArborError(.corruptObject, "an index node made from the index being edited does not parse, so that index is damaged: \(error.message)", backend: backend.engineName, operation: "edit")
            }
        }
        return results.map(\.hash)
    }

    /// Notes that an edit replaced node `hash` by `candidates` (``ProllyTree/rewrite(level:edits:root:rootHash:source:replaced:)``).
    func noteSuperseded(_ hash: Hash, _ node: NodeBytes, by candidates: [Hash]) {
        // A node this operation made and then edited again was never written.
        guard created[hash] == nil else { return }
        superseded.append((hash, node, candidates))
    }

    /// The stored nodes this operation's edits replaced, each written as a delta against the new
    /// node among `written` (the objects the operation wrote) that holds most of it, where that
    /// saves at least half its bytes (``ObjectDelta/make(old:base:)``).
    ///
    /// - Complexity: O(*s*) for the *s* entries of the nodes replaced and their candidates.
    func restatements(written: Set<Hash>) -> [Restatement] {
        var result = [Restatement]()
        result.reserveCapacity(superseded.count)
        var seen = Set<Hash>()
        for (hash, node, candidates) in superseded where !written.contains(hash) && seen.insert(hash).inserted {
            var best: Restatement?
            for candidate in candidates where candidate != hash && written.contains(candidate) {
                guard let base = localBytes[candidate], let delta = ObjectDelta.make(old: node, base: base) else { continue }
                if delta.count < best?.delta.count ?? .max { best = Restatement(hash: hash, base: candidate, delta: delta) }
            }
            if let best { result.append(best) }
        }
        return result
    }

    /// ``ProllyTree/checkSize(ofNewNode:)``, naming the backend and the operation.
    private func checkSize(ofNewNode byteCount: Int) throws {
        do { try ProllyTree.checkSize(ofNewNode: byteCount) } catch let error as ArborError {
            throw error.located(backend: backend.engineName, operation: "edit")
        }
    }

    /// The new nodes reachable from `root`, children first, ready to be written, each put in
    /// the store's caches. Nodes created and then abandoned by the edit (collapsed levels) are
    /// dropped.
    func newObjects(reachableFrom root: Hash) -> [(hash: Hash, bytes: [UInt8])] {
        var result = [(hash: Hash, bytes: [UInt8])]()
        var visited = Set<Hash>()
        func visit(_ hash: Hash) {
            guard let bytes = created[hash], visited.insert(hash).inserted else { return }
            if let node = local[hash] {
                if node.level > 0 {
                    for entry in node.entries { if case .node(let child, _) = entry.payload { visit(child) } }
                }
                cache.insert(node, for: hash)
            } else if let node = localBytes[hash] {
                // Made as bytes: a branch's children are read in place (checked when made).
                if node.level > 0 {
                    for index in 0..<node.count { if let child = try? node.child(at: index) { visit(child) } }
                }
                bytesCache.insert(node, for: hash)
            }
            result.append((hash, bytes))
        }
        visit(root)
        return result
    }
}

/// Fetching objects with their hashes checked.
enum ObjectFetch {
    /// Fetches `hashes`; throws ``ArborError/Code/missingObject`` for one that is absent and
    /// ``ArborError/Code/corruptObject`` for one whose bytes do not match its hash.
    ///
    /// One found missing is read once more after the batches of a collection's sweep then in
    /// flight have ended (``SweepMarker``): such a batch may have removed it just before a
    /// writer's version re-used it, and writes it back once it has marked again.
    static func verified(_ hashes: [Hash], from backend: any Backend) async throws -> [Hash: [UInt8]] {
        var objects = try await backend.get(hashes)
        let absent = hashes.filter { objects[$0] == nil }
        if !absent.isEmpty { objects.merge(try await SweepMarker.readAgain(absent, from: backend)) { $1 } }
        for hash in hashes {
            guard let bytes = objects[hash] else { throw missing(hash, backend.engineName) }
            guard Hash.of(bytes) == hash else { throw corrupt(hash, backend.engineName) }
        }
        return objects
    }

    static func missing(_ hash: Hash, _ engine: String) -> ArborError {
        ArborError(.missingObject, "object \(hash) is missing", backend: engine, operation: "get")
    }

    static func corrupt(_ hash: Hash, _ engine: String) -> ArborError {
        ArborError(.corruptObject, "object \(hash) does not match its hash", backend: engine, operation: "get")
    }
}

extension IndexNode: CacheCosted {
    /// Each entry's key and inline record are arrays of their own: their bytes plus about 80
    /// bytes of headers and allocation overhead each, and the entry itself.
    var cacheCost: Int {
        entries.reduce(64) { total, entry in
            let payload = if case .inline(let bytes) = entry.payload { bytes.count + 80 } else { 0 }
            return total + 48 + entry.key.count + 80 + payload
        }
    }
}

/// What a store keeps of a node it checked in place: its ``Fingerprint`` (the hash is the key).
struct VerifiedObject: CacheCosted {
    let fingerprint: UInt64
    /// The hash, the fingerprint and the table's share of them.
    var cacheCost: Int { 56 }
}

/// What a store keeps of the index nodes its point reads read in place (``InPlaceReading``).
final class InPlaceReadState: Sendable {
    /// The nodes found sound, against their hash and as index nodes, with their fingerprint:
    /// a later read of one checks the fingerprint instead of both.
    let verified: ObjectCache<VerifiedObject>
    /// Leaf reads so far, to sample which leaves are cached.
    private let leafReads = Atomic<UInt64>(0)
    /// One leaf read in this many also caches the leaf.
    static let admissionInterval: UInt64 = 8

    /// The store's backend if it lends objects in place: cast once, not at every read.
    let lender: (any InPlaceReading)?

    init(capacity: Int, byteLimit: Int, lender: (any InPlaceReading)?) {
        verified = ObjectCache(capacity: capacity, byteLimit: byteLimit)
        self.lender = lender
    }

    /// Whether this leaf read also copies the leaf into the store's cache of node bytes.
    ///
    /// A copy costs an allocation of kilobytes and evicts another node, and pays only when
    /// the leaf is read again before it is evicted in turn. Sampling admits a leaf after a few
    /// reads: a store whose leaves fit in the cache soon reads them all from there, and one
    /// read at random across many more leaves than the cache holds copies one leaf in eight,
    /// not each one it reads.
    func admitsLeaf() -> Bool {
        leafReads.add(1, ordering: .relaxed).newValue % Self.admissionInterval == 0
    }
}

extension NodeBytes: CacheCosted {
    /// Two arrays: the node's bytes, and its keys' abbreviations with its entries' offsets.
    var cacheCost: Int { 160 + bytes.count + 4 * 5 * count }
}

extension Version: CacheCosted {
    var cacheCost: Int { 256 + 32 * parents.count + replica.utf8.count + message.utf8.count }
}
