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

    /// Every property that differs, by name in canonical order. Names compare by their bytes:
    /// a name spelt in another Unicode form is another property (the old one removed, the new
    /// one added), as the record's bytes say; compared as `String`s, such a change listed nothing.
    public var properties: [PropertyChange] {
        let before = old?.properties ?? [:]
        let after = new?.properties ?? [:]
        /// The value of the property spelt exactly `name` (a dictionary finds any spelling).
        func value(_ name: String, in properties: [String: PropertyValue]) -> PropertyValue? {
            guard let index = properties.index(forKey: name), utf8Equal(properties[index].key, name) else { return nil }
            return properties[index].value
        }
        var seen = Set<[UInt8]>()
        let names = (Array(before.keys) + Array(after.keys)).filter { seen.insert(Array($0.utf8)).inserted }.sorted(by: utf8Less)
        return names.compactMap { name in
            let (old, new) = (value(name, in: before), value(name, in: after))
            return old == new ? nil : PropertyChange(name: name, old: old, new: new)
        }
    }
}
