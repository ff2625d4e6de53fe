/// The records a merge works on: the three versions of every record either side changed since
/// the ancestor, and the merged result as it is built.
///
/// The three versions are kept as canonical bytes, a fraction of the memory of decoded records,
/// and decoded one record at a time as the merge reaches it (``recordMerge(_:store:)``).
struct MergeState {
    /// Every key either side changed, in key order.
    private(set) var changed = [RecordKey]()
    /// ``changed`` as a set.
    private(set) var isChanged = Set<RecordKey>()
    /// The canonical bytes of each changed key at the ancestor and on both sides (absent: the
    /// record is).
    private(set) var base = [RecordKey: [UInt8]]()
    private(set) var ours = [RecordKey: [UInt8]]()
    private(set) var theirs = [RecordKey: [UInt8]]()
    /// The canonical bytes each key holds at ours' head (`nil`: absent), for every key in `merged`
    /// but those a resolver added.
    private(set) var inOurs = [RecordKey: [UInt8]?]()
    /// The merged state of the keys decided so far (`nil`: deleted); other keys are as in ours.
    var merged = [RecordKey: Record?]()
    /// The record that held each child at the ancestor, among the changed records: made when
    /// first asked for (``placeBack(_:store:)``), once every record was decoded.
    var ancestorHolders: [RecordKey: RecordKey]?
    /// The records a resolver returned: what they leave out goes, and nothing is put back.
    var settledByResolver = Set<RecordKey>()
    /// Blob objects of large merged records, to write with the commit.
    private(set) var blobs = [(hash: Hash, bytes: [UInt8])]()
    /// Where each side's changed records hold their children (``placementsOnEachSide()``).
    private typealias SidePlacements = (base: [RecordKey: Set<ChildPlacement>], ours: [RecordKey: Set<ChildPlacement>], theirs: [RecordKey: Set<ChildPlacement>])
    private var sidePlacements: SidePlacements?
    /// The children ``findContestedChildren(store:)`` found, with the places each side put them.
    private var contested = [RecordKey: (ours: Set<ChildPlacement>, theirs: Set<ChildPlacement>)]()
    /// Whether every record read was stored as Arbor stores it (inline up to
    /// ``ProllyTree/inlineLimit`` bytes, a blob above), so that its payload can be made again
    /// from its bytes. A store written otherwise is read, but not second-guessed.
    private var payloadsFollowBytes = true
    private let baseRoot: Hash
    let oursRoot: Hash
    private let theirsRoot: Hash

    private init(baseRoot: Hash, oursRoot: Hash, theirsRoot: Hash) {
        self.baseRoot = baseRoot
        self.oursRoot = oursRoot
        self.theirsRoot = theirsRoot
    }

    /// Diffs both sides against the ancestor's root and reads the changed records.
    ///
    /// - Complexity: O(k log n) node reads for `k` changed records.
    static func load(base baseRoot: Hash, ours: Version, theirs: Version, store: Store, source: NodeSource) async throws -> MergeState {
        var state = MergeState(baseRoot: baseRoot, oursRoot: ours.root, theirsRoot: theirs.root)
        // The base's nodes are kept for the second diff, ours' for the index edit that follows;
        // theirs' are not read again.
        let oursDiff = try await ProllyTree.diff(baseRoot, ours.root, source: source)
        let theirsDiff = try await ProllyTree.diff(baseRoot, theirs.root, source: source, rememberNew: false)
        var keys = Set<[UInt8]>()
        func entries(_ differences: [IndexDifference], _ side: KeyPath<IndexDifference, IndexPayload?>) -> [(key: [UInt8], payload: IndexPayload)] {
            differences.compactMap { difference in difference[keyPath: side].map { (difference.key, $0) } }
        }
        func read(_ entries: [(key: [UInt8], payload: IndexPayload)]) async throws -> [(key: RecordKey, bytes: [UInt8])] {
            let records = try await store.recordBytes(entries)
            for (entry, record) in zip(entries, records) where !ProllyTree.isCanonical(entry.payload, forRecord: record.bytes) {
                state.payloadsFollowBytes = false
            }
            return records
        }
        for (key, bytes) in try await read(entries(oursDiff, \.old) + entries(theirsDiff, \.old)) { state.base[key] = bytes }
        let oursNew = try await read(entries(oursDiff, \.new))
        let theirsNew = try await read(entries(theirsDiff, \.new))
        for difference in oursDiff + theirsDiff { keys.insert(difference.key) }
        state.changed = try keys.sorted { compareKeys($0, $1) < 0 }.map { try RecordKey(indexBytes: $0[...]) }
        state.isChanged = Set(state.changed)
        let oursChanged = Set(try oursDiff.map { try RecordKey(indexBytes: $0.key[...]) })
        let theirsChanged = Set(try theirsDiff.map { try RecordKey(indexBytes: $0.key[...]) })
        for key in state.changed {
            if !oursChanged.contains(key) { state.ours[key] = state.base[key] }
            if !theirsChanged.contains(key) { state.theirs[key] = state.base[key] }
        }
        for (key, bytes) in oursNew { state.ours[key] = bytes }
        for (key, bytes) in theirsNew { state.theirs[key] = bytes }
        for key in state.changed { state.inOurs[key] = .some(state.ours[key]) }
        return state
    }

    /// The three versions of `key`, decoded; a side that holds the same bytes as another
    /// shares its decoded record.
    func recordMerge(_ key: RecordKey, store: Store) throws -> RecordMerge {
        let (baseBytes, oursBytes, theirsBytes) = (base[key], ours[key], theirs[key])
        let baseRecord = try baseBytes.map { try store.decodeRecord($0, of: key) }
        let oursRecord = try oursBytes == baseBytes ? baseRecord : oursBytes.map { try store.decodeRecord($0, of: key) }
        let theirsRecord = try theirsBytes == baseBytes ? baseRecord
            : (theirsBytes == oursBytes ? oursRecord : theirsBytes.map { try store.decodeRecord($0, of: key) })
        return RecordMerge(key: key, base: baseRecord, ours: oursRecord, theirs: theirsRecord)
    }

    /// The index payloads of `keys` (changed keys) at the base's root and at both heads' roots,
    /// by root, as ``Store/changeStamps(of:in:head:source:known:)`` takes them: made again from
    /// the bytes the diffs found, since a record's payload is a function of its bytes (none if
    /// a record read was stored otherwise, or a key is not one of ``changed``). Exact for the
    /// trees Arbor builds. In a damaged or hostile tree whose branch keys misdescribe their
    /// children, a diff (which follows the leaves) and a lookup (which follows the branch
    /// keys) can disagree; change times then follow the diffs: the same on every replica, but
    /// not always what Arbor chose before it made payloads again.
    func payloads(of keys: [RecordKey]) -> [Hash: [[UInt8]: IndexPayload]] {
        var result = [Hash: [[UInt8]: IndexPayload]]()
        // The diffs found every changed key at the three roots (in a well-formed tree), and no other.
        guard payloadsFollowBytes, Set(keys).isSubset(of: changed) else { return result }
        for (root, side) in [(baseRoot, base), (oursRoot, ours), (theirsRoot, theirs)] where result[root] == nil {
            var payloads = [[UInt8]: IndexPayload]()
            for key in keys {
                guard let bytes = side[key] else { continue }
                payloads[key.indexBytes] = ProllyTree.payload(forRecord: bytes).payload
            }
            result[root] = payloads
        }
        return result
    }

    /// Restores ownership in the merged records: a child a merged record names but the merge
    /// deleted is restored (from ours, else theirs), a record that some version of a changed
    /// record owned and no merged record owns any more is deleted, with what it owns (unless
    /// both sides keep it: it goes back where the ancestor held it, if it can,
    /// ``placeBack(_:store:)``), and then
    /// a child that several merged records hold is let go by all but one
    /// (``releaseSharedChildren(preferring:)``, `preferring` the side a strategy takes).
    ///
    /// - Complexity: O(c log n) node reads for `c` records restored or orphaned; none when the
    ///   sides' trees agree.
    mutating func enforceOwnership(store: Store, source: NodeSource, preferring side: RecordMerge.Side?) async throws {
        var candidates = Set<RecordKey>()
        for key in changed {
            // Read from the bytes: the merge decoded (so checked) every one of them already.
            for bytes in [base[key], ours[key], theirs[key]] { candidates.formUnion(try bytes.map(RecordCoding.childKeys) ?? []) }
        }
        while true {
            var held = Set<RecordKey>()
            for case let (_, record?) in merged { held.formUnion(record.childKeys) }
            let dangling = held.filter { if case .some(.none) = merged[$0] { true } else { false } }.sorted()
            if !dangling.isEmpty {
                let fromOurs = try await store.records(dangling, root: oursRoot, source: source)
                let fromTheirs = try await store.records(dangling, root: theirsRoot, source: source)
                for key in dangling {
                    guard let record = try fromOurs[key] ?? fromTheirs[key] ?? base[key].map({ try store.decodeRecord($0, of: key) }) else {
                        throw ArborError(.invalidInput, "the merge keeps a record naming child \(key), which neither side holds")
                    }
                    merged[key] = .some(record)
                    candidates.formUnion(record.childKeys)
                }
                continue
            }
            let unheld = candidates.subtracting(held)
            let unknown = unheld.filter { merged[$0] == nil }.sorted()
            if !unknown.isEmpty {
                let found = try await store.records(unknown, root: oursRoot, source: source)
                for key in unknown {
                    inOurs[key] = .some(found[key].map { RecordCoding.encode($0.properties) })
                    merged[key] = .some(found[key])
                }
            }
            var orphans = unheld.filter { if case .some(.some) = merged[$0] { true } else { false } }.sorted()
            // A record both sides keep lost its holders to the merge alone (one side moved it
            // into a record the other deleted): it goes back where the ancestor held it.
            let placed = try placeBack(orphans.filter(keptByBothSides), store: store)
            orphans.removeAll { placed.contains($0) }
            if orphans.isEmpty {
                // Only once no holder is left to go as an orphan: one that took a child from
                // another and then went would take the child with it.
                if releaseContestedChildren(preferring: side) { continue }
                if try releaseSharedChildren(preferring: side) { continue }
                if try releaseChildrenHeldTwiceByOneRecord(store: store) { continue }
                return
            }
            for key in orphans {
                if case .some(.some(let record)) = merged[key] { candidates.formUnion(record.childKeys) }
                merged[key] = .some(nil)
            }
        }
    }

    /// Leaves each child with one merged record, where the merge gave it several: ownership
    /// allows one owner. A record that held the child at the ancestor, and from which a side took
    /// it (moving it away, or deleting the record), lets it go first: the merge kept it whole
    /// from the other side (a record deleted on one side and changed on the other), so the
    /// move stands. A record lets a child go from arrays (``Record/releasing(_:)``); where that
    /// one holds it otherwise, the others let it go in key order, and the move is undone. Where
    /// that leaves several holders, each holding it in a property of its own, moves are undone
    /// in the same order: the property is set as a side has it that does not hold the child
    /// there (``lettingGoAsASideHolds(_:in:)``), and ownership is settled again.
    /// Where both sides moved the child to different records and
    /// ``releaseContestedChildren(preferring:)`` could not settle it, the record that `side`'s
    /// version holds it in keeps it (ours or theirs, as the strategy takes), else the record
    /// whose key sorts last. Depends on the three versions alone, so both directions of a merge
    /// agree.
    /// Returns whether a record let a child go.
    ///
    /// - Complexity: O(m) for `m` merged records.
    private mutating func releaseSharedChildren(preferring side: RecordMerge.Side?) throws -> Bool {
        var released = false
        // In key order, so that every replica settles them alike.
        for (child, found) in holders().filter({ $0.value.count > 1 }).sorted(by: { $0.key < $1.key }) {
            // As the merge now stands: a record may have let this child go since `holders()`.
            let keys = found.filter { key in
                if case .some(.some(let record)) = merged[key] { record.childKeys.contains(child) } else { false }
            }
            guard keys.count > 1 else { continue }
            var moved = [RecordKey](), others = [RecordKey](), preferred = [RecordKey]()
            for key in keys.sorted() {
                func holds(_ bytes: [UInt8]?) throws -> Bool { try bytes.map { try RecordCoding.childKeys($0).contains(child) } ?? false }
                if try holds(base[key]) && !(try holds(ours[key]) && holds(theirs[key])) {
                    moved.append(key)
                } else if let side, try holds(side == .ours ? ours[key] : theirs[key]) {
                    preferred.append(key)
                } else {
                    others.append(key)
                }
            }
            var holding = keys.count
            for key in moved + others + preferred where holding > 1 {
                guard case .some(.some(let record)) = merged[key], let without = record.releasing(child) else { continue }
                merged[key] = .some(without)
                holding -= 1
                released = true
            }
            // Where that leaves it shared, held in properties of their own, a move that put it
            // there is undone, in the same order (``lettingGoAsASideHolds(_:in:)``). That can let
            // other children go or name others: ownership is settled again before the next.
            for key in moved + others + preferred where holding > 1 {
                guard case .some(.some(let record)) = merged[key], let undone = try lettingGoAsASideHolds(child, in: record) else { continue }
                merged[key] = .some(undone)
                return true
            }
        }
        return released
    }

    /// Records the merge left holding one child in two of their properties: one side moved it
    /// from `todo` to `done`, the other changed `todo`, which conflicted and was taken whole from
    /// that side. A property where the ancestor held the child and a side no longer does lets it
    /// go (from its arrays, with the entry that wraps it), in name order, while it is held twice.
    /// Returns whether one did.
    ///
    /// - Complexity: O(m) for `m` merged records, plus decoding the three versions of each
    ///   record that holds a child twice.
    private mutating func releaseChildrenHeldTwiceByOneRecord(store: Store) throws -> Bool {
        var released = false
        for key in merged.keys.sorted() {
            guard case .some(.some(let record)) = merged[key],
                  record.properties.values.count(where: \.holdsChildren) > 1 else { continue }
            let childKeys = record.childKeys
            guard childKeys.count > 1 else { continue }
            var counts = [RecordKey: Int]()
            for child in childKeys { counts[child, default: 0] += 1 }
            guard counts.values.contains(where: { $0 > 1 }) else { continue }
            let (before, inOurs, inTheirs) = (
                try base[key].map { try store.decodeRecord($0, of: key) },
                try ours[key].map { try store.decodeRecord($0, of: key) },
                try theirs[key].map { try store.decodeRecord($0, of: key) }
            )
            func holds(_ version: Record?, _ name: String, _ child: RecordKey) -> Bool {
                version?.properties[name]?.childKeys.contains(child) ?? false
            }
            var properties = record.properties
            for (child, count) in counts.sorted(by: { $0.key < $1.key }) where count > 1 {
                var held = count
                for name in properties.keys.sorted(by: utf8Less) where held > 1 {
                    // Only where another property still holds it: never its last hold.
                    guard let value = properties[name], case let here = value.childKeys.count(where: { $0 == child }),
                          here > 0, held - here > 0, holds(before, name, child),
                          !(holds(inOurs, name, child) && holds(inTheirs, name, child)),
                          let without = value.droppingElement(child, wholeEntries: true), !without.childKeys.contains(child) else { continue }
                    held -= here
                    properties[name] = without
                }
            }
            guard properties != record.properties else { continue }
            merged[key] = .some(Record(key: key, properties: properties))
            released = true
        }
        return released
    }

    /// `record` without child `child` where a side's version of it does without it: dropped from
    /// its arrays (``PropertyValue/droppingElement(_:wholeEntries:)``), and each property that
    /// holds it alone otherwise set as a side has it that does not hold it there
    /// (``valueAsASideLeftIt(_:of:without:)``). `nil` where no side does without it there, where
    /// a property holds it with other children outside an array (they would go with it), or for
    /// a record no side changed.
    private func lettingGoAsASideHolds(_ child: RecordKey, in record: Record) throws -> Record? {
        guard isChanged.contains(record.key) else { return nil }
        var properties = record.properties
        for (name, value) in record.properties where value.childKeys.contains(child) {
            if let without = value.droppingElement(child, wholeEntries: true), !without.childKeys.contains(child) {
                properties[name] = without
                continue
            }
            guard value.childKeys == [child], let asLeft = try valueAsASideLeftIt(name, of: record.key, without: child) else { return nil }
            properties[name] = asLeft
        }
        return Record(key: record.key, properties: properties)
    }

    /// Property `name` of record `key` as a side has it that does not hold `child` there (the
    /// inner `nil`: that side has no such property): the move that put the child there undone as
    /// the other side left it. Where both sides' values lack it and differ, the ancestor's if one
    /// is, else the one whose encoding sorts first, so both directions of a merge agree. Not the
    /// ancestor's value as such: it may hold records both sides deleted. `nil` where each side
    /// holds the child there, or for a record no side changed.
    func valueAsASideLeftIt(_ name: String, of key: RecordKey, without child: RecordKey) throws -> PropertyValue?? {
        guard isChanged.contains(key) else { return nil }
        let sides = try [ours[key], theirs[key]].compactMap { try $0.map(RecordCoding.decode) }
        let lacking = sides.map { $0[name] }.filter { $0?.childKeys.contains(child) != true }
        guard let first = lacking.first else { return nil }
        guard lacking.count == 2, lacking[0] != lacking[1] else { return .some(first) }
        if let before = try base[key].map(RecordCoding.decode), lacking.contains(where: { $0 == before[name] }) {
            return .some(before[name])
        }
        let encodings = lacking.map { RecordCoding.encode($0.map { [name: $0] } ?? [:]) }
        return .some(encodings[0].lexicographicallyPrecedes(encodings[1]) ? lacking[0] : lacking[1])
    }

    /// The merged records that hold each child (of those `including` takes), in no order.
    ///
    /// - Complexity: O(m) for `m` merged records.
    private func holders(including: (RecordKey) -> Bool = { _ in true }) -> [RecordKey: [RecordKey]] {
        var holders = [RecordKey: [RecordKey]]()
        for case let (key, record?) in merged {
            for child in Set(record.childKeys) where including(child) { holders[child, default: []].append(key) }
        }
        return holders
    }

    /// The children both sides placed elsewhere than the ancestor did, and differently: moved
    /// to different records, or to different properties of one record (a card moved from `todo`
    /// to `doing` on one side and to `done` on the other), or added with the same key in
    /// different places. Each is a conflict on every place (record and property) one side put
    /// it in and the other did not, with that property's values at the ancestor and on both
    /// sides. ``MergeStrategy/manual`` stops at them; the other strategies settle them
    /// (``releaseContestedChildren(preferring:)``), so this also records them.
    ///
    /// A child one side moved and the other left where it was is no conflict: the move stands.
    ///
    /// - Complexity: O(m) for the `m` changed records' bytes, plus decoding once each record
    ///   that holds a contested child.
    mutating func findContestedChildren(store: Store) throws -> [MergeConflict] {
        let (inBase, inOurs, inTheirs) = try placementsOnEachSide()
        // The disputed properties of each record: a record that holds many is decoded once.
        var disputed = [RecordKey: Set<String>]()
        contested = [:]
        // In key order: the spelling of a property name two sides spell differently is the
        // first one met, the same in every run.
        for child in inOurs.keys.sorted() {
            let oursPlaces = inOurs[child] ?? []
            let basePlaces = inBase[child] ?? [], theirsPlaces = inTheirs[child] ?? []
            // A side that left the child where it was at the ancestor lets the other's move stand.
            guard oursPlaces != basePlaces, !theirsPlaces.isEmpty, theirsPlaces != basePlaces, oursPlaces != theirsPlaces else { continue }
            contested[child] = (oursPlaces, theirsPlaces)
            for place in oursPlaces.symmetricDifference(theirsPlaces) { disputed[place.record, default: []].insert(place.property) }
        }
        var conflicts = [MergeConflict]()
        for (holder, properties) in disputed {
            let merge = try recordMerge(holder, store: store)
            for name in properties {
                conflicts.append(MergeConflict(
                    key: holder, property: name, base: merge.base?.properties[name],
                    ours: merge.ours?.properties[name], theirs: merge.theirs?.properties[name]))
            }
        }
        return conflicts.sorted(by: MergeConflict.canonicalOrder)
    }

    /// ``placements(_:)`` of the ancestor, ours and theirs, made once: the sides' bytes do not
    /// change once loaded.
    private mutating func placementsOnEachSide() throws -> SidePlacements {
        if let known = sidePlacements { return known }
        let made = (try placements(base), try placements(ours), try placements(theirs))
        sidePlacements = made
        return made
    }

    /// Where the changed records of one version (`side`: ``base``, ``ours`` or ``theirs``) hold
    /// each child they hold. A record no side changed holds the same children on every side.
    ///
    /// - Complexity: O(m) for the `m` changed records' bytes.
    private func placements(_ side: [RecordKey: [UInt8]]) throws -> [RecordKey: Set<ChildPlacement>] {
        var placements = [RecordKey: Set<ChildPlacement>]()
        for key in changed {
            guard let bytes = side[key] else { continue }
            for (property, children) in try RecordCoding.childKeysByProperty(bytes) {
                for child in children { placements[child, default: []].insert(ChildPlacement(record: key, property: property)) }
            }
        }
        return placements
    }

    /// The records one side deleted and the other moved (kept, but held elsewhere than at the
    /// ancestor), with the side that deleted each and a place the other side put it in (the
    /// first). A move is a change of the record's place: each is a record deleted on one side and
    /// changed on the other, though the moving side left its bytes as they were.
    ///
    /// - Complexity: O(m) for the `m` changed records' bytes.
    mutating func deletesMeetingMoves() throws -> [RecordKey: (deleting: RecordMerge.Side, place: ChildPlacement)] {
        let (inBase, inOurs, inTheirs) = try placementsOnEachSide()
        var result = [RecordKey: (deleting: RecordMerge.Side, place: ChildPlacement)]()
        for key in changed where base[key] != nil && (ours[key] == nil) != (theirs[key] == nil) {
            let (deleting, moving): (RecordMerge.Side, Set<ChildPlacement>?) = ours[key] == nil ? (.ours, inTheirs[key]) : (.theirs, inOurs[key])
            guard let moving, let place = moving.min(), moving != inBase[key] ?? [] else { continue }
            result[key] = (deleting, place)
        }
        return result
    }

    /// Lets `children` go from every merged record that holds them (records a side deleted that
    /// the merge deletes, which the other side had moved): from its arrays, with the entry that
    /// wraps one if it is the entry's only child; a property of its own that holds one alone is
    /// set as the side that did not move it there has it (``lettingGoAsASideHolds(_:in:)``).
    /// A record that holds one otherwise (with other children outside an array, or on both
    /// sides) keeps it, and the merge keeps the child.
    ///
    /// - Complexity: O(m + e·c) for `m` merged records, `e` elements of the arrays that hold
    ///   the `c` children.
    mutating func letGo(_ children: Set<RecordKey>) throws {
        guard !children.isEmpty else { return }
        for case let (key, record?) in merged {
            let held = Set(record.childKeys).intersection(children)
            guard !held.isEmpty else { continue }
            var kept = record
            // In key order: letting one go can change what another's removal takes.
            for child in held.sorted() where kept.childKeys.contains(child) {
                if let without = try lettingGoAsASideHolds(child, in: kept) {
                    kept = without
                } else {
                    // Where it cannot go everywhere, from the arrays that can let it go.
                    var properties = kept.properties
                    for (name, value) in kept.properties where value.holdsChildren && value.childKeys.contains(child) {
                        if let without = value.droppingElement(child, wholeEntries: true) { properties[name] = without }
                    }
                    kept = Record(key: key, properties: properties)
                }
            }
            merged[key] = .some(kept)
        }
    }

    /// Settles the children ``findContestedChildren(store:)`` found: each stays where `side`'s
    /// version put it (with most-recent, `nil`, the side that put it in the place that sorts
    /// last, by record key then property name), and every other property of a merged record
    /// lets it go from its arrays, with the entry that wraps it if it is that entry's only child.
    /// Left to ``releaseSharedChildren(preferring:)`` where no merged record holds it in a place
    /// kept (a record the merge deleted). Depends on the three versions alone, so both directions
    /// of a merge agree. Returns whether a record let a child go.
    ///
    /// - Complexity: O(m) for `m` merged records, when children are contested.
    private mutating func releaseContestedChildren(preferring side: RecordMerge.Side?) -> Bool {
        guard !contested.isEmpty else { return false }
        let holders = holders { contested[$0] != nil }
        var released = false
        for (child, places) in contested {
            let kept: Set<ChildPlacement> = switch side {
            case .ours: places.ours
            case .theirs: places.theirs
            case nil: places.ours.symmetricDifference(places.theirs).max().map { places.ours.contains($0) ? places.ours : places.theirs } ?? places.ours
            }
            func holds(_ record: Record, _ property: String) -> Bool {
                record.properties[property].map { $0.holdsChildren && $0.childKeys.contains(child) } ?? false
            }
            let keys = holders[child] ?? []
            guard keys.contains(where: { key in
                guard case .some(.some(let record)) = merged[key] else { return false }
                return kept.contains { $0.record == key && holds(record, $0.property) }
            }) else { continue }
            for key in keys {
                guard case .some(.some(let record)) = merged[key] else { continue }
                var properties = record.properties
                for (name, value) in record.properties where !kept.contains(ChildPlacement(record: key, property: name)) && holds(record, name) {
                    // A child held other than in an array (or an array's entry that holds only
                    // it) stays: the record's type may need it.
                    if let without = value.droppingElement(child, wholeEntries: true) { properties[name] = without }
                }
                guard properties != record.properties else { continue }
                merged[key] = .some(Record(key: key, properties: properties))
                released = true
            }
        }
        return released
    }

    /// The index edits that turn ours' index into the merged one, in key order; large records'
    /// blobs go to ``blobs``. Throws ``ArborError/Code/invalidInput`` for a merged record larger
    /// than a record may be (two sides each grew it, or a resolver did).
    mutating func edits() throws -> [IndexEdit] {
        var edits = [IndexEdit]()
        for (key, record) in merged {
            let bytes = record.map { RecordCoding.encode($0.properties) }
            // Records are equal when their bytes are (a change of a name's Unicode form alone is
            // one). Ours' entry stays, unless some record was stored otherwise than Arbor stores
            // it (a small one in a blob): then it is written again as Arbor stores it, or the
            // two directions of a merge would keep different forms and differ.
            if payloadsFollowBytes, case .some(let held) = inOurs[key], held == bytes { continue }
            guard let bytes else {
                edits.append(IndexEdit(key: key.indexBytes, payload: nil))
                continue
            }
            edits.append(try .settingRecord(key, at: key.indexBytes, toEncoded: bytes, blobs: &blobs))
        }
        return edits.sorted { compareKeys($0.key, $1.key) < 0 }
    }

}

/// Where a record holds a child: the record, and its property that holds it.
struct ChildPlacement: Hashable, Comparable {
    var record: RecordKey
    var property: String

    static func < (a: ChildPlacement, b: ChildPlacement) -> Bool {
        // Names equal as Unicode are one place, ordered neither way.
        a.record != b.record ? a.record < b.record : a.property != b.property && utf8Less(a.property, b.property)
    }
}
