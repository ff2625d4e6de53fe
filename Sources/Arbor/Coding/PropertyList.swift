/// The properties one keyed container writes while a value is encoded, in the order first
/// written: the encoder's working form of a record's `[String: PropertyValue]`.
///
/// A name written again keeps its place and spelling and takes the new value, as a dictionary
/// keeps its key, so names that are equal as Swift strings (canonically equivalent Unicode) are
/// one property spelled as first written — exactly what `[String: PropertyValue]` holds, and so
/// the same canonical bytes. A record has a handful of properties: they are found by comparing
/// names one by one, which costs less than hashing each, until there are too many.
///
/// - Complexity: `set` and `remove` are O(1) amortized past ``searchLimit`` names, O(*p*) below.
struct PropertyList {
    private(set) var entries: [(name: String, value: PropertyValue)] = []
    /// Where each name is, once there are more than ``searchLimit``; `nil` before.
    private var positions: [String: Int]?

    /// The count up to which names are searched one by one.
    static let searchLimit = 16

    init() {}

    init(_ properties: [String: PropertyValue]) {
        entries = properties.map { ($0.key, $0.value) }
        if entries.count > Self.searchLimit { indexPositions() }
    }

    var isEmpty: Bool { entries.isEmpty }

    private func position(of name: String) -> Int? {
        if let positions { return positions[name] }
        return entries.firstIndex { $0.name == name }
    }

    /// Sets `name` to `value`; returns whether it replaced a value `name` had.
    @discardableResult
    mutating func set(_ value: PropertyValue, forKey name: String) -> Bool {
        if let position = position(of: name) {
            entries[position].value = value
            return true
        }
        // Room for a typical record's properties at once, rather than growing by doubling.
        entries.append((name, value))
        if positions != nil {
            positions![name] = entries.count - 1
        } else if entries.count > Self.searchLimit {
            indexPositions()
        }
        return false
    }

    /// Removes `name`; returns whether it had a value.
    @discardableResult
    mutating func remove(_ name: String) -> Bool {
        guard let position = position(of: name) else { return false }
        entries.remove(at: position)
        if positions != nil { indexPositions() }
        return true
    }

    private mutating func indexPositions() {
        var positions = [String: Int](minimumCapacity: entries.count)
        for (position, entry) in entries.enumerated() { positions[entry.name] = position }
        self.positions = positions
    }

    /// Names each child of `renames`' keys by its value instead, at any depth.
    mutating func renameChildren(_ renames: [RecordKey: RecordKey]) {
        for position in entries.indices where entries[position].value.holdsChildren {
            entries[position].value = entries[position].value.renamingChildren(renames)
        }
    }

    /// The properties as a record holds them.
    var dictionary: [String: PropertyValue] {
        var result = [String: PropertyValue](minimumCapacity: entries.count)
        for (name, value) in entries { result[name] = value }
        return result
    }

    /// The properties in the order canonical bytes list them: names in UTF-8 byte order.
    consuming func sortedByName() -> [(name: String, value: PropertyValue)] {
        var sorted = entries
        entries = []
        sorted.sort { utf8Less($0.name, $1.name) }
        return sorted
    }
}

extension PropertyValue {
    /// This value with each child of `renames`' keys named by its value instead.
    func renamingChildren(_ renames: [RecordKey: RecordKey]) -> PropertyValue {
        switch self {
        case .child(let key): .child(renames[key] ?? key)
        case .array(let values) where holdsChildren: .array(values.map { $0.renamingChildren(renames) })
        case .map(let values) where holdsChildren: .map(values.mapValues { $0.renamingChildren(renames) })
        default: self
        }
    }
}
