/// What the core stores for one value: its key (type and id) and its properties.
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

    /// The records this one owns directly, in property order.
    public var childKeys: [RecordKey] {
        // Most records own nothing: find that out without sorting their property names.
        guard properties.values.contains(where: \.holdsChildren) else { return [] }
        return properties.keys.sorted(by: utf8Less).flatMap { properties[$0]!.childKeys }
    }
}
