import Foundation

/// The first byte of every Arbor object: the format marker and version (format 1).
let objectFormatMarker: UInt8 = 0xA1

/// What an object is; the second byte of its canonical bytes.
public enum ObjectKind: UInt8, Sendable, CaseIterable {
    /// An index node at level 0, holding records.
    case leaf = 1
    /// An index node above level 0, holding child nodes.
    case branch = 2
    /// A version.
    case commit = 3
    /// A record too large to sit inline in a leaf.
    case blob = 4
    /// The set of heads of a store, which the `heads` ref points to.
    case headSet = 5

    var name: String {
        switch self {
        case .leaf: "leaf"
        case .branch: "branch"
        case .commit: "commit"
        case .blob: "blob"
        case .headSet: "heads"
        }
    }

    /// The kind of the object `bytes`, or `nil` if they are not an Arbor object of this format.
    public static func of(_ bytes: some Collection<UInt8>) -> ObjectKind? {
        var iterator = bytes.makeIterator()
        guard iterator.next() == objectFormatMarker, let kind = iterator.next() else { return nil }
        return ObjectKind(rawValue: kind)
    }
}

extension ByteWriter {
    static func object(_ kind: ObjectKind, capacity: Int = 256) -> ByteWriter {
        var writer = ByteWriter(capacity: capacity)
        writer.byte(objectFormatMarker)
        writer.byte(kind.rawValue)
        return writer
    }
}

extension ByteReader {
    static func object(_ bytes: [UInt8], expecting kind: ObjectKind) throws -> ByteReader {
        var reader = ByteReader(bytes)
        guard try reader.byte() == objectFormatMarker else {
            throw reader.corrupt("not an Arbor format-1 object")
        }
        let found = try reader.byte()
        guard found == kind.rawValue else {
            throw reader.corrupt("expected a \(kind.name), found kind \(found)")
        }
        return reader
    }
}

// MARK: - Index nodes

extension UInt64 {
    /// `self + other`, or `UInt64.max` where that would overflow. Record counts are read from
    /// objects, which a damaged or hostile store may fill with any number: adding them up must
    /// give a wrong count (which verification then reports), never a crash.
    func addingSaturated(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}

@inline(__always)
func varintSize(_ value: UInt64) -> Int {
    value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
}

/// What an index entry holds: a record (inline, or in a blob object) or a child node.
enum IndexPayload: Equatable, Sendable {
    /// The canonical bytes of the record's properties.
    case inline([UInt8])
    /// A record stored as its own blob object.
    case blob(Hash)
    /// A child node and the number of records below it.
    case node(Hash, count: UInt64)

    var recordCount: UInt64 {
        if case .node(_, let count) = self { return count }
        return 1
    }
}

struct IndexEntry: Equatable, Sendable {
    /// The record's key bytes (leaf) or the last key below the child (branch).
    var key: [UInt8]
    var payload: IndexPayload
}

/// One node of the prolly tree. Level 0 nodes are leaves.
struct IndexNode: Sendable {
    var level: Int
    var entries: [IndexEntry]

    static let empty = IndexNode(level: 0, entries: [])

    var lastKey: [UInt8]? { entries.last?.key }
    var recordCount: UInt64 { entries.reduce(0) { $0.addingSaturated($1.payload.recordCount) } }

    /// The number of bytes ``encoded()`` gives.
    var encodedSize: Int {
        // Entries are read by index, never copied out: a copy would retain and release their
        // arrays, and nodes are encoded on several threads at once over shared arrays.
        var size = 2 + varintSize(UInt64(entries.count)) + (level > 0 ? varintSize(UInt64(level)) : 0)
        for index in entries.indices {
            size += varintSize(UInt64(entries[index].key.count)) + entries[index].key.count
            switch entries[index].payload {
            case .inline(let bytes): size += 1 + varintSize(UInt64(bytes.count)) + bytes.count
            case .blob: size += 33
            case .node(_, let count): size += 32 + varintSize(count)
            }
        }
        return size
    }

    func encoded() -> [UInt8] {
        // Sized exactly first, then written through a raw buffer: nodes are encoded on every
        // commit, and per-byte appends would dominate the cost.
        return [UInt8](unsafeUninitializedCapacity: encodedSize) { buffer, initialized in
            var offset = 0
            func put(_ byte: UInt8) { buffer[offset] = byte; offset += 1 }
            func putVarint(_ value: UInt64) {
                var rest = value
                while rest >= 0x80 { put(UInt8(truncatingIfNeeded: rest) | 0x80); rest >>= 7 }
                put(UInt8(rest))
            }
            func putBytes(_ bytes: [UInt8]) {
                bytes.withUnsafeBufferPointer { source in
                    guard let base = source.baseAddress, !source.isEmpty else { return }
                    (buffer.baseAddress! + offset).update(from: base, count: source.count)
                }
                offset += bytes.count
            }
            func putHash(_ hash: Hash) {
                var words = (hash.w0.bigEndian, hash.w1.bigEndian, hash.w2.bigEndian, hash.w3.bigEndian)
                withUnsafeBytes(of: &words) { raw in
                    for byte in raw { put(byte) }
                }
            }
            put(objectFormatMarker)
            put(level == 0 ? ObjectKind.leaf.rawValue : ObjectKind.branch.rawValue)
            if level > 0 { putVarint(UInt64(level)) }
            putVarint(UInt64(entries.count))
            for index in entries.indices {
                putVarint(UInt64(entries[index].key.count))
                putBytes(entries[index].key)
                switch entries[index].payload {
                case .inline(let bytes): put(0); putVarint(UInt64(bytes.count)); putBytes(bytes)
                case .blob(let hash): put(1); putHash(hash)
                case .node(let hash, let count): putHash(hash); putVarint(count)
                }
            }
            initialized = offset
        }
    }

    static func decode(_ bytes: [UInt8]) throws -> IndexNode {
        let (header, level, count) = try ByteReader.indexNode(bytes)
        var reader = header
        var entries = [IndexEntry]()
        entries.reserveCapacity(min(count, ByteReader.reservationLimit))
        try reader.indexEntries(level: level, count: count) { key, payload in
            entries.append(IndexEntry(key: Array(bytes[key]), payload: payload.decoded(from: bytes)))
        }
        return IndexNode(level: level, entries: entries)
    }
}

extension CanonicalReader {
    /// Reads an index node's header: a reader placed after it, the node's level (0 for a leaf)
    /// and its number of entries.
    static func indexNode(_ bytes: Bytes) throws -> (reader: CanonicalReader, level: Int, count: Int) {
        guard let kind = ObjectKind.of(bytes), kind == .leaf || kind == .branch else {
            throw ArborError(.corruptObject, "malformed object: not an index node")
        }
        // Point reads keep offsets into a node in 32 bits (``NodeBytes``); nodes are kilobytes.
        guard bytes.count <= ProllyTree.maximumNodeSize else {
            throw ArborError(.corruptObject, "malformed object: an index node of \(bytes.count) bytes, past the maximum node size")
        }
        var reader = CanonicalReader(bytes, offset: 2)
        let level = kind == .leaf ? 0 : try reader.level()
        let count = try reader.count()
        // Only the empty index is an empty node, and it is a leaf: readers descend into a
        // branch's entries without looking, so an empty branch is refused here.
        if kind == .branch && count == 0 { throw reader.corrupt("empty branch") }
        return (reader, level, count)
    }

    /// What an index entry holds after its key, read in place: an inline record is left where
    /// it lies.
    enum IndexEntryPayload {
        case inline(Range<Int>)
        case blob(Hash)
        case node(Hash, count: UInt64)

        /// The payload as an ``IndexPayload``, an inline record copied out of `bytes`.
        func decoded(from bytes: Bytes) -> IndexPayload {
            switch self {
            case .inline(let record): .inline(Array(bytes[record]))
            case .blob(let hash): .blob(hash)
            case .node(let hash, let count): .node(hash, count: count)
            }
        }
    }

    /// What a leaf entry holds after its key: a record inline (left where it lies) or a blob's hash.
    mutating func leafPayload() throws -> IndexEntryPayload {
        switch try byte() {
        case 0: return .inline(try sliceRange())
        case 1: return .blob(try hash())
        default: throw corrupt("unknown leaf payload")
        }
    }

    /// Reads the `count` entries of a node at `level` that follow its header (``indexNode(_:)``),
    /// checking what every decoder of nodes checks: keys strictly increasing, payloads of a known
    /// form, nothing after the last entry. Hands each entry's key (where it lies) and payload to
    /// `body`.
    ///
    /// - Complexity: O(*m*) for *m* bytes.
    mutating func indexEntries(level: Int, count: Int, _ body: (_ key: Range<Int>, _ payload: IndexEntryPayload) throws -> Void) throws {
        let bytes = self.bytes
        try bytes.withBytes { buffer in
            var previous: UnsafeBufferPointer<UInt8>?
            for _ in 0..<count {
                let key = try sliceRange()
                let keyBytes = UnsafeBufferPointer(rebasing: buffer[key])
                if let previous, compareKeys(previous, keyBytes) >= 0 { throw corrupt("keys out of order") }
                previous = keyBytes
                let payload: IndexEntryPayload
                if level == 0 {
                    payload = try leafPayload()
                } else {
                    payload = .node(try hash(), count: try varint())
                }
                try body(key, payload)
            }
        }
        try expectEnd()
    }
}

/// A record stored outside its leaf: the canonical bytes of its properties after a 2-byte header.
enum Blob {
    static func encode(record bytes: [UInt8]) -> [UInt8] {
        var writer = ByteWriter.object(.blob, capacity: bytes.count + 2)
        writer.bytes.append(contentsOf: bytes)
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> [UInt8] {
        _ = try ByteReader.object(bytes, expecting: .blob)
        return Array(bytes[2...])
    }
}

// MARK: - Commits and head sets

/// A hybrid logical clock reading: wall-clock milliseconds, and a counter that orders events
/// within one millisecond and keeps time moving forward when a clock runs behind its parents.
public struct HybridTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var milliseconds: UInt64
    public var counter: UInt32

    public init(milliseconds: UInt64, counter: UInt32 = 0) {
        self.milliseconds = milliseconds
        self.counter = counter
    }

    /// The next reading after every time in `parents`, and no earlier than `now`.
    public static func next(after parents: [HybridTime], now: Date = Date()) -> HybridTime {
        // Clamped: a clock the application supplies may give any date, an infinite one too.
        let milliseconds = (now.timeIntervalSince1970 * 1000).rounded(.down)
        let wall = milliseconds.isNaN || milliseconds <= 0 ? 0 : milliseconds >= 0x1p64 ? UInt64.max : UInt64(milliseconds)
        guard let latest = parents.max() else { return HybridTime(milliseconds: wall) }
        if wall > latest.milliseconds { return HybridTime(milliseconds: wall) }
        if latest.counter == .max {
            // A parent at the very end of time (only a damaged or hostile one) cannot be passed.
            return latest.milliseconds == .max ? latest : HybridTime(milliseconds: latest.milliseconds + 1)
        }
        return HybridTime(milliseconds: latest.milliseconds, counter: latest.counter + 1)
    }

    public static func < (lhs: HybridTime, rhs: HybridTime) -> Bool {
        (lhs.milliseconds, lhs.counter) < (rhs.milliseconds, rhs.counter)
    }

    /// The wall-clock part as a date.
    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// The wall-clock part as ISO 8601 text in UTC, to the millisecond:
    /// `2026-11-25T00:24:03.989Z`. Past the year 9999, which four year digits cannot write
    /// (only a damaged or hostile commit has such a time), the milliseconds since 1970.
    public var timestamp: String {
        // Formatted by hand: a Foundation ISO8601DateFormatter costs about 100 µs to make, and
        // `arbor log` prints one line per version.
        milliseconds < ISODate.endOfYear9999 ? ISODate.format(milliseconds: Int64(milliseconds)) : "\(milliseconds) ms after 1970"
    }

    /// ``timestamp``, then `+counter` when the counter is not zero.
    public var description: String {
        timestamp + (counter > 0 ? "+\(counter)" : "")
    }
}

/// A version: the root of the whole index at one moment, and where it came from.
public struct Version: Hashable, Sendable {
    /// The hash of this commit object.
    public let id: Hash
    /// The root node of the index.
    public let root: Hash
    /// The versions this one builds on: none for a first commit, two for a merge.
    public let parents: [Hash]
    /// When it was made, by the hybrid clock of the replica that made it.
    public let time: HybridTime
    /// The replica that made it.
    public let replica: String
    public let message: String
    /// The number of records in the index.
    public let recordCount: UInt64

    struct Content: Sendable {
        var root: Hash
        var parents: [Hash]
        var time: HybridTime
        var replica: String
        var message: String
        var recordCount: UInt64

        func encoded() -> [UInt8] {
            var writer = ByteWriter.object(.commit, capacity: 128 + message.utf8.count)
            writer.hash(root)
            writer.varint(parents.count)
            for parent in parents { writer.hash(parent) }
            writer.varint(time.milliseconds)
            writer.varint(UInt64(time.counter))
            writer.string(replica)
            writer.string(message)
            writer.varint(recordCount)
            return writer.bytes
        }

        /// The most parents a version names (a merge of many heads merges them in pairs).
        static let maximumParents = 64

        static func decode(_ bytes: [UInt8]) throws -> Content {
            var reader = try ByteReader.object(bytes, expecting: .commit)
            let root = try reader.hash()
            let parentCount = try reader.count(limit: maximumParents)
            var parents = [Hash]()
            for _ in 0..<parentCount { parents.append(try reader.hash()) }
            let milliseconds = try reader.varint()
            let counter = try reader.varint()
            guard counter <= UInt64(UInt32.max) else { throw reader.corrupt("clock counter out of range") }
            let content = Content(
                root: root, parents: parents, time: HybridTime(milliseconds: milliseconds, counter: UInt32(counter)),
                replica: try reader.string(), message: try reader.string(), recordCount: try reader.varint())
            try reader.expectEnd()
            return content
        }
    }

    init(id: Hash, content: Content) {
        self.id = id
        root = content.root
        parents = content.parents
        time = content.time
        replica = content.replica
        message = content.message
        recordCount = content.recordCount
    }

    var content: Content {
        Content(root: root, parents: parents, time: time, replica: replica, message: message, recordCount: recordCount)
    }
}

/// The heads of a store: a sorted set of commit hashes, stored as an object the `heads` ref names.
enum HeadSet {
    /// The most heads a head set holds (the decoder refuses more).
    static let maximumHeads = 1 << 20

    /// Throws ``ArborError/Code/invalidInput`` past ``maximumHeads``: a head set the decoder
    /// refused, once the heads ref named it, would make the store unreadable.
    static func encode(_ heads: Set<Hash>) throws -> [UInt8] {
        guard heads.count <= maximumHeads else {
            throw ArborError(.invalidInput, "a store holds at most \(maximumHeads) heads, and this change would make \(heads.count): merge heads first (arbor merge)")
        }
        var writer = ByteWriter.object(.headSet, capacity: 8 + heads.count * 32)
        writer.varint(heads.count)
        for head in heads.sorted() { writer.hash(head) }
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> [Hash] {
        var reader = try ByteReader.object(bytes, expecting: .headSet)
        let count = try reader.count(limit: maximumHeads)
        var heads = [Hash]()
        for _ in 0..<count {
            let head = try reader.hash()
            if let last = heads.last, !(last < head) { throw reader.corrupt("heads out of order") }
            heads.append(head)
        }
        try reader.expectEnd()
        return heads
    }
}
