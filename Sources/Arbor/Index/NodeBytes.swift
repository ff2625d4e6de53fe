/// An index node kept as its verified bytes and where each entry lies, for point reads and diffs.
///
/// A decoded ``IndexNode`` holds a key and a payload per entry, each its own allocation. A point
/// read wants one entry per level, and a diff only the entries that differ: decoding whole nodes
/// for them, then freeing them, cost more than the work itself (in a merge of 1,000,000 records,
/// allocation and release took half the time), and probing a decoded branch chases a pointer
/// per probe. Here searches and comparisons run over the bytes as stored and only the entries
/// wanted are decoded.
///
/// Built only by ``init(validating:)``, which checks the node with the same reader as
/// ``IndexNode/decode(_:)`` (``CanonicalReader/indexEntries(level:count:_:)``), so a node is refused
/// the same way on either path.
struct NodeBytes: Sendable {
    let bytes: [UInt8]
    /// 0 for a leaf.
    let level: Int
    /// The number of entries.
    let count: Int
    /// How many leading bytes every key of the node shares (those of its first and last keys).
    private let sharedPrefix: Int
    /// Two tables in one allocation (one retain per copy), both in key order:
    /// - from 0, each key's *abbreviation*: the 8 bytes after the shared prefix, big-endian, zero
    ///   padded, as two words (high, low). Abbreviations order as their keys do where they
    ///   differ, so a search compares words and reads key bytes only on a tie;
    /// - from 2 × `count`, where each entry lies: for entry *i*, its key starts at 3*i*, its key
    ///   ends and its payload starts at 3*i* + 1, and its payload ends at 3*i* + 2.
    private let table: [UInt32]

    /// The empty index: the only empty node.
    static let empty = NodeBytes(bytes: IndexNode.empty.encoded(), level: 0, count: 0, sharedPrefix: 0, table: [])

    private init(bytes: [UInt8], level: Int, count: Int, sharedPrefix: Int, table: [UInt32]) {
        self.bytes = bytes
        self.level = level
        self.count = count
        self.sharedPrefix = sharedPrefix
        self.table = table
    }

    /// Where entry `index`'s key starts (`part` 0), ends and its payload starts (1), and its
    /// payload ends (2).
    @inline(__always)
    private func bound(_ index: Int, _ part: Int) -> Int {
        Int(table[2 * count + 3 * index + part])
    }

    /// Checks `bytes` as a canonical index node.
    ///
    /// - Complexity: O(*m*) for *m* bytes, with two allocations (one kept).
    init(validating bytes: [UInt8]) throws {
        let (header, level, count) = try ByteReader.indexNode(bytes)
        var reader = header
        var bounds = [UInt32]()
        bounds.reserveCapacity(3 * min(count, ByteReader.reservationLimit))
        try reader.indexEntries(level: level, count: count) { key, payload in
            // Each entry starts where the previous one's payload ended, with its key's length.
            assert(key.lowerBound == (bounds.last.map(Int.init) ?? header.offset) + varintSize(UInt64(key.count)), "entry offsets out of step")
            bounds.append(UInt32(key.lowerBound))
            bounds.append(UInt32(key.upperBound))
            // The encoding is canonical (minimal varints), so equal payload bytes are equal payloads.
            let end = switch payload {
            case .inline(let record): record.upperBound
            case .blob: key.upperBound + 33
            case .node(_, let count): key.upperBound + 32 + varintSize(count)
            }
            bounds.append(UInt32(end))
        }
        assert((bounds.last.map(Int.init) ?? header.offset) == bytes.count, "the last payload does not end the node")
        // Keys increase (checked above), so the first and last share what all of them share.
        let entries = bounds.count / 3
        let sharedPrefix = entries == 0 ? 0 : bytes.withUnsafeBufferPointer { buffer in
            sharedPrefixLength(
                UnsafeBufferPointer(rebasing: buffer[Int(bounds[0])..<Int(bounds[1])]),
                UnsafeBufferPointer(rebasing: buffer[Int(bounds[3 * entries - 3])..<Int(bounds[3 * entries - 2])]))
        }
        var table = [UInt32]()
        table.reserveCapacity(5 * entries)
        table.append(contentsOf: repeatElement(0, count: 2 * entries))
        bytes.withUnsafeBufferPointer { buffer in
            for entry in 0..<entries {
                let key = UnsafeBufferPointer(rebasing: buffer[Int(bounds[3 * entry]) + sharedPrefix..<Int(bounds[3 * entry + 1])])
                let abbreviation = keyAbbreviation(key)
                table[2 * entry] = UInt32(truncatingIfNeeded: abbreviation >> 32)
                table[2 * entry + 1] = UInt32(truncatingIfNeeded: abbreviation)
            }
        }
        table += bounds
        self.bytes = bytes
        self.level = level
        self.count = entries
        self.sharedPrefix = sharedPrefix
        self.table = table
    }

    /// The first entry whose key is at least `key` (`count` if none is), and whether its key
    /// is `key`: a binary search over the abbreviations, reading key bytes only on a tie.
    func lowerBound(_ key: [UInt8]) -> (index: Int, isEqual: Bool) {
        guard count > 0 else { return (0, false) }
        return bytes.withUnsafeBufferPointer { buffer in
            key.withUnsafeBufferPointer { wanted in
                table.withUnsafeBufferPointer { table in
                    let count = self.count
                    func entryKey(_ index: Int) -> UnsafeBufferPointer<UInt8> {
                        let bounds = 2 * count + 3 * index
                        return UnsafeBufferPointer(rebasing: buffer[Int(table[bounds])..<Int(table[bounds + 1])])
                    }
                    // Past the shared prefix, or before or after every key.
                    let prefix = UnsafeBufferPointer(rebasing: entryKey(0)[..<sharedPrefix])
                    let prefixOrder = compareKeys(prefix, UnsafeBufferPointer(rebasing: wanted[..<min(sharedPrefix, wanted.count)]))
                    if prefixOrder < 0 { return (count, false) }
                    if prefixOrder > 0 { return (0, false) }
                    let abbreviated = keyAbbreviation(UnsafeBufferPointer(rebasing: wanted[sharedPrefix...]))
                    func compare(_ index: Int) -> Int {
                        let abbreviation = UInt64(table[2 * index]) << 32 | UInt64(table[2 * index + 1])
                        if abbreviation != abbreviated { return abbreviation < abbreviated ? -1 : 1 }
                        return compareKeys(entryKey(index), wanted)
                    }
                    var low = 0
                    var high = count
                    while low < high {
                        let middle = (low + high) / 2
                        if compare(middle) < 0 { low = middle + 1 } else { high = middle }
                    }
                    return (low, low < count && compare(low) == 0)
                }
            }
        }
    }

    /// The payload under `key` of a leaf that an engine lends in place (``InPlaceReading``),
    /// read from just past its header (`header`, ``CanonicalReader/indexNode(_:)``), or `nil` if it has
    /// none. Only the payload found is copied: a leaf read once is not worth an array and a
    /// table of offsets.
    ///
    /// If `checked`, every entry is checked as ``init(validating:)`` checks it, with the same
    /// reader. Otherwise the leaf was found sound before and its bytes match their fingerprint
    /// then, and the search stops at the first key not below `key`.
    ///
    /// - Complexity: O(*m*) for *m* bytes.
    static func payload(
        inLeaf header: CanonicalReader<UnsafeBufferPointer<UInt8>>, count: Int, for key: [UInt8], checked: Bool
    ) throws -> IndexPayload? {
        var reader = header
        let bytes = header.bytes
        return try key.withUnsafeBufferPointer { wanted -> IndexPayload? in
            func order(_ entryKey: Range<Int>) -> Int { compareKeys(UnsafeBufferPointer(rebasing: bytes[entryKey]), wanted) }
            guard checked else {
                for _ in 0..<count {
                    let order = order(try reader.sliceRange())
                    if order > 0 { return nil }
                    let payload = try reader.leafPayload()
                    if order == 0 { return payload.decoded(from: bytes) }
                }
                return nil
            }
            var found: IndexPayload?
            var passed = false
            try reader.indexEntries(level: 0, count: count) { entryKey, payload in
                // Keys are checked to increase, so the search stops comparing once past `key`.
                guard !passed else { return }
                let order = order(entryKey)
                guard order >= 0 else { return }
                passed = true
                guard order == 0 else { return }
                found = payload.decoded(from: bytes)
            }
            return found
        }
    }

    /// ``payload(inLeaf:count:for:checked:)`` on `bytes` as an engine would lend them, header
    /// included: what the fuzz checks hold against the decoder. Throws for a branch.
    static func payload(inLentLeaf bytes: [UInt8], for key: [UInt8], checked: Bool) throws -> IndexPayload? {
        try bytes.withUnsafeBufferPointer { buffer in
            let (header, level, count) = try CanonicalReader.indexNode(buffer)
            guard level == 0 else { throw header.corrupt("a branch where a leaf was expected") }
            return try payload(inLeaf: header, count: count, for: key, checked: checked)
        }
    }

    /// A leaf's payload under `key`, or `nil` if it has none.
    ///
    /// - Complexity: O(log *e*) key comparisons for *e* entries.
    func payload(for key: [UInt8]) throws -> IndexPayload? {
        let (index, isEqual) = lowerBound(key)
        guard isEqual else { return nil }
        return try payload(at: index)
    }

    /// A branch's child that covers `key`: the first whose last key is at least `key`, or the
    /// last child (it also covers every key past the node's last).
    ///
    /// - Complexity: O(log *e*) key comparisons for *e* entries.
    func child(covering key: [UInt8]) throws -> Hash {
        try child(at: childIndex(covering: key))
    }

    /// The index of the branch entry whose child covers `key`: the first whose last key is at
    /// least `key`, or the last. For branches only (a branch is never empty).
    ///
    /// - Complexity: O(log *e*) key comparisons for *e* entries.
    func childIndex(covering key: [UInt8]) -> Int {
        min(lowerBound(key).index, count - 1)
    }

    /// Compares entry `index`'s key with `key`, in place.
    ///
    /// - Complexity: O(key length).
    func compareKey(_ index: Int, to key: [UInt8]) -> Int {
        withEntry(index, key: true) { a in key.withUnsafeBufferPointer { b in compareKeys(a, b) } }
    }

    /// Entry `index`'s payload, decoded.
    ///
    /// - Complexity: O(1), plus a copy of an inline record.
    func payload(at index: Int) throws -> IndexPayload {
        var reader = ByteReader(bytes, offset: bound(index, 1))
        if level > 0 { return .node(try reader.hash(), count: try reader.varint()) }
        return try reader.leafPayload().decoded(from: bytes)
    }

    /// The child that branch entry `index` names.
    ///
    /// - Complexity: O(1).
    func child(at index: Int) throws -> Hash {
        var reader = ByteReader(bytes, offset: bound(index, 1))
        return try reader.hash()
    }

    /// Entry `index`'s key, copied out.
    func key(at index: Int) -> [UInt8] {
        Array(bytes[bound(index, 0)..<bound(index, 1)])
    }

    /// The bytes entries `range` take, their keys' lengths included: entries lie back to back in
    /// key order, so these encode those entries in any node of the same level.
    ///
    /// - Complexity: O(1).
    func entryBytes(_ range: Range<Int>) -> ArraySlice<UInt8> {
        guard !range.isEmpty else { return [] }
        let first = range.lowerBound
        let start = bound(first, 0) - varintSize(UInt64(bound(first, 1) - bound(first, 0)))
        return bytes[start..<bound(range.upperBound - 1, 2)]
    }

    /// The records below this node: one per entry of a leaf, its children's counts for a branch.
    ///
    /// - Complexity: O(*e*) for *e* entries.
    func recordCount() throws -> UInt64 {
        level == 0 ? UInt64(count) : try recordCount(of: 0..<count)
    }

    /// The records below branch entries `range`: the sum of their children's counts.
    ///
    /// - Complexity: O(*r*) for *r* entries.
    func recordCount(of range: Range<Int>) throws -> UInt64 {
        try range.reduce(0) { total, index in
            var reader = ByteReader(bytes, offset: bound(index, 1) + Hash.byteCount)
            return total.addingSaturated(try reader.varint())
        }
    }

    /// Whether entry `index`'s key ends a node at this node's level (``ProllyTree/isBoundary(_:level:)``).
    func endsNode(_ index: Int) -> Bool {
        withEntry(index, key: true) { ProllyTree.isBoundary($0, level: level) }
    }

    /// Compares entry `index`'s key with entry `otherIndex`'s key in `other`, in place.
    ///
    /// - Complexity: O(key length).
    func compareKey(_ index: Int, with other: NodeBytes, _ otherIndex: Int) -> Int {
        withEntry(index, key: true) { a in other.withEntry(otherIndex, key: true) { b in compareKeys(a, b) } }
    }

    /// Whether entry `index` holds the same payload as entry `otherIndex` of `other`: the
    /// encoding is canonical, so this compares bytes in place.
    ///
    /// - Complexity: O(payload length).
    func hasSamePayload(_ index: Int, as other: NodeBytes, _ otherIndex: Int) -> Bool {
        withEntry(index, key: false) { a in other.withEntry(otherIndex, key: false) { b in compareKeys(a, b) == 0 } }
    }

    /// Runs `body` over entry `index`'s key bytes (`key`) or payload bytes, in place.
    private func withEntry<R>(_ index: Int, key: Bool, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        let start = bound(index, key ? 0 : 1)
        let end = bound(index, key ? 1 : 2)
        return bytes.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[start..<end])) }
    }
}

/// How many leading bytes `a` and `b` share.
private func sharedPrefixLength(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
    var length = 0
    let limit = min(a.count, b.count)
    while length < limit, a[length] == b[length] { length += 1 }
    return length
}

/// The first 8 bytes of `key`, big-endian, zero padded: two keys whose abbreviations differ
/// order as their abbreviations do (a key that runs out first is a prefix of the other, and less).
@inline(__always)
private func keyAbbreviation(_ key: UnsafeBufferPointer<UInt8>) -> UInt64 {
    var word: UInt64 = 0
    for index in 0..<8 { word = word << 8 | UInt64(index < key.count ? key[index] : 0) }
    return word
}
