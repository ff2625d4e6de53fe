/// How one property differs between two versions of a record.
public struct PropertyChange: Hashable, Sendable {
    public var name: String
    /// The value before, or `nil` if the property was absent.
    public var old: PropertyValue?
    /// The value after, or `nil` if the property was removed.
    public var new: PropertyValue?
}

/// How one record differs between two versions.
public struct RecordChange: Hashable, Sendable {
    public enum Kind: String, Sendable { case added, removed, modified }

    public var key: RecordKey
    /// The record before, or `nil` if it was added.
    public var old: Record?
    /// The record after, or `nil` if it was removed.
    public var new: Record?

    public var kind: Kind { old == nil ? .added : (new == nil ? .removed : .modified) }

    /// Every property that differs, by name in canonical order.
    public var properties: [PropertyChange] {
        let before = old?.properties ?? [:]
        let after = new?.properties ?? [:]
        return Set(before.keys).union(after.keys).sorted(by: utf8Less).compactMap { name in
            before[name] == after[name] ? nil : PropertyChange(name: name, old: before[name], new: after[name])
        }
    }
}
