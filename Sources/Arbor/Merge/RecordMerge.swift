/// The three versions of one record in a merge (the ancestor's, ours and theirs; `nil`: absent)
/// and how they combine, property by property.
struct RecordMerge {
    var key: RecordKey
    var base: Record?
    var ours: Record?
    var theirs: Record?

    /// The record merged as far as it merges cleanly, and the conflicts left. A record-level
    /// conflict (deleted on one side, changed on the other) leaves `merged` at `nil`.
    struct Result {
        var merged: Record?
        var conflicts: [MergeConflict]
    }

    /// Which side a conflict is settled for.
    enum Side { case ours, theirs }

    func merge() -> Result {
        if ours == theirs { return Result(merged: ours, conflicts: []) }
        if ours == base { return Result(merged: theirs, conflicts: []) }
        if theirs == base { return Result(merged: ours, conflicts: []) }
        guard let ours, let theirs else { return wholeRecordConflict() }
        // Both sides hold the record: merge property by property (a record added on both sides
        // merges against an empty ancestor).
        let baseProperties = base?.properties ?? [:]
        var merged = [String: PropertyValue]()
        var conflicts = [MergeConflict]()
        let names = Set(baseProperties.keys).union(ours.properties.keys).union(theirs.properties.keys).sorted(by: utf8Less)
        for name in names {
            let (b, o, t) = (baseProperties[name], ours.properties[name], theirs.properties[name])
            if let value = Self.mergeProperty(base: b, ours: o, theirs: t) {
                if let value { merged[Self.spelling(of: name, base: baseProperties, ours: ours.properties, theirs: theirs.properties)] = value }
            } else {
                conflicts.append(MergeConflict(key: key, property: name, base: b, ours: o, theirs: t))
            }
        }
        return Result(merged: Record(key: key, properties: merged), conflicts: conflicts)
    }

    /// The record as a conflict of its own (one side deleted it, the other changed it), with
    /// each side's properties.
    func wholeRecordConflict() -> Result {
        let conflict = MergeConflict(
            key: key, property: nil, base: base.map { .map($0.properties) },
            ours: ours.map { .map($0.properties) }, theirs: theirs.map { .map($0.properties) })
        return Result(merged: nil, conflicts: [conflict])
    }

    /// How the merged record spells `name`, where the sides spell it in different Unicode forms
    /// (a dictionary finds either form by the other): a side's new spelling is a change like any
    /// other, so theirs' spelling where ours kept the ancestor's, else ours'.
    static func spelling(of name: String, base: [String: PropertyValue], ours: [String: PropertyValue], theirs: [String: PropertyValue]) -> String {
        func spelled(_ properties: [String: PropertyValue]) -> String? { properties.index(forKey: name).map { properties[$0].key } }
        let (b, o, t) = (spelled(base), spelled(ours), spelled(theirs))
        if let o, let b, utf8Equal(o, b), let t { return t }
        return o ?? t ?? b ?? name
    }

    /// The record with every conflict of `result` settled for the side `choose` picks.
    func settle(_ result: Result, choose: (MergeConflict) -> Side) -> Record? {
        guard let first = result.conflicts.first else { return result.merged }
        if first.property == nil { return choose(first) == .ours ? ours : theirs }
        var properties = result.merged?.properties ?? [:]
        for conflict in result.conflicts {
            guard let name = conflict.property else { continue }
            // The chosen side's value, under that side's spelling of the name.
            let forOurs = choose(conflict) == .ours
            let sideProperties = (forOurs ? ours : theirs)?.properties ?? [:]
            let spelled = sideProperties.index(forKey: name).map { sideProperties[$0].key } ?? name
            properties[name] = nil
            properties[spelled] = forOurs ? conflict.ours : conflict.theirs
        }
        return Record(key: key, properties: properties)
    }

    /// The merged value of one property: `.some(value)` (`.some(nil)`: absent), or `nil` for
    /// a conflict.
    static func mergeProperty(base: PropertyValue?, ours: PropertyValue?, theirs: PropertyValue?) -> PropertyValue?? {
        let (base, ours, theirs) = PropertyValue.pairingLegacyDictionaries(base, ours, theirs)
        if ours == theirs { return .some(ours) }
        if ours == base { return .some(theirs) }
        if theirs == base { return .some(ours) }
        if let set = mergeKeySets(base: base, ours: ours, theirs: theirs) { return .some(set) }
        if let map = mergeMaps(base: base, ours: ours, theirs: theirs) { return .some(map) }
        return nil
    }

    /// Maps (a nested struct, a dictionary with string keys) merge name by name, as a record's
    /// properties do: one side's `address.street` and the other's `address.city` both survive,
    /// and so do entries each side added under its own name. `nil` (the property is then a
    /// conflict whole, as before) where:
    /// - a value is not a map (an absent ancestor merges as an empty one);
    /// - each side holds one name, new and different: an enum, stored as a map of its one case,
    ///   changed to a different case on each side (merged, it would hold two; a dictionary of
    ///   one entry added on each side is taken for one, too);
    /// - a name conflicts;
    /// - a side moved a child from one name to another: ownership settles moves per record and
    ///   property, and would not see one within the map.
    static func mergeMaps(base: PropertyValue?, ours: PropertyValue?, theirs: PropertyValue?) -> PropertyValue? {
        guard case .map(let o)? = ours, case .map(let t)? = theirs else { return nil }
        let b: [String: PropertyValue]
        switch base {
        case .map(let values)?: b = values
        case nil: b = [:]
        default: return nil
        }
        // An enum's shape: each side holds one name, new and different.
        if o.count == 1, t.count == 1, let x = o.keys.first, let y = t.keys.first, b[x] == nil, b[y] == nil, !utf8Equal(x, y) { return nil }
        // The name each child is held under.
        func names(_ map: [String: PropertyValue]) -> [RecordKey: String] {
            var names = [RecordKey: String]()
            for (name, value) in map { for child in value.childKeys { names[child] = name } }
            return names
        }
        let baseNames = names(b)
        for side in [o, t] {
            for (child, name) in names(side) {
                if let before = baseNames[child], !utf8Equal(before, name) { return nil }
            }
        }
        var merged = [String: PropertyValue]()
        for name in Set(b.keys).union(o.keys).union(t.keys).sorted(by: utf8Less) {
            guard let value = mergeProperty(base: b[name], ours: o[name], theirs: t[name]) else { return nil }
            if let value { merged[spelling(of: name, base: b, ours: o, theirs: t)] = value }
        }
        let result = PropertyValue.map(merged)
        let children = result.childKeys
        return Set(children).count == children.count ? result : nil
    }

    /// Arrays of child or reference keys merge as sets: the ancestor's elements, minus those
    /// either side removed, in the ancestor's order, or in the order a side put them in if one
    /// side reordered them (both, differently: the ancestor's order, as neither can be taken
    /// without the other's additions or removals); then the elements either side added, in key
    /// order (so both directions of a merge agree). `nil` if the values are not such arrays, or
    /// one holds a key twice: it is no set (a playlist that plays a song twice), and merged as
    /// one it would lose a repeat neither side removed.
    static func mergeKeySets(base: PropertyValue?, ours: PropertyValue?, theirs: PropertyValue?) -> PropertyValue? {
        func elements(_ value: PropertyValue?) -> (list: [PropertyValue], set: Set<PropertyValue>)? {
            guard case .array(let values)? = value else { return value == nil ? ([], []) : nil }
            guard values.allSatisfy(Self.isKey) else { return nil }
            let set = Set(values)
            return set.count == values.count ? (values, set) : nil
        }
        guard ours != nil, theirs != nil,
              let (b, baseSet) = elements(base), let (o, oursSet) = elements(ours), let (t, theirsSet) = elements(theirs) else { return nil }
        var seen = Set<PropertyValue>()
        var result = b.filter { oursSet.contains($0) && theirsSet.contains($0) && seen.insert($0).inserted }
        // The kept elements in the order each side holds them.
        func order(_ side: [PropertyValue]) -> [PropertyValue] {
            var met = Set<PropertyValue>()
            return side.filter { seen.contains($0) && met.insert($0).inserted }
        }
        let (oursOrder, theirsOrder) = (order(o), order(t))
        if oursOrder == result {
            result = theirsOrder
        } else if theirsOrder == result || theirsOrder == oursOrder {
            result = oursOrder
        }
        let added = (o + t).filter { !baseSet.contains($0) && seen.insert($0).inserted }
        result += added.sorted(by: Self.keyOrder)
        return .array(result)
    }

    private static func isKey(_ value: PropertyValue) -> Bool {
        switch value {
        case .child, .reference: true
        default: false
        }
    }

    /// Children before references, then by record key.
    private static func keyOrder(_ a: PropertyValue, _ b: PropertyValue) -> Bool {
        switch (a, b) {
        case (.child(let x), .child(let y)), (.reference(let x), .reference(let y)): x < y
        case (.child, _): true
        default: false
        }
    }
}
