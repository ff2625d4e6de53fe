import Arbor

extension ConformanceCase {
    /// The merge scenarios on the adapter: every kind of change on two sides, every strategy.
    static let mergeCases: [ConformanceCase] = [
        ConformanceCase(.merge, "disjoint-changes", "records added on each side, and properties changed on each side, all survive without conflict") { context in
            let store = context.store()
            let (base, a, b) = try await fork(context, store, ours: { try $0.save(SuiteTask(id: "a", title: "A", done: false)) },
                                              theirs: { try $0.save(SuiteTask(id: "b", title: "B", done: true)) })
            let (version, report) = try await merged(context, store, a, b, .manual)
            try expectEqual(report.ancestor, base.id, "the common ancestor")
            try expectEqual(report.resolved, [], "the conflicts resolved")
            try expectEqual(try await store.values(SuiteTask.self, at: version.id).map(\.id), ["a", "b", "t"], "the records of the merge")
            try expectEqual(version.parents, [a.id, b.id].sorted(), "the parents of the merge commit")
            try expectEqual(try await store.heads().map(\.id), [version.id], "the heads after the merge")

            let (_, c, d) = try await fork(context, store, ours: { try $0.save(SuiteTask(id: "t", title: "renamed", done: false)) },
                                           theirs: { try $0.save(SuiteTask(id: "t", title: "base", done: true)) })
            let (properties, _) = try await merged(context, store, c, d, .manual)
            try expectEqual(try await store.value(SuiteTask.self, id: "t", at: properties.id), SuiteTask(id: "t", title: "renamed", done: true),
                            "one side's title and the other's done")
        },

        ConformanceCase(.merge, "conflict-strategies", "one property changed differently on both sides: manual stops with the conflict, ours, theirs and most recent settle it the same both ways") { context in
            let store = context.store()
            let (_, a, b) = try await fork(context, store, ours: { try $0.save(SuiteTask(id: "t", title: "ours", done: false)) },
                                           theirs: { try $0.save(SuiteTask(id: "t", title: "theirs", done: false)) })
            let expected = [MergeConflict(key: RecordKey(type: "Task", id: "t"), property: "title", base: .string("base"), ours: .string("ours"), theirs: .string("theirs"))]
            guard case .conflicts(let conflicts) = try await context.step("a manual merge", { try await store.merge(a.id, b.id, strategy: .manual) }) else {
                throw ConformanceFailure(message: "a manual merge of a conflict", expected: "conflicts", actual: "a merge")
            }
            try expectEqual(conflicts, expected, "the conflicts of a manual merge")
            try expectEqual(try await store.heads().count, 2, "heads after a manual merge stopped at conflicts")
            // The heads are taken in hash order, so either side may be "ours" here.
            let ofHeads = try await context.step("listing the conflicts of the heads") { try await store.conflicts() }
            func sides(_ conflicts: [MergeConflict]) -> [[String]] {
                conflicts.map { [$0.key.description, $0.property ?? ""] + [$0.ours, $0.theirs].map { describe($0) }.sorted() }
            }
            try expectEqual(sides(ofHeads), sides(expected), "the conflicts of the heads")
            for (strategy, title) in [(MergeStrategy.ours, "ours"), (.theirs, "theirs"), (.mostRecent, "theirs")] {
                let (version, report) = try await merged(context, store, a, b, strategy)
                try expectEqual(report.resolved, expected, "the conflicts \(strategy) resolved")
                try expectEqual(try await store.value(SuiteTask.self, id: "t", at: version.id)?.title, title, "the title \(strategy) keeps")
            }
            try await context.step("merging both ways") {
                let forward = try await store.merge(a.id, b.id, strategy: .mostRecent).version?.id
                try expectEqual(try await store.merge(b.id, a.id, strategy: .mostRecent).version?.id, forward, "most recent merges both ways to one commit")
                let oursForward = try await store.merge(a.id, b.id, strategy: .ours).version?.id
                try expectEqual(try await store.merge(b.id, a.id, strategy: .theirs).version?.id, oursForward, "theirs one way is ours the other")
            }
        },

        ConformanceCase(.merge, "delete-versus-update", "a record deleted on one side and changed on the other is a conflict each strategy settles") { context in
            let store = context.store()
            let root = try await context.step("committing a base") { try await store.change(on: nil) { try $0.save(SuiteTask(id: "t", title: "base", done: false)) } }
            let deleted = try await context.step("deleting") { try await store.change(on: root) { try $0.delete(SuiteTask.self, id: "t") } }
            let updated = try await context.step("updating") { try await store.change(on: root) { try $0.save(SuiteTask(id: "t", title: "new", done: false)) } }
            guard case .conflicts(let conflicts) = try await context.step("a manual merge", { try await store.merge(deleted.id, updated.id, strategy: .manual) }) else {
                throw ConformanceFailure(message: "a manual merge of a deletion and an update", expected: "a conflict", actual: "a merge")
            }
            try expectEqual(conflicts.map(\.key), [RecordKey(type: "Task", id: "t")], "the conflicting record")
            try expectEqual(conflicts.first?.property, nil, "a whole-record conflict names no property")
            for (strategy, title) in [(MergeStrategy.ours, nil), (.theirs, "new"), (.mostRecent, "new")] as [(MergeStrategy, String?)] {
                let (version, _) = try await merged(context, store, deleted, updated, strategy)
                try expectEqual(try await store.value(SuiteTask.self, id: "t", at: version.id)?.title, title, "the task after \(strategy)")
            }
        },

        ConformanceCase(.merge, "children", "children added on both sides merge as a set; a child removed on one side and edited on the other leaves no orphan") { context in
            let store = context.store()
            let n0 = SuiteNote(id: "n0", text: "zero")
            let (_, a, b) = try await fork(context, store, base: SuiteTask(id: "t", title: "base", done: false, notes: [n0]),
                ours: { try $0.save(SuiteTask(id: "t", title: "base", done: false, notes: [n0, SuiteNote(id: "n2", text: "ours")])) },
                theirs: { try $0.save(SuiteTask(id: "t", title: "base", done: false, notes: [n0, SuiteNote(id: "n1", text: "theirs")])) })
            let (version, _) = try await merged(context, store, a, b, .manual)
            try expectEqual(try await store.value(SuiteTask.self, id: "t", at: version.id)?.notes.map(\.id), ["n0", "n1", "n2"], "children added on both sides")

            let keep = SuiteNote(id: "k", text: "keep")
            let (_, c, d) = try await fork(context, store, base: SuiteTask(id: "u", title: "base", done: false, notes: [SuiteNote(id: "old", text: "old"), keep]),
                ours: { try $0.save(SuiteTask(id: "u", title: "base", done: false, notes: [keep])) },
                theirs: { try $0.save(SuiteTask(id: "u", title: "edited", done: false, notes: [SuiteNote(id: "old", text: "new"), keep])) })
            for strategy in [MergeStrategy.ours, .theirs, .mostRecent] {
                let (result, _) = try await merged(context, store, c, d, strategy)
                try expectEqual(try await store.value(SuiteTask.self, id: "u", at: result.id), SuiteTask(id: "u", title: "edited", done: false, notes: [keep]),
                                "the parent after \(strategy)")
                try expectEqual(try await store.record(RecordKey(type: "Note", id: "old"), at: result.id), nil, "the removed child after \(strategy)")
            }
        },

        ConformanceCase(.merge, "fast-forward-and-heads", "a head that contains the other fast-forwards; concurrent heads merge into one, the same commit as on the reference adapter") { context in
            var results = [Hash?]()
            for backend in [context.backend, MemoryBackend()] {
                results.append(try await context.step("three replicas' heads merged on \(backend.engineName)") {
                    let store = context.store(backend)
                    let base = try await store.change(on: nil) { try $0.save(SuiteTask(id: "t", title: "x", done: false)) }
                    for replica in 0..<3 {
                        _ = try await context.store(backend, replica: "r\(replica)").change(on: base) { try $0.save(SuitePerson(id: "p\(replica)", name: "n")) }
                    }
                    return try await store.mergeHeads()?.version?.id
                })
            }
            try expectEqual(results[0], results[1], "the merge of three heads, as on the memory adapter")
            try expectEqual(try await context.store(context.backend).heads().map(\.id), results[0].map { [$0] } ?? [], "the heads after merging them")
            let store = context.store()
            let root = try await context.step("committing") { try await store.change(on: nil) { try $0.save(SuiteTask(id: "f", title: "x", done: false)) } }
            let later = try await context.step("committing on it") { try await store.change(on: root) { try $0.save(SuiteTask(id: "f", title: "y", done: false)) } }
            for (ours, theirs) in [(root, later), (later, root)] {
                guard case .fastForward(let version) = try await context.step("merging a version with its descendant", { try await store.merge(ours.id, theirs.id) }) else {
                    throw ConformanceFailure(message: "merging a version with its descendant", expected: "a fast-forward", actual: "a merge commit or conflicts")
                }
                try expectEqual(version.id, later.id, "the fast-forward")
            }
        },
    ]

    /// A base with task `base`, then `ours` and `theirs` committed on it.
    static func fork(
        _ context: ConformanceContext, _ store: Store, base: SuiteTask = SuiteTask(id: "t", title: "base", done: false),
        ours: (inout ChangeSet) throws -> Void, theirs: (inout ChangeSet) throws -> Void
    ) async throws -> (base: Version, ours: Version, theirs: Version) {
        try await context.step("committing a base and two sides on it") {
            let root = try await store.change(on: nil) { try $0.save(base) }
            return (root, try await store.change(on: root, "ours", ours), try await store.change(on: root, "theirs", theirs))
        }
    }

    /// Merges `theirs` into `ours` with `strategy`; fails unless that makes a merge commit.
    static func merged(
        _ context: ConformanceContext, _ store: Store, _ ours: Version, _ theirs: Version, _ strategy: MergeStrategy
    ) async throws -> (Version, MergeReport) {
        let outcome = try await context.step("merging with \(strategy)") { try await store.merge(ours.id, theirs.id, strategy: strategy) }
        guard case .merged(let version, let report) = outcome else {
            throw ConformanceFailure(message: "a merge with \(strategy)", expected: "a merge commit", actual: "\(outcome)")
        }
        return (version, report)
    }
}
