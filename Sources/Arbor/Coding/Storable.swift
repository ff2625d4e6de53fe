import Synchronization
/// A value Arbor can store: `Codable`, `Identifiable`, and named by a stored type name.
///
/// ```swift
/// struct Task: Storable { var id: String; var title: String; var done: Bool; var notes: [Note]; var owner: Ref<Person>? }
/// ```
///
/// Nested `Storable` values (single, optional or in arrays) become child records, owned by the
/// parent: committing the parent commits them, deleting the parent deletes them. Every other
/// `Codable` property (enums, plain structs, dictionaries) becomes a property.
public protocol Storable: Codable, Identifiable, Sendable where ID: Codable & Sendable {
    /// The name records of this type are stored under. Defaults to the type's name; set it
    /// explicitly to keep data readable after a rename.
    static var typeName: String { get }
}

extension Storable {
    public static var typeName: String { DefaultTypeNames.name(of: Self.self) }
}

/// The default type names, worked out once per type: `String(describing:)` of a metatype first
/// asks the runtime whether it conforms to three printing protocols, which cost more than the
/// rest of encoding a small record (12% of a bulk commit's time), and every record asks.
enum DefaultTypeNames {
    private static let names = Mutex<[ObjectIdentifier: String]>([:])

    /// `String(describing: type)`, from the table after the first time.
    ///
    /// - Complexity: O(1), after the first call for `type`.
    static func name(of type: Any.Type) -> String {
        let id = ObjectIdentifier(type)
        if let name = names.withLock({ $0[id] }) { return name }
        let name = String(describing: type)
        names.withLock { $0[id] = name }
        return name
    }
}

/// A weak link to another stored value, by id. It owns nothing: deleting the value that holds a
/// reference leaves the referenced value alone, and a reference may outlive its target.
public struct Ref<Target: Storable>: Codable, Hashable, Sendable, CustomStringConvertible {
    /// The id of the target, as the record key's id string.
    public var id: String

    public init(id: String) { self.id = id }

    /// A reference to `value`.
    public init(_ value: Target) throws {
        self.id = try RecordEncoder.idString(of: value)
    }

    public var key: RecordKey { RecordKey(type: Target.typeName, id: id) }

    public var description: String { key.description }

    public init(from decoder: any Decoder) throws {
        id = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(id)
    }
}

/// Lets the record encoder recognise a `Ref` of any target type.
protocol AnyRecordReference {
    var key: RecordKey { get }
    init(referencing key: RecordKey)
}

extension Ref: AnyRecordReference {
    init(referencing key: RecordKey) { self.init(id: key.id) }
}
