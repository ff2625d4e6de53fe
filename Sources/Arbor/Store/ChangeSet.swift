/// The inserts, updates and deletes one commit makes.
///
/// Saving a value saves its whole tree: the value and every nested `Storable`. Children the
/// value owned before and no longer holds are deleted with the commit; deleting a value deletes
/// the records it owns. Later changes to the same key win over earlier ones.
public struct ChangeSet: Sendable {
    enum Change: Sendable {
        /// A tree of records: its root, and the records nested in it (most values have none,
        /// and an empty array costs no allocation).
        case save(EncodedRecord, nested: [EncodedRecord])
        case delete(RecordKey)
    }

    /// A saved record as the commit needs it: encoded once, when saved. Its canonical bytes
    /// take less than half the memory of its decoded properties, and become the index entry's
    /// payload as they are, so a large change set holds each record once and compactly.
    struct EncodedRecord: Sendable {
        let key: RecordKey
        /// The canonical bytes of its properties (``RecordCoding``), with no spare room: they
        /// live as long as the change set, and as payloads in the nodes the commit caches.
        let bytes: [UInt8]
        /// The records it owns (``Record/childKeys``).
        let childKeys: [RecordKey]

        init(_ record: Record) {
            key = record.key
            bytes = Self.trimmed(RecordCoding.encode(record.properties))
            childKeys = record.childKeys
        }

        /// A record from its properties in UTF-8 name order, as the encoder gives them: the
        /// same bytes and children as from the ``Record`` of the same properties.
        init(key: RecordKey, sortedProperties: [(name: String, value: PropertyValue)]) {
            self.key = key
            bytes = Self.trimmed(RecordCoding.encode(sorted: sortedProperties))
            childKeys = sortedProperties.contains(where: \.value.holdsChildren) ? sortedProperties.flatMap(\.value.childKeys) : []
        }

        private static func trimmed(_ encoded: [UInt8]) -> [UInt8] {
            encoded.capacity > encoded.count ? encoded.exactCopy() : encoded
        }
    }

    private(set) var changes: [Change] = []

    public init() {}

    public var isEmpty: Bool { changes.isEmpty }

    /// Saves `value` and the values it contains.
    public mutating func save<Value: Storable>(_ value: Value) throws {
        let records = try RecordEncoder.encodedRecords(of: value)
        changes.append(.save(records[0], nested: records.count > 1 ? Array(records.dropFirst()) : []))
    }

    /// Saves a record as it is. Child properties must name records saved in this change set or
    /// already present in the version the commit builds on.
    public mutating func save(_ record: Record) throws {
        try record.validateForStorage()
        changes.append(.save(EncodedRecord(record), nested: []))
    }

    /// Deletes the value `id` of `type` and the values it owns.
    ///
    /// To remove a value another one owns (a note of a task), save the owner without it: the
    /// commit deletes it. Deleted directly, it leaves its owner naming a missing child, and
    /// reading the owner fails until the child is saved again (a store keeps no index from a
    /// child to its owner, so the commit cannot tell).
    public mutating func delete<Value: Storable>(_ type: Value.Type, id: Value.ID) throws {
        try DefaultTypeNames.refuseAmbiguity(of: Value.typeName)
        changes.append(.delete(RecordKey(type: Value.typeName, id: try RecordEncoder.idString(encoding: id, typeName: Value.typeName))))
    }

    /// Deletes the record `key` and the records it owns. A record another record owns is
    /// removed by saving its owner without it (see ``delete(_:id:)``).
    public mutating func delete(_ key: RecordKey) {
        changes.append(.delete(key))
    }
}
