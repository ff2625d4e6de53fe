import Foundation

/// Turns a `Storable` value tree into records: one for the value and one for each nested
/// `Storable`, linked by child properties.
public enum RecordEncoder {
    /// The records of `value`'s tree: the root first, then its descendants depth-first.
    ///
    /// - Complexity: O(*n*) in the size of the tree.
    public static func records<Value: Storable>(of value: Value) throws -> [Record] {
        let context = EncodingContext()
        _ = try context.record(for: value, typeName: Value.typeName)
        return context.records.map { Record(key: $0.key, properties: $0.properties.dictionary) }
    }

    /// The records of `value`'s tree as ``records(of:)`` gives them, each as a commit keeps it
    /// (its canonical bytes), without building its properties' dictionary.
    static func encodedRecords<Value: Storable>(of value: Value) throws -> [ChangeSet.EncodedRecord] {
        let context = EncodingContext()
        _ = try context.record(for: value, typeName: Value.typeName)
        return context.records.map { ChangeSet.EncodedRecord(key: $0.key, sortedProperties: $0.properties.sortedByName()) }
    }

    /// The id string of a storable value: its `id`, encoded, as text.
    public static func idString<Value: Storable>(of value: Value) throws -> String {
        try idString(encoding: value.id, typeName: Value.typeName)
    }

    static func idString<ID: Encodable>(encoding id: ID, typeName: @autoclosure () -> String) throws -> String {
        // The common id types, without running an encoder, nor a dynamic cast (costly unspecialized).
        if ID.self == String.self { return unsafeBitCast(id, to: String.self) }
        if ID.self == Int.self { return String(unsafeBitCast(id, to: Int.self)) }
        if ID.self == UUID.self { return unsafeBitCast(id, to: UUID.self).uuidString }
        let encoded = try EncodingContext().encodeValue(id, codingPath: [])
        switch encoded {
        case .string(let text): return text
        case .int(let number): return String(number)
        default:
            throw ArborError(.coding, "the id of a \(typeName()) must encode as a string or an integer, not \(encoded)")
        }
    }
}

/// Collects the records of a tree while it is encoded.
final class EncodingContext {
    /// The records of the tree, the root first, each with its properties as written.
    var records = [(key: RecordKey, properties: PropertyList)]()
    /// The key of the record that first held each record of the tree (the root holds itself).
    /// Built only for trees of more than one record: most are one.
    private var firstHolders = [RecordKey: RecordKey]()
    /// Records written again by the record that first held them (a custom `encode(to:)` that
    /// writes a key twice, or moves a child to another key, the last write winning as in
    /// Foundation's encoders): each under a key of its own until the tree is whole, by which
    /// its holder names it; then the one the root reaches takes the real key, and a real key
    /// reached twice is refused. Each entry: the real key, and the holder's index in `records`.
    private var rewrites = [RecordKey: (key: RecordKey, holder: Int)]()
    private var rewritesMade = 0
    /// The record being encoded: its index in `records`, and its real key.
    private var current: (index: Int, key: RecordKey)?
    /// Whether a value's encoding failed (it may have been swallowed by a value's own
    /// `encode(to:)`), or a value was written over (a custom `encode(to:)` writing one key
    /// twice): either may leave records held by nothing.
    private var abandonedRecords = false
    /// The depth, as ``RecordDecoder`` counts it, of the record being encoded.
    private var recordDepth = 0

    func record<Value: Storable>(for value: Value, typeName: String) throws -> RecordKey {
        let key = RecordKey(type: typeName, id: try RecordEncoder.idString(of: value))
        try key.validate()
        try DefaultTypeNames.refuseAmbiguity(of: typeName)
        var entryKey = key
        if let holder = current {
            if firstHolders.isEmpty { firstHolders[records[0].key] = records[0].key }
            if let first = firstHolders[key] {
                // Held by another record as well: two owners. Written again by its holder (or
                // after a write was abandoned, which may have held it): kept apart until the tree
                // shows which write stands; rewrites beyond a few per record (a graph of shared
                // class instances, each path its own rewrite) are refused before they multiply.
                guard first == holder.key || abandonedRecords, rewrites.count < 4 * (records.count - rewrites.count) + 64 else {
                    throw Self.heldTwice(key)
                }
                rewritesMade += 1
                // A type name with a NUL, which no record's key has.
                entryKey = RecordKey(type: "\u{0}rewrite", id: String(rewritesMade))
                rewrites[entryKey] = (key, holder.index)
            } else {
                firstHolders[key] = holder.key
            }
        }
        let index = records.count
        records.append((entryKey, PropertyList()))
        let outer = current
        current = (index, key)
        defer { current = outer }
        do {
            records[index].properties = try encodeProperties(value, typeName: typeName)
        } catch {
            // A custom `encode(to:)` may swallow the error (`try?`): the record, and those it
            // began below it, must not stay in the tree, empty and held by nothing.
            for begun in records[index...] where rewrites.removeValue(forKey: begun.key) == nil {
                firstHolders.removeValue(forKey: begun.key)
            }
            records.removeSubrange(index...)
            throw error
        }
        // Records encoded before a sibling failed (an array of children whose last one threw,
        // the error swallowed), or written over, are held by no property: dropped once the tree
        // is whole, where records written again are settled.
        if index == 0, abandonedRecords || !rewrites.isEmpty { try settleTree() }
        return entryKey
    }

    /// The canonical bytes `value` has once the tree is whole, by which unordered collections
    /// sort their elements: a child written again sorts by its real key, not its key of its own.
    func sortingBytes(of value: PropertyValue) -> [UInt8] {
        guard !rewrites.isEmpty, value.holdsChildren else { return PropertyValue.canonicalBytes(of: value) }
        return PropertyValue.canonicalBytes(of: value.renamingChildren(rewrites.mapValues(\.key)))
    }

    private static func heldTwice(_ key: RecordKey) -> ArborError {
        ArborError(.coding, "the value tree holds \(key) twice; a child record has one owner")
    }

    /// Keeps only the records the root reaches through the properties written, and gives each
    /// record written again that it reaches its real key, in the record that names it; refuses
    /// a key reached twice.
    ///
    /// - Complexity: O(n) for the tree's `n` property values.
    private func settleTree() throws {
        let positions = Dictionary(records.indices.map { (records[$0].key, $0) }, uniquingKeysWith: { first, _ in first })
        var reached: Set<RecordKey> = [records[0].key]
        var pending = [0]
        while let position = pending.popLast() {
            for (_, value) in records[position].properties.entries {
                for child in value.childKeys where reached.insert(child).inserted {
                    if let found = positions[child] { pending.append(found) }
                }
            }
        }
        if !rewrites.isEmpty {
            var held = Set<RecordKey>()
            for record in records where reached.contains(record.key) {
                let key = rewrites[record.key]?.key ?? record.key
                guard held.insert(key).inserted else { throw Self.heldTwice(key) }
            }
            // Named by their keys of their own in their holders, which the root reaches too
            // (a Set sorted them by their real keys already: ``sortingBytes(of:)``).
            var renames = [Int: [RecordKey: RecordKey]]()
            for (rewrite, real) in rewrites where reached.contains(rewrite) { renames[real.holder, default: [:]][rewrite] = real.key }
            for (holder, names) in renames { records[holder].properties.renameChildren(names) }
        }
        records.removeAll { !reached.contains($0.key) }
        if !rewrites.isEmpty {
            for index in records.indices {
                if let real = rewrites[records[index].key] { records[index].key = real.key }
            }
            rewrites = [:]
        }
        firstHolders = [:]
    }

    /// The properties of a record's value, as its keyed container wrote them.
    private func encodeProperties<Value: Storable>(_ value: Value, typeName: String) throws -> PropertyList {
        try checkDepth([])
        let encoder = PropertyEncoder(context: self, codingPath: [])
        try value.encode(to: encoder)
        let properties: PropertyList
        var nests = encoder.storage.nests
        if let resolved = encoder.storage.resolvedProperties() {
            properties = resolved
        } else {
            nests = true
            guard case .map(let resolved) = encoder.storage.resolved() else {
                throw ArborError(.coding, "a \(typeName) must encode as a keyed container (a struct or class)")
            }
            properties = PropertyList(resolved)
        }
        // The coding path does not count every level (a nested container of a custom encode(to:),
        // a super encoder): measure what was built, when anything nests at all.
        guard nests else { return properties }
        for (name, value) in properties.entries where !value.fitsValueDepth() {
            throw ArborError(.coding, "property \(String(reflecting: String(name.prefix(80)))) of a \(typeName) nests values \(ByteReader.maximumValueDepth) or more levels deep, deeper than a record is read back")
        }
        return properties
    }

    /// Encodes one value, recognising the kinds records store natively.
    func encodeValue<T: Encodable>(_ value: T, codingPath: [any CodingKey]) throws -> PropertyValue {
        do {
            try checkDepth(codingPath)
            if let special = try specialKind(value, codingPath: codingPath) { return special }
            let encoder = PropertyEncoder(context: self, codingPath: codingPath)
            try value.encode(to: encoder)
            return encoder.storage.resolved()
        } catch {
            // A value's own `encode(to:)` may swallow this (`try?`), leaving records encoded
            // within it (a child beside the failed field) held by no property.
            abandonedRecords = true
            throw error
        }
    }

    /// A container wrote over a value written before: a child record it held is held by nothing
    /// now, and is dropped once the tree is whole.
    func noteValueWrittenOver() { abandonedRecords = true }

    /// The canonical decoder refuses values nested 64 levels deep or more (a property's value at
    /// level 0, under a coding path of one key); refuse them here, before anything is written,
    /// rather than commit what cannot be read back. This also stops a value that encodes itself
    /// without end; levels that lengthen no coding path are measured once the record is built.
    private func checkDepth(_ codingPath: [any CodingKey]) throws {
        guard codingPath.count <= ByteReader.maximumValueDepth else {
            throw ArborError(.coding, "a value is nested \(ByteReader.maximumValueDepth) or more levels deep, deeper than a record is read back, at \(codingPath.prefix(8).map(\.stringValue).joined(separator: "."))…")
        }
    }

    /// The kinds records store natively, and nested `Storable` values as child records.
    private func specialKind<T: Encodable>(_ value: T, codingPath: [any CodingKey]) throws -> PropertyValue? {
        switch value {
        case let date as Date: return .date(date)
        case let data as Data: return .bytes(Array(data))
        case let url as URL: return .string(url.absoluteString)
        case let reference as any AnyRecordReference: return .reference(reference.key)
        case let decimal as Decimal:
            // Its text would not read back: Decimal(string: "NaN") is nil.
            guard !decimal.isNaN else {
                throw ArborError(.coding, "a Decimal NaN cannot be stored (at \(codingPath.map(\.stringValue).joined(separator: ".")))")
            }
            return .string(decimal.description)
        case let storable as any Storable: return .child(try childRecord(storable, at: codingPath))
        case let unordered as any UnorderedCollection:
            return try unordered.canonicalValue(in: self, codingPath: codingPath)
        default: return nil
        }
    }

    /// A nested `Storable` at `codingPath` in the record being encoded, as a record of its own.
    /// Refused past the depth ``RecordDecoder`` reads back, counted as it counts: each property,
    /// element and record one level (a tree of records in arrays takes three a record).
    private func childRecord<Value: Storable>(_ value: Value, at codingPath: [any CodingKey]) throws -> RecordKey {
        let depth = recordDepth + codingPath.count
        guard depth < RecordDecoder.maximumTreeDepth else {
            throw ArborError(.coding, "the value tree nests \(Value.typeName) deeper than a tree is read back (\(RecordDecoder.maximumTreeDepth) levels of properties, elements and records)")
        }
        let outer = recordDepth
        recordDepth = depth + 1
        defer { recordDepth = outer }
        do {
            return try record(for: value, typeName: Value.typeName)
        } catch var error as ArborError where error.code == .coding {
            // A record's paths start at its own properties: say where this one sits in its
            // holder (each holder up the tree adds its part).
            error.message += " (in the \(Value.typeName) at \(codingPath.map(\.stringValue).joined(separator: ".")))"
            throw error
        }
    }
}

/// Where an encoder writes: a value, or a map or array of values and nested slots.
///
/// A class so that nested containers can fill their part after their parent has moved on; the
/// map and array live in stored properties so they are mutated in place, never copied.
final class EncodingSlot {
    enum Item {
        case value(PropertyValue)
        case slot(EncodingSlot)

        var resolved: PropertyValue {
            switch self {
            case .value(let value): value
            case .slot(let slot): slot.resolved()
            }
        }
    }

    var value: PropertyValue?
    /// A keyed container's values, set directly; those of nested containers are in
    /// `nestedSlots` until resolved. A key is in one or the other: the last write wins. Most
    /// records nest nothing, and their map is the record's properties, never copied.
    var map: PropertyList?
    var nestedSlots: [String: EncodingSlot] = [:]
    var array: [Item]?
    /// Whether a keyed container's values include an array or a map (a nested container, or a
    /// value encoded as one): only then can a record's values nest deeper than its properties.
    private(set) var nests = false

    func resolved() -> PropertyValue {
        if let properties = resolvedProperties() { return .map(properties.dictionary) }
        if let array { return .array(array.map(\.resolved)) }
        return value ?? .map([:])
    }

    /// A keyed container's values with its nested containers' resolved, or `nil` if it was
    /// not used as a keyed container.
    func resolvedProperties() -> PropertyList? {
        guard var map else { return nil }
        for (key, slot) in nestedSlots { map.set(slot.resolved(), forKey: key) }
        return map
    }

    /// Sets `key` to `value`; returns whether that wrote over what `key` had.
    @discardableResult
    func set(_ value: PropertyValue, forKey key: String) -> Bool {
        switch value {
        case .array, .map: nests = true
        default: break
        }
        if map == nil { map = PropertyList() }
        let replacedValue = map!.set(value, forKey: key)
        let replacedSlot = !nestedSlots.isEmpty && nestedSlots.removeValue(forKey: key) != nil
        return replacedValue || replacedSlot
    }

    /// The slot of a container nested at `key` (the one already there, if any), and whether
    /// making it wrote over a value `key` had.
    func nestedSlot(forKey key: String) -> (slot: EncodingSlot, replaced: Bool) {
        nests = true
        if map == nil { map = PropertyList() }
        if let existing = nestedSlots[key] { return (existing, false) }
        let replaced = map!.remove(key)
        let slot = EncodingSlot()
        nestedSlots[key] = slot
        return (slot, replaced)
    }

    func append(_ value: PropertyValue) {
        if array == nil { array = [] }
        array!.append(.value(value))
    }

    func appendSlot() -> EncodingSlot {
        if array == nil { array = [] }
        let slot = EncodingSlot()
        array!.append(.slot(slot))
        return slot
    }

    func ensureMap() { if map == nil { map = PropertyList() } }
    func ensureArray() { if array == nil { array = [] } }
    var arrayCount: Int { array?.count ?? 0 }
}

struct PropertyEncoder: Encoder {
    let context: EncodingContext
    let codingPath: [any CodingKey]
    let storage: EncodingSlot
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(context: EncodingContext, codingPath: [any CodingKey], storage: EncodingSlot = EncodingSlot()) {
        self.context = context
        self.codingPath = codingPath
        self.storage = storage
    }

    // A slot resolves to one kind (a map over an array over a single value): taking another
    // kind after one was written hides what was written, children too.
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if storage.value != nil || storage.array != nil { context.noteValueWrittenOver() }
        storage.ensureMap()
        return KeyedEncodingContainer(KeyedPropertyContainer<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if storage.value != nil || storage.map != nil { context.noteValueWrittenOver() }
        storage.ensureArray()
        return UnkeyedPropertyContainer(encoder: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SinglePropertyContainer(encoder: self) }

    /// Writes `value` as a single value container writes one: also for a kind of its own that
    /// a value writes itself (a `Ref` that a wrapper's `encode(to:)` forwards to).
    func setSingleValue(_ value: PropertyValue) {
        if storage.value != nil || storage.map != nil || storage.array != nil { context.noteValueWrittenOver() }
        storage.value = value
    }

    func encoded<T: Encodable>(_ value: T, key: (any CodingKey)?) throws -> PropertyValue {
        try context.encodeValue(value, codingPath: key.map { codingPath + [$0] } ?? codingPath)
    }

    /// An integer as the int kind; one beyond `Int64` (a `UInt64` bit mask, the low half of a
    /// `Duration`, an `Int128`) as its decimal string, which only the decoders of types it fits
    /// read back.
    static func integer<T: BinaryInteger>(_ value: T, at path: [any CodingKey]) throws -> PropertyValue {
        if let number = Int64(exactly: value) { return .int(number) }
        if value.bitWidth > 64 { return .string(String(value)) }
        guard let unsigned = UInt64(exactly: value) else {
            let at = path.isEmpty ? "" : " (at \(path.map(\.stringValue).joined(separator: ".")))"
            throw ArborError(.coding, "\(value) does not fit in 64 bits\(at)")
        }
        return .string(String(unsigned))
    }
}

struct KeyedPropertyContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: PropertyEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ value: PropertyValue, _ key: Key) {
        if encoder.storage.set(value, forKey: key.stringValue) { encoder.context.noteValueWrittenOver() }
    }

    private func nestedSlot(_ name: String) -> EncodingSlot {
        let (slot, replaced) = encoder.storage.nestedSlot(forKey: name)
        if replaced { encoder.context.noteValueWrittenOver() }
        return slot
    }

    mutating func encodeNil(forKey key: Key) throws { set(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(.double(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(.double(Double(value)), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(try PropertyEncoder.integer(value, at: codingPath + [key]), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(try PropertyEncoder.integer(value, at: codingPath + [key]), key) }
    mutating func encode(_ value: Int128, forKey key: Key) throws { set(try PropertyEncoder.integer(value, at: codingPath + [key]), key) }
    mutating func encode(_ value: UInt128, forKey key: Key) throws { set(try PropertyEncoder.integer(value, at: codingPath + [key]), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        set(try encoder.encoded(value, key: key), key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let slot = nestedSlot(key.stringValue)
        return PropertyEncoder(context: encoder.context, codingPath: codingPath + [key], storage: slot).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let slot = nestedSlot(key.stringValue)
        return PropertyEncoder(context: encoder.context, codingPath: codingPath + [key], storage: slot).unkeyedContainer()
    }

    // The path gains the level the decoder's superDecoder() adds, so a tree of records nested
    // through super encoders is measured as deep as it is read.
    mutating func superEncoder() -> any Encoder {
        PropertyEncoder(context: encoder.context, codingPath: codingPath + [IndexCodingKey(stringValue: "super")], storage: nestedSlot("super"))
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        PropertyEncoder(context: encoder.context, codingPath: codingPath + [key], storage: nestedSlot(key.stringValue))
    }
}

struct IndexCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) { self.stringValue = String(intValue); self.intValue = intValue }
}

struct UnkeyedPropertyContainer: UnkeyedEncodingContainer {
    let encoder: PropertyEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { encoder.storage.arrayCount }

    private func append(_ value: PropertyValue) { encoder.storage.append(value) }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(.double(value)) }
    mutating func encode(_ value: Float) throws { append(.double(Double(value))) }
    mutating func encode(_ value: Int) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { append(.int(value)) }
    mutating func encode(_ value: UInt) throws { append(try PropertyEncoder.integer(value, at: codingPath)) }
    mutating func encode(_ value: UInt8) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { append(try PropertyEncoder.integer(value, at: codingPath)) }
    mutating func encode(_ value: Int128) throws { append(try PropertyEncoder.integer(value, at: codingPath)) }
    mutating func encode(_ value: UInt128) throws { append(try PropertyEncoder.integer(value, at: codingPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        append(try encoder.encoded(value, key: IndexCodingKey(intValue: count)))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let key = IndexCodingKey(intValue: count)
        return PropertyEncoder(context: encoder.context, codingPath: codingPath + [key], storage: encoder.storage.appendSlot()).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let key = IndexCodingKey(intValue: count)
        return PropertyEncoder(context: encoder.context, codingPath: codingPath + [key], storage: encoder.storage.appendSlot()).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let key = IndexCodingKey(intValue: count)
        return PropertyEncoder(context: encoder.context, codingPath: codingPath + [key], storage: encoder.storage.appendSlot())
    }
}

struct SinglePropertyContainer: SingleValueEncodingContainer {
    let encoder: PropertyEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ value: PropertyValue) { encoder.setSingleValue(value) }

    mutating func encodeNil() throws { set(.null) }
    mutating func encode(_ value: Bool) throws { set(.bool(value)) }
    mutating func encode(_ value: String) throws { set(.string(value)) }
    mutating func encode(_ value: Double) throws { set(.double(value)) }
    mutating func encode(_ value: Float) throws { set(.double(Double(value))) }
    mutating func encode(_ value: Int) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { set(.int(value)) }
    mutating func encode(_ value: UInt) throws { set(try PropertyEncoder.integer(value, at: codingPath)) }
    mutating func encode(_ value: UInt8) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { set(try PropertyEncoder.integer(value, at: codingPath)) }
    mutating func encode(_ value: Int128) throws { set(try PropertyEncoder.integer(value, at: codingPath)) }
    mutating func encode(_ value: UInt128) throws { set(try PropertyEncoder.integer(value, at: codingPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws { set(try encoder.encoded(value, key: nil)) }
}
