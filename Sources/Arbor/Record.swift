/// What the core stores for one value: its key (type and id) and its properties.
///
/// Two records are equal when they have the same bytes: property names are compared by their
/// UTF-8 bytes, values as ``PropertyValue`` compares them.
public struct Record: Hashable, Sendable {
    public var key: RecordKey
    public var properties: [String: PropertyValue]

    public init(key: RecordKey, properties: [String: PropertyValue]) {
        self.key = key
        self.properties = properties
    }

    public init(type: String, id: String, properties: [String: PropertyValue]) {
        self.init(key: RecordKey(type: type, id: id), properties: properties)
    }

    public static func == (lhs: Record, rhs: Record) -> Bool {
        lhs.key == rhs.key && PropertyValue.sameMembers(lhs.properties, rhs.properties)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(key)
        hasher.combine(PropertyValue.map(properties))
    }

    /// Throws ``ArborError/Code/invalidInput`` unless the record can be stored and read back:
    /// a valid key, valid keys of the children it names, and values nested less than 64 deep
    /// (as values encoded from `Storable` types are checked while they are encoded).
    func validateForStorage() throws {
        try key.validate()
        for (name, value) in properties where !value.fitsValueDepth() {
            throw ArborError(.invalidInput, "property \(String(reflecting: String(name.prefix(80)))) of \(key) nests values \(ByteReader.maximumValueDepth) or more levels deep, deeper than a record is read back")
        }
        // A child is found by its index key, which a type name with NUL could share with
        // another record's: the commit would find one, every read the other.
        for child in childKeys {
            do { try child.validate() } catch let error as ArborError {
                throw ArborError(.invalidInput, "\(key) names child \(child): \(error.message)")
            }
        }
    }

    /// The records this one owns directly, in property order.
    public var childKeys: [RecordKey] {
        // Most records own nothing: find that out without sorting their property names.
        guard properties.values.contains(where: \.holdsChildren) else { return [] }
        return properties.keys.sorted(by: utf8Less).flatMap { properties[$0]!.childKeys }
    }
}
