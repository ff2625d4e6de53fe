/// An index node kept as its verified bytes and where each entry starts, for point reads.
///
/// A decoded ``IndexNode`` holds a key and a payload per entry, each its own allocation. A point
/// read wants one entry per level: decoding a whole leaf for it, then freeing it when the cache
/// drops it, cost more than the read once a store's leaves outgrow the cache, and probing a
/// decoded branch chases a pointer per probe. Here the binary search runs over the bytes as
/// stored and only the entry found is decoded.
///
/// Built only by ``init(validating:)``, which checks the node with the same reader as
/// ``IndexNode/decode(_:)`` (``ByteReader/indexEntries(level:count:_:)``), so a node is refused
/// the same way on either path.
struct NodeBytes: Sendable {
    let bytes: [UInt8]
    /// 0 for a leaf.
    let level: Int
    /// Where each entry's key starts and ends, in key order: entry *i* at 2*i* and 2*i* + 1.
    private let keyBounds: [UInt32]

    /// The empty index: the only empty node.
    static let empty = NodeBytes(bytes: IndexNode.empty.encoded(), level: 0, keyBounds: [])

    private init(bytes: [UInt8], level: Int, keyBounds: [UInt32]) {
        self.bytes = bytes
        self.level = level
        self.keyBounds = keyBounds
    }

    private var count: Int { keyBounds.count / 2 }

    /// Checks `bytes` as a canonical index node.
    ///
    /// - Complexity: O(*m*) for *m* bytes, with two allocations.
    init(validating bytes: [UInt8]) throws {
        let (header, level, count) = try ByteReader.indexNode(bytes)
        var reader = header
        var bounds = [UInt32]()
        bounds.reserveCapacity(2 * min(count, ByteReader.reservationLimit))
        try reader.indexEntries(level: level, count: count) { key, _ in
            bounds.append(UInt32(key.lowerBound))
            bounds.append(UInt32(key.upperBound))
        }
        self.bytes = bytes
        self.level = level
        self.keyBounds = bounds
    }

    /// The first entry whose key is at least `key` (`count` if none is), and whether its key
    /// is `key`.
    private func lowerBound(_ key: [UInt8]) -> (index: Int, isEqual: Bool) {
        bytes.withUnsafeBufferPointer { buffer in
            key.withUnsafeBufferPointer { wanted in
                keyBounds.withUnsafeBufferPointer { bounds in
                    func compare(_ index: Int) -> Int {
                        let entryKey = UnsafeBufferPointer(rebasing: buffer[Int(bounds[2 * index])..<Int(bounds[2 * index + 1])])
                        return compareKeys(entryKey, wanted)
                    }
                    var low = 0
                    var high = bounds.count / 2
                    while low < high {
                        let middle = (low + high) / 2
                        if compare(middle) < 0 { low = middle + 1 } else { high = middle }
                    }
                    return (low, low < bounds.count / 2 && compare(low) == 0)
                }
            }
        }
    }

    /// A leaf's payload under `key`, or `nil` if it has none.
    ///
    /// - Complexity: O(log *e*) key comparisons for *e* entries.
    func payload(for key: [UInt8]) throws -> IndexPayload? {
        let (index, isEqual) = lowerBound(key)
        guard isEqual else { return nil }
        var reader = ByteReader(bytes, offset: Int(keyBounds[2 * index + 1]))
        return try reader.byte() == 0 ? .inline(Array(try reader.slice())) : .blob(try reader.hash())
    }

    /// A branch's child that covers `key`: the first whose last key is at least `key`, or the
    /// last child (it also covers every key past the node's last).
    ///
    /// - Complexity: O(log *e*) key comparisons for *e* entries.
    func child(covering key: [UInt8]) throws -> Hash {
        let index = min(lowerBound(key).index, count - 1)
        var reader = ByteReader(bytes, offset: Int(keyBounds[2 * index + 1]))
        return try reader.hash()
    }
}
