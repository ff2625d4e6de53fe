import Foundation
import Testing
@testable import Arbor

@Suite struct StoreTests {
    func withStore(_ kind: AdapterKind, _ body: (Store) async throws -> Void) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let store = Store(backend: backend, configuration: .init(replica: "test"))
        try await body(store)
        try await store.close()
    }

    /// One limit for every store, so that every engine can hold what any store committed: a
    /// record just over it is refused before anything is written, one at it is stored.
    @Test func aRecordOverTheSizeLimitIsRefusedAndNothingIsWritten() async throws {
        let backend = CountingBackend()
        let store = Store(backend: backend)
        let first = try await store.save(Person(id: "p", name: "kept"))
        // The encoding adds a few bytes of framing to the data (kind, length, property name).
        let data = Data(repeating: 1, count: Store.maximumRecordSize)
        backend.reset()
        await #expect { try await store.save(Attachment(id: "big", data: data)) } throws: { error in
            guard let error = error as? ArborError else { return false }
            return error.code == .invalidInput && error.message.contains("Attachment/big") && error.message.contains("256 MiB")
        }
        #expect(backend.objectsPut == 0)
        #expect(try await store.head()?.id == first.id)
        let fits = try await store.save(Attachment(id: "fits", data: data.prefix(Store.maximumRecordSize - 64)))
        #expect(fits.parents == [first.id])
    }

    /// A merge is held to the same limit: two sides that each grew a record to within it can
    /// merge into one over it, which is refused with nothing written and the heads as they were.
    @Test func aMergedRecordOverTheSizeLimitIsRefused() async throws {
        let backend = CountingBackend()
        let store = Store(backend: backend)
        let base = try await store.commit({ var c = ChangeSet(); try c.save(Record(type: "Doc", id: "d", properties: [:])); return c }())
        let half = PropertyValue.bytes([UInt8](repeating: 1, count: Store.maximumRecordSize / 2 + 1))
        var grown = [Hash]()
        for name in ["a", "b"] {
            var changes = ChangeSet()
            try changes.save(Record(type: "Doc", id: "d", properties: [name: half]))
            grown.append(try await store.commit(changes, parents: [base.id]).id)
        }
        let heads = try await store.heads().map(\.id)
        backend.reset()
        await #expect { try await store.mergeHeads(strategy: .mostRecent) } throws: { error in
            guard let error = error as? ArborError else { return false }
            return error.code == .invalidInput && error.message.contains("Doc/d") && error.message.contains("256 MiB")
        }
        #expect(backend.objectsPut == 0)
        #expect(Set(try await store.heads().map(\.id)) == Set(heads) && Set(heads) == Set(grown))
    }

    @Test(arguments: AdapterKind.allCases) func valueTreesRoundTrip(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let task = Task(id: "t1", title: "Write Arbor", done: false,
                            notes: [Note(id: "n1", text: "core", attachments: [Attachment(id: "a1", data: Data(repeating: 7, count: 3000))])],
                            owner: Ref(id: "p1"), pinned: Note(id: "n2", text: "pinned"))
            var changes = ChangeSet()
            try changes.save(task)
            try changes.save(Person(id: "p1", name: "Ada"))
            try changes.save(Everything(id: 5))
            let version = try await store.commit(changes, message: "first")
            #expect(version.recordCount == 6)
            #expect(try await store.value(Task.self, id: "t1") == task)
            #expect(try await store.value(Everything.self, id: 5) == Everything(id: 5))
            #expect(try await store.value(Task.self, id: "missing") == nil)
            #expect(try await store.values(Note.self).map(\.id) == ["n1", "n2"])
            // A large child (3 KB of data) lives in a blob object and still reads back.
            #expect(try await store.record(RecordKey(type: "Attachment", id: "a1"))?.properties["data"] == .bytes(Array(repeating: 7, count: 3000)))
        }
    }

    @Test(arguments: AdapterKind.allCases) func childrenAreOwnedAndReferencesAreNot(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            var task = Task(id: "t", title: "x", done: false, notes: [Note(id: "n1", text: "a", attachments: [Attachment(id: "a", data: Data())]), Note(id: "n2", text: "b")],
                            owner: Ref(id: "p"))
            var changes = ChangeSet()
            try changes.save(task)
            try changes.save(Person(id: "p", name: "Owner"))
            let first = try await store.commit(changes)

            // Dropping a child from the array deletes it (and what it owns) with the commit.
            task.notes.removeFirst()
            let second = try await store.save(task, message: "drop n1")
            #expect(try await store.record(RecordKey(type: "Note", id: "n1")) == nil)
            #expect(try await store.record(RecordKey(type: "Attachment", id: "a")) == nil)
            #expect(try await store.record(RecordKey(type: "Note", id: "n1"), at: first.id) != nil)
            #expect(second.recordCount == 3)

            // Deleting the parent deletes its children but not what it references.
            var deletion = ChangeSet()
            try deletion.delete(Task.self, id: "t")
            let third = try await store.commit(deletion)
            #expect(third.recordCount == 1)
            #expect(try await store.value(Person.self, id: "p") != nil)
            #expect(try await store.values(Note.self).isEmpty)
        }
    }

    @Test(arguments: AdapterKind.allCases) func ownershipWithinOneChangeSet(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let note = { (id: String) in Note(id: id, text: id) }
            // Saved with two notes, then saved again with one, in one change set: one note remains.
            var changes = ChangeSet()
            try changes.save(Task(id: "t", title: "a", done: false, notes: [note("n1"), note("n2")]))
            try changes.save(Task(id: "t", title: "b", done: false, notes: [note("n2")]))
            let first = try await store.commit(changes)
            #expect(try await store.values(Note.self).map(\.id) == ["n2"])
            #expect(first.recordCount == 2)

            // Saved and then deleted in one set: nothing of the tree remains, base children included.
            var again = ChangeSet()
            try again.save(Task(id: "t", title: "c", done: false, notes: [note("n2"), note("n3")]))
            try again.delete(Task.self, id: "t")
            let second = try await store.commit(again)
            #expect(second.recordCount == 0)

            // A raw record adopting an existing record as its child, then dropping it: the child goes.
            try await store.save(Note(id: "loose", text: "x"))
            try await store.commit({ var set = ChangeSet(); try set.save(Record(type: "Box", id: "b", properties: ["c": .child(RecordKey(type: "Note", id: "loose"))])); return set }())
            #expect(try await store.value(Note.self, id: "loose") != nil)
            try await store.commit({ var set = ChangeSet(); try set.save(Record(type: "Box", id: "b", properties: [:])); return set }())
            #expect(try await store.value(Note.self, id: "loose") == nil)

            // A child moved from one parent to another in one commit survives.
            try await store.save(Task(id: "p1", title: "", done: false, notes: [note("m")]))
            var move = ChangeSet()
            try move.save(Task(id: "p1", title: "", done: false, notes: []))
            try move.save(Task(id: "p2", title: "", done: false, notes: [note("m")]))
            try await store.commit(move)
            #expect(try await store.value(Task.self, id: "p2")?.notes.map(\.id) == ["m"])
        }
    }

    /// A commit in which one record lets a child go and another adopts it (raw records) used
    /// to delete the child: only the dropping record's own new children were counted as holding
    /// it. Likewise a record moved out of an orphaned tree kept its place but lost its children.
    @Test(arguments: AdapterKind.allCases) func aChildOneRecordDropsAndAnotherAdoptsInOneCommitStays(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            func record(_ type: String, _ id: String, children: [RecordKey] = []) -> Record {
                var properties: [String: PropertyValue] = ["text": .string(id)]
                for (index, child) in children.enumerated() { properties["c\(index)"] = .child(child) }
                return Record(type: type, id: id, properties: properties)
            }
            func commit(_ body: (inout ChangeSet) throws -> Void) async throws {
                var set = ChangeSet()
                try body(&set)
                try await store.commit(set)
            }
            let loose = RecordKey(type: "Note", id: "loose")
            try await commit { set in
                try set.save(record("Note", "loose"))
                try set.save(record("Box", "b1", children: [loose]))
            }
            // b1 lets it go, b2 adopts it; then b2 lets it go and b1 is deleted as b3 adopts it.
            try await commit { set in
                try set.save(record("Box", "b1"))
                try set.save(record("Box", "b2", children: [loose]))
            }
            #expect(try await store.snapshot().record(loose) != nil)
            try await commit { set in try set.save(record("Box", "b2", children: [loose])) }
            try await commit { set in
                try set.save(record("Box", "b2"))
                set.delete(RecordKey(type: "Box", id: "b1"))
                try set.save(record("Box", "b3", children: [loose]))
            }
            #expect(try await store.snapshot().record(loose) != nil)

            // An orphaned tree top → middle → kept → leaf, with `kept` saved again under a new
            // parent in the same commit: top and middle go, kept and its leaf stay.
            let (top, middle, kept, leaf) = (RecordKey(type: "N", id: "top"), RecordKey(type: "N", id: "middle"), RecordKey(type: "N", id: "kept"), RecordKey(type: "N", id: "leaf"))
            try await commit { set in
                try set.save(record("N", "leaf"))
                try set.save(record("N", "kept", children: [leaf]))
                try set.save(record("N", "middle", children: [kept]))
                try set.save(record("N", "top", children: [middle]))
            }
            try await commit { set in
                set.delete(top)
                try set.save(record("N", "kept", children: [leaf]))
                try set.save(record("Box", "holder", children: [kept]))
            }
            let after = try await store.snapshot()
            #expect(try await after.record(top) == nil)
            #expect(try await after.record(middle) == nil)
            #expect(try await after.record(kept) != nil)
            #expect(try await after.record(leaf) != nil)
            #expect(try await store.verify().isIntact)
        }
    }

    /// A key no record can have is refused by reads as by writes: `Task\0t1` / `x` has the
    /// index key of `Task` / `t1\0x`, which it used to read (and list, by type).
    @Test func readsRefuseKeysNoRecordCanHave() async throws {
        let store = Store(backend: MemoryBackend())
        var changes = ChangeSet()
        try changes.save(Record(type: "Task", id: "t1\0x", properties: ["n": .int(1)]))
        try await store.commit(changes)
        let snapshot = try await store.snapshot()
        #expect(try await snapshot.record(RecordKey(type: "Task", id: "t1\0x")) != nil)
        let aliased = RecordKey(type: "Task\0t1", id: "x")
        await #expect { try await snapshot.record(aliased) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        await #expect { try await snapshot.records([aliased]) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        await #expect { try await snapshot.records(ofType: "Task\0t1") } throws: { ($0 as? ArborError)?.code == .invalidInput }
        #expect(try await snapshot.records(ofType: "Task").count == 1)
    }

    @Test(arguments: AdapterKind.allCases) func historyLogAndDiff(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let v1 = try await store.save(Task(id: "t", title: "draft", done: false), message: "v1")
            let v2 = try await store.save(Person(id: "p", name: "Bob"), message: "v2")
            let v3 = try await store.save(Task(id: "t", title: "final", done: true), message: "v3")
            let log = try await store.log()
            #expect(log.map(\.id) == [v3.id, v2.id, v1.id])
            #expect(log.map(\.message) == ["v3", "v2", "v1"])
            #expect(v2.parents == [v1.id] && v3.parents == [v2.id])
            #expect(v3.time > v2.time && v2.time > v1.time)

            #expect(try await store.history(of: RecordKey(type: "Task", id: "t")).map(\.id) == [v3.id, v1.id])
            #expect(try await store.history(of: RecordKey(type: "Person", id: "p")).map(\.id) == [v2.id])

            let diff = try await store.diff(from: v1.id, to: v3.id)
            #expect(diff.map(\.key.description) == ["Person/p", "Task/t"])
            #expect(diff[0].kind == .added)
            #expect(diff[1].kind == .modified)
            #expect(diff[1].properties == [
                PropertyChange(name: "done", old: .bool(false), new: .bool(true)),
                PropertyChange(name: "title", old: .string("draft"), new: .string("final")),
            ])
            #expect(try await store.diff(from: v3.id, to: v1.id).first?.kind == .removed)
            #expect(try await store.diff(from: v2.id, to: v2.id).isEmpty)
            #expect(try await store.changes(in: v1.id).map(\.kind) == [.added])

            // Old versions stay readable.
            #expect(try await store.value(Task.self, id: "t", at: v1.id)?.title == "draft")

            // Versions resolve by unique prefix and HEAD.
            #expect(try await store.resolve(String(v2.id.hex.prefix(10))).id == v2.id)
            #expect(try await store.resolve("HEAD").id == v3.id)
            #expect(try await store.resolve("HEAD~").id == v2.id)
            #expect(try await store.resolve("HEAD~2").id == v1.id)
            #expect(try await store.resolve(String(v3.id.hex.prefix(8)) + "~1").id == v2.id)
            await #expect { try await store.resolve("HEAD~3") } throws: { ($0 as? ArborError)?.code == .unknownVersion }
            await #expect { try await store.resolve("HEAD~x") } throws: { ($0 as? ArborError)?.code == .unknownVersion }
            await #expect { try await store.resolve("zzzz") } throws: { ($0 as? ArborError)?.code == .unknownVersion }
            await #expect { try await store.resolve("ab") } throws: { ($0 as? ArborError)?.code == .unknownVersion }
            // The hash of another object (here an index root) names no version, as an absent hash.
            await #expect { try await store.resolve(v3.root.hex) } throws: { ($0 as? ArborError)?.code == .unknownVersion }
            await #expect { try await store.resolve(String(repeating: "0", count: 64)) } throws: { ($0 as? ArborError)?.code == .unknownVersion }
            // So do the calls that take a version's hash: a wrong argument, not a damaged store.
            let notAVersion = { (error: any Error) in (error as? ArborError)?.code == .unknownVersion && "\(error)".contains("not a version") }
            await #expect { try await store.version(v3.root) } throws: { notAVersion($0) }
            await #expect { try await store.snapshot(at: v3.root) } throws: { notAVersion($0) }
            await #expect { try await store.diff(from: v1.id, to: v3.root) } throws: { notAVersion($0) }
            await #expect { try await store.log(from: [v3.root]) } throws: { notAVersion($0) }
            await #expect { try await store.merge(v1.id, v3.root) } throws: { notAVersion($0) }
            await #expect { try await store.commit(ChangeSet(), parents: [v3.id, v3.root]) } throws: { notAVersion($0) }
        }
    }

    @Test(arguments: AdapterKind.allCases) func snapshotsReadOneVersion(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let empty = try await store.snapshot()
            #expect(empty.version == nil)
            #expect(try await empty.record(RecordKey(type: "Task", id: "t")) == nil)
            #expect(try await empty.values(Task.self).isEmpty)
            // HEAD of a store without versions is its empty state; any other name is unknown.
            #expect(try await store.snapshot(at: " head ").version == nil)
            await #expect { try await store.snapshot(at: "HEAD~1") } throws: { ($0 as? ArborError)?.code == .unknownVersion }

            let v1 = try await store.save(Task(id: "t", title: "one", done: false, notes: [Note(id: "n", text: "x")]))
            let snapshot = try await store.snapshot()
            _ = try await store.save(Task(id: "t", title: "two", done: true))
            // A snapshot keeps reading the version it was opened on.
            #expect(snapshot.version?.id == v1.id)
            #expect(try await snapshot.value(Task.self, id: "t")?.notes.map(\.id) == ["n"])
            #expect(try await snapshot.records(ofType: "Note").count == 1)
            #expect(try await snapshot.records([RecordKey(type: "Task", id: "t"), RecordKey(type: "Task", id: "x")]).count == 1)
            #expect(try await store.snapshot().value(Task.self, id: "t")?.title == "two")
            #expect(try await store.snapshot(at: v1.id).record(RecordKey(type: "Task", id: "t"))?.properties["title"] == .string("one"))
            // By name, as resolve takes it.
            #expect(try await store.snapshot(at: "HEAD~1").version?.id == v1.id)
            #expect(try await store.snapshot(at: String(v1.id.hex.prefix(8))).value(Task.self, id: "t")?.title == "one")
            #expect(try await store.snapshot(at: "HEAD").value(Task.self, id: "t")?.title == "two")
        }
    }

    @Test(arguments: AdapterKind.allCases) func twoWritersOnOneParentLeaveTwoHeads(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let base = try await Store(backend: backend).save(Person(id: "p", name: "base"))
        // Two stores (two replicas) write concurrently on the same parent.
        let a = Store(backend: backend, configuration: .init(replica: "a"))
        let b = Store(backend: backend, configuration: .init(replica: "b"))
        var changesA = ChangeSet(), changesB = ChangeSet()
        try changesA.save(Person(id: "p", name: "from a"))
        try changesB.save(Person(id: "q", name: "from b"))
        async let commitA = a.commit(changesA, parents: [base.id])
        async let commitB = b.commit(changesB, parents: [base.id])
        let (va, vb) = try await (commitA, commitB)
        let heads = Set(try await a.heads().map(\.id))
        #expect(heads == [va.id, vb.id])
        #expect(try await a.log().count == 3)
    }

    @Test(arguments: AdapterKind.allCases) func manyConcurrentWritersLoseNothing(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let writers = 8, commitsEach = 10
        let made = try await withThrowingTaskGroup(of: [Hash].self) { group in
            for writer in 0..<writers {
                group.addTask {
                    let store = Store(backend: backend, configuration: .init(replica: "w\(writer)"))
                    var ids = [Hash]()
                    for index in 0..<commitsEach {
                        ids.append(try await store.save(Person(id: "w\(writer)-\(index)", name: "x")).id)
                    }
                    return ids
                }
            }
            return try await group.reduce(into: [Hash]()) { $0 += $1 }
        }
        let reachable = Set(try await Store(backend: backend).log().map(\.id))
        #expect(reachable.isSuperset(of: made))
        #expect(made.count == writers * commitsEach)
    }

    @Test(arguments: AdapterKind.allCases) func corruptObjectsAreReportedNotCrashed(kind: AdapterKind) async throws {
        try await withStore(kind) { store in
            let version = try await store.save(Person(id: "p", name: "x"))
            // Replace the root node's bytes under its hash.
            try await store.backend.delete([version.root])
            await #expect { try await Store(backend: store.backend).value(Person.self, id: "p") } throws: { error in
                (error as? ArborError)?.code == .missingObject
            }
            try await store.backend.put([(version.root, [0xA1, 0x01, 0x00])])
            await #expect { try await Store(backend: store.backend).value(Person.self, id: "p") } throws: { error in
                (error as? ArborError)?.code == .corruptObject && "\(error)".contains(version.root.hex)
            }
        }
    }

    @Test func badValuesAreRefusedBeforeAnythingIsWritten() async throws {
        let backend = CountingBackend()
        let store = Store(backend: backend)
        var changes = ChangeSet()
        try changes.save(Record(type: "Task", id: "t", properties: ["note": .child(RecordKey(type: "Note", id: "nope"))]))
        await #expect { try await store.commit(changes) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        #expect(backend.objectsWritten == 0)
        #expect(try await store.heads().isEmpty)
        var copy = ChangeSet()
        #expect { try copy.save(Record(type: "", id: "x", properties: [:])) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        #expect { try copy.save(Record(type: "A\u{0}B", id: "x", properties: [:])) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        // A deletion of a key no record can have is refused too: such a key has no place in the
        // index's order.
        copy.delete(RecordKey(type: "A\u{0}B", id: "x"))
        await #expect { try await store.commit(copy) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        #expect(backend.objectsWritten == 0)
    }

    /// What a store could not read back is refused before anything is written, instead of
    /// becoming a head that makes the store unreadable: more parents than a version names (and
    /// a parent named twice is named once), and a record whose values nest 64 levels deep (from
    /// a `Record` or a merge resolver; values encoded from `Storable` types are checked as they
    /// are encoded).
    @Test func whatCouldNotBeReadBackIsRefusedUnwritten() async throws {
        let backend = CountingBackend()
        let store = Store(backend: backend)
        let first = try await store.save(Person(id: "p", name: "a"))
        let twice = try await store.commit(ChangeSet(), parents: Array(repeating: first.id, count: 65))
        #expect(twice.parents == [first.id])
        var many = [first.id]
        for index in 0..<64 { many.append(try await store.commit(ChangeSet(), message: "\(index)", parents: [first.id]).id) }
        let written = backend.objectsWritten
        await #expect { try await store.commit(ChangeSet(), parents: many) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        #expect(backend.objectsWritten == written)
        #expect(try await store.heads().count == 65)

        var deep = PropertyValue.null
        for _ in 0..<ByteReader.maximumValueDepth { deep = .array([deep]) }
        var changes = ChangeSet()
        #expect { try changes.save(Record(type: "T", id: "x", properties: ["p": deep])) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        guard case .array(let shallower) = deep else { return }
        try changes.save(Record(type: "T", id: "x", properties: ["p": shallower[0]]))
        let version = try await store.commit(changes)
        #expect(try await store.record(RecordKey(type: "T", id: "x"), at: version.id)?.properties["p"] == shallower[0])

        // A child whose type name holds a NUL shares its index key with another record's
        // ("A\0B"/"c" and "A"/"B\0c"): the commit would find that one, every read none.
        var sharing = ChangeSet()
        try sharing.save(Record(type: "A", id: "B\u{0}c", properties: [:]))
        #expect { try sharing.save(Record(type: "P", id: "p", properties: ["c": .child(RecordKey(type: "A\u{0}B", id: "c"))])) } throws: { error in
            (error as? ArborError)?.code == .invalidInput && "\(error)".contains("names child")
        }
    }

    @Test func aLogFromAHeadGivenTwiceListsEachVersionOnce() async throws {
        let store = Store(backend: MemoryBackend())
        try await store.save(Person(id: "p", name: "one"))
        let head = try await store.save(Person(id: "p", name: "two"))
        #expect(try await store.log(from: [head.id, head.id]).count == 2)
    }

    /// A change set is put in the index's order by its record keys: keys whose types are prefixes
    /// of each other, ids with a NUL or outside ASCII, given in any order, make the same index as
    /// the records committed one at a time.
    @Test func aChangeSetInAnyOrderMakesTheIndexOfOneRecordAtATime() async throws {
        var keys = [RecordKey]()
        for type in ["A", "AB", "A B", "Ä", "a"] {
            for id in ["", "1", "10", "2", "a\u{0}b", "a", "é", "e\u{301}", "ζ", "😀"] { keys.append(RecordKey(type: type, id: id)) }
        }
        var generator = SeededGenerator(seed: 7)
        var together = ChangeSet()
        for key in keys.shuffled(using: &generator) {
            try together.save(Record(type: key.type, id: key.id, properties: ["name": .string(key.description)]))
        }
        together.delete(RecordKey(type: "AB", id: "absent"))
        let oneCommit = try await Store(backend: MemoryBackend()).commit(together)

        let store = Store(backend: MemoryBackend())
        var last: Version?
        for key in keys {
            var one = ChangeSet()
            try one.save(Record(type: key.type, id: key.id, properties: ["name": .string(key.description)]))
            last = try await store.commit(one)
        }
        #expect(oneCommit.root == last?.root)
        #expect(oneCommit.recordCount == UInt64(keys.count))
    }

    @Test func commitTimesFollowAHybridClock() async throws {
        // A replica whose clock is far behind still produces versions later than their parents.
        let backend = MemoryBackend()
        let ahead = Store(backend: backend, configuration: .init(replica: "ahead", clock: { Date(timeIntervalSince1970: 2_000_000_000) }))
        let behind = Store(backend: backend, configuration: .init(replica: "behind", clock: { Date(timeIntervalSince1970: 1_000_000_000) }))
        let first = try await ahead.save(Person(id: "p", name: "a"))
        let second = try await behind.save(Person(id: "p", name: "b"))
        #expect(second.parents == [first.id])
        #expect(second.time > first.time)
        #expect(second.time.milliseconds == first.time.milliseconds && second.time.counter == 1)
    }

    /// A clock the application supplies may say anything: before 1970, NaN, past the end of
    /// `UInt64` milliseconds, infinity. Commits clamp it (an infinite date used to trap).
    @Test func anyClockReadingMakesACommit() async throws {
        for (reading, milliseconds) in [(-5.0, UInt64(0)), (.nan, 0), (1e300, .max), (.infinity, .max)] {
            let store = Store(backend: MemoryBackend(), configuration: .init(replica: "odd", clock: { Date(timeIntervalSince1970: reading) }))
            let version = try await store.save(Person(id: "p", name: "a"))
            #expect(version.time.milliseconds == milliseconds)
            #expect(try await store.save(Person(id: "p", name: "b")).time > version.time)
        }
    }
}

@Suite struct StreamedDiffTests {
    /// A diff handed out in batches: the same changes as the whole diff, in key order, each
    /// batch within the size asked for, and the walk's leaves not kept by the operation.
    @Test func batchesMakeTheWholeDiff() async throws {
        let store = Store(backend: MemoryBackend(), configuration: .init(replica: "x"))
        var first = ChangeSet()
        for index in stride(from: 0, to: 3_000, by: 2) { try first.save(Task(id: String(format: "%05d", index), title: "even", done: false)) }
        let v1 = try await store.commit(first)
        var second = ChangeSet()
        for index in stride(from: 1, to: 3_000, by: 2) { try second.save(Task(id: String(format: "%05d", index), title: "odd", done: false)) }
        for index in stride(from: 0, to: 3_000, by: 6) { try second.save(Task(id: String(format: "%05d", index), title: "changed", done: true)) }
        for index in stride(from: 2, to: 3_000, by: 6) { second.delete(RecordKey(type: Task.typeName, id: String(format: "%05d", index))) }
        let v2 = try await store.commit(second)

        let whole = try await store.diff(from: v1.id, to: v2.id)
        #expect(whole.count == 1_500 + 500 + 500)
        for batchSize in [1, 7, 1_000, 10_000] {
            var batches = [[RecordChange]]()
            try await store.diff(from: v1.id, to: v2.id, batchSize: batchSize) { batches.append($0) }
            #expect(batches.allSatisfy { !$0.isEmpty && $0.count <= batchSize })
            #expect(batches.count == (whole.count + batchSize - 1) / batchSize)
            #expect(batches.flatMap { $0 } == whole)
        }
        var fromEmpty = 0
        try await store.diff(from: nil, to: v2.id, batchSize: 100) { fromEmpty += $0.count }
        #expect(fromEmpty == v2.recordCount)
        await #expect(throws: ArborError.self) { try await store.diff(from: v1.id, to: v2.id, batchSize: 0) { _ in } }
    }

    /// Without remembering, a diff's walk reads each leaf from the store's bounded caches and
    /// keeps none itself: a source that remembers holds every node it read.
    @Test func aStreamedWalkKeepsNoNodes() async throws {
        let store = Store(backend: MemoryBackend(), configuration: .init(replica: "x"))
        var changes = ChangeSet()
        for index in 0..<2_000 { try changes.save(Task(id: String(format: "%05d", index), title: "t", done: false)) }
        let version = try await store.commit(changes)
        let root = try await store.version(version.id).root
        let remembering = store.makeSource()
        var count = 0
        try await ProllyTree.diff(Store.emptyRoot.hash, root, source: remembering, batchSize: 100) { count += $0.count }
        let forgetting = store.makeSource()
        try await ProllyTree.diff(Store.emptyRoot.hash, root, source: forgetting, batchSize: 100, remember: false) { count += $0.count }
        #expect(count == 4_000)
        #expect(remembering.rememberedBytesCount > 100)
        #expect(forgetting.rememberedBytesCount == 0)

        // One side only, as a merge's second diff keeps the base's nodes and not theirs'.
        let newSideForgotten = store.makeSource()
        #expect(try await ProllyTree.diff(Store.emptyRoot.hash, root, source: newSideForgotten, rememberNew: false).count == 2_000)
        #expect(newSideForgotten.rememberedBytesCount == 0)
        let oldSideKept = store.makeSource()
        #expect(try await ProllyTree.diff(root, Store.emptyRoot.hash, source: oldSideKept, rememberNew: false).count == 2_000)
        #expect(oldSideKept.rememberedBytesCount == remembering.rememberedBytesCount)
    }
}

@Suite struct RecordHistoryTests {
    /// A record's history over more versions than one batch of lookups, with a deletion, a
    /// re-addition and merges, is what reading the record at every version and its parents says.
    @Test func aLongHistoryMatchesReadingEveryVersion() async throws {
        let store = Store(backend: MemoryBackend(), configuration: .init(replica: "x"))
        let key = RecordKey(type: Task.typeName, id: "watched")
        var head: Version?
        var side: Version?
        for index in 0..<2_200 {
            var changes = ChangeSet()
            try changes.save(Task(id: "other-\(index % 50)", title: "edit \(index)", done: false))
            if index % 7 == 0 { try changes.save(Task(id: "watched", title: "title \(index / 7)", done: false)) }
            if index == 1_000 { changes.delete(key) }
            if index % 300 == 150 {
                // A side line off the head, merged back later: one edits the watched record.
                var branch = ChangeSet()
                try branch.save(Task(id: "watched", title: index % 600 == 150 ? "side \(index)" : "title \((index - 1) / 7)", done: true))
                side = try await store.commit(branch, message: "side", parents: head.map { [$0.id] })
            }
            head = try await store.commit(changes, message: "\(index)", parents: head.map { [$0.id] })
            if index % 300 == 299, let merging = side, let current = head {
                head = try await store.merge(current.id, merging.id, strategy: .ours).version
                side = nil
            }
        }
        let history = try await store.history(of: key, from: [head!.id])
        var expected = [Hash]()
        for version in try await store.log(from: [head!.id]) {
            let current = try await store.record(key, at: version.id)
            var parents = [Record?]()
            for parent in version.parents { parents.append(try await store.record(key, at: parent)) }
            if parents.isEmpty ? current != nil : parents.allSatisfy({ $0 != current }) { expected.append(version.id) }
        }
        #expect(expected.count > 300)
        #expect(history.map(\.id) == expected)
        // With a limit, the newest changes alone, the walk stopped once they are found.
        for limit in [0, 1, 5, 1_030, expected.count + 1] {
            #expect(try await store.history(of: key, from: [head!.id], limit: limit).map(\.id) == Array(expected.prefix(limit)))
        }
    }
}

@Suite struct RecordListingTests {
    /// Listing walks the index in key order, a leaf at a time, and keeps no node.
    @Test(arguments: AdapterKind.allCases) func everyRecordInKeyOrder(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let store = Store(backend: backend, configuration: .init(replica: "x"))
        var empty = [Record]()
        try await store.snapshot().forEachRecord { empty += $0 }
        #expect(empty.isEmpty, "a store without versions lists nothing")

        var changes = ChangeSet()
        for index in 0..<2_000 {
            try changes.save(Person(id: "p\(index)", name: "person \(index)"))
            if index % 4 == 0 { try changes.save(Task(id: "t\(index)", title: "task \(index)", done: false)) }
        }
        try changes.save(Attachment(id: "big", data: Data(repeating: 7, count: 4_000)))
        let first = try await store.commit(changes)
        var more = ChangeSet()
        try more.save(Person(id: "p-new", name: "added later"))
        more.delete(RecordKey(type: Person.typeName, id: "p0"))
        let second = try await store.commit(more)

        let snapshot = try await store.snapshot()
        var all = [Record](), batches = 0
        try await snapshot.forEachRecord { batch in
            #expect(!batch.isEmpty)
            batches += 1
            all += batch
        }
        #expect(all.count == Int(second.recordCount) && batches > 10)
        #expect(all.map(\.key) == all.map(\.key).sorted())
        #expect(all.first { $0.key.type == Attachment.typeName }?.properties["data"] == .bytes([UInt8](repeating: 7, count: 4_000)), "a blob record is read whole")
        var people = [Record]()
        try await snapshot.forEachRecord(ofType: Person.typeName) { people += $0 }
        #expect(people == (try await store.records(ofType: Person.typeName)))
        #expect(people.count == 2_000 && !people.contains { $0.key.id == "p0" })
        var none = 0
        try await snapshot.forEachRecord(ofType: "Nothing") { none += $0.count }
        #expect(none == 0)
        var older = [Record]()
        try await store.snapshot(at: first.id).forEachRecord(ofType: Person.typeName) { older += $0 }
        #expect(older.count == 2_000 && older.contains { $0.key.id == "p0" })

        let source = store.makeSource()
        try await ProllyTree.scan(prefix: [], root: second.root, source: source, remember: false) { _ in }
        #expect(source.rememberedNodesCount == 0 && source.rememberedBytesCount == 0)
        try await store.close()
    }
}

@Suite struct RootSplitTests {
    /// Inserting a boundary key before every key of a one-leaf index splits the root into a new
    /// leaf and the unchanged old one; both must be kept under the new root.
    @Test func insertingBeforeASingleLeafKeepsIt() async throws {
        let store = Store(backend: MemoryBackend(), configuration: .init(replica: "x"))
        var first = ChangeSet()
        try first.save(Task(id: "t", title: "base", done: false))
        try await store.commit(first)
        var second = ChangeSet()
        try second.save(Task(id: "a", title: "A", done: false))
        let version = try await store.commit(second)
        #expect(version.recordCount == 2)
        #expect(try await store.values(Task.self).map(\.id) == ["a", "t"])
    }
}
