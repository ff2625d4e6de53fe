/// An object's bytes written as the bytes of another object, its *base*, that they share, and
/// the bytes they do not: what a backend may keep instead of an object a newer one superseded
/// (``Backend/restate(_:)``).
///
/// Every version stays readable, so each commit leaves behind the index nodes it replaced. With
/// records spread over the index (random ids), a commit of *k* records replaces about *k*
/// leaves, each kept whole, and the history soon outweighs the records many times over. A
/// replaced node is almost entirely its replacement's entries: written as copies of ranges of
/// the replacement's bytes, it takes tens of bytes instead of kilobytes. The newest version's
/// nodes stay whole, so reads at the heads are unchanged; older versions read through the
/// chain of bases.
///
/// The format: a marker byte (`0xD1`), the length of the bytes it makes (a varint), then
/// operations up to the end, each a tag byte and varints: `0` *n* and *n* bytes to copy as they
/// are, `1` *offset* *n* to copy *n* bytes of the base from *offset*.
public enum ObjectDelta {
    /// The first byte of every delta. An Arbor object begins with its format marker (`0xA1`), so
    /// a backend that keeps deltas among whole objects need look deeper only at values that
    /// begin with this byte (other bytes may begin with it too: the contract does not look
    /// inside objects).
    public static let marker: UInt8 = 0xD1
    private static let literalTag: UInt8 = 0
    private static let copyTag: UInt8 = 1

    /// The bytes `delta` makes of `base`. Throws ``ArborError/Code/corruptObject`` for a delta
    /// that is not one (a copy past the base's end, a length other than it says). The caller
    /// checks the result against the object's hash.
    ///
    /// - Complexity: O(*m*) for a result of *m* bytes.
    public static func apply(_ delta: [UInt8], to base: [UInt8]) throws -> [UInt8] {
        var reader = ByteReader(delta)
        func corrupt(_ why: String) -> ArborError {
            ArborError(.corruptObject, "malformed object delta: \(why) at byte \(reader.offset)")
        }
        guard try reader.byte() == marker else { throw corrupt("not a delta (no marker)") }
        // A result longer than the delta could make (each copy op of 3 bytes takes at most the
        // whole base) is refused before memory is reserved for it.
        let length = try reader.varint()
        let (most, overflow) = UInt64(delta.count).multipliedReportingOverflow(by: UInt64(max(base.count, 1)))
        guard overflow || length <= most else { throw corrupt("implausible length \(length)") }
        var result = [UInt8]()
        // No more than the inputs' bytes ahead of time: a damaged length must fail, not allocate.
        result.reserveCapacity(Int(min(length, UInt64(delta.count + base.count))))
        while !reader.isAtEnd {
            switch try reader.byte() {
            case literalTag:
                let range = try reader.sliceRange()
                result.append(contentsOf: delta[range])
            case copyTag:
                let offset = try reader.varint()
                let count = try reader.varint()
                guard offset <= UInt64(base.count), count <= UInt64(base.count) - offset else {
                    throw corrupt("a copy of \(count) bytes from \(offset) past the base's \(base.count)")
                }
                result.append(contentsOf: base[Int(offset)..<Int(offset + count)])
            case let tag:
                throw corrupt("unknown operation \(tag)")
            }
            guard result.count <= length else { throw corrupt("more than the \(length) bytes it says") }
        }
        guard result.count == length else { throw corrupt("\(result.count) bytes, not the \(length) it says") }
        return result
    }

    /// The length of the bytes a delta makes, read from its first bytes (at least its first 11,
    /// or all of it), or `nil` if they do not begin a delta.
    ///
    /// - Complexity: O(1).
    public static func length(ofDeltaPrefix prefix: [UInt8]) -> Int? {
        var reader = ByteReader(prefix)
        guard (try? reader.byte()) == marker, let length = try? reader.varint(), length <= UInt64(Int.max) else { return nil }
        return Int(length)
    }

    /// `old` written against `base`, two index nodes of one level: each entry of `old` that
    /// `base` holds byte for byte becomes a copy (runs of them one copy), the rest as they are.
    /// `nil` when that saves less than half of `old`'s bytes.
    ///
    /// - Complexity: O(*m* + *m'*) for nodes of *m* and *m'* entries (keys compared in order).
    static func make(old: NodeBytes, base: NodeBytes) -> [UInt8]? {
        guard old.count > 0, base.count > 0, old.level == base.level else { return nil }
        var writer = ByteWriter(capacity: 64)
        writer.byte(marker)
        writer.varint(old.bytes.count)
        // The run being gathered: bytes of `old` to write as they are, or of `base` to copy.
        var literal: Range<Int>? = nil
        var copy: Range<Int>? = nil
        func flushLiteral() {
            guard let range = literal else { return }
            writer.byte(literalTag)
            writer.varint(range.count)
            writer.bytes.append(contentsOf: old.bytes[range])
            literal = nil
        }
        func flushCopy() {
            guard let range = copy else { return }
            writer.byte(copyTag)
            writer.varint(range.lowerBound)
            writer.varint(range.count)
            copy = nil
        }
        func addLiteral(_ range: Range<Int>) {
            flushCopy()
            if let run = literal, run.upperBound == range.lowerBound { literal = run.lowerBound..<range.upperBound } else {
                flushLiteral()
                literal = range
            }
        }
        func addCopy(_ range: Range<Int>) {
            flushLiteral()
            if let run = copy, run.upperBound == range.lowerBound { copy = run.lowerBound..<range.upperBound } else {
                flushCopy()
                copy = range
            }
        }
        // The header (kind, level, count) first.
        addLiteral(0..<old.entryBytes(0..<1).startIndex)
        var i = 0
        var j = 0
        while i < old.count {
            let order = j < base.count ? old.compareKey(i, with: base, j) : -1
            if order > 0 {
                j += 1
                continue
            }
            let entry = old.entryBytes(i..<i + 1).indices
            if order == 0 && old.hasSamePayload(i, as: base, j) {
                addCopy(base.entryBytes(j..<j + 1).indices)
            } else {
                addLiteral(entry)
            }
            if order == 0 { j += 1 }
            i += 1
        }
        flushLiteral()
        flushCopy()
        return writer.bytes.count * 2 <= old.bytes.count ? writer.bytes : nil
    }
}

/// An object a backend may keep as a delta against another (``Backend/restate(_:)``).
public struct Restatement: Sendable, Equatable {
    /// The object restated, which the backend holds whole.
    public var hash: Hash
    /// The object whose bytes `delta` copies from, which the backend holds too.
    public var base: Hash
    /// `hash`'s bytes as ``ObjectDelta`` writes them against `base`'s.
    public var delta: [UInt8]

    public init(hash: Hash, base: Hash, delta: [UInt8]) {
        self.hash = hash
        self.base = base
        self.delta = delta
    }

    /// Calls `keep` for each of `restatements` that a backend may keep as its delta without
    /// losing a byte, in order, inside the backend's write transaction: the object and its base
    /// are whole (`wholeBytes` returns the stored bytes of an object held whole, `nil`
    /// otherwise), the delta makes exactly the object's stored bytes, and the object's height
    /// (`height`: the most steps any delta takes to reach it) stays below `maximumChain`.
    /// `keep` gets that height; its dependents then take one step more. An object kept earlier
    /// in the batch is no longer whole, so no later restatement takes it as a base.
    ///
    /// - Complexity: O(*k*) calls of `wholeBytes` and `height` for *k* restatements.
    public static func forEachKeepable(
        _ restatements: [Restatement], maximumChain: Int,
        wholeBytes: (Hash) throws -> [UInt8]?, height: (Hash) throws -> Int,
        keep: (Restatement, _ height: Int) throws -> Void
    ) throws {
        var bases = [Hash: [UInt8]?]()
        for restatement in restatements where restatement.hash != restatement.base && restatement.delta.first == ObjectDelta.marker {
            guard let old = try wholeBytes(restatement.hash) else { continue }
            let baseBytes: [UInt8]?
            if let known = bases[restatement.base] { baseBytes = known } else {
                baseBytes = try wholeBytes(restatement.base)
                bases[restatement.base] = baseBytes
            }
            guard let baseBytes, (try? ObjectDelta.apply(restatement.delta, to: baseBytes)) == old else { continue }
            let objectHeight = try height(restatement.hash)
            guard objectHeight < maximumChain else { continue }
            try keep(restatement, objectHeight)
            // No longer whole: a later restatement in this batch must not take it as a base.
            bases[restatement.hash] = .some(nil)
        }
    }
}
