/// A collection whose `Codable` conformance writes its elements in hash order: `Set`, and
/// `Dictionary` with keys that encode as an array of key-value pairs.
///
/// Swift seeds its hashing per process, so two equal sets can iterate in different orders,
/// and encoding them as they iterate would give two records of equal values different bytes
/// and different hashes: replicas would never converge on them. The encoder writes such
/// collections with their elements (or pairs) sorted by canonical bytes instead.
protocol UnorderedCollection {
    /// The collection as records store it, its elements in canonical order.
    func canonicalValue(in context: EncodingContext, codingPath: [any CodingKey]) throws -> PropertyValue
}

extension Set: UnorderedCollection where Element: Encodable {
    func canonicalValue(in context: EncodingContext, codingPath: [any CodingKey]) throws -> PropertyValue {
        var elements = [(bytes: [UInt8], value: PropertyValue)]()
        elements.reserveCapacity(count)
        for (offset, element) in enumerated() {
            let value = try context.encodeValue(element, codingPath: codingPath + [IndexKey(offset)])
            elements.append((context.sortingBytes(of: value), value))
        }
        elements.sort { $0.bytes.lexicographicallyPrecedes($1.bytes) }
        try refuseEqualEncodings(elements.map(\.bytes), of: "elements of a Set", codingPath: codingPath)
        return .array(elements.map(\.value))
    }
}

extension Dictionary: UnorderedCollection where Key: Encodable, Value: Encodable {
    func canonicalValue(in context: EncodingContext, codingPath: [any CodingKey]) throws -> PropertyValue {
        let encoder = PropertyEncoder(context: context, codingPath: codingPath)
        try encode(to: encoder)
        let encoded = encoder.storage.resolved()
        // String and integer keys give a map, which is canonical already. Other keys give an
        // array alternating key and value: sort the pairs by their keys' bytes.
        guard case .array(let flat) = encoded, flat.count.isMultiple(of: 2) else { return encoded }
        var pairs = [(keyBytes: [UInt8], key: PropertyValue, value: PropertyValue)]()
        pairs.reserveCapacity(flat.count / 2)
        for start in stride(from: 0, to: flat.count, by: 2) {
            pairs.append((context.sortingBytes(of: flat[start]), flat[start], flat[start + 1]))
        }
        pairs.sort { $0.keyBytes.lexicographicallyPrecedes($1.keyBytes) }
        try refuseEqualEncodings(pairs.map(\.keyBytes), of: "keys of a Dictionary", codingPath: codingPath)
        // Pairs that name records are written as pairs (`[[key, value], …]`): alternating, they
        // would read as an array of references or children, which a merge combines as a set and
        // a record lets a child go from element by element, each shifting the pairs after it.
        if flat.contains(where: \.namesRecords) {
            return .array(pairs.map { .array([$0.key, $0.value]) })
        }
        return .array(pairs.flatMap { [$0.key, $0.value] })
    }
}

/// Refuses elements (or keys) of an unordered collection that encode to the same bytes (a type
/// whose `Hashable` uses a field its `Codable` leaves out, or two NaN keys): their order would
/// be the process's hash order, so equal values would differ in bytes, and only one of them
/// would read back. `sorted` are the encodings in order.
private func refuseEqualEncodings(_ sorted: [[UInt8]], of what: String, codingPath: [any CodingKey]) throws {
    for index in sorted.indices.dropFirst() where sorted[index] == sorted[index - 1] {
        throw ArborError(.coding, "two \(what) encode alike, so only one would read back, at \(codingPath.map(\.stringValue).joined(separator: "."))")
    }
}

extension PropertyValue {
    /// The three values of a property, where some are a dictionary stored as pairs (``DictionaryOfPairs``)
    /// and others the same dictionary stored before pairs were written (alternating keys and
    /// values, in the same order): those as pairs too, so that a value re-encoded unchanged is
    /// no change. Others as they are.
    static func pairingLegacyDictionaries(_ values: PropertyValue?...) -> (PropertyValue?, PropertyValue?, PropertyValue?) {
        func isPairs(_ value: PropertyValue?) -> Bool {
            guard case .array(let elements)? = value, !elements.isEmpty else { return false }
            return elements.allSatisfy { if case .array(let pair) = $0 { pair.count == 2 } else { false } } && value!.namesRecords
        }
        func paired(_ value: PropertyValue?) -> PropertyValue? {
            guard case .array(let flat)? = value, !flat.isEmpty, flat.count.isMultiple(of: 2),
                  !flat.contains(where: { if case .array = $0 { true } else { false } }) else { return value }
            return .array(stride(from: 0, to: flat.count, by: 2).map { .array([flat[$0], flat[$0 + 1]]) })
        }
        guard values.contains(where: isPairs) else { return (values[0], values[1], values[2]) }
        let result = values.map(paired)
        return (result[0], result[1], result[2])
    }
}

/// A `Dictionary`, to the decoder: one whose keys and values name records is stored as a list
/// of `[key, value]` pairs, which its `Decodable` conformance reads as a flat list.
protocol DictionaryOfPairs {}

extension Dictionary: DictionaryOfPairs {}

/// The coding key of an element's position, for error messages.
private struct IndexKey: CodingKey {
    let intValue: Int?
    let stringValue: String
    init(_ index: Int) { intValue = index; stringValue = "Index \(index)" }
    init?(intValue: Int) { self.init(intValue) }
    init?(stringValue: String) { nil }
}
