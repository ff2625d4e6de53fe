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
            // What does not hold the child is left as it is (a `[[Double]]` beside it too).
            guard childKeys.contains(child) else { return self }
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
            // Pairs that name no record any more are stored as the encoder stores them: keys and
            // values one after the other (else a re-save would differ from them, a change to a
            // later merge). Not where a key is null: rows of optionals (`[[Card?]]`) look alike.
            if pairs, !kept.contains(where: \.namesRecords),
               !kept.contains(where: { if case .array(let pair) = $0 { pair.first == .null } else { false } }),
               let flat = PropertyDecoder.flattening(kept) {
                return .array(flat)
            }
            return .array(kept)
        case .map(let values):
            guard childKeys.contains(child) else { return self }
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

    /// This value (a merged record's property) with `child` put back where `old`, the ancestor's
    /// value of the property, held it: the reverse of ``droppingElement(_:wholeEntries:)``. Into
    /// the entry that held it, where this value kept that entry without it (a dictionary's
    /// pair of the same key, a lane `{name, cards}` as the ancestor had it but for the child, a
    /// map's value under the same name), at the ancestor's index in its array; else with the
    /// entry that wrapped it, where that entry held no other child (and, as a pair, its key is
    /// free), or as the property's value itself where this is `null`. `nil` where it cannot.
    ///
    /// - Complexity: O(e) for the `e` elements on the way down.
    func restoring(_ child: RecordKey, from old: PropertyValue) -> PropertyValue? {
        switch (old, self) {
        case (.array(let oldElements), .array(var elements)):
            guard let index = oldElements.firstIndex(where: { $0.childKeys.contains(child) }) else { return nil }
            let element = oldElements[index]
            if Self.arePairs(oldElements), case .array(let oldPair) = element {
                // The dictionary as the encoder stores one that names no record: keys and values
                // one after the other; as pairs once it names one again.
                if !elements.allSatisfy({ if case .array(let pair) = $0 { pair.count == 2 } else { false } }) {
                    guard elements.count.isMultiple(of: 2), !elements.contains(where: \.namesRecords) else { return nil }
                    elements = stride(from: 0, to: elements.count, by: 2).map { .array([elements[$0], elements[$0 + 1]]) }
                }
                // A dictionary's key: back into its value, or the pair back whole.
                if let position = elements.firstIndex(where: { if case .array(let pair) = $0, pair.count == 2 { pair[0] == oldPair[0] } else { false } }) {
                    guard case .array(var pair) = elements[position], !oldPair[0].holdsChildren,
                          let value = pair[1].restoring(child, from: oldPair[1]) else { return nil }
                    pair[1] = value
                    elements[position] = .array(pair)
                    return .array(elements)
                }
                // Pairs are sorted by their keys' bytes: back where its key sorts.
                guard element.childKeys == [child] else { return nil }
                let keyBytes = PropertyValue.canonicalBytes(of: oldPair[0])
                let position = elements.firstIndex { existing in
                    guard case .array(let pair) = existing, let key = pair.first else { return false }
                    return keyBytes.lexicographicallyPrecedes(PropertyValue.canonicalBytes(of: key))
                } ?? elements.count
                elements.insert(element, at: position)
                return .array(elements)
            } else if element != .child(child), !element.holdsInPlace(child) {
                if let position = Self.counterpart(of: element, at: index, in: elements, among: oldElements) {
                    guard let restored = elements[position].restoring(child, from: element) else { return nil }
                    elements[position] = restored
                    return .array(elements)
                }
                // The entry is gone: back with this child alone (the next child of the group
                // then finds it by this one), rather than the child going as an orphan.
                var alone: PropertyValue? = element
                for other in element.childKeys where other != child { alone = alone?.droppingElement(other, wholeEntries: true) }
                guard let alone, alone.childKeys == [child] else { return nil }
                elements.insert(alone, at: min(index, elements.count))
                return .array(elements)
            }
            guard element.childKeys == [child] else { return nil }
            elements.insert(element, at: min(index, elements.count))
            return .array(elements)
        case (.map(let oldValues), .map(var values)):
            guard let (name, element) = oldValues.first(where: { $0.value.childKeys.contains(child) }) else { return nil }
            if let now = values[name], now != .null {
                guard let restored = now.restoring(child, from: element) else { return nil }
                values[name] = restored
            } else {
                guard element.childKeys == [child] else { return nil }
                values[name] = element
            }
            return .map(values)
        case (_, .null):
            return old.childKeys == [child] ? old : nil
        default:
            return nil
        }
    }

    /// Where `elements` (a merged array) holds the entry `element` held at `index` of the
    /// ancestor's array `oldElements`: the entry that holds another of its children, whatever
    /// else changed in it (a lane renamed, its cards moved or added to); else one of the same
    /// shape without children that holds no child another entry held (an emptied lane), at
    /// `index` if it is there; `nil` if none.
    private static func counterpart(of element: PropertyValue, at index: Int, in elements: [PropertyValue], among oldElements: [PropertyValue]) -> Int? {
        let siblings = Set(element.childKeys)
        if let found = elements.firstIndex(where: { !siblings.isDisjoint(with: $0.childKeys) }) { return found }
        var elsewhere = Set<RecordKey>()
        for (offset, old) in oldElements.enumerated() where offset != index { elsewhere.formUnion(old.childKeys) }
        let shape = element.withoutChildren
        func fits(_ candidate: PropertyValue) -> Bool { candidate.withoutChildren == shape && elsewhere.isDisjoint(with: candidate.childKeys) }
        if elements.indices.contains(index), fits(elements[index]) { return index }
        return elements.firstIndex(where: fits)
    }

    /// This value with no child: arrays without the elements that hold one outside arrays
    /// (``holdsInPlace(_:pair:)``, as ``droppingElement(_:wholeEntries:)`` drops them whole), a
    /// map's child values `null`.
    private var withoutChildren: PropertyValue {
        switch self {
        case .child: return .null
        case .array(let values) where holdsChildren:
            // As a release drops them: a pair whose key or value is a child goes whole.
            let pairs = Self.arePairs(values)
            return .array(values.filter { value in
                if pairs, case .array(let pair) = value { !pair.contains(where: \.holdsSomeChildInPlace) } else { !value.holdsSomeChildInPlace }
            }.map(\.withoutChildren))
        case .map(let values) where holdsChildren: return .map(values.mapValues(\.withoutChildren))
        default: return self
        }
    }

    /// Whether this value holds a child itself or in a map's value, at any depth of maps.
    private var holdsSomeChildInPlace: Bool {
        switch self {
        case .child: true
        case .map(let values): values.values.contains(where: \.holdsSomeChildInPlace)
        default: false
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
    /// two-element array, whose key or value, not both, may hold children (a dictionary keyed
    /// by records, `[Player: Int]`, or holding them, `[Column: [Card]]`). An array of arrays of
    /// two children each reads as what it is (so does a dictionary from records to records).
    private static func arePairs(_ values: [PropertyValue]) -> Bool {
        // As the encoder writes pairs: only where they name records.
        values.contains(where: \.namesRecords) && values.allSatisfy { value in
            guard case .array(let pair) = value, pair.count == 2 else { return false }
            return !(pair[0].holdsChildren && pair[1].holdsChildren)
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
