/// The objects one object names, read from its canonical bytes without decoding the records in
/// it: what an exchange, a migration or a verification follows from a root.
struct ObjectLinks {
    var kind: ObjectKind
    /// For a branch: its level, and its children with the records below each.
    var level = 0
    var children: [(hash: Hash, count: UInt64)] = []
    /// For a leaf: the blobs its records are stored in.
    var blobs: [Hash] = []
    /// For an index node: the records it holds (a leaf) or its children hold (a branch, as
    /// ``IndexNode/recordCount`` counts them).
    var recordCount: UInt64 = 0
    /// For a commit: its index root and parents, and when it was made.
    var root: Hash?
    var parents: [Hash] = []
    var time = HybridTime(milliseconds: 0)
    /// For a head set: the heads it names.
    var heads: [Hash] = []
    /// Read only when asked (`keys`), for verification and for the nodes an exchange copies, as digests (``keyDigest(_:)``): an index
    /// node's last key (`nil` for the empty leaf), and a branch's key for each of `children`,
    /// which must be that child's last key.
    var lastKeyDigest: Int?
    var childKeyDigests: [Int] = []
    /// With `keys`, where the node's first key lies in its bytes (`nil` for the empty leaf),
    /// and, for a branch, each child's key: for checks that compare keys' order, not only
    /// their equality, against the bytes the caller holds.
    var firstKeyRange: Range<Int>?
    var childKeyRanges: [Range<Int>] = []
    /// Read only when asked (`shape`), for verification: the first entry of an index node,
    /// before its last, whose key is a boundary at the node's level (a boundary ends its node,
    /// so in a canonical node only the last entry is one).
    var earlyBoundary: Int?
    /// With `shape`, the first record a leaf holds inline that is too large to be inline
    /// (``ProllyTree/storesInline(recordSize:)``): its entry and its size.
    var oversizedInline: (entry: Int, size: Int)?
    /// Read only when asked (`records`), for verification: the first entry of a leaf whose key is
    /// not a record key or whose inline record does not decode, and why.
    var undecodableRecord: (entry: Int, reason: String)?

    /// Whether the object is a node of an index (a leaf or a branch).
    var isIndexNode: Bool { kind == .leaf || kind == .branch }

    /// Reads the links of `bytes` (and with `keys`, an index node's keys as well; with `shape`,
    /// what breaks an index node's canonical shape; with `records`, a leaf's entry whose record
    /// would not read back); throws ``ArborError/Code/unsupportedFormat`` for an object of
    /// another format, ``ArborError/Code/corruptObject`` for one that does not parse.
    init(_ bytes: [UInt8], keys: Bool = false, shape: Bool = false, records: Bool = false) throws {
        guard bytes.count >= 2 else { throw ArborError(.corruptObject, "malformed object: \(bytes.count) bytes") }
        guard bytes[0] == objectFormatMarker else {
            throw ArborError(.unsupportedFormat, "an object of another format (marker 0x\(String(bytes[0], radix: 16)); this Arbor reads 0x\(String(objectFormatMarker, radix: 16)))")
        }
        guard let kind = ObjectKind(rawValue: bytes[1]) else { throw ArborError(.corruptObject, "malformed object: unknown kind \(bytes[1])") }
        self.kind = kind
        switch kind {
        case .leaf, .branch:
            // The same checks as every decoder of nodes (key order, payload forms, the end), so
            // an exchange, a migration or a verification refuses exactly the nodes a read refuses.
            let (header, level, count) = try ByteReader.indexNode(bytes)
            var reader = header
            var children = [(hash: Hash, count: UInt64)](), blobs = [Hash]()
            if level > 0 { children.reserveCapacity(min(count, ByteReader.reservationLimit)) }
            var childKeyDigests = [Int](), childKeyRanges = [Range<Int>](), firstKey: Range<Int>?, lastKey: Range<Int>?
            var entry = 0, earlyBoundary: Int?, oversizedInline: (entry: Int, size: Int)?, undecodableRecord: (entry: Int, reason: String)?
            if keys && level > 0 {
                childKeyDigests.reserveCapacity(min(count, ByteReader.reservationLimit))
                childKeyRanges.reserveCapacity(min(count, ByteReader.reservationLimit))
            }
            try reader.indexEntries(level: level, count: count) { key, payload in
                switch payload {
                case .inline: break
                case .blob(let hash): blobs.append(hash)
                case .node(let hash, let count):
                    children.append((hash, count))
                    if keys {
                        childKeyDigests.append(Self.keyDigest(bytes[key]))
                        childKeyRanges.append(key)
                    }
                }
                if firstKey == nil { firstKey = key }
                lastKey = key
                if records, level == 0, undecodableRecord == nil, let reason = Self.recordDamage(key: bytes[key], payload: payload, in: bytes) {
                    undecodableRecord = (entry, reason)
                }
                if shape {
                    if case .inline(let record) = payload, oversizedInline == nil, !ProllyTree.storesInline(recordSize: record.count) {
                        oversizedInline = (entry, record.count)
                    }
                    if entry < count - 1, earlyBoundary == nil,
                        bytes[key].withUnsafeBufferPointer({ ProllyTree.isBoundary($0, level: level) }) {
                        earlyBoundary = entry
                    }
                }
                entry += 1
            }
            self.earlyBoundary = earlyBoundary
            self.oversizedInline = oversizedInline
            self.undecodableRecord = undecodableRecord
            if keys {
                self.childKeyDigests = childKeyDigests
                self.childKeyRanges = childKeyRanges
                firstKeyRange = firstKey
                lastKeyDigest = lastKey.map { Self.keyDigest(bytes[$0]) }
            }
            self.level = level
            self.children = children
            self.blobs = blobs
            recordCount = level == 0 ? UInt64(count) : children.reduce(0) { $0.addingSaturated($1.count) }
        case .commit:
            let content = try Version.Content.decode(bytes)
            root = content.root
            parents = content.parents
            time = content.time
        case .headSet:
            heads = try HeadSet.decode(bytes)
        case .blob:
            break
        }
    }

    /// Why the record of a leaf's entry would not read back: its key is no record key, or its
    /// inline record does not decode as reads decode it (``RecordCoding/decode(_:)``); `nil` if
    /// it would. A blob's record is checked where the blob is read.
    static func recordDamage(key: ArraySlice<UInt8>, payload: ByteReader.IndexEntryPayload, in bytes: [UInt8]) -> String? {
        do {
            // An ASCII key with a NUL is a record key; only others need the strings made.
            let isASCIIKey = key.withUnsafeBufferPointer { ByteReader.isASCII($0) && $0.contains(0) }
            if !isASCIIKey { _ = try RecordKey(indexBytes: key) }
            if case .inline(let record) = payload {
                try bytes.withUnsafeBufferPointer { try RecordCoding.check(UnsafeBufferPointer(rebasing: $0[record])) }
            }
            return nil
        } catch {
            return (error as? ArborError)?.message ?? "\(error)"
        }
    }

    /// A digest of an index key that compares keys without copying them: SipHash with this
    /// process's own seed (unless `SWIFT_DETERMINISTIC_HASHING` is set), so a damaged or hostile
    /// store cannot be made to collide ahead of time. A collision could only hide damage.
    static func keyDigest(_ key: ArraySlice<UInt8>) -> Int {
        var hasher = Hasher()
        key.withUnsafeBytes { hasher.combine(bytes: $0) }
        return hasher.finalize()
    }

    /// The links of object `hash` of `backend`, which must be of `kind` (any kind when `nil`);
    /// a failure names the object and the backend.
    static func read(_ hash: Hash, _ bytes: [UInt8], expecting kind: ObjectKind?, keys: Bool = false, in backend: any Backend, operation: String) throws -> ObjectLinks {
        do {
            let links = try ObjectLinks(bytes, keys: keys)
            if let kind, links.kind != kind {
                throw ArborError(.corruptObject, "expected a \(kind.name), found a \(links.kind.name)")
            }
            return links
        } catch let error as ArborError {
            throw ArborError(error.code, "object \(hash): \(error.message)", backend: backend.engineName, operation: operation)
        }
    }

    /// The key child `index` of this branch (whose bytes are `bytes`) must start past, so that
    /// siblings do not overlap: the key the child before it is filed under, as a slice of
    /// `bytes`; for the first child, `inherited`, the key this node itself must start past.
    /// `nil` when not known (keys not read, or a root's first child).
    func lowerKey(ofChild index: Int, in bytes: [UInt8], inherited: ArraySlice<UInt8>?) -> ArraySlice<UInt8>? {
        index == 0 ? inherited : index <= childKeyRanges.count ? bytes[childKeyRanges[index - 1]] : nil
    }

    /// Whether this node's first key (in `bytes`, its bytes) is past `lowerKey`; true when
    /// there is no such key, or the node has no entry.
    func startsPast(_ lowerKey: ArraySlice<UInt8>?, in bytes: [UInt8]) -> Bool {
        guard let lowerKey, let first = firstKeyRange else { return true }
        return compareKeys(bytes[first], lowerKey) > 0
    }

    /// Every object this one names directly.
    var all: [Hash] {
        switch kind {
        case .leaf: blobs
        case .branch: children.map(\.hash)
        case .commit: (root.map { [$0] } ?? []) + parents
        case .headSet: heads
        case .blob: []
        }
    }
}
