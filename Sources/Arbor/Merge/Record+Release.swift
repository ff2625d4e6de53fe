extension Record {
    /// This record without child `child`, dropped from the arrays that hold it at any depth,
    /// with the entry that wraps it where it is that entry's only child (a struct around it);
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
    /// element whose only child is `child` (a struct that wraps it, `{card, note}` in a column)
    /// goes too.
    func droppingElement(_ child: RecordKey, wholeEntries: Bool = false) -> PropertyValue? {
        switch self {
        case .child(let key):
            return key == child ? nil : self
        case .array(let values):
            var kept = [PropertyValue]()
            kept.reserveCapacity(values.count)
            for value in values where value != .child(child) {
                if wholeEntries, value.holdsChildren, value.childKeys == [child] { continue }
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
}

extension PropertyValue {
    /// This array without its elements that hold child `child` at any depth, whatever else they
    /// hold; `nil` if this is not an array.
    func droppingEntries(holding child: RecordKey) -> PropertyValue? {
        guard case .array(let values) = self else { return nil }
        return .array(values.filter { !$0.childKeys.contains(child) })
    }
}
