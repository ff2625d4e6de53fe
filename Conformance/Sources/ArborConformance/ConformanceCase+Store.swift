import Arbor
import Foundation

extension ConformanceCase {
    /// The core's store API on the adapter: commit, read, diff, log, concurrent writers,
    /// persistence, and the same bytes as the in-memory reference adapter.
    static let storeCases: [ConformanceCase] = [
        ConformanceCase(.store, "point-reads", "each of 3,000 records reads back by a point read through a store that has read nothing yet, twice, at the head and at the version before; a missing key reads as nil") { context in
            let people = (0..<3_000).map { SuitePerson(id: String(format: "p%05d", $0 * 7 % 3_000), name: "Person \($0)") }
            let edited = Dictionary(uniqueKeysWithValues: people.prefix(100).map { ($0.id, SuitePerson(id: $0.id, name: $0.name + ", edited")) })
            let (first, second) = try await context.step("committing 3,000 records, then 100 edits") {
                let store = context.store()
                let first = try await store.change(on: nil, "people") { changes in for person in people { try changes.save(person) } }
                let second = try await store.change(on: first, "edits") { changes in for person in edited.values { try changes.save(person) } }
                return (first, second)
            }
            // A store with cold caches, as after opening: each leaf is first read and checked,
            // then read again, from wherever the store keeps it.
            let reader = context.store()
            for round in 1...2 {
                try await context.step("point reads, round \(round)") {
                    let head = try await reader.snapshot(at: second.id), before = try await reader.snapshot(at: first.id)
                    for person in people {
                        let key = RecordKey(type: SuitePerson.typeName, id: person.id)
                        let name = try await head.record(key)?.properties["name"]
                        try expectEqual(name, .string((edited[person.id] ?? person).name), "the name of \(person.id) at the head, round \(round)")
                        let old = try await before.record(key)?.properties["name"]
                        try expectEqual(old, .string(person.name), "the name of \(person.id) at the first version, round \(round)")
                    }
                    try expectEqual(try await head.record(RecordKey(type: SuitePerson.typeName, id: "p99999")), nil, "a key that was never saved")
                }
            }
        },

        ConformanceCase(.store, "commit-read", "value trees of every property kind commit and read back, at the head and at older versions") { context in
            let store = context.store()
            let attachment = SuiteAttachment(id: "a1", data: Data(repeating: 7, count: 3000))  // a blob: larger than a leaf entry
            let task = SuiteTask(id: "t1", title: "Write", done: false,
                                 notes: [SuiteNote(id: "n1", text: "core", attachments: [attachment]), SuiteNote(id: "n2", text: "tests")],
                                 owner: Ref(id: "p1"))
            let v1 = try await context.step("committing a value tree") {
                try await store.change(on: nil, "first") { changes in
                    try changes.save(task)
                    try changes.save(SuitePerson(id: "p1", name: "Ada"))
                    try changes.save(SuiteKinds(id: 5))
                }
            }
            try await context.step("reading it back") {
                try expectEqual(v1.recordCount, 6, "the records of the first version")
                try expectEqual(try await store.value(SuiteTask.self, id: "t1"), task, "the task read back")
                try expectEqual(try await store.value(SuiteKinds.self, id: 5), SuiteKinds(id: 5), "a value of every property kind read back")
                try expectEqual(try await store.value(SuiteTask.self, id: "missing"), nil, "a record that was never saved")
                try expectEqual(try await store.values(SuiteNote.self).map(\.id), ["n1", "n2"], "all values of one type")
                try expectEqual(try await store.records(ofType: "Attachment").first?.properties["data"], .bytes(Array(attachment.data)), "a record stored as a blob")
            }
            var edited = task
            edited.done = true
            edited.notes.removeFirst()
            let v2 = try await context.step("dropping a child and deleting a value") {
                try await store.change(on: v1, "second") { changes in
                    try changes.save(edited)
                    try changes.delete(SuiteKinds.self, id: 5)
                }
            }
            try await context.step("reading both versions") {
                try expectEqual(v2.recordCount, 3, "the records of the second version")
                try expectEqual(try await store.value(SuiteTask.self, id: "t1"), edited, "the edited task at the head")
                try expectEqual(try await store.value(SuiteAttachment.self, id: "a1"), nil, "a dropped child's own child at the head")
                try expectEqual(try await store.value(SuiteTask.self, id: "t1", at: v1.id), task, "the task at the first version")
                try expectEqual(try await store.snapshot(at: v1.id).values(SuiteNote.self).count, 2, "the notes of a snapshot of the first version")
                try expectEqual(try await store.heads().map(\.id), [v2.id], "the heads")
            }
        },

        ConformanceCase(.store, "diff-log", "diff, log, history and version names report exactly what changed") { context in
            let store = context.store()
            let (v1, v2, v3) = try await context.step("committing three versions") {
                (try await store.save(SuiteTask(id: "t", title: "draft", done: false), message: "v1"),
                 try await store.save(SuitePerson(id: "p", name: "Bob"), message: "v2"),
                 try await store.save(SuiteTask(id: "t", title: "final", done: true), message: "v3"))
            }
            try await context.step("reading the log and the history") {
                try expectEqual(try await store.log().map(\.id), [v3.id, v2.id, v1.id], "the log, newest first")
                try expectEqual(try await store.log(limit: 1).map(\.message), ["v3"], "the log limited to one")
                try expectEqual([v2.parents, v3.parents], [[v1.id], [v2.id]], "the parents")
                try expectEqual(try await store.history(of: RecordKey(type: "Task", id: "t")).map(\.id), [v3.id, v1.id], "the history of the task")
                try expectEqual(try await store.resolve("HEAD~2").id, v1.id, "HEAD~2")
                try expectEqual(try await store.resolve(String(v2.id.hex.prefix(10))).id, v2.id, "a hash prefix")
            }
            try await context.step("diffing") {
                let diff = try await store.diff(from: v1.id, to: v3.id)
                try expectEqual(diff.map(\.key.description), ["Person/p", "Task/t"], "the records changed from v1 to v3")
                try expectEqual(diff.map(\.kind), [.added, .modified], "how they changed")
                let properties = diff.last?.properties ?? []
                try expectEqual(properties.map(\.name), ["done", "title"], "the properties changed")
                try expectEqual(properties.map(\.old), [.bool(false), .string("draft")], "the old values of the properties changed")
                try expectEqual(properties.map(\.new), [.bool(true), .string("final")], "the new values of the properties changed")
                try expectEqual(try await store.diff(from: v3.id, to: v1.id).map(\.kind), [.removed, .modified], "the diff backwards")
                try expectEqual(try await store.diff(from: v2.id, to: v2.id).count, 0, "the diff of a version with itself")
                try expectEqual(try await store.changes(in: v1.id).map(\.kind), [.added], "the changes of the first version")
            }
        },

        ConformanceCase(.store, "concurrent-commits", "8 writers committing at once lose no commit, and the heads merge into one") { context in
            let writers = 8, commitsEach = 5
            let made = try await context.step("8 writers committing 5 versions each at once") {
                try await withThrowingTaskGroup(of: [Hash].self) { group in
                    for writer in 0..<writers {
                        let store = context.store(replica: "w\(writer)")
                        group.addTask {
                            var ids = [Hash]()
                            for index in 0..<commitsEach {
                                ids.append(try await store.save(SuitePerson(id: "w\(writer)-\(index)", name: "x")).id)
                            }
                            return ids
                        }
                    }
                    return try await group.reduce(into: [Hash]()) { $0 += $1 }
                }
            }
            let store = context.store()
            try await context.step("reading the history and merging the heads") {
                let reachable = Set(try await store.log().map(\.id))
                try expectEqual(reachable.intersection(made).count, writers * commitsEach, "commits reachable from the heads")
                let merged = try await store.mergeHeads()?.version
                try expectEqual(try await store.heads().map(\.id), merged.map { [$0.id] } ?? [], "the heads after merging them")
                try expectEqual(try await store.values(SuitePerson.self).count, writers * commitsEach, "records in the merged head")
            }
        },

        ConformanceCase(.store, "persistence", requires: .reopen, "versions, heads and records are all there after close and reopen, and commits go on from them") { context in
            let store = context.store()
            let (v1, v2) = try await context.step("committing two versions and closing") {
                let v1 = try await store.save(SuiteAttachment(id: "a", data: Data(repeating: 1, count: 5000)), message: "one")
                let v2 = try await store.save(SuiteTask(id: "t", title: "x", done: false, notes: [SuiteNote(id: "n", text: "y")]), message: "two")
                try await store.close()
                return (v1, v2)
            }
            let reopened = context.store(try await context.reopen())
            try await context.step("reading the reopened store") {
                try expectEqual(try await reopened.heads().map(\.id), [v2.id], "the heads after reopening")
                try expectEqual(try await reopened.log().map(\.id), [v2.id, v1.id], "the log after reopening")
                try expectEqual(try await reopened.value(SuiteAttachment.self, id: "a")?.data.count, 5000, "a blob record after reopening")
                try expectEqual(try await reopened.value(SuiteTask.self, id: "t")?.notes.map(\.id), ["n"], "a value tree after reopening")
                let v3 = try await reopened.save(SuitePerson(id: "p", name: "z"))
                try expectEqual(v3.parents, [v2.id], "the parent of a commit on the reopened store")
            }
        },

        ConformanceCase(.store, "reference-hashes", "the same commits make the same versions and objects, byte for byte, as on the in-memory reference adapter") { context in
            let reference = MemoryBackend()
            var histories = [[Hash]]()
            for backend in [context.backend, reference] {
                histories.append(try await context.step("committing the same history on \(backend.engineName)") {
                    try await ConformanceCase.referenceHistory(context.store(backend))
                })
            }
            try expectEqual(histories[0], histories[1], "the version hashes of the same commits as on the memory adapter")
            let (mine, theirs) = try await context.step("enumerating both stores") {
                (try await context.backend.allHashes(), try await reference.allHashes())
            }
            try expect(mine == theirs, "the objects of the same commits as on the memory adapter", expected: "the same \(theirs.count) hashes",
                       actual: "\(theirs.subtracting(mine).count) missing and \(mine.subtracting(theirs).count) others of \(mine.count)")
            let expected = try await context.step("reading every object") { try await reference.get(Array(theirs)) }
            try expectObjects(expected.map { ($0.key, $0.value) }, in: try await context.backend.get(Array(theirs)), "the bytes of every object, as on the memory adapter")
        },
        ConformanceCase(.store, "ancestry", "ancestry returns the asked objects and only their ancestors, nearest generations first, at most the limit") { context in
            let store = context.store()
            let backend = context.backend
            // v0 ← v1 ← … ← v11, a side line s1 ← s2 off v3, and a merge of v11 and s2.
            var line = [try await store.change(on: nil, "v0") { try $0.save(SuitePerson(id: "p", name: "0")) }]
            for index in 1...11 {
                line.append(try await store.change(on: line.last, "v\(index)") { try $0.save(SuitePerson(id: "p", name: "\(index)")) })
            }
            let s1 = try await store.change(on: line[3], "s1") { try $0.save(SuitePerson(id: "q", name: "s1")) }
            let s2 = try await store.change(on: s1, "s2") { try $0.save(SuitePerson(id: "q", name: "s2")) }
            var changes = ChangeSet()
            try changes.save(SuitePerson(id: "r", name: "merge"))
            let merge = try await store.commit(changes, message: "merge", parents: [line[11].id, s2.id])
            // Each version's distance from the merge, along the shortest path.
            var distance = [merge.id: 0]
            var generation = [merge]
            while !generation.isEmpty {
                var next = [Version]()
                for version in generation {
                    for parent in try await store.versions(version.parents) where distance[parent.id] == nil {
                        distance[parent.id] = distance[version.id]! + 1
                        next.append(parent)
                    }
                }
                generation = next
            }
            let stored = try await backend.get(Array(distance.keys))
            func check(_ result: [Hash: [UInt8]], asked: [Hash], limit: Int, _ what: String) throws {
                for hash in asked where stored[hash] != nil {
                    try expectSameBytes(result[hash], stored[hash]!, "\(what): an asked version is returned, byte for byte")
                }
                try expect(result.count <= max(limit, Set(asked).count), "\(what): no more objects than the limit", expected: "at most \(max(limit, Set(asked).count))", actual: "\(result.count)")
                let asked = Set(asked)
                for (hash, bytes) in result where !asked.contains(hash) {
                    try expect(stored[hash] != nil, "\(what): only the asked objects and their ancestors", expected: "ancestors of the asked versions", actual: "\(hash), which is none")
                    try expectSameBytes(bytes, stored[hash]!, "\(what): an ancestor is returned byte for byte")
                }
                // Distances are from the merge: when more is asked, nearer is another matter.
                guard asked == [merge.id] else { return }
                let deepest = result.keys.compactMap { distance[$0] }.max() ?? 0
                let nearer = distance.filter { $0.value < deepest }.keys
                try expect(nearer.allSatisfy { result[$0] != nil }, "\(what): nearest generations first", expected: "every version nearer than distance \(deepest)",
                           actual: "\(nearer.filter { result[$0] == nil }.count) of them missing")
            }
            try await context.step("asking for the merge with room for all its history") {
                try check(try await backend.ancestry(of: [merge.id], limit: 100), asked: [merge.id], limit: 100, "limit 100")
            }
            try await context.step("asking for the merge with a limit of 5") {
                try check(try await backend.ancestry(of: [merge.id], limit: 5), asked: [merge.id], limit: 5, "limit 5")
            }
            try await context.step("asking for more versions than the limit") {
                let asked = [merge.id, line[5].id, s1.id, line[0].id]
                try check(try await backend.ancestry(of: asked, limit: 2), asked: asked, limit: 2, "limit 2")
            }
            try await context.step("asking for unknown hashes, and objects that look like broken versions") {
                let unknown = (0..<2).map(TestObjects.unknownHash)
                try expectEqual(try await backend.ancestry(of: unknown, limit: 10).count, 0, "unknown hashes are left out")
                // Marker and kind of a version, then too few bytes for the parents they announce.
                let broken: [(hash: Hash, bytes: [UInt8])] = [[0xA1, 0x03], [0xA1, 0x03] + [UInt8](repeating: 9, count: 32) + [0x7F, 1, 2], [0xA1, 0x03] + [UInt8](repeating: 0xFF, count: 40)]
                    .map { (Hash.of($0), $0) }
                try await backend.put(broken)
                let result = try await backend.ancestry(of: broken.map(\.hash) + unknown, limit: 10)
                try expectEqual(Set(result.keys), Set(broken.map(\.hash)), "broken versions are returned as they are, and nothing else")
            }
        },
    ]

    /// A history of a few versions touching 1,000 records, a blob and a merge; the version ids.
    static func referenceHistory(_ store: Store) async throws -> [Hash] {
        let base = try await store.change(on: nil, "base") { changes in
            for index in 0..<1_000 { try changes.save(SuitePerson(id: "p\(index)", name: "person \(index)")) }
        }
        let edit = try await store.change(on: base, "edit") { changes in
            for index in stride(from: 0, to: 1_000, by: 97) { try changes.save(SuitePerson(id: "p\(index)", name: "renamed")) }
            try changes.save(SuiteKinds(id: 1))
            try changes.save(SuiteAttachment(id: "blob", data: Data(repeating: 3, count: 4000)))
        }
        let other = try await store.change(on: base, "other") { changes in
            for index in stride(from: 5, to: 1_000, by: 101) { try changes.delete(SuitePerson.self, id: "p\(index)") }
        }
        let merged = try await store.merge(edit.id, other.id).version
        return [base.id, edit.id, other.id] + (merged.map { [$0.id] } ?? [])
    }
}
