import Foundation
import Testing
@testable import Arbor

@Suite struct MergeTests {
    func withStore(_ kind: AdapterKind, strategy: MergeStrategy = .mostRecent, resolvers: MergeResolvers = MergeResolvers(),
                   _ body: (Store) async throws -> Void) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let store = Store.ticking(replica: "test", backend: backend, strategy: strategy, resolvers: resolvers)
        try await body(store)
        try await store.close()
    }

    /// A base with task `t`, then `ours` and `theirs` built on it.
    func fork(_ store: Store, base: Task = Task(id: "t", title: "base", done: false),
              ours: (inout ChangeSet) throws -> Void, theirs: (inout ChangeSet) throws -> Void) async throws -> (base: Version, ours: Version, theirs: Version) {
        let root = try await store.change(on: nil) { try $0.save(base) }
        let a = try await store.change(on: root, "ours", ours)
        let b = try await store.change(on: root, "theirs", theirs)
        return (root, a, b)
    }

    func merged(_ outcome: MergeOutcome) throws -> (Version, MergeReport) {
        guard case .merged(let version, let report) = outcome else {
            Issue.record("expected a merge commit, got \(outcome)")
            throw ArborError(.invalidInput, "no merge")
        }
        return (version, report)
    }

    @Test(arguments: AdapterKind.allCases) func disjointInserts(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let (base, a, b) = try await fork(store, ours: { try $0.save(Task(id: "a", title: "A", done: false)) },
                                              theirs: { try $0.save(Task(id: "b", title: "B", done: true)) })
            let (version, report) = try merged(try await store.merge(a.id, b.id))
            #expect(report.ancestor == base.id)
            #expect(report.resolved.isEmpty)
            #expect(report.changed.map(\.id) == ["a", "b"])
            #expect(try await store.values(Task.self, at: version.id).map(\.id) == ["a", "b", "t"])
            #expect(version.parents == [a.id, b.id].sorted())
            #expect(version.replica == "merge")
            #expect(version.time > a.time && version.time > b.time)
            #expect(try await store.heads().map(\.id) == [version.id])
        }
    }

    @Test(arguments: AdapterKind.allCases) func differentPropertiesBothSurvive(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let (_, a, b) = try await fork(store, ours: { try $0.save(Task(id: "t", title: "renamed", done: false)) },
                                           theirs: { try $0.save(Task(id: "t", title: "base", done: true)) })
            let (version, report) = try merged(try await store.merge(a.id, b.id, strategy: .manual))
            #expect(report.resolved.isEmpty)
            #expect(try await store.value(Task.self, id: "t", at: version.id) == Task(id: "t", title: "renamed", done: true))
        }
    }

    /// A property named in two Unicode forms ("é" as one scalar, and as "e" and a combining
    /// accent), settled for ours: the merged record is ours', its bytes and spelling too, so
    /// ours' index is left as it is.
    @Test func aNameInAnotherUnicodeFormSettledForOursLeavesOursAsItIs() async throws {
        try await withStore(.memory) { store in
            let (composed, decomposed) = ("\u{E9}", "e\u{301}")
            let base = try await store.change(on: nil) { try $0.save(item("r", [composed: .int(0)])) }
            let a = try await store.change(on: base, "ours") { try $0.save(item("r", [decomposed: .int(1)])) }
            let b = try await store.change(on: base, "theirs") { try $0.save(item("r", [composed: .int(2)])) }
            let (version, report) = try merged(try await store.merge(a.id, b.id, strategy: .ours))
            #expect(report.resolved.count == 1)
            #expect(version.root == a.root)
            let record = try #require(try await store.record(RecordKey(type: "Item", id: "r"), at: version.id))
            #expect(record.properties.keys.map(\.unicodeScalars.count) == [2])
        }
    }

    /// A change of a name's Unicode form alone is a change: theirs respelled a map key and a
    /// property name and changed nothing else, ours changed another property; both changes are
    /// in the merge, in either order (it compared as `String`s, and dropped theirs).
    @Test func aRespellingOnOneSideIsKept() async throws {
        try await withStore(.memory) { store in
            let (composed, decomposed) = ("\u{E9}", "e\u{301}")
            let base = try await store.change(on: nil) {
                try $0.save(item("r", [composed: .int(0), "m": .map([composed: .int(1)]), "x": .int(0)]))
            }
            let a = try await store.change(on: base, "ours") {
                try $0.save(item("r", [composed: .int(0), "m": .map([composed: .int(1)]), "x": .int(1)]))
            }
            let b = try await store.change(on: base, "theirs") {
                try $0.save(item("r", [decomposed: .int(0), "m": .map([decomposed: .int(1)]), "x": .int(0)]))
            }
            for (first, second) in [(a, b), (b, a)] {
                let (version, _) = try merged(try await store.merge(first.id, second.id, strategy: .mostRecent))
                let record = try #require(try await store.record(RecordKey(type: "Item", id: "r"), at: version.id))
                #expect(record == Record(type: "Item", id: "r", properties: [decomposed: .int(0), "m": .map([decomposed: .int(1)]), "x": .int(1)]))
                #expect(record != Record(type: "Item", id: "r", properties: [composed: .int(0), "m": .map([decomposed: .int(1)]), "x": .int(1)]))
            }
        }
    }

    /// The change times of conflicting records come out the same whether the payloads at the
    /// base and the heads are looked up or made again from the bytes the diffs found: over
    /// several versions a side, a blob-sized record, a deletion and an addition on both sides.
    @Test func changeTimesFromTheDiffsMatchThoseLookedUp() async throws {
        try await withStore(.memory) { store in
            let big = String(repeating: "x", count: 2_000)
            let base = try await store.change(on: nil) { changes in
                for id in ["a", "b", "c", "big"] { try changes.save(item(id, ["v": .int(0)])) }
            }
            var ours = base, theirs = base
            for step in 1...3 {
                ours = try await store.change(on: ours, "ours \(step)") { changes in
                    try changes.save(item("a", ["v": .int(Int64(step))]))
                    if step == 2 { try changes.save(item("big", ["v": .string(big + "o")])) }
                    if step == 3 { changes.delete(RecordKey(type: "Item", id: "c")) }
                    try changes.save(item("new", ["v": .int(1)]))
                }
                theirs = try await store.change(on: theirs, "theirs \(step)") { changes in
                    if step == 1 { try changes.save(item("a", ["v": .int(-1)])) }
                    try changes.save(item("big", ["v": .string(big + "t\(step)")]))
                    try changes.save(item("c", ["v": .int(Int64(-step))]))
                    if step == 3 { try changes.save(item("new", ["v": .int(2)])) }
                }
            }
            let ancestry = try await CommonAncestor.find(ours, theirs, store: store)
            let source = store.makeSource()
            let state = try await MergeState.load(base: base.root, ours: ours, theirs: theirs, store: store, source: source)
            let keys = ["a", "big", "c", "new"].map { RecordKey(type: "Item", id: $0) }
            let known = state.payloads(of: keys)
            #expect(known.count == 3)
            // A key neither side changed is not known from the diffs: nothing is given.
            #expect(state.payloads(of: keys + [RecordKey(type: "Item", id: "b")]).isEmpty)
            for (side, head) in [(ancestry.oursOnly, ours), (ancestry.theirsOnly, theirs)] {
                let wanted = Dictionary(uniqueKeysWithValues: keys.map { ($0, Set<String?>([nil, "v"])) })
                let seeded = try await store.changeStamps(of: wanted, in: side, head: head, source: store.makeSource(), known: known)
                let lookedUp = try await store.changeStamps(of: wanted, in: side, head: head, source: store.makeSource())
                #expect(seeded == lookedUp)
                #expect(seeded.count == keys.count)
            }
        }
    }

    /// A version made by hand, on `parents`, with the records of `version` but `key`, small,
    /// stored in a blob (as Arbor never stores it).
    func storingInABlob(_ key: RecordKey, of version: Version, parents: [Version], in store: Store) async throws -> Version {
        let record = try #require(try await store.record(key, at: version.id))
        let blob = Blob.encode(record: RecordCoding.encode(record.properties))
        let source = store.makeSource()
        let root = try await ProllyTree.apply([IndexEdit(key: key.indexBytes, payload: .blob(Hash.of(blob)))], to: version.root, source: source)
        try await store.backend.put([(Hash.of(blob), blob)] + source.newObjects(reachableFrom: root))
        let content = Version.Content(
            root: root, parents: parents.map(\.id), time: HybridTime.next(after: parents.map(\.time), now: Date(timeIntervalSince1970: 0.001)),
            replica: "odd", message: "", recordCount: version.recordCount)
        let bytes = content.encoded()
        try await store.backend.put([(Hash.of(bytes), bytes)])
        return Version(id: Hash.of(bytes), content: content)
    }

    /// A record stored otherwise than Arbor stores it (a small one in a blob) is merged, but
    /// its payloads are not made again from its bytes: they are looked up.
    @Test func aRecordStoredOtherwiseIsNotSecondGuessed() async throws {
        try await withStore(.memory) { store in
            let base = try await store.change(on: nil) { try $0.save(item("a", ["v": .int(0)])) }
            let key = RecordKey(type: "Item", id: "a")
            let oddBase = try await storingInABlob(key, of: base, parents: [], in: store)
            let root = oddBase.root
            let ours = try await store.change(on: oddBase, "ours") { try $0.save(item("a", ["v": .int(1)])) }
            let theirs = try await store.change(on: oddBase, "theirs") { try $0.save(item("a", ["v": .int(2)])) }
            let state = try await MergeState.load(base: root, ours: ours, theirs: theirs, store: store, source: store.makeSource())
            #expect(state.payloads(of: [key]).isEmpty)
            let (version, report) = try merged(try await store.merge(ours.id, theirs.id, strategy: .mostRecent))
            #expect(report.resolved.count == 1)
            #expect(try await store.record(key, at: version.id)?.properties["v"] == .int(2))
        }
    }

    /// The same record stored in a blob on one side (by another writer) and inline on the other
    /// merges to one commit in both directions: the merge writes it as Arbor stores it.
    @Test func aRecordStoredOtherwiseMergesAlikeBothWays() async throws {
        try await withStore(.memory) { store in
            let base = try await store.change(on: nil) { try $0.save(item("a", ["v": .int(0)])) }
            let key = RecordKey(type: "Item", id: "a")
            let odd = try await storingInABlob(key, of: base, parents: [base], in: store)
            let other = try await store.change(on: base, "other") { try $0.save(item("b", ["v": .int(1)])) }
            let (one, _) = try merged(try await store.merge(odd.id, other.id, strategy: .mostRecent))
            let (two, _) = try merged(try await store.merge(other.id, odd.id, strategy: .mostRecent))
            #expect(one.id == two.id)
            #expect(try await store.record(key, at: one.id)?.properties["v"] == .int(0))
        }
    }

    @Test func sameRecordInsertedOnBothSides() async throws {
        try await withStore(.memory) { store in
            let root = try await store.change(on: nil) { try $0.save(item("other", [:])) }
            let a = try await store.change(on: root) { try $0.save(item("x", ["a": .int(1), "shared": .int(5)])) }
            let b = try await store.change(on: root) { try $0.save(item("x", ["b": .int(2), "shared": .int(5)])) }
            let (version, report) = try merged(try await store.merge(a.id, b.id, strategy: .manual))
            #expect(report.resolved.isEmpty)
            #expect(try await store.record(itemKey("x"), at: version.id)?.properties == ["a": .int(1), "b": .int(2), "shared": .int(5)])
            // Both adding the same property differently is a conflict against an empty ancestor.
            let c = try await store.change(on: root) { try $0.save(item("x", ["a": .int(9)])) }
            guard case .conflicts(let conflicts) = try await store.merge(a.id, c.id, strategy: .manual) else { Issue.record("no conflict"); return }
            #expect(conflicts == [MergeConflict(key: itemKey("x"), property: "a", base: nil, ours: .int(1), theirs: .int(9))])
        }
    }

    @Test(arguments: AdapterKind.allCases) func samePropertyEachStrategy(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let (_, a, b) = try await fork(store, ours: { try $0.save(Task(id: "t", title: "ours", done: false)) },
                                           theirs: { try $0.save(Task(id: "t", title: "theirs", done: false)) })
            guard case .conflicts(let conflicts) = try await store.merge(a.id, b.id, strategy: .manual) else { Issue.record("no conflict"); return }
            #expect(conflicts == [MergeConflict(key: RecordKey(type: "Task", id: "t"), property: "title", base: .string("base"), ours: .string("ours"), theirs: .string("theirs"))])
            #expect(try await store.heads().count == 2, "a manual merge with conflicts commits nothing")
            #expect(try await store.conflicts() == conflicts)
            for (strategy, expected) in [(MergeStrategy.ours, "ours"), (.theirs, "theirs"), (.mostRecent, "theirs")] {
                let (version, report) = try merged(try await store.merge(a.id, b.id, strategy: strategy))
                #expect(report.resolved == conflicts)
                #expect(try await store.value(Task.self, id: "t", at: version.id)?.title == expected, "\(strategy)")
            }
            // mostRecent gives the same commit in both directions; ours one way is theirs the other.
            let forward = try await store.merge(a.id, b.id, strategy: .mostRecent).version?.id
            #expect(try await store.merge(b.id, a.id, strategy: .mostRecent).version?.id == forward)
            #expect(try await store.merge(b.id, a.id, strategy: .theirs).version?.id == store.merge(a.id, b.id, strategy: .ours).version?.id)
        }
    }

    @Test func sameChangeOnBothSidesIsNoConflict() async throws {
        try await withStore(.memory) { store in
            let (_, a, b) = try await fork(store, ours: { try $0.save(Task(id: "t", title: "same", done: true)) },
                                           theirs: { try $0.save(Task(id: "t", title: "same", done: true)) })
            let (version, report) = try merged(try await store.merge(a.id, b.id, strategy: .manual))
            #expect(report.resolved.isEmpty)
            #expect(try await store.value(Task.self, id: "t", at: version.id) == Task(id: "t", title: "same", done: true))
        }
    }

    @Test(arguments: AdapterKind.allCases) func removedOnBoth(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let (_, a, b) = try await fork(store, ours: { try $0.delete(Task.self, id: "t"); try $0.save(Person(id: "p", name: "P")) },
                                           theirs: { try $0.delete(Task.self, id: "t") })
            let (version, report) = try merged(try await store.merge(a.id, b.id, strategy: .manual))
            #expect(report.resolved.isEmpty)
            #expect(version.recordCount == 1)
            #expect(try await store.value(Task.self, id: "t", at: version.id) == nil)
        }
    }

    @Test(arguments: AdapterKind.allCases) func removedVersusUpdated(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let root = try await store.change(on: nil) { try $0.save(Task(id: "t", title: "base", done: false)) }
            let deleted = try await store.change(on: root) { try $0.delete(Task.self, id: "t") }
            let updated = try await store.change(on: root) { try $0.save(Task(id: "t", title: "new", done: false)) }
            let key = RecordKey(type: "Task", id: "t")
            for (ours, theirs) in [(deleted, updated), (updated, deleted)] {
                guard case .conflicts(let conflicts) = try await store.merge(ours.id, theirs.id, strategy: .manual) else { Issue.record("no conflict"); return }
                #expect(conflicts.count == 1)
                #expect(conflicts.first?.key == key && conflicts.first?.property == nil)
                #expect((conflicts.first?.ours == nil) == (ours == deleted))
                for strategy in [MergeStrategy.ours, .theirs, .mostRecent] {
                    let (version, report) = try merged(try await store.merge(ours.id, theirs.id, strategy: strategy))
                    #expect(report.resolved.count == 1)
                    let winner = strategy == .ours ? ours : (strategy == .theirs ? theirs : updated)  // updated is newer
                    let title = try await store.value(Task.self, id: "t", at: version.id)?.title
                    #expect(title == (winner == updated ? "new" : nil), "\(strategy)")
                }
            }
        }
    }

    @Test(arguments: AdapterKind.allCases) func childAddedOnBothSides(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let n0 = Note(id: "n0", text: "zero")
            let (_, a, b) = try await fork(store, base: Task(id: "t", title: "base", done: false, notes: [n0]),
                ours: { try $0.save(Task(id: "t", title: "base", done: false, notes: [n0, Note(id: "n2", text: "ours")])) },
                theirs: { try $0.save(Task(id: "t", title: "base", done: false, notes: [n0, Note(id: "n1", text: "theirs")])) })
            let (version, report) = try merged(try await store.merge(a.id, b.id, strategy: .manual))
            #expect(report.resolved.isEmpty)
            let task = try await store.value(Task.self, id: "t", at: version.id)
            #expect(task?.notes.map(\.id) == ["n0", "n1", "n2"])
            #expect(try await store.merge(b.id, a.id, strategy: .manual).version?.id == version.id)
        }
    }

    @Test(arguments: AdapterKind.allCases) func childRemovedOnOneSideEditedOnTheOther(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let (_, a, b) = try await fork(store, base: Task(id: "t", title: "base", done: false, notes: [Note(id: "n1", text: "old"), Note(id: "n2", text: "keep")]),
                ours: { try $0.save(Task(id: "t", title: "base", done: false, notes: [Note(id: "n2", text: "keep")])) },
                theirs: { try $0.save(Task(id: "t", title: "edited", done: false, notes: [Note(id: "n1", text: "new"), Note(id: "n2", text: "keep")])) })
            guard case .conflicts(let conflicts) = try await store.merge(a.id, b.id, strategy: .manual) else { Issue.record("no conflict"); return }
            #expect(conflicts.map(\.key) == [RecordKey(type: "Note", id: "n1")])
            for strategy in [MergeStrategy.ours, .theirs, .mostRecent] {
                let (version, _) = try merged(try await store.merge(a.id, b.id, strategy: strategy))
                // The parent decides: its notes array merged to [n2], so n1 goes whoever won it.
                #expect(try await store.value(Task.self, id: "t", at: version.id) == Task(id: "t", title: "edited", done: false, notes: [Note(id: "n2", text: "keep")]))
                #expect(try await store.record(RecordKey(type: "Note", id: "n1"), at: version.id) == nil, "no orphan with \(strategy)")
                #expect(version.recordCount == 2)
            }
        }
    }

    /// A nested struct or a dictionary merges name by name, as a record's properties do: one
    /// side's `street` and the other's `city` both survive, as do notes each side added under its
    /// own name (they were a conflict on the whole property, and the side that lost it lost its
    /// note). A name both sides changed differently, or a child moved to a different name on
    /// each side, keeps the property a conflict.
    @Test func mapsMergeNameByName() async throws {
        try await withStore(.memory) { store in
            let note = { (id: String) in RecordKey(type: "Note", id: id) }
            func card(street: String, city: String, notes: [String: String]) -> Record {
                Record(type: "Card", id: "c", properties: [
                    "address": .map(["street": .string(street), "city": .string(city)]),
                    "notes": .map(notes.mapValues { .child(note($0)) }),
                ])
            }
            func noteRecord(_ id: String) -> Record { Record(type: "Note", id: id, properties: ["text": .string(id)]) }
            let root = try await store.change(on: nil) {
                try $0.save(card(street: "Main", city: "Oslo", notes: ["a": "n0"]))
                try $0.save(noteRecord("n0"))
            }
            let ours = try await store.change(on: root, "ours") {
                try $0.save(card(street: "High", city: "Oslo", notes: ["a": "n0", "b": "n1"]))
                try $0.save(noteRecord("n1"))
            }
            let theirs = try await store.change(on: root, "theirs") {
                try $0.save(card(street: "Main", city: "Bergen", notes: ["a": "n0", "c": "n2"]))
                try $0.save(noteRecord("n2"))
            }
            let (version, report) = try merged(try await store.merge(ours.id, theirs.id, strategy: .manual))
            #expect(report.resolved.isEmpty)
            #expect(try await store.record(RecordKey(type: "Card", id: "c"), at: version.id) == card(street: "High", city: "Bergen", notes: ["a": "n0", "b": "n1", "c": "n2"]))
            #expect(try await store.merge(theirs.id, ours.id, strategy: .manual).version?.id == version.id)
            #expect(try await store.verify().isIntact)

            // The same street changed differently: the address is a conflict, whole.
            let otherStreet = try await store.change(on: root, "other street") { try $0.save(card(street: "Low", city: "Oslo", notes: ["a": "n0"])) }
            guard case .conflicts(let conflicts) = try await store.merge(ours.id, otherStreet.id, strategy: .manual) else {
                Issue.record("two streets merged")
                return
            }
            #expect(conflicts.map(\.property) == ["address"])
            // n0 moved to "b" on one side and to "c" on the other: not held twice.
            let movedB = try await store.change(on: root, "to b") { try $0.save(card(street: "Main", city: "Oslo", notes: ["b": "n0"])) }
            let movedC = try await store.change(on: root, "to c") { try $0.save(card(street: "Main", city: "Oslo", notes: ["c": "n0"])) }
            guard case .conflicts(let moved) = try await store.merge(movedB.id, movedC.id, strategy: .manual) else {
                Issue.record("a child moved to two names merged")
                return
            }
            #expect(moved.map(\.property) == ["notes"])
        }
    }

    /// Maps merge by name also against an absent ancestor (a record made on both replicas), and
    /// where one side removed every name the ancestor had and the other added one; where each
    /// side holds one new name (an enum's case, or a dictionary of one entry) they conflict.
    @Test func mapsMergeAgainstAnAbsentOrEmptiedAncestor() async throws {
        try await withStore(.memory) { store in
            func log(_ entries: [String: Int64]) -> Record {
                Record(type: "Log", id: "l", properties: ["entries": .map(entries.mapValues { .int($0) })])
            }
            let empty = try await store.change(on: nil) { try $0.save(Record(type: "Other", id: "o", properties: [:])) }
            let a = try await store.change(on: empty, "ours") { try $0.save(log(["a": 1, "x": 0])) }
            let b = try await store.change(on: empty, "theirs") { try $0.save(log(["b": 2, "x": 0])) }
            let (both, _) = try merged(try await store.merge(a.id, b.id, strategy: .manual))
            #expect(try await store.record(RecordKey(type: "Log", id: "l"), at: both.id) == log(["a": 1, "b": 2, "x": 0]))

            let root = try await store.change(on: nil) { try $0.save(log(["alice": 1])) }
            let removed = try await store.change(on: root, "ours") { try $0.save(log([:])) }
            let added = try await store.change(on: root, "theirs") { try $0.save(log(["alice": 1, "carol": 3])) }
            let (carol, _) = try merged(try await store.merge(removed.id, added.id, strategy: .manual))
            #expect(try await store.record(RecordKey(type: "Log", id: "l"), at: carol.id) == log(["carol": 3]))

            let c = try await store.change(on: empty, "ours") { try $0.save(log(["a": 1])) }
            let d = try await store.change(on: empty, "theirs") { try $0.save(log(["b": 2])) }
            guard case .conflicts = try await store.merge(c.id, d.id, strategy: .manual) else { Issue.record("two new single names merged"); return }
        }
    }

    /// Under a configured manual strategy, a note's type overridden to theirs: a task deleted on
    /// one side whose note the other edited stops the merge on the task, which has no override,
    /// rather than follow its note's override.
    @Test func aHolderWithoutAnOverrideStopsAConfiguredManualMerge() async throws {
        var resolvers = MergeResolvers()
        resolvers.register(Note.self, strategy: .theirs)
        try await withStore(.memory, strategy: .manual, resolvers: resolvers) { store in
            let (_, a, b) = try await fork(store, base: Task(id: "t", title: "base", done: false, notes: [Note(id: "n1", text: "old")]),
                ours: { try $0.delete(Task.self, id: "t") },
                theirs: { try $0.save(Task(id: "t", title: "base", done: false, notes: [Note(id: "n1", text: "edited")])) })
            guard case .conflicts(let conflicts) = try await store.merge(a.id, b.id) else { Issue.record("the task was settled"); return }
            #expect(conflicts.map(\.key.description) == ["Task/t"])
        }
    }

    /// An enum is stored as a map of its one case: both sides changing the case is a conflict,
    /// not a merge of two cases into one map, which no decoder reads ("expected one key").
    @Test func anEnumChangedToTwoCasesIsAConflict() async throws {
        try await withStore(.memory) { store in
            let root = try await store.change(on: nil) { try $0.save(Sketch(id: "s", shape: .none)) }
            let a = try await store.change(on: root, "ours") { try $0.save(Sketch(id: "s", shape: .circle(radius: 1))) }
            let b = try await store.change(on: root, "theirs") { try $0.save(Sketch(id: "s", shape: .square(side: 2))) }
            guard case .conflicts(let conflicts) = try await store.merge(a.id, b.id, strategy: .manual) else { Issue.record("two cases merged"); return }
            #expect(conflicts.map(\.property) == ["shape"])
            let (version, _) = try merged(try await store.merge(a.id, b.id, strategy: .mostRecent))
            #expect(try await store.value(Sketch.self, id: "s", at: version.id) == Sketch(id: "s", shape: .square(side: 2)))
        }
    }

    /// A child moved from one name of a map to another on one side, and into another record on
    /// the other: the map is a conflict, as before maps merged by name; merged, it kept the
    /// child under its new name and the other record let it go, whatever the strategy said.
    @Test func aChildMovedWithinAMapWhileTheOtherSideMovesItAwayIsAConflict() async throws {
        try await withStore(.memory) { store in
            let note = RecordKey(type: "Note", id: "n0")
            func card(_ notes: [String: String]) -> Record {
                Record(type: "Card", id: "c", properties: ["notes": .map(notes.mapValues { .child(RecordKey(type: "Note", id: $0)) })])
            }
            func shelf(_ notes: [String]) -> Record {
                Record(type: "Shelf", id: "s", properties: ["notes": .array(notes.map { .child(RecordKey(type: "Note", id: $0)) })])
            }
            let root = try await store.change(on: nil) {
                try $0.save(card(["a": "n0", "k": "n9"]))
                try $0.save(shelf([]))
                for id in ["n0", "n9"] { try $0.save(Record(type: "Note", id: id, properties: ["text": .string(id)])) }
            }
            let a = try await store.change(on: root, "ours") { try $0.save(card(["b": "n0", "k": "n9"])) }
            let b = try await store.change(on: root, "theirs") {
                try $0.save(card(["k": "n9"]))
                try $0.save(shelf(["n0"]))
            }
            guard case .conflicts(let conflicts) = try await store.merge(a.id, b.id, strategy: .manual) else { Issue.record("merged"); return }
            #expect(conflicts.map { "\($0.key.type).\($0.property ?? "")" }.contains("Card.notes"))
            let (version, _) = try merged(try await store.merge(a.id, b.id, strategy: .theirs))
            #expect(try await store.record(RecordKey(type: "Shelf", id: "s"), at: version.id) == shelf(["n0"]))
            #expect(try await store.record(RecordKey(type: "Card", id: "c"), at: version.id) == card(["k": "n9"]))
            #expect(try await store.record(note, at: version.id) != nil)
        }
    }

    /// One side takes a note out of a task, then deletes the task; the other edits the note
    /// between the two. Most-recent compares the note's edit with the last deletion above it
    /// (the task's, later): both go, as the task would; by the note's own removal alone, the
    /// note was kept and then went as an orphan all the same. Taken the other way (theirs),
    /// both stay.
    @Test func aNoteEditedBetweenItsRemovalAndItsTasksDeletionGoesWithTheTask() async throws {
        try await withStore(.memory) { store in
            let note = Note(id: "n1", text: "old")
            let root = try await store.change(on: nil) { try $0.save(Task(id: "t", title: "base", done: false, notes: [note])) }
            let removed = try await store.change(on: root, "ours") { try $0.save(Task(id: "t", title: "base", done: false)) }
            let edited = Note(id: "n1", text: "edited")
            let b = try await store.change(on: root, "theirs") { try $0.save(Task(id: "t", title: "base", done: false, notes: [edited])) }
            let a = try await store.change(on: removed, "ours") { try $0.delete(Task.self, id: "t") }
            for (strategy, expected) in [(MergeStrategy.mostRecent, nil), (.ours, nil), (.theirs, Task(id: "t", title: "base", done: false, notes: [edited]))] {
                let (version, _) = try merged(try await store.merge(a.id, b.id, strategy: strategy))
                #expect(try await store.value(Task.self, id: "t", at: version.id) == expected, "\(strategy)")
                #expect(try await store.verify().isIntact)
                #expect(version.recordCount == (expected == nil ? 0 : 2), "\(strategy)")
            }
        }
    }

    /// An array of references that holds one twice (a playlist that plays a song twice) is no
    /// set: both sides changing it is a conflict, not a set merge that dropped the repeat neither
    /// side removed, or the one a side added.
    @Test func anArrayThatRepeatsAReferenceIsNoSet() async throws {
        try await withStore(.memory) { store in
            func playlist(_ songs: [String]) -> Record {
                Record(type: "Playlist", id: "p", properties: ["songs": .array(songs.map { .reference(RecordKey(type: "Song", id: $0)) })])
            }
            for (base, ours, theirs) in [
                (["s1", "s2", "s1"], ["s1", "s2", "s1", "s3"], ["s1", "s2", "s1", "s4"]),
                (["s1", "s2"], ["s1", "s2", "s1"], ["s1", "s2", "s3"]),
            ] {
                let root = try await store.change(on: nil) { try $0.save(playlist(base)) }
                let a = try await store.change(on: root, "ours") { try $0.save(playlist(ours)) }
                let b = try await store.change(on: root, "theirs") { try $0.save(playlist(theirs)) }
                guard case .conflicts(let conflicts) = try await store.merge(a.id, b.id, strategy: .manual) else {
                    Issue.record("\(ours) and \(theirs) merged as sets")
                    continue
                }
                #expect(conflicts.map(\.property) == ["songs"])
                let (version, _) = try merged(try await store.merge(a.id, b.id, strategy: .theirs))
                #expect(try await store.record(RecordKey(type: "Playlist", id: "p"), at: version.id) == playlist(theirs))
            }
            // Without repeats, the same edits merge as sets.
            let root = try await store.change(on: nil) { try $0.save(playlist(["s1", "s2"])) }
            let a = try await store.change(on: root, "ours") { try $0.save(playlist(["s1", "s2", "s3"])) }
            let b = try await store.change(on: root, "theirs") { try $0.save(playlist(["s2", "s4"])) }
            let (version, _) = try merged(try await store.merge(a.id, b.id, strategy: .manual))
            #expect(try await store.record(RecordKey(type: "Playlist", id: "p"), at: version.id) == playlist(["s2", "s3", "s4"]))
        }
    }

    @Test func deletedParentKeptByTheOtherSideKeepsItsChildren() async throws {
        try await withStore(.memory) { store in
            let (_, a, b) = try await fork(store, base: Task(id: "t", title: "base", done: false, notes: [Note(id: "n1", text: "x")]),
                ours: { try $0.delete(Task.self, id: "t") },
                theirs: { try $0.save(Task(id: "t", title: "edited", done: false, notes: [Note(id: "n1", text: "x")])) })
            let (version, _) = try merged(try await store.merge(a.id, b.id, strategy: .theirs))
            #expect(try await store.value(Task.self, id: "t", at: version.id)?.notes.map(\.id) == ["n1"])
            let (deleted, _) = try merged(try await store.merge(a.id, b.id, strategy: .ours))
            #expect(deleted.recordCount == 0)
        }
    }

    /// One side deletes a task, the other edits only a note it holds (the task's own record
    /// unchanged): the task conflicts as deleted and changed, settled with the note. Kept, it
    /// keeps the edited note and its other one; deleted, both go. The task used to go cleanly
    /// and take the note with it, though the note's edit won its conflict; under manual the
    /// task's conflict is reported beside the note's.
    @Test func aDeletedParentWhoseChildTheOtherSideEditedConflictsWithIt() async throws {
        try await withStore(.memory) { store in
            let (kept, edited) = (Note(id: "n2", text: "kept"), Note(id: "n1", text: "edited"))
            let (_, a, b) = try await fork(store, base: Task(id: "t", title: "base", done: false, notes: [Note(id: "n1", text: "old"), kept]),
                ours: { try $0.delete(Task.self, id: "t") },
                theirs: { try $0.save(Task(id: "t", title: "base", done: false, notes: [edited, kept])) })
            guard case .conflicts(let conflicts) = try await store.merge(a.id, b.id, strategy: .manual) else { Issue.record("no conflict"); return }
            #expect(conflicts.map(\.key.description) == ["Note/n1", "Task/t"])
            let restored = Task(id: "t", title: "base", done: false, notes: [edited, kept])
            for (strategy, expected) in [(MergeStrategy.theirs, restored), (.mostRecent, restored), (.ours, nil)] {
                for (x, y) in [(a, b), (b, a)] {
                    let flipped = strategy == .mostRecent || x.id == a.id ? strategy : (strategy == .ours ? .theirs : .ours)
                    let (version, _) = try merged(try await store.merge(x.id, y.id, strategy: flipped))
                    #expect(try await store.value(Task.self, id: "t", at: version.id) == expected, "\(strategy)")
                    #expect(version.recordCount == (expected == nil ? 0 : 3))
                }
            }
            #expect(try await store.verify().isIntact)
        }
    }

    @Test(arguments: AdapterKind.allCases) func referenceToRecordDeletedOnTheOtherSide(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let root = try await store.change(on: nil) { try $0.save(Person(id: "p", name: "P")); try $0.save(Task(id: "t", title: "x", done: false)) }
            let a = try await store.change(on: root) { try $0.save(Task(id: "t", title: "x", done: false, owner: Ref(id: "p"))) }
            let b = try await store.change(on: root) { try $0.delete(Person.self, id: "p") }
            let (version, report) = try merged(try await store.merge(a.id, b.id, strategy: .manual))
            #expect(report.resolved.isEmpty)
            #expect(try await store.value(Task.self, id: "t", at: version.id)?.owner == Ref(id: "p"))
            #expect(try await store.value(Person.self, id: "p", at: version.id) == nil)
        }
    }

    @Test(arguments: AdapterKind.allCases) func fastForward(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let root = try await store.change(on: nil) { try $0.save(Task(id: "t", title: "x", done: false)) }
            let later = try await store.change(on: root) { try $0.save(Task(id: "t", title: "y", done: false)) }
            guard case .fastForward(let version) = try await store.merge(root.id, later.id) else { Issue.record("no fast-forward"); return }
            #expect(version.id == later.id)
            guard case .fastForward(let again) = try await store.merge(later.id, root.id) else { Issue.record("no fast-forward"); return }
            #expect(again.id == later.id)
            #expect(try await store.heads().map(\.id) == [later.id])
            guard case .fastForward(let single)? = try await store.mergeHeads() else { Issue.record("no fast-forward"); return }
            #expect(single.id == later.id)
            // Two versions older than the head fast-forward to one of them, which an ancestor
            // of the head, does not become a head beside it.
            let latest = try await store.change(on: later) { try $0.save(Task(id: "t", title: "z", done: false)) }
            guard case .fastForward = try await store.merge(root.id, later.id) else { Issue.record("no fast-forward"); return }
            #expect(try await store.heads().map(\.id) == [latest.id])
        }
    }

    @Test(arguments: AdapterKind.allCases) func unrelatedHistories(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let a = try await store.change(on: nil) { try $0.save(Task(id: "a", title: "A", done: false)); try $0.save(item("x", ["v": .int(1)])) }
            let b = try await store.change(on: nil) { try $0.save(Task(id: "b", title: "B", done: false)); try $0.save(item("x", ["v": .int(1)])) }
            #expect(try await store.heads().count == 2)
            guard case .merged(let version, let report)? = try await store.mergeHeads(strategy: .manual) else { Issue.record("no merge"); return }
            #expect(report.ancestor == nil)
            #expect(try await store.values(Task.self, at: version.id).map(\.id) == ["a", "b"])
            #expect(version.recordCount == 3)
            #expect(Set(version.parents) == [a.id, b.id])
            #expect(try await store.heads().map(\.id) == [version.id])
        }
    }

    @Test(arguments: AdapterKind.allCases) func crissCross(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let root = try await store.change(on: nil) { try $0.save(item("x", ["v": .int(0)])); try $0.save(item("y", ["v": .int(0)])) }
            let a1 = try await store.change(on: root) { try $0.save(item("x", ["v": .int(1)])) }
            let b1 = try await store.change(on: root) { try $0.save(item("y", ["v": .int(1)])) }
            // Two different merges of a1 and b1, each carrying on one side.
            var m1Changes = ChangeSet(); try m1Changes.save(item("x", ["v": .int(1)])); try m1Changes.save(item("y", ["v": .int(1)])); try m1Changes.save(item("m1", [:]))
            let m1 = try await store.commit(m1Changes, parents: [a1.id, b1.id])
            var m2Changes = ChangeSet(); try m2Changes.save(item("y", ["v": .int(1)])); try m2Changes.save(item("x", ["v": .int(1)])); try m2Changes.save(item("m2", [:]))
            let m2 = try await store.commit(m2Changes, parents: [b1.id, a1.id])
            let a2 = try await store.change(on: m1) { try $0.save(item("x", ["v": .int(2)])) }
            let b2 = try await store.change(on: m2) { try $0.save(item("z", [:])) }

            let ancestry = try await CommonAncestor.find(a2, b2, store: store)
            #expect(Set(ancestry.candidates.map(\.id)) == [a1.id, b1.id])
            #expect(ancestry.ancestor?.id == [a1, b1].sorted(by: Store.newestFirst).first?.id)
            let (version, report) = try merged(try await store.merge(a2.id, b2.id, strategy: .manual))
            #expect(report.resolved.isEmpty)
            let records = try await store.records(ofType: "Item", at: version.id)
            #expect(records.map(\.key.id) == ["m1", "m2", "x", "y", "z"])
            #expect(records.first { $0.key.id == "x" }?.properties["v"] == .int(2))
            #expect(try await store.merge(b2.id, a2.id, strategy: .manual).version?.id == version.id)
        }
    }

    @Test func clockRunningBehindStillWinsWhenCausallyLater() async throws {
        let backend = MemoryBackend()
        let ahead = Store(backend: backend, configuration: .init(replica: "ahead", clock: { Date(timeIntervalSince1970: 1_763_700_000) }))
        let behind = Store(backend: backend, configuration: .init(replica: "behind", clock: { Date(timeIntervalSince1970: 1_763_700_000 - 3600) }))
        let root = try await ahead.change(on: nil) { try $0.save(Task(id: "t", title: "base", done: false)) }
        let a1 = try await ahead.change(on: root) { try $0.save(Task(id: "t", title: "ahead", done: false)) }
        let seen = try await ahead.change(on: root) { try $0.save(Person(id: "p", name: "P")) }
        // The replica behind has seen `seen` and then renames the task: causally later than
        // `seen`, and later than a1 by the hybrid clock, though its wall clock says an hour earlier.
        let b1 = try await behind.change(on: seen) { try $0.save(Task(id: "t", title: "behind", done: false)) }
        #expect(b1.time > a1.time)
        let (version, _) = try merged(try await ahead.merge(a1.id, b1.id, strategy: .mostRecent))
        #expect(try await ahead.value(Task.self, id: "t", at: version.id)?.title == "behind")
        #expect(try await behind.merge(b1.id, a1.id, strategy: .mostRecent).version?.id == version.id)
    }

    /// Most-recent goes by each property's last change, not its record's: one side changes
    /// `title` and later `done`, the other changes `title` between the two; the other's `title`
    /// is the newer one. Across a merge commit too, which takes each property from a parent and
    /// changes none of them, though its record differs from both.
    @Test(arguments: AdapterKind.allCases) func mostRecentGoesByThePropertysLastChange(kind: AdapterKind) async throws {
        try await withStore(kind, strategy: .mostRecent) { store in
            let root = try await store.change(on: nil) { try $0.save(Task(id: "t", title: "base", done: false)) }
            let oursTitle = try await store.change(on: root) { try $0.save(Task(id: "t", title: "ours", done: false)) }
            let theirs = try await store.change(on: root) { try $0.save(Task(id: "t", title: "theirs", done: false)) }
            let oursDone = try await store.change(on: oursTitle) { try $0.save(Task(id: "t", title: "ours", done: true)) }
            for (a, b) in [(oursDone, theirs), (theirs, oursDone)] {
                let (version, _) = try merged(try await store.merge(a.id, b.id))
                #expect(try await store.value(Task.self, id: "t", at: version.id) == Task(id: "t", title: "theirs", done: true))
            }

            // Heads h1 (title, oldest) and h2 (done) merge first; h3 (title, newer than h1's)
            // and h4 (another record) merge next. The merge of h1 and h2 changed no title.
            let base = try await store.change(on: nil) { try $0.save(Task(id: "x", title: "base", done: false)) }
            let h1 = try await store.change(on: base) { try $0.save(Task(id: "x", title: "first", done: false)) }
            let h3 = try await store.change(on: base) { try $0.save(Task(id: "x", title: "second", done: false)) }
            let h2 = try await store.change(on: base) { try $0.save(Task(id: "x", title: "base", done: true)) }
            let h4 = try await store.change(on: base) { try $0.save(Person(id: "p", name: "p")) }
            let (m12, _) = try merged(try await store.merge(h1.id, h2.id))
            let (m34, _) = try merged(try await store.merge(h3.id, h4.id))
            let (final, _) = try merged(try await store.merge(m12.id, m34.id))
            #expect(try await store.value(Task.self, id: "x", at: final.id) == Task(id: "x", title: "second", done: true))
        }
    }

    /// In a criss-cross history whose candidates cannot be merged (a type overridden to manual
    /// conflicts between them), the newest candidate is the base, and ours holds a title that
    /// the older candidate set: no version of ours alone changed it. Theirs changed it after both
    /// candidates, and before ours' head was made: theirs' change is the newer.
    @Test func aValueInheritedFromBelowACrissCrossIsNotStampedWithTheHead() async throws {
        var resolvers = MergeResolvers()
        resolvers.register(Person.self, strategy: .manual)
        try await withStore(.memory, strategy: .mostRecent, resolvers: resolvers) { store in
            let root = try await store.change(on: nil) { try $0.save(Task(id: "t", title: "root", done: false)); try $0.save(Person(id: "p", name: "root")) }
            let c1 = try await store.change(on: root) { try $0.save(Task(id: "t", title: "old", done: false)); try $0.save(Person(id: "p", name: "c1")) }
            let c2 = try await store.change(on: root) { try $0.save(Person(id: "p", name: "c2")) }
            var note = ChangeSet()
            try note.save(Note(id: "b", text: "b"))
            let b = try await store.commit(note, parents: [c2.id, c1.id])
            let newer = try await store.change(on: b) { try $0.save(Task(id: "t", title: "new", done: false)) }
            note = ChangeSet()
            try note.save(Note(id: "a", text: "a"))
            let a = try await store.commit(note, parents: [c1.id, c2.id])
            #expect(a.time > newer.time)
            for (ours, theirs) in [(a, newer), (newer, a)] {
                let (version, _) = try merged(try await store.merge(ours.id, theirs.id))
                #expect(try await store.value(Task.self, id: "t", at: version.id)?.title == "new")
            }
        }
    }

    /// A replica whose clock runs behind edits a value it read at an older version, as
    /// `save(_:parents:)` advises, after it has received a newer change: its edit is the later
    /// one, and most-recent keeps it, though it builds on a version older than the change.
    @Test func clockRunningBehindWinsWhenBuildingOnAnOlderVersion() async throws {
        let backend = MemoryBackend()
        let ahead = Store(backend: backend, configuration: .init(replica: "ahead", clock: { Date(timeIntervalSince1970: 1_763_700_000) }))
        let behind = Store(backend: backend, configuration: .init(replica: "behind", clock: { Date(timeIntervalSince1970: 1_763_700_000 - 3600) }))
        let read = try await ahead.save(Task(id: "t", title: "base", done: false))
        let received = try await ahead.save(Task(id: "t", title: "ahead", done: false))
        let edited = try await behind.save(Task(id: "t", title: "behind", done: false), parents: [read.id])
        #expect(edited.time > received.time)
        guard case .merged(let version, _)? = try await behind.mergeHeads(strategy: .mostRecent) else { Issue.record("no merge"); return }
        #expect(try await behind.value(Task.self, id: "t", at: version.id)?.title == "behind")
    }

    /// What a resolver returns replaces its record's children too, whatever the strategy does
    /// with their own conflicts and whether their type sorts before or after the owner's
    /// (most-recent settled them after the resolver ran; ours and theirs did for child types
    /// sorting after the owner's).
    @Test(arguments: [MergeStrategy.mostRecent, .ours, .theirs]) func aResolversChildrenWin(strategy: MergeStrategy) async throws {
        var resolvers = MergeResolvers()
        resolvers.register(ResolverOwner.self) { _, ours, _ in
            var merged = ours
            merged.title = "resolved"
            merged.parts = merged.parts.map { ResolverPart(id: $0.id, text: "resolved") }
            return merged
        }
        try await withStore(.memory, strategy: strategy, resolvers: resolvers) { store in
            let root = try await store.change(on: nil) { try $0.save(ResolverOwner(id: "o", title: "base", parts: [ResolverPart(id: "p", text: "base")])) }
            let a = try await store.change(on: root) { try $0.save(ResolverOwner(id: "o", title: "a", parts: [ResolverPart(id: "p", text: "a")])) }
            let b = try await store.change(on: root) { try $0.save(ResolverOwner(id: "o", title: "b", parts: [ResolverPart(id: "p", text: "b")])) }
            for (ours, theirs) in [(a, b), (b, a)] {
                let (version, _) = try merged(try await store.merge(ours.id, theirs.id))
                #expect(try await store.value(ResolverOwner.self, id: "o", at: version.id)
                    == ResolverOwner(id: "o", title: "resolved", parts: [ResolverPart(id: "p", text: "resolved")]))
            }
        }
    }

    /// A resolver that leaves out a child both sides kept: the child goes, as the resolver
    /// said; the merge does not put it back where the ancestor held it.
    @Test func aChildAResolverLeavesOutGoes() async throws {
        var resolvers = MergeResolvers()
        resolvers.register(ResolverOwner.self) { _, ours, _ in
            var merged = ours
            merged.title = "resolved"
            merged.parts.removeAll { $0.id == "dropped" }
            return merged
        }
        try await withStore(.memory, resolvers: resolvers) { store in
            let parts = [ResolverPart(id: "kept", text: "k"), ResolverPart(id: "dropped", text: "d")]
            let root = try await store.change(on: nil) { try $0.save(ResolverOwner(id: "o", title: "base", parts: parts)) }
            let a = try await store.change(on: root) { try $0.save(ResolverOwner(id: "o", title: "a", parts: parts)) }
            let b = try await store.change(on: root) { try $0.save(ResolverOwner(id: "o", title: "b", parts: parts)) }
            for (ours, theirs) in [(a, b), (b, a)] {
                let (version, _) = try merged(try await store.merge(ours.id, theirs.id))
                #expect(try await store.value(ResolverOwner.self, id: "o", at: version.id)?.parts.map(\.id) == ["kept"])
                #expect(try await store.record(RecordKey(type: "ResolverPart", id: "dropped"), at: version.id) == nil)
            }
        }
    }

    @Test func typeResolverAndOverride() async throws {
        var resolvers = MergeResolvers()
        resolvers.register(Task.self) { base, ours, theirs in
            var merged = ours
            merged.title = [ours.title, theirs.title].sorted().joined(separator: "+")
            merged.notes = (ours.notes + theirs.notes).filter { note in base?.notes.contains(note) != true }
            return merged
        }
        resolvers.register(Person.self, strategy: .ours)
        try await withStore(.memory, strategy: .theirs, resolvers: resolvers) { store in
            let root = try await store.change(on: nil) { try $0.save(Task(id: "t", title: "base", done: false)); try $0.save(Person(id: "p", name: "base")) }
            let a = try await store.change(on: root) { try $0.save(Task(id: "t", title: "b", done: false, notes: [Note(id: "n1", text: "1")])); try $0.save(Person(id: "p", name: "ours")) }
            let b = try await store.change(on: root) { try $0.save(Task(id: "t", title: "a", done: true)); try $0.save(Person(id: "p", name: "theirs")) }
            let (version, report) = try merged(try await store.merge(a.id, b.id))
            #expect(report.resolved.count == 2)
            #expect(try await store.value(Task.self, id: "t", at: version.id) == Task(id: "t", title: "a+b", done: false, notes: [Note(id: "n1", text: "1")]))
            #expect(try await store.value(Person.self, id: "p", at: version.id)?.name == "ours")
            // An explicit manual merge ignores the overrides.
            guard case .conflicts(let conflicts) = try await store.merge(a.id, b.id, strategy: .manual) else { Issue.record("no conflicts"); return }
            #expect(conflicts.map(\.property) == ["name", "title"])
        }
    }

    /// `sync(with:strategy: .ours)` keeps this store's side of a conflict, `.theirs` the other's,
    /// whichever head's hash sorts first (merging the heads alone picks by hash).
    /// Two replicas in memory that share task `t` and each retitle it ("edited on 0", "on 1").
    func replicasEditingOneTitle() async throws -> [Store] {
        let backends = [MemoryBackend(), MemoryBackend()]
        let stores = backends.map { Store(backend: $0, configuration: .init(replica: "r")) }
        let root = try await stores[0].change(on: nil) { try $0.save(Task(id: "t", title: "base", done: false)) }
        try await sync(from: backends[0], to: backends[1])
        for (index, store) in stores.enumerated() {
            try await store.change(on: root) { try $0.save(Task(id: "t", title: "edited on \(index)", done: false)) }
        }
        return stores
    }

    @Test func syncWithOursKeepsThisStoresSide() async throws {
        for strategy in [MergeStrategy.ours, .theirs] {
            for syncing in 0..<2 {
                let stores = try await replicasEditingOneTitle()
                let report = try await stores[syncing].sync(with: stores[1 - syncing], strategy: strategy)
                #expect(report.heads.count == 1)
                let kept = strategy == .ours ? syncing : 1 - syncing
                for store in stores { #expect(try await store.value(Task.self, id: "t")?.title == "edited on \(kept)") }
            }
        }
    }

    /// A manual sync that stops at a conflict reports this store's side as ours, whichever
    /// store's head hash sorts first.
    @Test func aManualSyncReportsThisStoresSideAsOurs() async throws {
        for syncing in 0..<2 {
            let stores = try await replicasEditingOneTitle()
            let report = try await stores[syncing].sync(with: stores[1 - syncing], strategy: .manual)
            #expect(report.conflicts.map(\.property) == ["title"])
            #expect(report.conflicts.first?.ours == .string("edited on \(syncing)"))
            #expect(report.conflicts.first?.theirs == .string("edited on \(1 - syncing)"))
            #expect(report.heads.count == 2)
        }
    }

    /// A type overridden to `.ours` keeps this store's side in a sync too, whatever the strategy.
    @Test func syncKeepsThisStoresSideForATypeOverriddenToOurs() async throws {
        var resolvers = MergeResolvers()
        resolvers.register(Person.self, strategy: .ours)
        for syncing in 0..<2 {
            let backends = [MemoryBackend(), MemoryBackend()]
            let stores = backends.map { Store(backend: $0, configuration: .init(replica: "r", mergeResolvers: resolvers)) }
            let root = try await stores[0].change(on: nil) { try $0.save(Person(id: "p", name: "base")) }
            try await sync(from: backends[0], to: backends[1])
            for (index, store) in stores.enumerated() {
                try await store.change(on: root) { try $0.save(Person(id: "p", name: "named on \(index)")) }
            }
            try await stores[syncing].sync(with: stores[1 - syncing])
            for store in stores { #expect(try await store.value(Person.self, id: "p")?.name == "named on \(syncing)") }
        }
    }

    /// A configured `.manual` lets the configured per-type overrides settle their conflicts and
    /// stops at the rest; an explicit one stops at all (``typeResolverAndOverride()``).
    @Test func aConfiguredManualStrategyKeepsTheOverrides() async throws {
        var resolvers = MergeResolvers()
        resolvers.register(Person.self, strategy: .theirs)
        try await withStore(.memory, strategy: .manual, resolvers: resolvers) { store in
            let root = try await store.change(on: nil) { try $0.save(Task(id: "t", title: "base", done: false)); try $0.save(Person(id: "p", name: "base")) }
            let a = try await store.change(on: root) { try $0.save(Person(id: "p", name: "a")) }
            let b = try await store.change(on: root) { try $0.save(Person(id: "p", name: "b")) }
            let (version, report) = try merged(try await store.merge(a.id, b.id))
            #expect(report.resolved.map(\.property) == ["name"])
            #expect(try await store.value(Person.self, id: "p", at: version.id)?.name == "b")
            let c = try await store.change(on: root) { try $0.save(Task(id: "t", title: "c", done: false)); try $0.save(Person(id: "p", name: "c")) }
            let d = try await store.change(on: root) { try $0.save(Task(id: "t", title: "d", done: false)); try $0.save(Person(id: "p", name: "d")) }
            guard case .conflicts(let left) = try await store.merge(c.id, d.id) else { Issue.record("no conflicts"); return }
            #expect(left.map(\.property) == ["title"])
        }
    }

    /// A value edited from the version it was read at keeps a change committed meanwhile: the
    /// save builds on that version, and the merge of the two heads keeps both properties.
    @Test func anEditBuiltOnTheVersionReadKeepsAConcurrentChange() async throws {
        let store = Store(backend: MemoryBackend(), configuration: .init(replica: "r"))
        let read = try await store.save(Task(id: "t", title: "draft", done: false))
        var edited = try #require(try await store.value(Task.self, id: "t", at: read.id))
        try await store.save(Task(id: "t", title: "draft", done: true))  // meanwhile, elsewhere
        edited.title = "final"
        try await store.save(edited, parents: [read.id])
        #expect(try await store.heads().count == 2)
        try await store.mergeHeads()
        #expect(try await store.value(Task.self, id: "t") == Task(id: "t", title: "final", done: true))
    }

    @Test func sameHeadsGiveTheSameCommitInAnotherStore() async throws {
        let first = MemoryBackend()
        let one = Store(backend: first, configuration: .init(replica: "one"))
        let (_, a, b) = try await fork(one, ours: { try $0.save(Task(id: "t", title: "ours", done: false)) },
                                       theirs: { try $0.save(Task(id: "t", title: "base", done: true)); try $0.save(Person(id: "p", name: "P")) })
        let second = MemoryBackend()
        try await sync(from: first, to: second)
        let two = Store(backend: second, configuration: .init(replica: "two", clock: { Date(timeIntervalSince1970: 0) }))
        let here = try await one.merge(a.id, b.id).version
        let there = try await two.merge(b.id, a.id).version
        #expect(here != nil && here?.id == there?.id)
        #expect(try await first.get(here!.id) == second.get(there!.id))
    }

    @Test func threeReplicasConvergeWhateverTheOrder() async throws {
        let backends = [MemoryBackend(), MemoryBackend(), MemoryBackend()]
        let stores = backends.enumerated().map { index, backend in
            let clock = TickClock(start: 1_763_700_000 + Double(index) * 0.25)
            return Store(backend: backend, configuration: .init(replica: "r\(index)", clock: { clock.read() }))
        }
        let root = try await stores[0].change(on: nil) { for id in ["x", "y", "z"] { try $0.save(item(id, ["v": .int(0), "w": .int(0)])) } }
        for backend in backends.dropFirst() { try await sync(from: backends[0], to: backend) }
        for (index, store) in stores.enumerated() {
            try await store.change(on: root) { try $0.save(item(["x", "y", "z"][index], ["v": .int(Int64(index) + 1), "w": .int(0)])); try $0.save(item("shared", ["v": .int(Int64(index))])) }
            try await store.change(on: try await store.head()) { try $0.save(item("x", ["v": .int(0), "w": .int(Int64(index) + 7)])) }
        }
        // Pairwise merges in different orders...
        try await sync(from: backends[1], to: backends[0]); try await stores[0].mergeHeads()
        try await sync(from: backends[2], to: backends[1]); try await stores[1].mergeHeads()
        try await sync(from: backends[0], to: backends[2]); try await stores[2].mergeHeads()
        // ... then everyone syncs with everyone and merges what they have.
        try await sync(from: backends[1], to: backends[0]); try await sync(from: backends[2], to: backends[0])
        for backend in backends.dropFirst() { try await sync(from: backends[0], to: backend) }
        var finals = [Hash]()
        for store in stores { finals.append(try #require(try await store.mergeHeads()?.version?.id)) }
        #expect(Set(finals).count == 1)
        for store in stores { #expect(try await store.heads().map(\.id) == [finals[0]]) }
    }

    /// Many heads merge into one as a tournament of pairs: every change kept, the conflicts
    /// settled by the strategy as one at a time would (for `ours`, the lowest head's value;
    /// for `theirs`, the highest's), and two replicas with the same heads reach the same commit.
    @Test(arguments: [MergeStrategy.mostRecent, .ours, .theirs]) func manyHeadsMergeIntoOne(strategy: MergeStrategy) async throws {
        let first = MemoryBackend()
        let one = Store.ticking(replica: "one", backend: first, strategy: strategy)
        let root = try await one.change(on: nil) { try $0.save(item("shared", ["v": .int(0)])) }
        var heads = [Version]()
        for index in 0..<13 {
            heads.append(try await one.change(on: root) {
                try $0.save(item("own-\(index)", ["v": .int(Int64(index))]))
                try $0.save(item("shared", ["v": .int(Int64(index) + 100)]))
            })
        }
        let second = MemoryBackend()
        try await sync(from: first, to: second)
        let two = Store(backend: second, configuration: .init(replica: "two", clock: { Date(timeIntervalSince1970: 0) }, mergeStrategy: strategy))

        let (version, report) = try merged(try #require(try await one.mergeHeads()))
        #expect(try await one.heads().map(\.id) == [version.id])
        #expect(version.recordCount == 14)
        #expect(report.changed.count == 14 && report.changed == report.changed.sorted())
        let sorted = heads.sorted { $0.id < $1.id }
        let winner: Version = switch strategy {
        case .ours: sorted.first!
        case .theirs: sorted.last!
        default: heads.last!
        }
        let shared = try await one.record(RecordKey(type: "Item", id: "shared"))
        #expect(shared == (try await one.record(RecordKey(type: "Item", id: "shared"), at: winner.id)))
        #expect(try await two.mergeHeads()?.version?.id == version.id, "the other replica makes the same commit")
    }

    @Test(arguments: [UInt64(1), 2, 3, 4, 5]) func randomEditsMergeTheSameBothWays(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let left = MemoryBackend(), right = MemoryBackend()
        let clockA = TickClock(), clockB = TickClock(start: 1_763_700_000.5)
        let a = Store(backend: left, configuration: .init(replica: "a", clock: { clockA.read() }))
        let b = Store(backend: right, configuration: .init(replica: "b", clock: { clockB.read() }))
        let root = try await a.change(on: nil) { changes in
            for i in 0..<20 { try changes.save(item("i\(i)", ["p": .int(0), "q": .int(0)])) }
        }
        try await sync(from: left, to: right)
        for store in [a, b] {
            for _ in 0..<8 {
                let head = try await store.head()
                var changes = ChangeSet()
                for _ in 0..<3 {
                    let id = "i\(Int.random(in: 0..<25, using: &random))"
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0: changes.delete(itemKey(id))
                    default:
                        let property = ["p", "q", "r"].randomElement(using: &random)!
                        var properties = try await store.record(itemKey(id), at: head?.id)?.properties ?? [:]
                        properties[property] = .int(Int64.random(in: 0..<5, using: &random))
                        try changes.save(item(id, properties))
                    }
                }
                try await store.commit(changes, parents: head.map { [$0.id] } ?? [])
            }
        }
        _ = root
        let headA = try #require(try await a.head()), headB = try #require(try await b.head())
        try await sync(from: left, to: right)
        try await sync(from: right, to: left)
        let here = try await a.merge(headA.id, headB.id, strategy: .mostRecent).version
        let there = try await b.merge(headB.id, headA.id, strategy: .mostRecent).version
        #expect(here != nil && here?.id == there?.id)
    }
}

/// An owner whose type name sorts before its children's.
struct ResolverOwner: Storable, Equatable {
    var id: String
    var title: String
    var parts: [ResolverPart]
}

struct ResolverPart: Storable, Equatable {
    var id: String
    var text: String
}

/// A value with an enum that has no raw type: stored as a map of its one case.
private struct Sketch: Storable, Equatable {
    enum Shape: Codable, Equatable {
        case none
        case circle(radius: Int)
        case square(side: Int)
    }
    var id: String
    var shape: Shape
}
