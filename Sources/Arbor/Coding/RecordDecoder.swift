import Foundation

/// Rebuilds `Storable` values from records: the inverse of ``RecordEncoder``.
public enum RecordDecoder {
    /// How deep a value tree is read: each property, array element and child record is one
    /// level, and a child record past this many is refused (against unbounded recursion on a
    /// hostile or damaged store). ``RecordEncoder`` refuses to write a tree deeper than this.
    static let maximumTreeDepth = 256

    /// `number` as a `Float`, as `JSONDecoder` reads one: a finite double out of its range is an
    /// error, not infinity (non-finite values stay what they are).
    static func float(_ number: Double, at codingPath: [any CodingKey]) throws -> Float {
        let narrowed = Float(number)
        guard narrowed.isFinite || !number.isFinite else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(number) does not fit in Float"))
        }
        return narrowed
    }

    /// Decodes the value stored in `key`'s record, resolving child properties from `records`.
    public static func value<Value: Storable>(_ type: Value.Type, key: RecordKey, records: [RecordKey: Record]) throws -> Value {
        guard let record = records[key] else {
            throw ArborError(.coding, "record \(key) is not among the records to decode")
        }
        let decoder = PropertyDecoder(value: .map(record.properties), records: records, codingPath: [], depth: 0, decoded: DecodedChildren())
        let value = try Value(from: decoder)
        try checkID(of: value, readFrom: key)
        return value
    }

    /// Throws unless `value`, decoded from `key`'s record, has the id of that record: a type
    /// that does not decode its id (`let id = UUID()`, which Swift then leaves out of
    /// `init(from:)`) would read back as another value, and be saved back as a second record.
    static func checkID<Value: Storable>(of value: Value, readFrom key: RecordKey) throws {
        let id = try RecordEncoder.idString(of: value)
        guard utf8Equal(id, key.id) else {
            throw ArborError(.coding, "the \(Value.self) read from record \(key) has the id \(id.debugDescription): \(Value.self) does not decode its id from the record (a `let id` with a default value is not decoded; make it `var`, or decode it in init(from:))")
        }
    }
}

/// The child records one decode has made, by key and type: a record that names a child more
/// than once (the encoder never writes one; a hand-made `Record` can) is decoded once, not
/// once per path to it, which for a chain of such records doubled at every level.
final class DecodedChildren {
    struct Key: Hashable {
        let record: RecordKey
        let type: ObjectIdentifier
    }
    var values: [Key: Any] = [:]
}

struct PropertyDecoder: Decoder {
    let value: PropertyValue
    let records: [RecordKey: Record]
    let codingPath: [any CodingKey]
    let depth: Int
    let decoded: DecodedChildren
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .map(let values) = value else { throw mismatch([String: PropertyValue].self) }
        return KeyedDecodingContainer(KeyedPropertyDecodingContainer<Key>(decoder: self, values: values))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        switch value {
        case .array(let values): return UnkeyedPropertyDecodingContainer(decoder: self, values: values)
        // Bytes as `Data(from:)` reads them: a list of its bytes.
        case .bytes(let bytes): return UnkeyedPropertyDecodingContainer(decoder: self, values: bytes.map { .int(Int64($0)) })
        default: throw mismatch([PropertyValue].self)
        }
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SinglePropertyDecodingContainer(decoder: self) }

    func mismatch(_ type: Any.Type) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(type), found \(value.kindAndSize)"))
    }

    func child(_ value: PropertyValue, key: (any CodingKey)?) -> PropertyDecoder {
        PropertyDecoder(value: value, records: records, codingPath: key.map { codingPath + [$0] } ?? codingPath, depth: depth + 1, decoded: decoded)
    }

    /// A value of `type`. Dates, bytes, URLs, decimals and references are stored as kinds of
    /// their own when a container encodes them; dates and bytes in their own `Codable` form when
    /// they encode themselves (`date.encode(to:)`, as property wrappers do), and either form
    /// reads back either way; a reference in its kind either way. A URL or a decimal that
    /// encodes itself is stored in its own form, which its own `init(from:)` reads, and a
    /// container too; its own `init(from:)` does not read the kind a container wrote.
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        switch (type, value) {
        case (is Date.Type, .date(let date)): return date as! T
        // A date's own Codable form is a Double: an integer is some other number (seconds since
        // 1970, say, of a property that was an Int), not a date.
        case (is Date.Type, .int): throw mismatch(type)
        case (is Data.Type, .bytes(let bytes)): return Data(bytes) as! T
        case (is URL.Type, .string(let text)):
            guard let url = URL(string: text) else { throw mismatch(type) }
            return url as! T
        case (is Decimal.Type, .string(let text)):
            guard let decimal = Decimal(string: text) else { throw mismatch(type) }
            return decimal as! T
        case (let referenceType as any AnyRecordReference.Type, .reference(let key)):
            return referenceType.init(referencing: key) as! T
        default: break
        }
        if case .child(let key) = value {
            guard depth < RecordDecoder.maximumTreeDepth else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "value tree nested deeper than \(RecordDecoder.maximumTreeDepth) levels"))
            }
            guard let record = records[key] else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "child record \(key) is missing"))
            }
            let memo = DecodedChildren.Key(record: key, type: ObjectIdentifier(T.self))
            if let known = decoded.values[memo] as? T { return known }
            let value = try T(from: child(.map(record.properties), key: nil))
            if let storable = value as? any Storable { try RecordDecoder.checkID(of: storable, readFrom: key) }
            decoded.values[memo] = value
            return value
        }
        // A dictionary stored as pairs (``DictionaryOfPairs``) reads as its conformance reads:
        // flat. One stored flat before pairs were written reads as it was, and so does one of
        // pairs whose records a merge let go (then it may name none).
        if case .array(let pairs) = value, case .array(let first)? = pairs.first, first.count == 2,
           type is any DictionaryOfPairs.Type, let flat = Self.flattening(pairs) {
            do {
                return try T(from: PropertyDecoder(value: .array(flat), records: records, codingPath: codingPath, depth: depth, decoded: decoded))
            } catch let error as DecodingError where !pairs.contains(where: \.namesRecords) {
                // Pairs name records; these may be a legacy flat dictionary of two-element arrays.
                if let flatValue = try? T(from: self) { return flatValue }
                throw error
            }
        }
        return try T(from: self)
    }

    /// The elements of `pairs`, each a two-element array, one after the other; else `nil`.
    static func flattening(_ pairs: [PropertyValue]) -> [PropertyValue]? {
        var flat = [PropertyValue]()
        flat.reserveCapacity(pairs.count * 2)
        for pair in pairs {
            guard case .array(let elements) = pair, elements.count == 2 else { return nil }
            flat += elements
        }
        return flat
    }

    func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        // A value beyond Int64, as the encoder writes it: its decimal string, for the types it
        // fits (an unsigned 64-bit one, a 128-bit one).
        if case .string(let text) = value, T.bitWidth > 64 || (T.bitWidth == 64 && !T.isSigned) {
            guard let number = T(text), Int64(exactly: number) == nil, String(number) == text else { throw mismatch(type) }
            return number
        }
        guard case .int(let number) = value else { throw mismatch(type) }
        guard let result = T(exactly: number) else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(number) does not fit in \(type)"))
        }
        return result
    }

    func double() throws -> Double {
        switch value {
        case .double(let number): return number
        case .int(let number): return Double(number)
        // A date as `Date(from:)` reads it.
        case .date(let date): return date.timeIntervalSinceReferenceDate
        default: throw mismatch(Double.self)
        }
    }
}

struct KeyedPropertyDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: PropertyDecoder
    let values: [String: PropertyValue]
    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] { values.keys.sorted(by: utf8Less).compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { values[key.stringValue] != nil }

    private func child(_ key: Key) throws -> PropertyDecoder {
        guard let value = values[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no property \(key.stringValue)"))
        }
        return decoder.child(value, key: key)
    }

    func decodeNil(forKey key: Key) throws -> Bool { values[key.stringValue].map { $0 == .null } ?? true }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        let child = try child(key)
        guard case .bool(let flag) = child.value else { throw child.mismatch(type) }
        return flag
    }
    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        let child = try child(key)
        guard case .string(let text) = child.value else { throw child.mismatch(type) }
        return text
    }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).double() }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try RecordDecoder.float(try child(key).double(), at: codingPath + [key]) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).integer(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).integer(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).integer(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).integer(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).integer(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).integer(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).integer(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).integer(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).integer(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).integer(type) }
    func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 { try child(key).integer(type) }
    func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 { try child(key).integer(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).decode(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try child(key).unkeyedContainer() }
    func superDecoder() throws -> any Decoder { decoder.child(values["super"] ?? .map([:]), key: IndexCodingKey(stringValue: "super")) }
    func superDecoder(forKey key: Key) throws -> any Decoder { decoder.child(values[key.stringValue] ?? .map([:]), key: key) }
}

struct UnkeyedPropertyDecodingContainer: UnkeyedDecodingContainer {
    let decoder: PropertyDecoder
    let values: [PropertyValue]
    var currentIndex = 0
    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { values.count }
    var isAtEnd: Bool { currentIndex >= values.count }

    init(decoder: PropertyDecoder, values: [PropertyValue]) {
        self.decoder = decoder
        self.values = values
    }

    /// The element at `currentIndex`, not yet consumed.
    private func current(_ type: Any.Type) throws -> PropertyDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(codingPath: codingPath + [IndexCodingKey(intValue: currentIndex)], debugDescription: "array has only \(values.count) elements"))
        }
        return decoder.child(values[currentIndex], key: IndexCodingKey(intValue: currentIndex))
    }

    /// `body` of the next element, which is consumed only if `body` succeeds, as JSONDecoder
    /// does: a lenient array (`try? decode(T.self)`, then skipping the element another way)
    /// reads the element that failed again, not the one after it.
    private mutating func next<T>(_ type: T.Type, _ body: (PropertyDecoder) throws -> T) throws -> T {
        let value = try body(try current(type))
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, values[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }
    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: String.Type) throws -> String { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type) { try $0.double() } }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type) { try RecordDecoder.float(try $0.double(), at: $0.codingPath) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: Int128.Type) throws -> Int128 { try next(type) { try $0.integer(type) } }
    mutating func decode(_ type: UInt128.Type) throws -> UInt128 { try next(type) { try $0.integer(type) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type) { try $0.decode(type) } }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next(KeyedDecodingContainer<NestedKey>.self) { try $0.container(keyedBy: type) }
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next((any UnkeyedDecodingContainer).self) { try $0.unkeyedContainer() }
    }
    // As JSONDecoder: the element is consumed whatever the caller then reads of it.
    mutating func superDecoder() throws -> any Decoder {
        let element = try current((any Decoder).self)
        currentIndex += 1
        return element
    }
}

struct SinglePropertyDecodingContainer: SingleValueDecodingContainer {
    let decoder: PropertyDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { decoder.value == .null }
    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let flag) = decoder.value else { throw decoder.mismatch(type) }
        return flag
    }
    func decode(_ type: String.Type) throws -> String {
        guard case .string(let text) = decoder.value else { throw decoder.mismatch(type) }
        return text
    }
    func decode(_ type: Double.Type) throws -> Double { try decoder.double() }
    func decode(_ type: Float.Type) throws -> Float { try RecordDecoder.float(try decoder.double(), at: codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try decoder.integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.integer(type) }
    func decode(_ type: Int128.Type) throws -> Int128 { try decoder.integer(type) }
    func decode(_ type: UInt128.Type) throws -> UInt128 { try decoder.integer(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decode(type) }
}
