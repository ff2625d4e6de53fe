import Foundation

/// Appends the primitives of the canonical format (see FORMAT.md) to a byte buffer.
struct ByteWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// Unsigned LEB128, shortest form.
    mutating func varint(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    mutating func varint(_ value: Int) { varint(UInt64(value)) }

    /// ZigZag, then LEB128: small magnitudes of either sign stay short.
    mutating func signed(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    mutating func fixed64(_ value: UInt64) {
        var bigEndian = value.bigEndian
        withUnsafeBytes(of: &bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func lengthPrefixed<C: Collection>(_ data: C) where C.Element == UInt8 {
        varint(data.count)
        bytes.append(contentsOf: data)
    }

    mutating func string(_ value: String) {
        var copy = value
        copy.withUTF8 { lengthPrefixed($0) }
    }

    mutating func hash(_ value: Hash) { value.append(to: &bytes) }
}

/// Bytes a ``CanonicalReader`` can read: an array it holds, or memory an engine lends for the
/// length of a call (``InPlaceReading``), which index-node checks read where it lies.
protocol CanonicalByteStorage: RandomAccessCollection where Element == UInt8, Index == Int {
    /// Runs `body` over the bytes in contiguous memory.
    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R
}

extension Array: CanonicalByteStorage where Element == UInt8 {
    @inline(__always)
    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R { try withUnsafeBufferPointer(body) }
}

extension UnsafeBufferPointer: CanonicalByteStorage where Element == UInt8 {
    @inline(__always)
    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R { try body(self) }
}

/// Reads the primitives of the canonical format from an array of bytes (see ``CanonicalReader``).
typealias ByteReader = CanonicalReader<[UInt8]>

/// Reads the primitives of the canonical format, rejecting every non-canonical form, so that
/// one object has exactly one encoding. Generic over where the bytes lie, so that the checks of
/// a node read in place are the very checks of one read into an array.
struct CanonicalReader<Bytes: CanonicalByteStorage> {
    let bytes: Bytes
    var offset: Int

    init(_ bytes: Bytes, offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var isAtEnd: Bool { offset == bytes.count }

    /// At most how many elements a decoder reserves room for ahead of reading them: a count is
    /// only as trustworthy as its object, and each nested collection would reserve again.
    static var reservationLimit: Int { 1024 }

    func corrupt(_ why: String) -> ArborError {
        ArborError(.corruptObject, "malformed object: \(why) at byte \(offset)")
    }

    mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw corrupt("unexpected end") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func varint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next = try byte()
            if shift == 63 && next > 1 { throw corrupt("varint overflow") }
            result |= UInt64(next & 0x7F) << shift
            if next & 0x80 == 0 {
                if next == 0 && shift > 0 { throw corrupt("non-minimal varint") }
                return result
            }
            shift += 7
        }
    }

    /// A number of elements that follow, each at least a byte long: a count past the bytes left
    /// is refused before anyone reserves memory for it.
    mutating func count(limit: Int = 1 << 28) throws -> Int {
        let value = try varint()
        guard value <= UInt64(limit), value <= UInt64(bytes.count - offset) else {
            throw corrupt("implausible count \(value)")
        }
        return Int(value)
    }

    /// A branch's level: 1 to 64 (64 levels of at least two children each is past any store).
    mutating func level() throws -> Int {
        let value = try varint()
        guard (1...64).contains(value) else { throw corrupt(value == 0 ? "branch at level 0" : "implausible level \(value)") }
        return Int(value)
    }

    mutating func signed() throws -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    mutating func fixed64() throws -> UInt64 {
        guard bytes.count - offset >= 8 else { throw corrupt("unexpected end") }
        var value: UInt64 = 0
        for index in offset..<(offset + 8) { value = (value << 8) | UInt64(bytes[index]) }
        offset += 8
        return value
    }

    mutating func slice() throws -> Bytes.SubSequence {
        bytes[try sliceRange()]
    }

    /// Where a length-prefixed run of bytes lies, without taking it.
    mutating func sliceRange() throws -> Range<Int> {
        let length = try varint()
        guard length <= UInt64(bytes.count - offset) else { throw corrupt("length past the end") }
        defer { offset += Int(length) }
        return offset..<(offset + Int(length))
    }

    mutating func hash() throws -> Hash {
        guard bytes.count - offset >= 32 else { throw corrupt("unexpected end") }
        defer { offset += 32 }
        return bytes.withBytes { Hash(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: $0[offset..<(offset + 32)])))! }
    }

    func expectEnd() throws {
        guard isAtEnd else { throw corrupt("trailing bytes") }
    }
}

extension CanonicalReader {
    mutating func string() throws -> String {
        let range = try sliceRange()
        // `String(validating:as:)` runs as unspecialised generic code, whose metadata lookups
        // cost more than the check. Decoding repairs invalid UTF-8 (with U+FFFD), which changes
        // the bytes, so the input was valid exactly when the string's bytes equal it.
        return try bytes.withBytes { buffer in
            let input = UnsafeBufferPointer(rebasing: buffer[range])
            let text = String(decoding: input, as: UTF8.self)
            let unchanged = text.utf8.withContiguousStorageIfAvailable { stored in
                stored.count == input.count && (input.isEmpty || memcmp(stored.baseAddress!, input.baseAddress!, input.count) == 0)
            } ?? text.utf8.elementsEqual(input)
            guard unchanged else { throw corrupt("invalid UTF-8") }
            return text
        }
    }
}

// MARK: - Property values and records

enum ValueTag: UInt8 {
    case null = 0, `false`, `true`, int, double, string, date, bytes, reference, child, array, map
}

extension ByteWriter {
    mutating func recordKey(_ key: RecordKey) {
        string(key.type)
        string(key.id)
    }

    mutating func value(_ value: PropertyValue) {
        switch value {
        case .null: byte(ValueTag.null.rawValue)
        case .bool(let flag): byte(flag ? ValueTag.true.rawValue : ValueTag.false.rawValue)
        case .int(let number): byte(ValueTag.int.rawValue); signed(number)
        case .double(let number): byte(ValueTag.double.rawValue); fixed64(PropertyValue.canonicalBits(number))
        case .string(let text): byte(ValueTag.string.rawValue); string(text)
        case .date(let date):
            byte(ValueTag.date.rawValue)
            fixed64(PropertyValue.canonicalBits(date.timeIntervalSinceReferenceDate))
        case .bytes(let data): byte(ValueTag.bytes.rawValue); lengthPrefixed(data)
        case .reference(let key): byte(ValueTag.reference.rawValue); recordKey(key)
        case .child(let key): byte(ValueTag.child.rawValue); recordKey(key)
        case .array(let values):
            byte(ValueTag.array.rawValue)
            varint(values.count)
            for element in values { self.value(element) }
        case .map(let values):
            byte(ValueTag.map.rawValue)
            namedValues(values)
        }
    }

    /// Names in UTF-8 byte order, each followed by its value.
    mutating func namedValues(_ values: [String: PropertyValue]) {
        varint(values.count)
        // Sorted as pairs: no second lookup of each name.
        for (name, propertyValue) in values.sorted(by: { utf8Less($0.key, $1.key) }) {
            string(name)
            value(propertyValue)
        }
    }

    /// `entries`, already in UTF-8 name order and with distinct names, as ``namedValues(_:)``
    /// writes a dictionary of them.
    mutating func namedValues(sorted entries: [(name: String, value: PropertyValue)]) {
        varint(entries.count)
        for (name, propertyValue) in entries {
            string(name)
            value(propertyValue)
        }
    }
}

extension PropertyValue {
    /// Whether the value, at `depth`, and every value inside it lie within
    /// ``ByteReader/maximumValueDepth``: what the canonical decoder reads back. Looks no deeper
    /// than that.
    func fitsValueDepth(at depth: Int = 0) -> Bool {
        guard depth < ByteReader.maximumValueDepth else { return false }
        switch self {
        case .array(let values): return values.allSatisfy { $0.fitsValueDepth(at: depth + 1) }
        case .map(let values): return values.values.allSatisfy { $0.fitsValueDepth(at: depth + 1) }
        default: return true
        }
    }

    /// The value's canonical bytes (tag and payload), as records store it: what orders values
    /// deterministically wherever an order must be the same on every replica.
    static func canonicalBytes(of value: PropertyValue) -> [UInt8] {
        var writer = ByteWriter()
        writer.value(value)
        return writer.bytes
    }
}

extension CanonicalReader {
    /// How deep values nest in a record: a property's value is at depth 0, an element of an
    /// array or a value of a map one deeper than the array or map; depth 64 is refused.
    static var maximumValueDepth: Int { 64 }

    mutating func recordKey() throws -> RecordKey {
        RecordKey(type: try string(), id: try string())
    }

    mutating func value(depth: Int = 0) throws -> PropertyValue {
        guard depth < Self.maximumValueDepth else { throw corrupt("values nested deeper than 64") }
        guard let tag = ValueTag(rawValue: try byte()) else { throw corrupt("unknown value tag") }
        switch tag {
        case .null: return .null
        case .false: return .bool(false)
        case .true: return .bool(true)
        case .int: return .int(try signed())
        case .double: return .double(try canonicalDouble())
        case .string: return .string(try string())
        case .date: return .date(Date(timeIntervalSinceReferenceDate: try canonicalDouble()))
        case .bytes: return .bytes(Array(try slice()))
        case .reference: return .reference(try recordKey())
        case .child: return .child(try recordKey())
        case .array:
            let count = try count()
            var values = [PropertyValue]()
            values.reserveCapacity(Swift.min(count, Self.reservationLimit))
            for _ in 0..<count { values.append(try value(depth: depth + 1)) }
            return .array(values)
        case .map: return .map(try namedValues(depth: depth + 1))
        }
    }

    /// Reads past one value, checking all that ``value(depth:)`` checks, without building it.
    mutating func checkValue(depth: Int = 0) throws {
        guard depth < Self.maximumValueDepth else { throw corrupt("values nested deeper than 64") }
        guard let tag = ValueTag(rawValue: try byte()) else { throw corrupt("unknown value tag") }
        switch tag {
        case .null, .false, .true: break
        case .int: _ = try signed()
        case .double, .date: _ = try canonicalDouble()
        case .string: _ = try checkString()
        case .bytes: _ = try sliceRange()
        case .reference, .child: _ = try checkString(); _ = try checkString()
        case .array:
            for _ in 0..<(try count()) { try checkValue(depth: depth + 1) }
        case .map: try checkNamedValues(depth: depth + 1)
        }
    }

    /// Reads past named values, checking all that ``namedValues(depth:)`` checks, without
    /// building them.
    mutating func checkNamedValues(depth: Int = 0) throws {
        let count = try count()
        // Where the names lie, for the Unicode check below: on the stack for a record's usual
        // few, else in an array that grows with the names read (a count is only a claim).
        guard count > 16 else {
            return try withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: count) { names in
                try checkNamedValues(count: count, depth: depth) { names.initializeElement(at: $0, to: $1) } names: { Array(names) }
            }
        }
        var names = [Range<Int>]()
        try checkNamedValues(count: count, depth: depth) { names.append($1) } names: { names }
    }

    /// The entries of ``checkNamedValues(depth:)``, each name's place handed to `keep` with its
    /// index, and all of them back from `names` where two may be one Unicode name.
    private mutating func checkNamedValues(
        count: Int, depth: Int, keep: (Int, Range<Int>) -> Void, names: () -> [Range<Int>]
    ) throws {
        var previous: Range<Int>?
        var allASCII = true
        for index in 0..<count {
            let (name, isASCII) = try checkString()
            if let previous, bytes.withBytes({ compareKeys(UnsafeBufferPointer(rebasing: $0[previous]), UnsafeBufferPointer(rebasing: $0[name])) }) >= 0 {
                throw corrupt("names out of order")
            }
            previous = name
            allASCII = allASCII && isASCII
            keep(index, name)
            try checkValue(depth: depth)
        }
        // Names of distinct bytes can be canonically equivalent Unicode only where one is not
        // ASCII (the Kelvin sign is a K): then they are compared as the decoder's dictionary does.
        guard !allASCII, count > 1 else { return }
        let names = names()
        var seen = Set<String>(minimumCapacity: names.count)
        for range in names {
            let name = bytes.withBytes { String(decoding: UnsafeBufferPointer(rebasing: $0[range]), as: UTF8.self) }
            guard seen.insert(name).inserted else {
                throw corrupt("two names are canonically equivalent Unicode (\(String(reflecting: String(name.prefix(40)))))")
            }
        }
    }

    /// Whether every byte is ASCII (below 0x80).
    @inline(__always)
    static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var high: UInt8 = 0
        for byte in bytes { high |= byte }
        return high < 0x80
    }

    /// Reads past a string, checking what ``string()`` checks; an ASCII one (valid UTF-8) without
    /// making it. Returns where its bytes lie, and whether they are ASCII.
    mutating func checkString() throws -> (range: Range<Int>, isASCII: Bool) {
        let start = offset
        let range = try sliceRange()
        let isASCII = bytes.withBytes { Self.isASCII(UnsafeBufferPointer(rebasing: $0[range])) }
        if !isASCII {
            offset = start
            _ = try string()
        }
        return (range, isASCII)
    }

    /// Skips one value, collecting the keys of the children it names, without building it.
    mutating func collectChildren(into keys: inout [RecordKey], depth: Int = 0) throws {
        guard depth < Self.maximumValueDepth else { throw corrupt("values nested deeper than 64") }
        guard let tag = ValueTag(rawValue: try byte()) else { throw corrupt("unknown value tag") }
        switch tag {
        case .null, .false, .true: break
        case .int: _ = try varint()
        case .double, .date: _ = try fixed64()
        case .string, .bytes: _ = try slice()
        case .reference: _ = try slice(); _ = try slice()
        case .child: keys.append(try recordKey())
        case .array:
            for _ in 0..<(try count()) { try collectChildren(into: &keys, depth: depth + 1) }
        case .map:
            for _ in 0..<(try count()) {
                _ = try slice()
                try collectChildren(into: &keys, depth: depth + 1)
            }
        }
    }

    mutating func canonicalDouble() throws -> Double {
        let bits = try fixed64()
        let number = Double(bitPattern: bits)
        if number.isNaN && bits != PropertyValue.canonicalNaNBits { throw corrupt("non-canonical NaN") }
        return number
    }

    mutating func namedValues(depth: Int = 0) throws -> [String: PropertyValue] {
        let count = try count()
        var result = [String: PropertyValue](minimumCapacity: Swift.min(count, Self.reservationLimit))
        var previous: String?
        for _ in 0..<count {
            let name = try string()
            if let previous, !utf8Less(previous, name) { throw corrupt("names out of order") }
            // Distinct bytes, yet one dictionary key: decoding both would silently drop a value.
            if result[name] != nil { throw corrupt("two names are canonically equivalent Unicode (\(String(reflecting: String(name.prefix(40)))))") }
            result[name] = try value(depth: depth)
            previous = name
        }
        return result
    }
}

/// The canonical bytes of a record's properties (its key lives in the index entry).
enum RecordCoding {
    static func encode(_ properties: [String: PropertyValue]) -> [UInt8] {
        var writer = ByteWriter(capacity: 128)
        writer.namedValues(properties)
        return writer.bytes
    }

    /// The same bytes as ``encode(_:)`` of the properties' dictionary, from properties already
    /// in UTF-8 name order (``PropertyList/sortedByName()``).
    static func encode(sorted properties: [(name: String, value: PropertyValue)]) -> [UInt8] {
        var writer = ByteWriter(capacity: 128)
        writer.namedValues(sorted: properties)
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> [String: PropertyValue] {
        var reader = ByteReader(bytes)
        let properties = try reader.namedValues()
        try reader.expectEnd()
        return properties
    }

    /// Throws what ``decode(_:)`` throws for `bytes`, without building the record: what
    /// verification checks of every record.
    ///
    /// - Complexity: O(*m*) for *m* bytes; no allocation unless a name or string is not ASCII.
    static func check(_ bytes: UnsafeBufferPointer<UInt8>) throws {
        var reader = CanonicalReader(bytes)
        try reader.checkNamedValues()
        try reader.expectEnd()
    }

    /// The children a record's canonical bytes name, by the property that holds them (only
    /// properties that hold some), found without decoding the record.
    static func childKeysByProperty(_ bytes: [UInt8]) throws -> [(property: String, children: [RecordKey])] {
        var reader = ByteReader(bytes)
        var result = [(property: String, children: [RecordKey])]()
        for _ in 0..<(try reader.count()) {
            let start = reader.offset
            _ = try reader.sliceRange()
            var children = [RecordKey]()
            try reader.collectChildren(into: &children)
            guard !children.isEmpty else { continue }
            // The name, made (and checked) only for properties that hold children.
            let end = reader.offset
            reader.offset = start
            result.append((try reader.string(), children))
            reader.offset = end
        }
        try reader.expectEnd()
        return result
    }

    /// The children a record's canonical bytes name, found without decoding the record.
    static func childKeys(_ bytes: [UInt8]) throws -> [RecordKey] {
        var reader = ByteReader(bytes)
        var keys = [RecordKey]()
        for _ in 0..<(try reader.count()) {
            _ = try reader.slice()
            try reader.collectChildren(into: &keys)
        }
        try reader.expectEnd()
        return keys
    }
}
