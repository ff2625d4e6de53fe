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
///
/// `String(describing:)` leaves out what a type is nested in, so `Inbox.Item` and
/// `Archive.Item` would both be stored as `Item`, one overwriting the other's records. The
/// table remembers which type took each name; a second type taking it makes the name ambiguous,
/// and the encoder refuses to write records under it (``ambiguity(of:)``).
enum DefaultTypeNames {
    private struct Table {
        var names: [ObjectIdentifier: String] = [:]
        /// Each default name, with the type that took it first (as `String(reflecting:)` says it).
        var claims: [String: (type: ObjectIdentifier, fullName: String)] = [:]
        /// Names two or more types took, with those types' full names.
        var ambiguous: [String: [String]] = [:]
    }

    private static let table = Mutex(Table())
    /// Whether any name is ambiguous: the encoder's check costs a load while none is.
    private static let anyAmbiguous = Atomic<Bool>(false)

    /// `String(describing: type)`, from the table after the first time.
    ///
    /// - Complexity: O(1), after the first call for `type`.
    static func name(of type: Any.Type) -> String {
        let id = ObjectIdentifier(type)
        if let name = table.withLock({ $0.names[id] }) { return name }
        let name = String(describing: type)
        let fullName = String(reflecting: type)
        table.withLock { table in
            table.names[id] = name
            guard let claim = table.claims[name] else {
                table.claims[name] = (id, fullName)
                return
            }
            guard claim.type != id else { return }
            table.ambiguous[name, default: [claim.fullName]].append(fullName)
            anyAmbiguous.store(true, ordering: .releasing)
        }
        return name
    }

    /// Why records may not be written under `name`: two types of this process both have it as
    /// their default type name. `nil` when they may.
    static func ambiguity(of name: String) -> String? {
        guard anyAmbiguous.load(ordering: .acquiring), let types = table.withLock({ $0.ambiguous[name] }) else { return nil }
        return "\(types.joined(separator: " and ")) are all stored as \"\(name)\" by default, and would overwrite each other's records: give each a typeName of its own"
    }

    /// Throws ``ArborError/Code/coding`` with ``ambiguity(of:)`` when `name` is ambiguous: what
    /// writes, deletes and reads of values under it do.
    static func refuseAmbiguity(of name: String) throws {
        if let ambiguity = ambiguity(of: name) { throw ArborError(.coding, ambiguity) }
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

    /// Equal when the ids have the same bytes, as record keys compare: ids that differ only in
    /// Unicode form name two records.
    public static func == (lhs: Ref, rhs: Ref) -> Bool { utf8Equal(lhs.id, rhs.id) }

    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    // In a record, a reference is a kind of its own, which a container writes for a `Ref`
    // property; a wrapper that forwards to these (a property wrapper) reads and writes the same.
    public init(from decoder: any Decoder) throws {
        if let decoder = decoder as? PropertyDecoder, case .reference(let key) = decoder.value {
            id = key.id
            return
        }
        id = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        if let encoder = encoder as? PropertyEncoder { return encoder.setSingleValue(.reference(key)) }
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
