import Foundation

/// One property of a record.
///
/// Equality is the equality of canonical bytes: every NaN equals every other NaN, and `0.0` and
/// `-0.0` are different values, and the names of a map are compared by their UTF-8 bytes (as
/// `String`s, names that differ only in Unicode form would be equal though their bytes differ,
/// so a merge would take a change of spelling alone for no change), so that two equal values
/// always have the same hash and the same bytes.
public enum PropertyValue: Sendable, Hashable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    /// A point in time, kept exactly as `Date` keeps it (seconds since 2001-01-01 as a `Double`).
    case date(Date)
    case bytes([UInt8])
    /// A weak link to another record; it owns nothing.
    case reference(RecordKey)
    /// A record owned by this one: deleting the owner deletes it.
    case child(RecordKey)
    case array([PropertyValue])
    /// Named values, as nested plain structs, enums with payloads and dictionaries encode.
    case map([String: PropertyValue])

    /// What the value is, with its size but none of its contents: for errors, which end up in
    /// logs, where a stored value may be large (a blob's megabytes) or secret (a token).
    var kindAndSize: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int: "an integer"
        case .double: "a floating-point number"
        case .string(let text): "a string of \(text.utf8.count) bytes"
        case .date: "a date"
        case .bytes(let bytes): "\(bytes.count) bytes of data"
        case .reference(let key): "a reference to a \(key.type)"
        case .child(let key): "a child \(key.type)"
        case .array(let values): "an array of \(values.count) values"
        case .map(let values): "a map of \(values.count) values"
        }
    }

    /// The bit pattern every NaN is stored as.
    static let canonicalNaNBits: UInt64 = 0x7FF8_0000_0000_0000

    static func canonicalBits(_ value: Double) -> UInt64 {
        value.isNaN ? canonicalNaNBits : value.bitPattern
    }

    public static func == (lhs: PropertyValue, rhs: PropertyValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.int(let a), .int(let b)): a == b
        case (.double(let a), .double(let b)): canonicalBits(a) == canonicalBits(b)
        case (.string(let a), .string(let b)): utf8Equal(a, b)
        case (.date(let a), .date(let b)):
            canonicalBits(a.timeIntervalSinceReferenceDate) == canonicalBits(b.timeIntervalSinceReferenceDate)
        case (.bytes(let a), .bytes(let b)): a == b
        case (.reference(let a), .reference(let b)): a == b
        case (.child(let a), .child(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.map(let a), .map(let b)): sameMembers(a, b)
        default: false
        }
    }

    /// Whether two maps have the same names, byte for byte, with equal values. (A dictionary
    /// holds one of two names that differ only in Unicode form: a lookup finds either.)
    static func sameMembers(_ a: [String: PropertyValue], _ b: [String: PropertyValue]) -> Bool {
        a.count == b.count && a.allSatisfy { name, value in
            guard let index = b.index(forKey: name) else { return false }
            return utf8Equal(b[index].key, name) && b[index].value == value
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(value)
        case .int(let value): hasher.combine(value)
        case .double(let value): hasher.combine(Self.canonicalBits(value))
        case .string(let value): hasher.combine(Array(value.utf8))
        case .date(let value): hasher.combine(Self.canonicalBits(value.timeIntervalSinceReferenceDate))
        case .bytes(let value): hasher.combine(value)
        case .reference(let key): hasher.combine(1); hasher.combine(key)
        case .child(let key): hasher.combine(2); hasher.combine(key)
        case .array(let values): hasher.combine(values)
        case .map(let values): hasher.combine(values.count)
            for key in values.keys.sorted(by: utf8Less) { hasher.combine(key); hasher.combine(values[key]) }
        }
    }

    public var description: String { JSONValue(propertyValue: self).serialized() }

    /// Whether this value owns any record, directly or inside arrays and maps.
    var holdsChildren: Bool {
        switch self {
        case .child: true
        case .array(let values): values.contains(where: \.holdsChildren)
        case .map(let values): values.values.contains(where: \.holdsChildren)
        default: false
        }
    }

    /// Whether this value owns or references any record, directly or inside arrays and maps.
    var namesRecords: Bool {
        switch self {
        case .child, .reference: true
        case .array(let values): values.contains(where: \.namesRecords)
        case .map(let values): values.values.contains(where: \.namesRecords)
        default: false
        }
    }

    /// Every record this value owns, directly or inside arrays and maps.
    var childKeys: [RecordKey] {
        switch self {
        case .child(let key): [key]
        case .array(let values): values.flatMap(\.childKeys)
        case .map(let values): values.keys.sorted(by: utf8Less).flatMap { values[$0]!.childKeys }
        default: []
        }
    }
}

/// Orders strings by their UTF-8 bytes: the one ordering used wherever bytes must be canonical.
@inline(__always)
func utf8Less(_ lhs: String, _ rhs: String) -> Bool {
    let order = lhs.utf8.withContiguousStorageIfAvailable { a in
        rhs.utf8.withContiguousStorageIfAvailable { b in compareKeys(a, b) < 0 }
    }
    return (order ?? nil) ?? lhs.utf8.lexicographicallyPrecedes(rhs.utf8)
}

/// Whether two strings have the same UTF-8 bytes (`==` on `String` compares canonical
/// equivalence instead). Compares in place with `memcmp`: record keys are compared on every
/// dictionary probe of a merge, where a byte-at-a-time loop cost a tenth of the time.
@inline(__always)
func utf8Equal(_ lhs: String, _ rhs: String) -> Bool {
    guard lhs.utf8.count == rhs.utf8.count else { return false }
    let equal = lhs.utf8.withContiguousStorageIfAvailable { a in
        rhs.utf8.withContiguousStorageIfAvailable { b in compareKeys(a, b) == 0 }
    }
    return (equal ?? nil) ?? lhs.utf8.elementsEqual(rhs.utf8)
}
