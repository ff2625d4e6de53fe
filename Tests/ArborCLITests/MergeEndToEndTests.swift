import Arbor
import ArborCLI
import Foundation
import Testing

/// `merge` and `conflicts` on a real `json:` store with two heads.
@Suite struct MergeEndToEndTests {
    /// A store with a task, then two heads: one renames it and adds task 2, the other renames
    /// it differently and marks it done.
    func withConflictingHeads(_ body: (String) async throws -> Void) async throws {
        try await withJSONStore { url async throws in
            let base = try committedHash(try await arbor("put", url, "Task", "1", #"{"title": "base", "done": false}"#, "--replica", "a"))
            _ = try await arbor("put", url, "Task", "1", #"{"title": "ours", "done": false}"#, "--parent", base, "--replica", "a")
            _ = try await arbor("put", url, "Task", "2", #"{"title": "two"}"#, "--replica", "a")
            _ = try await arbor("put", url, "Task", "1", #"{"title": "theirs", "done": true}"#, "--parent", base, "--replica", "b")
            #expect(lines(try await arbor("heads", url)).count == 2)
            try await body(url)
        }
    }

    @Test func conflictsListsWithoutStoring() async throws {
        try await withConflictingHeads { url in
            let listed = lines(try await arbor("conflicts", url))
            #expect(listed == [#"! Task/1 title: base "base", ours "theirs", theirs "ours""#]
                    || listed == [#"! Task/1 title: base "base", ours "ours", theirs "theirs""#])
            let document = try json(try await arbor("conflicts", url, "--json")).elements
            #expect(document.count == 1)
            #expect(document.first?["property"] == .string("title"))
            #expect(document.first?["base"] == .string("base"))
            #expect(lines(try await arbor("heads", url)).count == 2)

            let manual = lines(try await arborStopping("merge", url, "--strategy", "manual"))
            #expect(manual.first == "1 conflict; nothing committed")
            #expect(lines(try await arbor("heads", url)).count == 2)
        }
    }

    @Test func mergeMakesOneHead() async throws {
        try await withConflictingHeads { url in
            let output = lines(try await arbor("merge", url))
            #expect(output.first?.contains("merged") == true)
            #expect(output.first?.hasSuffix("1 record merged cleanly, 1 conflict settled") == true)
            #expect(output.dropFirst().contains("  = Task/2"))
            let heads = lines(try await arbor("heads", url))
            #expect(heads.count == 1)
            // most-recent: "theirs" was committed last; done came from that side cleanly.
            let task = try json(try await arbor("get", url, "Task", "1", "--json"))
            #expect(task["properties"]?["title"] == .string("theirs"))
            #expect(task["properties"]?["done"] == .bool(true))
            #expect(try await arbor("conflicts", url).isEmpty)
            let again = try json(try await arbor("merge", url, "--json"))
            #expect(again["result"] == .string("fast-forward"))
        }
    }

    @Test func mergeJSONNamesTheResult() async throws {
        try await withConflictingHeads { url in
            let document = try json(try await arbor("merge", url, "--strategy", "ours", "--json"))
            #expect(document["result"] == .string("merged"))
            #expect(document["version"]?.stringValue?.count == 64)
            #expect(document["ancestor"]?.stringValue?.count == 64)
            #expect(document["clean"]?.elements.count == 1)
            #expect(document["conflicts"]?.elements.first?["property"] == .string("title"))
        }
    }

    @Test func mergeOnAnEmptyStore() async throws {
        try await withJSONStore { url async throws in
            #expect(lines(try await arbor("merge", url)) == ["nothing to merge: the store has no versions"])
            #expect(try await arbor("conflicts", url).isEmpty)
        }
    }
}
