import Foundation

/// The shape rules of the index: a prolly tree whose node boundaries depend on keys alone.
///
/// An entry at level `L` ends its node when a 64-bit hash of its key salted with `L` falls in the
/// lowest 1/16 (leaves) or 1/32 (branches) of the range. Since that decision looks at nothing but the key, the same set of
/// records always yields the same nodes and the same root hash, whatever order it was written in.
enum ProllyTree {
    /// On average one leaf entry in `leafFanout` ends its leaf. Small leaves keep the bytes a
    /// commit rewrites low when its records land all over the index (random ids).
    static let leafFanout: UInt64 = 16
    /// On average one branch entry in `branchFanout` ends its node.
    static let branchFanout: UInt64 = 32
    /// Records whose canonical bytes are longer than this are stored as blob objects.
    static let inlineLimit = 1024

    @inline(__always)
    static func boundaryHash(_ key: [UInt8], level: Int) -> UInt64 {
        key.withUnsafeBufferPointer { boundaryHash($0, level: level) }
    }

    @inline(__always)
    static func boundaryHash(_ key: UnsafeBufferPointer<UInt8>, level: Int) -> UInt64 {
        // FNV-1a over the key, seeded with the level, then the MurmurHash3 finalizer for mixing.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ (UInt64(level) &* 0x9E37_79B9_7F4A_7C15)
        for byte in key { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return murmurMix(hash)
    }

    @inline(__always)
    static func isBoundary(_ key: [UInt8], level: Int) -> Bool {
        key.withUnsafeBufferPointer { isBoundary($0, level: level) }
    }

    @inline(__always)
    static func isBoundary(_ key: UnsafeBufferPointer<UInt8>, level: Int) -> Bool {
        boundaryHash(key, level: level) < boundaryThreshold(level: level)
    }

    /// A key whose ``boundaryHash(_:level:)`` is below this ends its node at `level`:
    /// ⌊(2⁶⁴ − 1) / fanout⌋.
    @inline(__always)
    static func boundaryThreshold(level: Int) -> UInt64 {
        UInt64.max / (level == 0 ? leafFanout : branchFanout)
    }

    /// The largest index node format 1 allows, in bytes: readers keep offsets into a node in 32
    /// bits (``NodeBytes``).
    static let maximumNodeSize = Int(UInt32.max)

    /// Throws ``ArborError/Code/invalidInput`` for a node an edit made that is larger than
    /// ``maximumNodeSize``: readers would refuse it, so the edit fails before anything is written.
    static func checkSize(ofNewNode byteCount: Int) throws {
        guard byteCount > maximumNodeSize else { return }
        throw ArborError(
            .invalidInput,
            "an index node of \(byteCount) bytes would exceed the format's maximum node size of \(maximumNodeSize) bytes (2³² − 1): "
                + "its entries are a long run of keys none of which is a boundary, and a node ends only at a boundary key "
                + "(FORMAT.md section 7.1); keys not chosen to avoid boundaries practically never form such a run")
    }

    /// Whether `payload` stores the record whose canonical bytes are `bytes` as
    /// ``payload(forRecord:)`` does: inline up to ``inlineLimit`` bytes, a blob above (a blob's
    /// hash is checked when it is read).
    static func isCanonical(_ payload: IndexPayload, forRecord bytes: [UInt8]) -> Bool {
        switch payload {
        case .inline: storesInline(recordSize: bytes.count)
        case .blob: !storesInline(recordSize: bytes.count)
        case .node: false
        }
    }

    /// Whether a record whose canonical bytes are `recordSize` long is stored inline in its
    /// leaf (up to ``inlineLimit`` bytes), rather than as a blob.
    static func storesInline(recordSize: Int) -> Bool { recordSize <= inlineLimit }

    /// The payload that stores `properties` as a record: inline, or a blob for large records.
    static func payload(forRecord bytes: [UInt8]) -> (payload: IndexPayload, blob: (Hash, [UInt8])?) {
        guard !storesInline(recordSize: bytes.count) else { return (.inline(bytes), nil) }
        let blob = Blob.encode(record: bytes)
        let hash = Hash.of(blob)
        return (.blob(hash), (hash, blob))
    }
}

/// The MurmurHash3 finalizer: a bijection of 64 bits that spreads every input bit over all of
/// the output.
@inline(__always)
func murmurMix(_ value: UInt64) -> UInt64 {
    var x = value
    x ^= x >> 33
    x &*= 0xff51_afd7_ed55_8ccd
    x ^= x >> 33
    x &*= 0xc4ce_b9fe_1a85_ec53
    x ^= x >> 33
    return x
}

/// Byte-wise three-way comparison of keys.
@inline(__always)
func compareKeys(_ lhs: [UInt8], _ rhs: [UInt8]) -> Int {
    lhs.withUnsafeBufferPointer { a in rhs.withUnsafeBufferPointer { b in compareKeys(a, b) } }
}

/// Byte-wise three-way comparison of slices of keys, in place.
func compareKeys(_ lhs: ArraySlice<UInt8>, _ rhs: ArraySlice<UInt8>) -> Int {
    lhs.withUnsafeBufferPointer { a in rhs.withUnsafeBufferPointer { b in compareKeys(a, b) } }
}

/// Byte-wise three-way comparison of keys in place.
@inline(__always)
func compareKeys(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
    let common = min(a.count, b.count)
    if common > 0 {
        let order = memcmpBytes(a.baseAddress!, b.baseAddress!, common)
        if order != 0 { return order }
    }
    return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
}

/// libc's `memcmp`, which compares a word or a vector at a time: keys of one type share a long
/// prefix (the type name), which a byte loop walks one byte per step on every probe.
@inline(__always)
private func memcmpBytes(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ count: Int) -> Int {
    let order = memcmp(a, b, count)
    return order == 0 ? 0 : (order < 0 ? -1 : 1)
}

extension IndexNode {
    /// The index of the first entry whose key is at least `key`, or the last entry if none is:
    /// the child of a branch that covers `key`.
    func childIndex(covering key: [UInt8]) -> Int {
        // Through buffer pointers: subscripting the array would copy each probed entry out,
        // retaining and releasing its key and payload, which cost more than the comparison.
        entries.withUnsafeBufferPointer { entries in
            var low = 0
            var high = entries.count - 1
            while low < high {
                let middle = (low + high) / 2
                if compareKeys(entries[middle].key, key) < 0 { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }
}

/// A position on one level of the tree: the path from the root down to one node at that level.
/// Nodes are read as bytes (``NodeBytes``), never decoded.
struct LevelCursor {
    let source: NodeSource
    let level: Int
    let root: NodeBytes
    let rootHash: Hash
    /// Branches from the root down to the parent of `node`, with the index taken in each.
    private(set) var path: [(node: NodeBytes, index: Int)] = []
    private(set) var node: NodeBytes
    /// The hash of `node`, as its parent names it.
    private(set) var nodeHash: Hash

    init(source: NodeSource, root: NodeBytes, rootHash: Hash, level: Int) {
        self.source = source
        self.root = root
        self.rootHash = rootHash
        self.level = level
        self.node = root
        self.nodeHash = rootHash
    }

    /// Moves to the node at `level` that covers `key`: the first whose last key is at least `key`,
    /// or the level's last node.
    ///
    /// The path of the previous seek is reused down to the first branch where `key` takes a
    /// different child, so sorted keys in one region fetch no node twice.
    mutating func seek(_ key: [UInt8]) async throws {
        var depth = 0
        var current = root
        var currentHash = rootHash
        while current.level > level {
            let index = current.childIndex(covering: key)
            if depth < path.count, path[depth].index == index, path[depth].node.level == current.level {
                // Same branch and same child as before: the next node down is already known.
                currentHash = try current.child(at: index)
                current = depth + 1 < path.count ? path[depth + 1].node : node
                depth += 1
                continue
            }
            path.removeSubrange(depth...)
            path.append((current, index))
            (current, currentHash) = try await child(of: (current, index))
            // Below a changed branch nothing of the old path applies.
            while current.level > level {
                let index = current.childIndex(covering: key)
                path.append((current, index))
                (current, currentHash) = try await child(of: (current, index))
            }
            break
        }
        node = current
        nodeHash = currentHash
    }

    var hasNext: Bool { path.contains { $0.index < $0.node.count - 1 } }

    /// Moves to the next node on the level. Returns `false` at the level's end.
    mutating func advance() async throws -> Bool {
        while let last = path.last, last.index >= last.node.count - 1 { path.removeLast() }
        guard !path.isEmpty else { return false }
        path[path.count - 1].index += 1
        var (current, currentHash) = try await child(of: path[path.count - 1])
        while current.level > level {
            path.append((current, 0))
            (current, currentHash) = try await child(of: (current, 0))
        }
        node = current
        nodeHash = currentHash
        return true
    }

    private func child(of step: (node: NodeBytes, index: Int)) async throws -> (NodeBytes, Hash) {
        let hash = try step.node.child(at: step.index)
        let child = try await source.nodeBytes(hash)
        guard child.level == step.node.level - 1 else { throw ProllyTree.wrongLevel(hash, child.level, under: step.node.level) }
        return (child, hash)
    }
}
