import Foundation
import Testing
@testable import Arbor

/// Merges whose sides move children: each side's moves are sound alone, and the merge must
/// still leave every record with one holder, reachable from a record that has none.
@Suite struct MergeOwnershipTests {
    /// A folder record holding `kids` (folders, or items for ids starting with "i"); `wrapped`,
    /// each in an entry of its own (`{box: kid}`), as a struct around a child encodes.
    func folder(_ id: String, _ kids: [String], name: String = "", wrapped: Bool = false) -> Record {
        Record(type: "Folder", id: id, properties: [
            "name": .string(name),
            "kids": .array(kids.map { kid in
                let key = PropertyValue.child(RecordKey(type: kid.hasPrefix("i") ? "Leaf" : "Folder", id: kid))
                return wrapped ? .map(["box": key]) : key
            }),
        ])
    }

    /// What the random moves of ``randomMovesOnBothSidesMergeToOneTree(seed:variation:)`` do.
    enum RandomMoves: Sendable, CaseIterable {
        case moves, movesAndDeletes, wrappedMoves, wrappedMovesAndDeletes
        var deleting: Bool { self == .movesAndDeletes || self == .wrappedMovesAndDeletes }
        var wrapped: Bool { self == .wrappedMoves || self == .wrappedMovesAndDeletes }
    }

    func folderKey(_ id: String) -> RecordKey { RecordKey(type: "Folder", id: id) }

    /// Folders `t1`, holding item `i`, and `t2`, empty (neither held by a record): the version
    /// and the item.
    func itemInFolder(in store: Store) async throws -> (base: Version, item: Record) {
        let item = Record(type: "Leaf", id: "i", properties: ["v": .int(1)])
        let base = try await store.change(on: nil) {
            try $0.save(folder("t1", ["i"]))
            try $0.save(folder("t2", []))
            try $0.save(item)
        }
        return (base, item)
    }

    /// Each folder's holder in `version`, by id ("-" for none), and checks that following
    /// holders from any folder ends at one with none: no folder is part of a holder cycle.
    func holders(in store: Store, at version: Version) async throws -> [String: String] {
        let folders = try await store.records(ofType: "Folder", at: version.id)
        var holder = [String: String]()
        for record in folders { holder[record.key.id] = holder[record.key.id] ?? "-" }
        for record in folders {
            for child in record.childKeys where child.type == "Folder" {
                #expect(holder[child.id] == nil || holder[child.id] == "-", "\(child.id) has two holders")
                holder[child.id] = record.key.id
            }
        }
        for start in holder.keys {
            var seen = Set<String>(), current = start
            while let next = holder[current], next != "-" {
                guard seen.insert(current).inserted else {
                    Issue.record("\(start) is in a holder cycle")
                    break
                }
                current = next
            }
        }
        return holder
    }

    /// Root `r` holds `a` and `b`, and `b` holds `m`, which holds `x`. Ours moves `a` under
    /// `target` (`b` itself, or `x`, deep in `b`'s tree, which neither side changes on the way);
    /// theirs, later, moves `b` under `a`. Each move is sound alone; both together would make
    /// `a` and `b` hold each other, and `r` neither.
    func crossedMoves(in store: Store, under target: String) async throws -> (ours: Version, theirs: Version) {
        let base = try await store.change(on: nil) {
            try $0.save(folder("r", ["a", "b"]))
            try $0.save(folder("a", []))
            try $0.save(folder("b", ["m"]))
            try $0.save(folder("m", ["x"]))
            try $0.save(folder("x", []))
        }
        let ours = try await store.change(on: base) {
            try $0.save(folder("r", ["b"]))
            try $0.save(folder(target, target == "b" ? ["m", "a"] : ["a"]))
        }
        let theirs = try await store.change(on: base) {
            try $0.save(folder("r", ["a"]))
            try $0.save(folder("a", ["b"]))
        }
        return (ours, theirs)
    }

    /// The crossed moves under each strategy, in both directions: one commit, no cycle, every
    /// folder kept. The side a strategy takes keeps its move and the other's is undone, its
    /// folder put back in `r`; most-recent keeps the later move (theirs).
    @Test(arguments: [MergeStrategy.mostRecent, .ours, .theirs], ["b", "x"])
    func crossedMovesMakeNoHolderCycle(strategy: MergeStrategy, target: String) async throws {
        let store = Store.ticking()
        let (ours, theirs) = try await crossedMoves(in: store, under: target)
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        let holder = try await holders(in: store, at: merged)
        #expect(Set(holder.keys) == ["r", "a", "b", "m", "x"])
        if strategy == .ours {
            #expect(holder["a"] == target && holder["b"] == "r")
        } else {
            #expect(holder["b"] == "a" && holder["a"] == "r")
        }
        #expect(holder["m"] == "b" && holder["x"] == "m")
        #expect(try await store.verify().isIntact)
    }

    /// The crossed moves through a folder neither side changed, on every adapter: the same
    /// merge commit as in memory, byte for byte (the records below the moved folders are read
    /// through the adapter), with no holder cycle.
    @Test(arguments: AdapterKind.allCases) func crossedMovesMergeAlikeOnEveryAdapter(kind: AdapterKind) async throws {
        let reference = Store.ticking()
        let (referenceOurs, referenceTheirs) = try await crossedMoves(in: reference, under: "x")
        let expected = try #require(try await reference.merge(referenceOurs.id, referenceTheirs.id, strategy: .mostRecent).version)
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let store = Store.ticking(backend: backend)
        let (ours, theirs) = try await crossedMoves(in: store, under: "x")
        let merged = try #require(try await store.merge(ours.id, theirs.id, strategy: .mostRecent).version)
        #expect(merged.id == expected.id)
        #expect(try await holders(in: store, at: merged)["a"] == "r")
        try await store.close()
    }

    /// Under manual the crossed moves stop the merge: no commit, the heads stay, and the
    /// conflicts name the properties each side moved a folder into.
    @Test(arguments: ["b", "x"]) func crossedMovesStopAManualMerge(target: String) async throws {
        let store = Store.ticking()
        let (ours, theirs) = try await crossedMoves(in: store, under: target)
        for (x, y) in [(ours, theirs), (theirs, ours)] {
            let outcome = try await store.merge(x.id, y.id, strategy: .manual)
            guard case .conflicts(let conflicts) = outcome else {
                Issue.record("a manual merge of crossed moves made \(outcome)")
                continue
            }
            #expect(conflicts.map { "\($0.key.id).\($0.property ?? "")" } == ["a.kids", "\(target).kids"])
        }
        #expect(Set(try await store.heads().map(\.id)) == [ours.id, theirs.id])
    }

    /// Three folders moved in a ring, two by one side and one by the other: `a` under `b` and
    /// `b` under `c` (ours), `c` under `a` (theirs). One move is undone, whichever way.
    @Test(arguments: [MergeStrategy.mostRecent, .ours, .theirs])
    func aRingOfMovesAcrossTheSidesIsBroken(strategy: MergeStrategy) async throws {
        let store = Store.ticking()
        let base = try await store.change(on: nil) {
            try $0.save(folder("r", ["a", "b", "c"]))
            for id in ["a", "b", "c"] { try $0.save(folder(id, [])) }
        }
        let ours = try await store.change(on: base) {
            try $0.save(folder("r", ["c"]))
            try $0.save(folder("b", ["a"]))
            try $0.save(folder("c", ["b"]))
        }
        let theirs = try await store.change(on: base) {
            try $0.save(folder("r", ["a", "b"]))
            try $0.save(folder("a", ["c"]))
        }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        let holder = try await holders(in: store, at: merged)
        #expect(Set(holder.keys) == ["r", "a", "b", "c"])
        #expect(try await store.verify().isIntact)
    }

    /// Ours moves item `i` from `t1` to `t2` (folders no record holds); theirs, later, deletes
    /// `t2`. Neither side deleted `i`: where the delete wins (theirs, most-recent), `i` goes back
    /// into `t1`, not away with `t2`; where the move wins (ours), it stays in `t2`.
    @Test(arguments: [MergeStrategy.mostRecent, .ours, .theirs])
    func aChildMovedIntoARecordTheOtherSideDeletedIsKept(strategy: MergeStrategy) async throws {
        let store = Store.ticking()
        let (base, leaf) = try await itemInFolder(in: store)
        let ours = try await store.change(on: base) {
            try $0.save(folder("t1", []))
            try $0.save(folder("t2", ["i"]))
        }
        let theirs = try await store.change(on: base) { $0.delete(folderKey("t2")) }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        #expect(try await store.record(leaf.key, at: merged.id) == leaf)
        let holder = try await store.records(ofType: "Folder", at: merged.id).first { $0.childKeys.contains(leaf.key) }?.key.id
        #expect(holder == (strategy == .ours ? "t2" : "t1"))
        #expect(try await store.verify().isIntact)
    }

    /// The same with the item held in a dictionary (`items: ["x": i]`): where the delete of `t2`
    /// wins, `i` goes back into `t1` under its name; it used to be put back only into arrays,
    /// and was deleted with `t2`.
    @Test(arguments: [MergeStrategy.mostRecent, .ours, .theirs])
    func aChildMovedOutOfADictionaryIntoARecordTheOtherSideDeletedIsKept(strategy: MergeStrategy) async throws {
        func box(_ id: String, _ items: [String: String]) -> Record {
            Record(type: "Folder", id: id, properties: ["items": .map(items.mapValues { .child(RecordKey(type: "Leaf", id: $0)) })])
        }
        let store = Store.ticking()
        let leaf = Record(type: "Leaf", id: "i", properties: ["v": .int(1)])
        let base = try await store.change(on: nil) {
            try $0.save(box("t1", ["x": "i", "w": "j"]))
            try $0.save(box("t2", [:]))
            try $0.save(leaf)
            try $0.save(Record(type: "Leaf", id: "j", properties: ["v": .int(2)]))
        }
        let ours = try await store.change(on: base) {
            try $0.save(box("t1", ["w": "j"]))
            try $0.save(box("t2", ["y": "i"]))
        }
        let theirs = try await store.change(on: base) { $0.delete(folderKey("t2")) }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        #expect(try await store.record(leaf.key, at: merged.id) == leaf)
        if strategy == .ours {
            #expect(try await store.record(folderKey("t2"), at: merged.id) == box("t2", ["y": "i"]))
        } else {
            #expect(try await store.record(folderKey("t1"), at: merged.id) == box("t1", ["x": "i", "w": "j"]))
        }
        #expect(try await store.verify().isIntact)
    }

    /// Random moves (and deletes) of folders on two sides of a fork, the folders held plainly or
    /// each in an entry of its own, merged both ways under each strategy: one commit either way,
    /// each folder with one holder and reached from the root `r`, none lost without a delete,
    /// and a store that verifies. (Entries are no key sets: the sides' arrays conflict, and the
    /// side a strategy takes keeps its array whole.)
    @Test(arguments: Array(UInt64(1)...40), RandomMoves.allCases)
    func randomMovesOnBothSidesMergeToOneTree(seed: UInt64, variation: RandomMoves) async throws {
        let (deleting, wrapped) = (variation.deleting, variation.wrapped)
        func folder(_ id: String, _ kids: [String]) -> Record { self.folder(id, kids, wrapped: wrapped) }
        var random = SeededGenerator(seed: seed)
        let store = Store.ticking()
        let ids = (0..<8).map { "f\($0)" }
        var start = ["r": ids.prefix(4).map { $0 }]
        for (index, id) in ids.enumerated() { start[id] = index < 4 ? [ids[index + 4]] : [] }
        let base = try await store.change(on: nil) { changes in
            for (id, kids) in start { try changes.save(folder(id, kids)) }
        }
        var heads = [Version]()
        for _ in 0..<2 {
            var tree = start, head = base
            for _ in 0..<4 {
                // Each folder's holder, and whether `a` lies in `b`'s tree.
                func holder(_ id: String) -> String? { tree.first { $0.value.contains(id) }?.key }
                func isBelow(_ a: String, _ b: String) -> Bool {
                    var current = a
                    while let up = holder(current) { if up == b { return true }; current = up }
                    return false
                }
                let present = tree.keys.filter { $0 != "r" }.sorted()
                guard let moved = present.randomElement(using: &random), let from = holder(moved) else { continue }
                var touched: Set<String> = [from]
                tree[from]!.removeAll { $0 == moved }
                if deleting && Int.random(in: 0..<4, using: &random) == 0 {
                    var gone = [moved]
                    while let id = gone.popLast() { gone += tree.removeValue(forKey: id) ?? [] }
                    touched.formIntersection(tree.keys)
                } else {
                    let targets = tree.keys.filter { $0 != moved && !isBelow($0, moved) }.sorted()
                    let target = targets.randomElement(using: &random)!
                    tree[target]!.insert(moved, at: Int.random(in: 0...tree[target]!.count, using: &random))
                    touched.insert(target)
                }
                head = try await store.change(on: head) { changes in
                    for id in touched { try changes.save(folder(id, tree[id]!)) }
                }
            }
            heads.append(head)
        }
        for strategy in [MergeStrategy.mostRecent, .ours, .theirs] {
            let (outcome, reversed) = try await store.mergeBothWays(heads[0], heads[1], strategy: strategy)
            let merged = try #require(outcome.version)
            #expect(reversed.version?.id == merged.id, "seed \(seed), \(strategy)")
            let holder = try await holders(in: store, at: merged)
            for (id, up) in holder where id != "r" { #expect(up != "-", "seed \(seed), \(strategy): \(id) has no holder") }
            if !deleting { #expect(holder.count == 9, "seed \(seed), \(strategy): \(holder)") }
        }
        #expect(try await store.verify().isIntact)
    }

    /// Ours drops item `i` from `t1`, which deletes it; theirs moves it to `t2` (and with
    /// `editing`, changes it too). That is a record deleted on one side and changed on the other:
    /// manual stops at it; ours deletes it, and `t2` lets it go; theirs keeps it in `t2`; most-
    /// recent follows the later of the delete and the move. The same in both directions.
    @Test(arguments: [MergeStrategy.mostRecent, .ours, .theirs, .manual], [false, true])
    func aDeleteThatMeetsAMoveIsAConflict(strategy: MergeStrategy, editing: Bool) async throws {
        for moveIsLater in [true, false] {
            let store = Store.ticking()
            let (base, leaf) = try await itemInFolder(in: store)
            func deleting() async throws -> Version { try await store.change(on: base) { try $0.save(folder("t1", [])) } }
            func moving() async throws -> Version {
                try await store.change(on: base) {
                    try $0.save(folder("t1", []))
                    try $0.save(folder("t2", ["i"]))
                    if editing { try $0.save(Record(type: "Leaf", id: "i", properties: ["v": .int(2)])) }
                }
            }
            let (ours, theirs) = try await deletingOursAndMovingTheirs(moveIsLater: moveIsLater, deleting: deleting, moving: moving)
            let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
            guard case .merged(let merged, let report) = outcome else {
                guard case .conflicts(let conflicts) = outcome else { throw ArborError(.invalidInput, "no merge") }
                #expect(strategy == .manual)
                #expect(conflicts.map { "\($0.key.id).\($0.property ?? "*")" } == ["i.*"])
                #expect(conflicts.first?.ours == nil)
                continue
            }
            #expect(strategy != .manual)
            #expect(reversed.version?.id == merged.id)
            #expect(report.resolved.map { "\($0.key.id).\($0.property ?? "*")" } == ["i.*"])
            let kept = strategy == .theirs || (strategy == .mostRecent && moveIsLater)
            let value = try await store.record(leaf.key, at: merged.id)
            #expect(value == (kept ? Record(type: "Leaf", id: "i", properties: ["v": .int(editing ? 2 : 1)]) : nil), "\(strategy), move later: \(moveIsLater)")
            let holders = try await store.records(ofType: "Folder", at: merged.id).filter { $0.childKeys.contains(leaf.key) }.map(\.key.id)
            #expect(holders == (kept ? ["t2"] : []))
            #expect(try await store.verify().isIntact)
        }
    }

    /// Ours from `deleting` and theirs from `moving`, made in the order that makes the move the
    /// later change if `moveIsLater` (for most-recent), else the delete.
    private func deletingOursAndMovingTheirs(
        moveIsLater: Bool, deleting: () async throws -> Version, moving: () async throws -> Version
    ) async throws -> (ours: Version, theirs: Version) {
        if moveIsLater {
            let ours = try await deleting()
            return (ours, try await moving())
        }
        let theirs = try await moving()
        return (try await deleting(), theirs)
    }

    /// As above, with the move into a property of the new holder's own: ours drops note n from
    /// t1's `notes`, theirs moves it into t2's `pinned` (with `editing`, changing it too). Where
    /// the delete wins, t2's `pinned` goes back to its value at the ancestor (none), so the note
    /// goes, rather than staying because t2 could not let it go from an array.
    @Test(arguments: [MergeStrategy.mostRecent, .ours, .theirs], [false, true])
    func aDeleteThatMeetsAMoveIntoAPropertyOfItsOwnIsSettledTheSameWay(strategy: MergeStrategy, editing: Bool) async throws {
        for moveIsLater in [true, false] {
            let store = Store.ticking()
            let note = Note(id: "n", text: "first")
            let base = try await store.change(on: nil) {
                try $0.save(Task(id: "t1", title: "one", done: false, notes: [note]))
                try $0.save(Task(id: "t2", title: "two", done: false))
            }
            func deleting() async throws -> Version { try await store.change(on: base) { try $0.save(Task(id: "t1", title: "one", done: false)) } }
            func moving() async throws -> Version {
                try await store.change(on: base) {
                    try $0.save(Task(id: "t1", title: "one", done: false))
                    try $0.save(Task(id: "t2", title: "two", done: false, pinned: editing ? Note(id: "n", text: "edited") : note))
                }
            }
            let (ours, theirs) = try await deletingOursAndMovingTheirs(moveIsLater: moveIsLater, deleting: deleting, moving: moving)
            let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
            let merged = try #require(outcome.version)
            #expect(reversed.version?.id == merged.id)
            let kept = strategy == .theirs || (strategy == .mostRecent && moveIsLater)
            #expect(try await store.value(Task.self, id: "t2", at: merged.id)?.pinned == (kept ? Note(id: "n", text: editing ? "edited" : "first") : nil),
                    "\(strategy), move later: \(moveIsLater)")
            #expect(try await store.value(Note.self, id: "n", at: merged.id) == (kept ? Note(id: "n", text: editing ? "edited" : "first") : nil))
            #expect(try await store.value(Task.self, id: "t1", at: merged.id) == Task(id: "t1", title: "one", done: false))
            #expect(try await store.verify().isIntact)
        }
    }

    /// Ours drops item `i` from `t1`; theirs moves it into an entry of `t2`'s `slots` beside a
    /// new note, and adds an entry of two more new records. Where the delete wins, `t2` cannot
    /// let `i` go alone (its entry holds the new note too), so it keeps it, and every new record
    /// stays: none of theirs goes with a property put back as it was.
    @Test(arguments: [MergeStrategy.mostRecent, .ours, .theirs])
    func aDeleteThatMeetsAMoveIntoASharedEntryKeepsEveryNewRecord(strategy: MergeStrategy) async throws {
        let store = Store.ticking()
        let (base, _) = try await itemInFolder(in: store)
        let leaf = { (id: String) in Record(type: "Leaf", id: id, properties: ["v": .int(1)]) }
        func slot(_ box: RecordKey, _ note: String) -> PropertyValue { .map(["box": .child(box), "note": .child(RecordKey(type: "Leaf", id: note))]) }
        let theirs = try await store.change(on: base) {
            try $0.save(folder("t1", []))
            try $0.save(Record(type: "Folder", id: "t2", properties: [
                "name": .string(""), "kids": .array([]),
                "slots": .array([slot(RecordKey(type: "Leaf", id: "i"), "n"), slot(folderKey("c"), "d")]),
            ]))
            for id in ["n", "d"] { try $0.save(leaf(id)) }
            try $0.save(folder("c", []))
        }
        let ours = try await store.change(on: base) { try $0.save(folder("t1", [])) }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        let leaves = Set(try await store.records(ofType: "Leaf", at: merged.id).map(\.key.id))
        #expect(leaves.isSuperset(of: ["n", "d"]), "\(strategy): \(leaves)")
        #expect(try await store.record(folderKey("c"), at: merged.id) != nil)
        #expect(try await store.verify().isIntact)
    }

    /// Ours moves note a from t3's `pinned` into r's (deleting r's note y) and deletes t3;
    /// theirs first empties r's `pinned` (deleting y too), then, last, edits t3. Most-recent
    /// keeps ours' r.pinned and theirs' t3 whole: both hold a. r's move is undone as theirs left
    /// r (no note), not back to the ancestor's y, which both sides deleted and which must not
    /// come back.
    @Test func undoingAMoveDoesNotBringBackWhatBothSidesDeleted() async throws {
        let store = Store.ticking()
        let (a, y) = (Note(id: "a", text: "moving"), Note(id: "y", text: "gone on both sides"))
        let base = try await store.change(on: nil) {
            try $0.save(Task(id: "t3", title: "three", done: false, pinned: a))
            try $0.save(Task(id: "r", title: "r", done: false, pinned: y))
        }
        let theirsFirst = try await store.change(on: base) { try $0.save(Task(id: "r", title: "r", done: false)) }
        let ours = try await store.change(on: base) {
            try $0.save(Task(id: "r", title: "r", done: false, pinned: a))
            try $0.delete(Task.self, id: "t3")
        }
        let theirs = try await store.change(on: theirsFirst) { try $0.save(Task(id: "t3", title: "edited", done: false, pinned: a)) }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: .mostRecent)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        #expect(try await store.values(Task.self, at: merged.id) == [
            Task(id: "r", title: "r", done: false), Task(id: "t3", title: "edited", done: false, pinned: a),
        ])
        #expect(try await store.value(Note.self, id: "y", at: merged.id) == nil)
        #expect(try await store.verify().isIntact)
    }

    /// One side reorders a folder's children and the other adds one: the reorder stands, the
    /// new child after. Both sides reordering them differently, one also adding a child, keep the
    /// ancestor's order and the new child, whatever the strategy: no conflict takes one side's
    /// array whole, which would lose the other's new child.
    @Test func aReorderOnOneSideStandsAndTwoDifferentOnesKeepTheAncestorsOrder() async throws {
        let store = Store.ticking()
        let base = try await store.change(on: nil) {
            try $0.save(folder("r", ["a", "b", "c"]))
            for id in ["a", "b", "c"] { try $0.save(folder(id, [])) }
        }
        let reordered = try await store.change(on: base) { try $0.save(folder("r", ["c", "a", "b"])) }
        let added = try await store.change(on: base) {
            try $0.save(folder("r", ["a", "b", "d", "c"]))
            try $0.save(folder("d", []))
        }
        for (x, y) in [(reordered, added), (added, reordered)] {
            let merged = try #require(try await store.merge(x.id, y.id, strategy: .manual).version)
            #expect(try await store.record(folderKey("r"), at: merged.id) == folder("r", ["c", "a", "b", "d"]))
        }
        let otherOrder = try await store.change(on: base) {
            try $0.save(folder("r", ["b", "a", "c", "e"]))
            try $0.save(folder("e", []))
        }
        for strategy in [MergeStrategy.manual, .ours, .theirs, .mostRecent] {
            let merged = try #require(try await store.merge(reordered.id, otherOrder.id, strategy: strategy).version)
            #expect(try await store.record(folderKey("r"), at: merged.id) == folder("r", ["a", "b", "c", "e"]))
            #expect(try await store.record(folderKey("e"), at: merged.id) != nil)
        }
    }

    /// Crossed moves whose holds each sit in an entry with a new child beside the moved one
    /// (`{box, note}`): no move can be undone alone, so one goes with its entry, and the new child
    /// of that entry with it; the same commit both ways, no cycle.
    @Test(arguments: [MergeStrategy.mostRecent, .ours, .theirs])
    func crossedMovesInSharedEntriesAreUndoneWithTheirEntry(strategy: MergeStrategy) async throws {
        func box(_ id: String, _ slots: [(box: String, note: String?)]) -> Record {
            Record(type: "Folder", id: id, properties: ["kids": .array(slots.map { slot in
                var entry: [String: PropertyValue] = ["box": .child(folderKey(slot.box))]
                if let note = slot.note { entry["note"] = .child(RecordKey(type: "Leaf", id: note)) }
                return .map(entry)
            })])
        }
        let note = { (id: String) in Record(type: "Leaf", id: id, properties: ["v": .int(1)]) }
        let store = Store.ticking()
        let base = try await store.change(on: nil) {
            try $0.save(box("r", [("a", nil), ("b", nil)]))
            try $0.save(box("a", []))
            try $0.save(box("b", []))
        }
        let ours = try await store.change(on: base) {
            try $0.save(box("r", [("b", nil)]))
            try $0.save(box("b", [("a", "i1")]))
            try $0.save(note("i1"))
        }
        let theirs = try await store.change(on: base) {
            try $0.save(box("r", [("a", nil)]))
            try $0.save(box("a", [("b", "i2")]))
            try $0.save(note("i2"))
        }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        let holder = try await holders(in: store, at: merged)
        #expect(Set(holder.keys) == ["r", "a", "b"])
        let leaves = try await store.records(ofType: "Leaf", at: merged.id).map(\.key.id)
        #expect(leaves == [strategy == .ours ? "i1" : "i2"])
        #expect(try await store.verify().isIntact)
    }

    /// A cycle closed by moves into properties of a record's own (`lead`): ours moves `b` into
    /// `a.lead`, deleting `y`, which it held; theirs first set `a.lead` to a new `z` (deleting `y`
    /// too), then, last, moves `a` into `b.lead`. Most-recent keeps ours' `a.lead` (newer than
    /// theirs') and theirs' `b.lead`: a cycle, whose older move (ours') is undone as theirs left
    /// `a.lead` (`z`), not back to the ancestor's `y`, which both sides deleted.
    @Test func undoingAMoveThatClosedACycleDoesNotBringBackWhatBothSidesDeleted() async throws {
        func node(_ id: String, kids: [String] = [], lead: String? = nil) -> Record {
            var properties: [String: PropertyValue] = ["kids": .array(kids.map { .child(folderKey($0)) })]
            if let lead { properties["lead"] = .child(folderKey(lead)) }
            return Record(type: "Folder", id: id, properties: properties)
        }
        let store = Store.ticking()
        let base = try await store.change(on: nil) {
            try $0.save(node("r", kids: ["a", "b"]))
            try $0.save(node("a", lead: "y"))
            for id in ["b", "y"] { try $0.save(node(id)) }
        }
        let theirsFirst = try await store.change(on: base) {
            try $0.save(node("a", lead: "z"))
            try $0.save(node("z"))
            $0.delete(folderKey("y"))
        }
        let ours = try await store.change(on: base) {
            try $0.save(node("r", kids: ["a"]))
            try $0.save(node("a", lead: "b"))
            $0.delete(folderKey("y"))
        }
        let theirs = try await store.change(on: theirsFirst) {
            try $0.save(node("r", kids: ["b"]))
            try $0.save(node("b", lead: "a"))
        }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: .mostRecent)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        let holder = try await holders(in: store, at: merged)
        #expect(holder == ["r": "-", "b": "r", "a": "b", "z": "a"])
        #expect(try await store.record(folderKey("y"), at: merged.id) == nil)
        #expect(try await store.verify().isIntact)
    }
}

/// A card on a ``KanbanBoardOfLanes``.
private struct LaneCard: Storable, Equatable {
    var id: String
    var title: String
}

/// A lane of cards: a struct in an array that holds its children in an array of its own.
private struct Lane: Codable, Equatable, Sendable {
    var name: String
    var cards: [LaneCard]
}

/// A column of a ``KanbanBoardOfLanes``: a key that is neither a string nor an integer, so a
/// dictionary keyed by it encodes as an array of keys and values (stored as pairs, as it names
/// records).
private enum Column: String, Codable, Sendable { case todo, doing, done }

/// A board with its cards both in a dictionary of arrays and in lanes.
private struct KanbanBoardOfLanes: Storable, Equatable {
    var id: String
    var columns: [Column: [LaneCard]] = [:]
    var lanes: [Lane] = []
    var named: [String: [LaneCard]] = [:]
}

/// A player of a ``Team``: a record that keys a dictionary.
private struct Player: Storable, Hashable {
    var id: String
}

/// Scores by player: a dictionary keyed by child records, stored as pairs.
private struct Team: Storable, Equatable {
    var id: String
    var scores: [Player: Int] = [:]
}

extension MergeOwnershipTests {
    /// One side moves the only card of column `todo` and of lane `x` to another board and
    /// deletes the board; the other adds a column and a lane, and the merge keeps the board as
    /// that side has it: the board lets the moved cards go and keeps column `todo` and lane `x`,
    /// empty. A dictionary's key whose value is an array, and a struct whose array held the
    /// child, are not the child's wrappers.
    @Test(arguments: [MergeStrategy.mostRecent, .theirs])
    func aColumnEmptiedByAMoveKeepsItsKeyWhenItsBoardLetsTheCardGo(strategy: MergeStrategy) async throws {
        let store = Store.ticking()
        let (todo, doing, inLane, other) = (LaneCard(id: "c1", title: "todo"), LaneCard(id: "c2", title: "doing"), LaneCard(id: "c3", title: "lane"), LaneCard(id: "c4", title: "other lane"))
        let base = try await store.change(on: nil) {
            try $0.save(KanbanBoardOfLanes(id: "a", columns: [.todo: [todo], .doing: [doing]], lanes: [Lane(name: "x", cards: [inLane]), Lane(name: "y", cards: [other])]))
            try $0.save(KanbanBoardOfLanes(id: "b"))
        }
        let ours = try await store.change(on: base) {
            try $0.save(KanbanBoardOfLanes(id: "b", columns: [.todo: [todo]], lanes: [Lane(name: "x", cards: [inLane])]))
            try $0.delete(KanbanBoardOfLanes.self, id: "a")
        }
        let theirs = try await store.change(on: base) {
            try $0.save(KanbanBoardOfLanes(id: "a", columns: [.todo: [todo], .doing: [doing], .done: []], lanes: [Lane(name: "x", cards: [inLane]), Lane(name: "y", cards: [other]), Lane(name: "z", cards: [])]))
        }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        let board = try #require(try await store.value(KanbanBoardOfLanes.self, id: "a", at: merged.id))
        #expect(board.columns == [.todo: [], .doing: [doing], .done: []])
        let stored = try #require(try await store.record(RecordKey(type: KanbanBoardOfLanes.typeName, id: "a"), at: merged.id))
        guard case .array(let pairs)? = stored.properties["columns"], case .array(let pair)? = pairs.first else { throw ArborError(.invalidInput, "columns not stored as pairs") }
        #expect(pairs.count == 3 && pair.count == 2)
        #expect(board.lanes == [Lane(name: "x", cards: []), Lane(name: "y", cards: [other]), Lane(name: "z", cards: [])])
        #expect(try await store.value(KanbanBoardOfLanes.self, id: "b", at: merged.id) == KanbanBoardOfLanes(id: "b", columns: [.todo: [todo]], lanes: [Lane(name: "x", cards: [inLane])]))
        #expect(try await store.verify().isIntact)
    }

    /// What an array lets go with a child: the entries that hold it outside arrays, and nothing
    /// else.
    @Test func anArrayLetsAChildGoWithTheEntryThatHoldsItOutsideArraysOnly() {
        let (c1, c2) = (RecordKey(type: "Card", id: "c1"), RecordKey(type: "Card", id: "c2"))
        let (one, two) = (PropertyValue.child(c1), PropertyValue.child(c2))
        // (value, without c1; nil: cannot let it go)
        let cases: [(PropertyValue, PropertyValue?)] = [
            (.array([one, two]), .array([two])),
            // Wrapped: `{card, note}`, and a dictionary whose values are children.
            (.array([.map(["card": one, "note": .string("n")]), .map(["card": two, "note": .string("m")])]), .array([.map(["card": two, "note": .string("m")])])),
            (.array([.array([.string("a"), one]), .array([.string("b"), two])]), .array([.array([.string("b"), two])])),
            (.array([.map(["inner": .map(["card": one])])]), .array([])),
            // In an array of the entry's own: a lane, a dictionary of arrays, an array of arrays.
            (.array([.map(["name": .string("x"), "cards": .array([one])])]), .array([.map(["name": .string("x"), "cards": .array([])])])),
            (.array([.array([.string("a"), .array([one])]), .array([.string("b"), .array([one, two])])]), .array([.array([.string("a"), .array([])]), .array([.string("b"), .array([two])])])),
            (.array([.array([.string("a"), .array([one, two])])]), .array([.array([.string("a"), .array([two])])])),
            (.array([.array([one, two]), .array([two])]), .array([.array([two]), .array([two])])),
            // A dictionary keyed by records: the pair goes with its key. One that names no record
            // any more is stored as the encoder stores it, keys and values one after the other.
            (.array([.array([one, .int(5)]), .array([two, .int(3)])]), .array([.array([two, .int(3)])])),
            (.array([.array([.string("a"), .array([one])]), .array([.string("b"), .array([])])]), .array([.string("a"), .array([]), .string("b"), .array([])])),
            // Rows of optionals look like pairs: not flattened where a "key" is null.
            (.array([.array([one, .null]), .array([.null, .null])]), .array([.array([.null, .null])])),
            // Data beside the child that merely looks like pairs is left as it is.
            (.array([.map(["cards": .array([one]), "outline": .array([.array([.int(0), .int(0)]), .array([.int(1), .int(1)])])])]),
             .array([.map(["cards": .array([]), "outline": .array([.array([.int(0), .int(0)]), .array([.int(1), .int(1)])])])])),
            (.array([.array([one])]), .array([.array([])])),
            // With another child outside arrays, or held by a property itself: not alone.
            (.array([.map(["card": one, "other": two])]), nil),
            (.array([.array([.string("a"), .map(["card": one, "other": two])])]), nil),
            (one, nil),
            (.map(["card": one]), nil),
        ]
        for (value, expected) in cases {
            #expect(value.droppingElement(c1, wholeEntries: true) == expected, "\(value)")
        }
    }
}

extension MergeOwnershipTests {
    /// One side moves cards out of a lane of two, both cards out of another lane, out of a
    /// column of a dictionary stored as pairs and out of one keyed by strings, to another
    /// board, which the other side deletes: the delete wins, and each card goes back into the
    /// entry that held it, which the moving side kept emptied or with the other card: no card
    /// lost, no lane or key twice.
    @Test(arguments: [MergeStrategy.mostRecent, .theirs])
    func aCardWhoseNewBoardWasDeletedGoesBackIntoItsLane(strategy: MergeStrategy) async throws {
        let store = Store.ticking()
        let cards = (1...7).map { LaneCard(id: "c\($0)", title: "card \($0)") }
        let board = KanbanBoardOfLanes(id: "a", columns: [.todo: [cards[2]]], lanes: [Lane(name: "x", cards: [cards[0], cards[1]]), Lane(name: "y", cards: [cards[4]]), Lane(name: "w", cards: [cards[5], cards[6]])], named: ["n": [cards[3]]])
        let base = try await store.change(on: nil) {
            try $0.save(board)
            try $0.save(KanbanBoardOfLanes(id: "b"))
        }
        let ours = try await store.change(on: base) {
            try $0.save(KanbanBoardOfLanes(id: "a", columns: [.todo: []], lanes: [Lane(name: "x", cards: [cards[1]]), Lane(name: "y", cards: []), Lane(name: "w", cards: [])], named: ["n": []]))
            try $0.save(KanbanBoardOfLanes(id: "b", columns: [.todo: [cards[2]]], lanes: [Lane(name: "x", cards: [cards[0]]), Lane(name: "y", cards: [cards[4]]), Lane(name: "w", cards: [cards[5], cards[6]])], named: ["n": [cards[3]]]))
        }
        let theirs = try await store.change(on: base) { try $0.delete(KanbanBoardOfLanes.self, id: "b") }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        #expect(try await store.value(KanbanBoardOfLanes.self, id: "b", at: merged.id) == nil)
        #expect(try await store.value(KanbanBoardOfLanes.self, id: "a", at: merged.id) == board)
        let stored = try #require(try await store.record(RecordKey(type: KanbanBoardOfLanes.typeName, id: "a"), at: merged.id))
        #expect(stored.properties["columns"] == (try RecordEncoder.records(of: board)[0].properties["columns"]))
        #expect(try await store.verify().isIntact)
    }

    /// One side moves a card from `todo` to `done` in one record; the other edits another
    /// entry of `todo`, which conflicts and is taken from it whole: the record would hold the
    /// card in both. `todo`, where the ancestor held it and the moving side no longer does,
    /// lets it go.
    @Test(arguments: [MergeStrategy.mostRecent, .theirs])
    func aCardMovedWithinARecordIsNotHeldTwiceWhenTheOtherSideEditsItsOldColumn(strategy: MergeStrategy) async throws {
        let store = Store.ticking()
        func entry(_ card: String, _ note: String) -> PropertyValue { .map(["card": .child(RecordKey(type: "Card", id: card)), "note": .string(note)]) }
        func board(todo: [PropertyValue], done: [PropertyValue]) -> Record { Record(type: "Board", id: "r", properties: ["todo": .array(todo), "done": .array(done)]) }
        let base = try await store.change(on: nil) {
            try $0.save(board(todo: [entry("c", ""), entry("e", "")], done: []))
            for card in ["c", "e"] { try $0.save(Record(type: "Card", id: card, properties: ["title": .string(card)])) }
        }
        let ours = try await store.change(on: base) { try $0.save(board(todo: [entry("e", "")], done: [entry("c", "")])) }
        let theirs = try await store.change(on: base) { try $0.save(board(todo: [entry("c", ""), entry("e", "edited")], done: [])) }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        #expect(try await store.record(RecordKey(type: "Board", id: "r"), at: merged.id) == board(todo: [entry("e", "edited")], done: [entry("c", "")]))
        #expect(try await store.verify().isIntact)
    }

    /// A dictionary keyed by records (`[Player: Int]`, pairs whose keys are children): one
    /// side moves a player to another team, the other changes a score, and the merge takes the
    /// other's scores: the team lets the player go with its pair, and still decodes.
    @Test(arguments: [MergeStrategy.mostRecent, .theirs])
    func aTeamLetsAPlayerThatKeysItsScoresGoWithTheScore(strategy: MergeStrategy) async throws {
        let store = Store.ticking()
        let (one, two) = (Player(id: "p1"), Player(id: "p2"))
        let base = try await store.change(on: nil) {
            try $0.save(Team(id: "t", scores: [one: 5, two: 3]))
            try $0.save(Team(id: "u"))
        }
        let ours = try await store.change(on: base) {
            try $0.save(Team(id: "t", scores: [two: 3]))
            try $0.save(Team(id: "u", scores: [one: 5]))
        }
        let theirs = try await store.change(on: base) { try $0.save(Team(id: "t", scores: [one: 5, two: 4])) }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        #expect(try await store.value(Team.self, id: "t", at: merged.id) == Team(id: "t", scores: [two: 4]))
        #expect(try await store.value(Team.self, id: "u", at: merged.id) == Team(id: "u", scores: [one: 5]))
        #expect(try await store.verify().isIntact)
    }

    /// Records stored holding each other (a damaged or hostile replica's: Arbor never commits
    /// such a cycle), one side deleting them and the other changing a record below: the merge
    /// ends.
    @Test(.timeLimit(.minutes(1))) func holdersThatHoldEachOtherAtTheAncestorDoNotHangAMerge() async throws {
        let store = Store.ticking()
        func holder(_ id: String, _ kids: [String]) -> Record {
            Record(type: "Folder", id: id, properties: ["kids": .array(kids.map { .child(RecordKey(type: $0 == "k" ? "Leaf" : "Folder", id: $0)) })])
        }
        let base = try await store.change(on: nil) {
            try $0.save(holder("a", ["b", "k"]))
            try $0.save(holder("b", ["a"]))
            try $0.save(Record(type: "Leaf", id: "k", properties: ["v": .int(1)]))
        }
        let ours = try await store.change(on: base) {
            $0.delete(RecordKey(type: "Folder", id: "a"))
            $0.delete(RecordKey(type: "Folder", id: "b"))
            $0.delete(RecordKey(type: "Leaf", id: "k"))
        }
        let theirs = try await store.change(on: base) { try $0.save(Record(type: "Leaf", id: "k", properties: ["v": .int(2)])) }
        for strategy in [MergeStrategy.mostRecent, .ours, .theirs] {
            _ = try? await store.merge(ours.id, theirs.id, strategy: strategy)
        }
    }
}

extension MergeOwnershipTests {
    /// Cards whose new board was deleted go back to the entry that held them, found by the
    /// cards it still holds, or rebuilt where the moving side removed it: a lane renamed on the
    /// moving side, a lane removed with both its cards, and rows of cards (`[[Card]]`) whose
    /// emptied row was removed: each card back, with its own row, none lost.
    @Test(arguments: [MergeStrategy.mostRecent, .theirs])
    func cardsGoBackToTheirEntryFoundByTheCardsItStillHolds(strategy: MergeStrategy) async throws {
        let store = Store.ticking()
        func card(_ id: String) -> PropertyValue { .child(RecordKey(type: "Card", id: id)) }
        func lane(_ name: String, _ cards: [String]) -> PropertyValue { .map(["name": .string(name), "cards": .array(cards.map(card))]) }
        func board(_ id: String, lanes: [PropertyValue], rows: [[String]]) -> Record {
            Record(type: "Board", id: id, properties: ["lanes": .array(lanes), "rows": .array(rows.map { .array($0.map(card)) })])
        }
        let ancestor = board("a", lanes: [lane("x", ["c1", "c2"]), lane("w", ["c3", "c4"])], rows: [["c5"], ["c6"]])
        let base = try await store.change(on: nil) {
            try $0.save(ancestor)
            try $0.save(board("b", lanes: [], rows: []))
            for id in (1...6).map({ "c\($0)" }) { try $0.save(Record(type: "Card", id: id, properties: ["title": .string(id)])) }
        }
        let ours = try await store.change(on: base) {
            try $0.save(board("a", lanes: [lane("x renamed", ["c2"])], rows: [["c6"]]))
            try $0.save(board("b", lanes: [lane("x", ["c1"]), lane("w", ["c3", "c4"])], rows: [["c5"]]))
        }
        let theirs = try await store.change(on: base) { $0.delete(RecordKey(type: "Board", id: "b")) }
        let (outcome, reversed) = try await store.mergeBothWays(ours, theirs, strategy: strategy)
        let merged = try #require(outcome.version)
        #expect(reversed.version?.id == merged.id)
        #expect(try await store.record(RecordKey(type: "Board", id: "a"), at: merged.id)
            == board("a", lanes: [lane("x renamed", ["c1", "c2"]), lane("w", ["c3", "c4"])], rows: [["c5"], ["c6"]]))
        #expect(try await store.records(ofType: "Card", at: merged.id).count == 6)
        #expect(try await store.verify().isIntact)
    }
}
