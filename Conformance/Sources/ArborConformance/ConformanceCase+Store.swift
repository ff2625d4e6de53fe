import Arbor
import Foundation

extension ConformanceCase {
    /// The core's store API on the adapter: commit, read, diff, log, concurrent writers,
    /// persistence, and the same bytes as the in-memory reference adapter.
    static let storeCases: [ConformanceCase] = [
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
