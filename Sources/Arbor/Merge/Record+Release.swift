extension Record {
    /// This record without child `child`, dropped from the arrays that hold it at any depth,
    /// with the entry that wraps it where it is that entry's only child and held outside its
    /// arrays (a struct around it, a dictionary's key with it as its value);
    /// `nil` if the record also holds it elsewhere (a property of its own, a map's value beside
    /// others), where taking it away would leave a value its type may not decode without.
    func releasing(_ child: RecordKey) -> Record? {
        var properties = properties
        for (name, value) in properties where value.holdsChildren {
            guard let kept = value.droppingElement(child, wholeEntries: true) else { return nil }
            properties[name] = kept
        }
        return Record(key: key, properties: properties)
    }
}

extension PropertyValue {
    /// This value without the array elements that are child `child`, at any depth; `nil` if it
    /// also holds the child elsewhere (itself, or a map's value). With `wholeEntries`, an array
    /// element that holds the child outside arrays and no other child (a struct that wraps it,
    /// `{card, note}` in a column; a dictionary's key with it as its value) goes too. One that
    /// holds it in an array of its own keeps its place and lets it go from there: a lane
    /// `{name, cards}` or a dictionary's key whose value is an array stays, emptied.
    func droppingElement(_ child: RecordKey, wholeEntries: Bool = false) -> PropertyValue? {
        switch self {
        case .child(let key):
            return key == child ? nil : self
        case .array(let values):
            // A dictionary stored as pairs (`[[key, value], …]`): a pair stays two.
            let pairs = Self.arePairs(values)
            var kept = [PropertyValue]()
            kept.reserveCapacity(values.count)
            for value in values where value != .child(child) {
                if value.holdsInPlace(child, pair: pairs) {
                    guard wholeEntries, value.childKeys == [child] else { return nil }
                    continue
                }
                guard let value = value.droppingElement(child, wholeEntries: wholeEntries) else { return nil }
                kept.append(value)
            }
            return .array(kept)
        case .map(let values):
            var kept = [String: PropertyValue](minimumCapacity: values.count)
            for (name, value) in values {
                guard let value = value.droppingElement(child, wholeEntries: wholeEntries) else { return nil }
                kept[name] = value
            }
            return .map(kept)
        default:
            return self
        }
    }

    /// Whether this value holds `child` where no array can let it go: itself, or a map's value
    /// at any depth of maps; with `pair`, also as a pair's key or value.
    private func holdsInPlace(_ child: RecordKey, pair: Bool = false) -> Bool {
        switch self {
        case .child(let key): key == child
        case .map(let values): values.values.contains { $0.holdsInPlace(child) }
        case .array(let elements): pair && elements.contains { $0.holdsInPlace(child) }
        default: false
        }
    }

    /// Whether `values` reads as a dictionary stored as pairs (``DictionaryOfPairs``): each a
    /// two-element array whose first element, a key, holds no child. An array of arrays of two
    /// children reads as what it is.
    private static func arePairs(_ values: [PropertyValue]) -> Bool {
        !values.isEmpty && values.allSatisfy { value in
            guard case .array(let pair) = value, pair.count == 2 else { return false }
            return !pair[0].holdsChildren
        }
    }
}

extension PropertyValue {
    /// This array without its elements that hold child `child` at any depth, whatever else they
    /// hold; `nil` if this is not an array.
    func droppingEntries(holding child: RecordKey) -> PropertyValue? {
        guard case .array(let values) = self else { return nil }
        return .array(values.filter { !$0.childKeys.contains(child) })
    }
}
