/// The name of a record in the index: its type name, then its id.
///
/// Keys sort by the UTF-8 bytes of the type name, then of the id, so all records of one type
/// form one contiguous range of the index.
public struct RecordKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The stored type name, such as `"Task"`. Non-empty, without NUL, at most 255 bytes.
    public var type: String
    /// The record's id, unique within its type.
    public var id: String

    public init(type: String, id: String) {
        self.type = type
        self.id = id
    }

    public static func < (lhs: RecordKey, rhs: RecordKey) -> Bool {
        if utf8Equal(lhs.type, rhs.type) { return utf8Less(lhs.id, rhs.id) }
        return utf8Less(lhs.type, rhs.type)
    }

    public static func == (lhs: RecordKey, rhs: RecordKey) -> Bool {
        utf8Equal(lhs.type, rhs.type) && utf8Equal(lhs.id, rhs.id)
    }

    public func hash(into hasher: inout Hasher) {
        // Byte-equal strings are canonically equal, so String's own hash agrees with `==`.
        hasher.combine(type)
        hasher.combine(id)
    }

    public var description: String { "\(type)/\(id)" }

    /// The bytes the index sorts by: the type name, a NUL byte, the id.
    var indexBytes: [UInt8] {
        var bytes = Array(type.utf8)
        bytes.append(0)
        bytes.append(contentsOf: id.utf8)
        return bytes
    }

    /// The smallest index key of every record of `type`.
    static func typePrefix(_ type: String) -> [UInt8] { Array(type.utf8) + [0] }

    init(indexBytes bytes: ArraySlice<UInt8>) throws {
        guard let separator = bytes.firstIndex(of: 0),
            let type = String(validating: bytes[bytes.startIndex..<separator], as: UTF8.self),
            let id = String(validating: bytes[(separator + 1)...], as: UTF8.self)
        else { throw ArborError(.corruptObject, "an index key is not a valid record key") }
        self.init(type: type, id: id)
    }

    /// Throws ``ArborError/Code/invalidInput`` unless the type name can be stored.
    public func validate() throws {
        guard !type.isEmpty, type.utf8.count <= 255, !type.utf8.contains(0) else {
            throw ArborError(.invalidInput, "invalid type name \(String(reflecting: String(type.prefix(80)))): it must be 1 to 255 bytes without NUL")
        }
        guard id.utf8.count <= 4096 else {
            throw ArborError(.invalidInput, "the id of a \(type) is longer than 4096 bytes")
        }
    }
}
