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
    /// Where each entry lies, in key order: for entry *i*, its key starts at 3*i*, its key ends
    /// and its payload starts at 3*i* + 1, and its payload ends at 3*i* + 2.
    private let bounds: [UInt32]

    /// The empty index: the only empty node.
    static let empty = NodeBytes(bytes: IndexNode.empty.encoded(), level: 0, bounds: [])

    private init(bytes: [UInt8], level: Int, bounds: [UInt32]) {
        self.bytes = bytes
        self.level = level
        self.bounds = bounds
    }

    /// The number of entries.
    var count: Int { bounds.count / 3 }

    /// Checks `bytes` as a canonical index node.
    ///
    /// - Complexity: O(*m*) for *m* bytes, with two allocations.
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
        self.bytes = bytes
        self.level = level
        self.bounds = bounds
    }

    /// The first entry whose key is at least `key` (`count` if none is), and whether its key
    /// is `key`.
    private func lowerBound(_ key: [UInt8]) -> (index: Int, isEqual: Bool) {
        bytes.withUnsafeBufferPointer { buffer in
            key.withUnsafeBufferPointer { wanted in
                bounds.withUnsafeBufferPointer { bounds in
                    func compare(_ index: Int) -> Int {
                        let entryKey = UnsafeBufferPointer(rebasing: buffer[Int(bounds[3 * index])..<Int(bounds[3 * index + 1])])
                        return compareKeys(entryKey, wanted)
                    }
                    var low = 0
                    var high = bounds.count / 3
                    while low < high {
                        let middle = (low + high) / 2
                        if compare(middle) < 0 { low = middle + 1 } else { high = middle }
                    }
                    return (low, low < bounds.count / 3 && compare(low) == 0)
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
        var reader = ByteReader(bytes, offset: Int(bounds[3 * index + 1]))
        if level > 0 { return .node(try reader.hash(), count: try reader.varint()) }
        return try reader.leafPayload().decoded(from: bytes)
    }

    /// The child that branch entry `index` names.
    ///
    /// - Complexity: O(1).
    func child(at index: Int) throws -> Hash {
        var reader = ByteReader(bytes, offset: Int(bounds[3 * index + 1]))
        return try reader.hash()
    }

    /// Entry `index`'s key, copied out.
    func key(at index: Int) -> [UInt8] {
        Array(bytes[Int(bounds[3 * index])..<Int(bounds[3 * index + 1])])
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
        let start = Int(bounds[3 * index + (key ? 0 : 1)])
        let end = Int(bounds[3 * index + (key ? 1 : 2)])
        return bytes.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[start..<end])) }
    }
}
