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
            let encoded = RecordCoding.encode(record.properties)
            bytes = encoded.capacity > encoded.count ? encoded.exactCopy() : encoded
            childKeys = record.childKeys
        }
    }

    private(set) var changes: [Change] = []

    public init() {}

    public var isEmpty: Bool { changes.isEmpty }

    /// Saves `value` and the values it contains.
    public mutating func save<Value: Storable>(_ value: Value) throws {
        let records = try RecordEncoder.records(of: value)
        changes.append(.save(EncodedRecord(records[0]), nested: records.dropFirst().map(EncodedRecord.init)))
    }

    /// Saves a record as it is. Child properties must name records saved in this change set or
    /// already present in the version the commit builds on.
    public mutating func save(_ record: Record) throws {
        try record.key.validate()
        changes.append(.save(EncodedRecord(record), nested: []))
    }

    /// Deletes the value `id` of `type` and the values it owns.
    public mutating func delete<Value: Storable>(_ type: Value.Type, id: Value.ID) throws {
        changes.append(.delete(RecordKey(type: Value.typeName, id: try RecordEncoder.idString(encoding: id, typeName: Value.typeName))))
    }

    /// Deletes the record `key` and the records it owns.
    public mutating func delete(_ key: RecordKey) {
        changes.append(.delete(key))
    }
}
