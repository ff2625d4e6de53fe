import Arbor
@testable import ArborCLI
import ArborJSON
import Foundation
import Testing

/// The commands run one after another on a real `json:` store, as a person would run them.
@Suite struct EndToEndTests {
    @Test func aRecordsWholeLife() async throws {
        try await withJSONStore { url async throws in
            // put, then get in both forms
            let first = try committedHash(try await arbor("put", url, "Task", "1", #"{"title": "Write", "done": false}"#, "-m", "first"))
            let plain = lines(try await arbor("get", url, "Task", "1"))
            #expect(plain.first == "Task/1 at \(first)")
            let shown = try json(plain.dropFirst().joined(separator: "\n"))
            #expect(shown == .object([("done", .bool(false)), ("title", .string("Write"))]))

            let document = try json(try await arbor("get", url, "Task", "1", "--json"))
            #expect(document["type"] == .string("Task"))
            #expect(document["id"] == .string("1"))
            let fullHash = try #require(document["version"]?.stringValue)
            #expect(fullHash.count == 64 && fullHash.hasPrefix(first))
            #expect(document["properties"]?["title"] == .string("Write"))
            #expect(document["properties"]?["done"] == .bool(false))

            // a second version
            let secondOutput = try await arbor("put", url, "Task", "1", #"{"title": "Write CLI", "done": false}"#, "-m", "second")
            #expect(secondOutput.contains("modified Task/1 (changed: title)"))
            let second = try committedHash(secondOutput)

            // log: newest first, in both forms, and limited
            let log = lines(try await arbor("log", url))
            #expect(log.count == 2)
            #expect(log[0].hasPrefix(second) && log[0].hasSuffix("second") && log[0].contains("1 record"))
            #expect(log[1].hasPrefix(first) && log[1].hasSuffix("first"))
            let logJSON = try json(try await arbor("log", url, "--json")).elements
            #expect(logJSON.map { $0["message"] } == [.string("second"), .string("first")])
            #expect(logJSON[0]["parents"] == .array([.string(fullHash)]))
            #expect(logJSON[1]["id"] == .string(fullHash))
            #expect(logJSON[1]["recordCount"] == .number("1"))
            #expect(lines(try await arbor("log", url, "--limit", "1")).count == 1)

            // heads: only the newest version
            let heads = lines(try await arbor("heads", url))
            #expect(heads.count == 1 && heads[0].hasPrefix(second))
            #expect(try json(try await arbor("heads", url, "--json")).elements.count == 1)

            // diff: the changed property with its old and new value
            let diff = try await arbor("diff", url, first, second)
            #expect(lines(diff) == ["~ Task/1", #"  title: "Write" -> "Write CLI""#])
            let diffJSON = try json(try await arbor("diff", url, first, "HEAD", "--json")).elements
            #expect(diffJSON.count == 1)
            #expect(diffJSON.first?["change"] == .string("modified"))
            #expect(diffJSON.first?["properties"] == .array([
                .object([("name", .string("title")), ("old", .string("Write")), ("new", .string("Write CLI"))])
            ]))
            #expect(try await arbor("diff", url, second, second).isEmpty)

            // show: metadata and the changes against the parent
            let show = try await arbor("show", url, second)
            #expect(show.contains("parents  \(first)"))
            #expect(show.contains("message  second"))
            #expect(show.contains(#"  title: "Write" -> "Write CLI""#))
            let showJSON = try json(try await arbor("show", url, first, "--json"))
            #expect(showJSON["id"] == .string(fullHash))
            #expect(showJSON["changes"]?.elements.first?["change"] == .string("added"))

            // an older version is still readable
            let old = try json(try await arbor("get", url, "Task", "1", "--at", first, "--json"))
            #expect(old["properties"]?["title"] == .string("Write"))

            // delete: the record is gone at HEAD, and deleting again fails
            let deleted = try await arbor("delete", url, "Task", "1", "-m", "done")
            #expect(deleted.hasSuffix("deleted Task/1\n"))
            let missing = try #require(await arborError("get", url, "Task", "1"))
            #expect(missing.code == .notFound)
            #expect(missing.message == "no Task/1 at \(try committedHash(deleted))")
            #expect(await arborError("delete", url, "Task", "1")?.code == .notFound)
            #expect(lines(try await arbor("diff", url, second, "HEAD")) == ["- Task/1", "  done: false", #"  title: "Write CLI""#])
            #expect(lines(try await arbor("log", url)).count == 3)
        }
    }

    /// What other replicas write (record ids, property names, replica names, messages) cannot
    /// act on the terminal nor forge a line of text output: controls show as `\u{…}`; JSON
    /// output keeps them as they are, escaped as JSON escapes them.
    @Test func textFromTheStoreCannotActOnTheTerminal() async throws {
        try await withJSONStore { url async throws in
            let path = String(url.dropFirst("json:".count))
            let store = Store(backend: try JSONBackend.open(.init(path: path)), configuration: .init(replica: "evil\u{1B}]0;owned\u{07}"))
            var changes = ChangeSet()
            let forged = "x\n+ Task/admin\u{1B}[2J\u{202E}"
            try changes.save(Record(type: "Task", id: forged, properties: ["ti\u{1B}tle": .string("a\u{1B}b\u{9B}")]))
            let first = try await store.commit(changes, message: "first\u{1B}[31m\nsecond\u{9B}")
            try await store.close()
            let acting: (Unicode.Scalar) -> Bool = { [0x1B, 0x9B, 0x07, 0x202E].contains($0.value) }
            for output in [try await arbor("show", url, "HEAD"), try await arbor("get", url, "Task", forged)] {
                #expect(!output.unicodeScalars.contains(where: acting), "\(output)")
            }
            for command in ["list", "log", "heads"] {
                let output = try await arbor(command, url)
                #expect(!output.unicodeScalars.contains(where: acting), "\(command): \(output)")
                #expect(output.split(separator: "\n").count == 1, "\(command) printed one line: \(output)")
            }
            let listed = try await arbor("list", url)
            #expect(listed.hasPrefix(#"Task/x\u{A}+ Task/admin\u{1B}[2J\u{202E}  "#), "\(listed)")
            #expect(try await arbor("log", url).contains(#"evil\u{1B}]0;owned\u{7}"#))
            let shown = try await arbor("show", url, "HEAD")
            #expect(shown.contains(#"first\u{1B}[31m"#) && shown.contains(#"second\u{9B}"#) && shown.contains(#"ti\u{1B}tle"#))
            guard case .array(let listedJSON) = try json(try await arbor("list", url, "--json")) else { throw ArborError(.invalidInput, "not an array") }
            #expect(listedJSON.first?["id"] == .string(forged))
            // Errors quoting an id are printable too.
            let command = try #require(try ArborCommand.parseAsRoot(["get", url, "Task", "no\u{1B}pe"]) as? GetCommand)
            let message = command.errorMessage(for: ArborError(.notFound, "no Task/no\u{1B}pe"))
            #expect(message == #"no Task/no\u{1B}pe"#)

            // Two heads, one changing the record: a merge lists it among those merged cleanly.
            let again = Store(backend: try JSONBackend.open(.init(path: path)))
            var edit = ChangeSet(), other = ChangeSet()
            try edit.save(Record(type: "Task", id: forged, properties: ["ti\u{1B}tle": .string("edited")]))
            try other.save(Record(type: "Task", id: "other", properties: [:]))
            _ = try await again.commit(edit, parents: [first.id])
            _ = try await again.commit(other, parents: [first.id])
            try await again.close()
            let mergedText = try await arbor("merge", url)
            #expect(!mergedText.unicodeScalars.contains(where: acting) && mergedText.contains(#"= Task/x\u{A}+ Task/admin"#), "\(mergedText)")
        }
    }

    @Test func initTwiceFailsAndLeavesTheStore() async throws {
        try await withJSONStore { url async throws in
            _ = try await arbor("put", url, "Task", "1", #"{"title": "Keep me"}"#)
            let error = try #require(await arborError("init", url))
            #expect(error.code == .alreadyExists)
            #expect(error.message.hasPrefix("a store already exists at "))
            #expect(try json(try await arbor("get", url, "Task", "1", "--json"))["properties"]?["title"] == .string("Keep me"))
        }
    }

    @Test func commandsOnAMissingStoreFail() async throws {
        try await withJSONStore(initialized: false) { url async throws in
            #expect(await arborError("log", url)?.code == .notFound)
            #expect(await arborError("put", url, "Task", "1", "{}")?.code == .notFound)
        }
    }

    @Test func anEmptyStoreHasNoVersions() async throws {
        try await withJSONStore { url async throws in
            #expect(try await arbor("log", url).isEmpty)
            #expect(try await arbor("log", url, "--json") == "[]\n")
            #expect(try await arbor("heads", url, "--json") == "[]\n")
            #expect(await arborError("get", url, "Task", "1")?.message == "the store has no versions yet")
            #expect(await arborError("delete", url, "Task", "1")?.message == "no Task/1: the store has no versions yet")
        }
    }

    @Test func propertiesComeFromStandardInput() async throws {
        try await withJSONStore { url async throws in
            _ = try await arbor("put", url, "Note", "a", input: #"{"text": "from stdin"}"#)
            _ = try await arbor("put", url, "Note", "b", "-", input: #"{"text": "from dash"}"#)
            #expect(try json(try await arbor("get", url, "Note", "a", "--json"))["properties"]?["text"] == .string("from stdin"))
            #expect(try json(try await arbor("get", url, "Note", "b", "--json"))["properties"]?["text"] == .string("from dash"))
            // An argument wins over standard input.
            _ = try await arbor("put", url, "Note", "c", #"{"text": "argument"}"#, input: #"{"text": "ignored"}"#)
            #expect(try json(try await arbor("get", url, "Note", "c", "--json"))["properties"]?["text"] == .string("argument"))
        }
    }

    @Test(arguments: [#"{"title": }"#, "[1, 2]", "", #"{"n": 99999999999999999999}"#, #"{"when": {"$date": "yesterday"}}"#])
    func malformedPropertiesFailAndLeaveTheStoreUnchanged(properties: String) async throws {
        try await withJSONStore { url async throws in
            _ = try await arbor("put", url, "Task", "1", #"{"title": "before"}"#)
            let error = try #require(await arborError("put", url, "Task", "1", properties))
            #expect(error.code == .invalidInput)
            #expect(error.message.hasPrefix("the properties of Task/1 are not valid: "))
            #expect(await arborError("put", url, "Task", "2", input: properties)?.code == .invalidInput)
            #expect(lines(try await arbor("log", url)).count == 1)
            #expect(try json(try await arbor("get", url, "Task", "1", "--json"))["properties"]?["title"] == .string("before"))
        }
    }

    @Test func versionsResolveByPrefixAndHEAD() async throws {
        try await withJSONStore { url async throws in
            let first = try committedHash(try await arbor("put", url, "Task", "1", #"{"n": 1}"#))
            _ = try await arbor("put", url, "Task", "1", #"{"n": 2}"#)
            let prefix = String(first.prefix(4))
            #expect(try json(try await arbor("get", url, "Task", "1", "--at", prefix, "--json"))["properties"]?["n"] == .number("1"))
            #expect(try json(try await arbor("get", url, "Task", "1", "--at", "head", "--json"))["properties"]?["n"] == .number("2"))
            #expect(try await arbor("show", url, first.uppercased()).contains("version  \(first)"))

            let log = try json(try await arbor("log", url, "--json")).elements.compactMap { $0["id"]?.stringValue }
            let unknown = try #require((0..<0x10000).lazy.map { String(format: "%04x", $0) }.first { candidate in
                !log.contains { $0.hasPrefix(candidate) }
            })
            let error = try #require(await arborError("get", url, "Task", "1", "--at", unknown))
            #expect(error.code == .unknownVersion)
            #expect(error.message == "no version starts with \(unknown)")
            #expect(await arborError("show", url, "abc")?.code == .unknownVersion)
            #expect(await arborError("diff", url, "HEAD", "not-a-version")?.code == .unknownVersion)
        }
    }

    @Test func anAmbiguousPrefixFails() async throws {
        try await withJSONStore { url async throws in
            // Commit through the core, without flushing to disk, until two hashes share 4 digits.
            let path = String(url.dropFirst("json:".count))
            let store = Store(backend: try JSONBackend.open(JSONBackend.Configuration(path: path, synchronous: false)))
            var seen = [String: Hash]()
            var shared: String?
            for number in 0..<5000 where shared == nil {
                var changes = ChangeSet()
                try changes.save(Record(type: "Counter", id: "c", properties: ["n": .int(Int64(number))]))
                let prefix = String(try await store.commit(changes).id.hex.prefix(4))
                if seen.updateValue(Hash.of([]), forKey: prefix) != nil { shared = prefix }
            }
            try await store.close()
            let prefix = try #require(shared)

            let error = try #require(await arborError("show", url, prefix))
            #expect(error.code == .unknownVersion)
            #expect(error.message.hasPrefix("\(prefix) is ambiguous"))
        }
    }

    @Test func diffsShowAddedRemovedAndNullProperties() async throws {
        try await withJSONStore { url async throws in
            let first = try committedHash(try await arbor("put", url, "Task", "1", #"{"note": null, "title": "a"}"#))
            _ = try await arbor("put", url, "Task", "2", #"{"title": "b"}"#)
            let third = try committedHash(try await arbor("put", url, "Task", "1", #"{"note": 5, "tags": ["x"], "title": "a"}"#))

            #expect(lines(try await arbor("diff", url, first, third)) == [
                "~ Task/1", "  note: null -> 5", #"  tags: (absent) -> ["x"]"#,
                "+ Task/2", #"  title: "b""#,
            ])
            // Reversed, the added record is removed and the absent side swaps.
            #expect(lines(try await arbor("diff", url, third, first)) == [
                "~ Task/1", "  note: 5 -> null", #"  tags: ["x"] -> (absent)"#,
                "- Task/2", #"  title: "b""#,
            ])

            // In JSON a null value is written, an absent one left out.
            let changes = try json(try await arbor("diff", url, first, third, "--json")).elements
            #expect(changes.map { $0["change"] } == [.string("modified"), .string("added")])
            #expect(changes[0]["properties"] == .array([
                .object([("name", .string("note")), ("old", .null), ("new", .number("5"))]),
                .object([("name", .string("tags")), ("new", .array([.string("x")]))]),
            ]))
            #expect(changes[1]["properties"] == .array([.object([("name", .string("title")), ("new", .string("b"))])]))
        }
    }

    /// log prints a long history a batch of 1,000 versions at a time; the text and the JSON
    /// document read as if printed whole.
    @Test func longLogsPrintInBatchesAsOneDocument() async throws {
        try await withJSONStore { url async throws in
            let store = Store(backend: try JSONBackend.open(.init(path: String(url.dropFirst("json:".count)), synchronous: false)))
            for index in 0..<1_100 {
                var changes = ChangeSet()
                try changes.save(Record(key: RecordKey(type: "Task", id: String(index % 10)), properties: ["n": .int(Int64(index))]))
                try await store.commit(changes, message: "edit \(index)")
            }
            let expected = try await store.log()
            try await store.close()

            let text = lines(try await arbor("log", url))
            #expect(text == expected.map(Rendering.line))
            let document = try await arbor("log", url, "--json")
            let parsed = try json(document)
            #expect(parsed.serialized(pretty: true) + "\n" == document)
            #expect(parsed == .array(expected.map(Rendering.json)))
            #expect(try json(try await arbor("log", url, "--json", "--limit", "1001")).elements.count == 1_001)
        }
    }

    /// diff and show print a long diff a batch of 1,000 changes at a time; the text and the JSON
    /// document read as if printed whole.
    @Test func longDiffsPrintInBatchesAsOneDocument() async throws {
        try await withJSONStore { url async throws in
            let first = try committedHash(try await arbor("put", url, "Task", "0000", #"{"title": "first"}"#))
            let store = Store(backend: try JSONBackend.open(.init(path: String(url.dropFirst("json:".count)))))
            var changes = ChangeSet()
            for index in 0..<2_500 {
                try changes.save(Record(key: RecordKey(type: "Task", id: String(format: "%04d", index)), properties: ["title": .string("task \(index)")]))
            }
            let second = try await store.commit(changes, message: "many")
            let expected = try await store.diff(from: try await store.resolve(first).id, to: second.id)
            try await store.close()
            #expect(expected.count == 2_500)

            let text = lines(try await arbor("diff", url, first, "HEAD"))
            #expect(text.count == 2 * 2_500)
            #expect(text.filter { !$0.hasPrefix(" ") } == ["~ Task/0000"] + (1..<2_500).map { String(format: "+ Task/%04d", $0) })
            let document = try await arbor("diff", url, first, "HEAD", "--json")
            let parsed = try json(document)
            #expect(parsed.serialized(pretty: true) + "\n" == document)
            #expect(parsed.elements.map { $0["id"] } == expected.map { .string($0.key.id) })

            let show = try await arbor("show", url, "HEAD", "--json")
            let shown = try json(show)
            #expect(shown.serialized(pretty: true) + "\n" == show)
            #expect(shown["changes"] == parsed)
            #expect(shown["message"] == .string("many"))
            let showText = lines(try await arbor("show", url, "HEAD"))
            #expect(Array(showText.suffix(text.count)) == text)

            // No changes: an empty array, and in text nothing after the version.
            #expect(try await arbor("diff", url, "HEAD", "HEAD", "--json") == "[]\n")
            #expect(try json(try await arbor("show", url, first, "--json"))["changes"]?.elements.count == 1)
        }
    }

    @Test func listShowsTheRecordsOfAVersion() async throws {
        try await withJSONStore { url async throws in
            #expect(try await arbor("list", url).isEmpty, "a store without versions lists nothing")
            #expect(try await arbor("list", url, "--json") == "[]\n")
            #expect(try await arbor("list", url, "--at", " head").isEmpty, "HEAD spelled as resolve takes it")
            let first = try committedHash(try await arbor("put", url, "Task", "b", #"{"title": "second", "done": false}"#))
            _ = try await arbor("put", url, "Task", "a", #"{"title": "first"}"#)
            _ = try await arbor("put", url, "Person", "ada", #"{"name": "Ada"}"#)

            #expect(lines(try await arbor("list", url)) == [
                #"Person/ada  {"name":"Ada"}"#, #"Task/a  {"title":"first"}"#, #"Task/b  {"done":false,"title":"second"}"#,
            ])
            #expect(lines(try await arbor("list", url, "Task", "--at", first)) == [#"Task/b  {"done":false,"title":"second"}"#])
            let document = try await arbor("list", url, "Task", "--json")
            let parsed = try json(document)
            #expect(parsed.serialized(pretty: true) + "\n" == document)
            #expect(parsed.elements.map { $0["id"] } == [.string("a"), .string("b")])
            #expect(parsed.elements.first?["properties"]?["title"] == .string("first"))
            #expect(try await arbor("list", url, "Nothing").isEmpty)
            let bad = try #require(await arborError("list", url, ""))
            #expect(bad.code == .invalidInput)
        }
    }

    @Test func deletingAnOwnerDeletesItsChildren() async throws {
        try await withJSONStore { url async throws in
            _ = try await arbor("put", url, "Task", "t1", #"{"title": "child"}"#)
            let put = try await arbor("put", url, "Project", "p", #"{"lead": {"$child": {"type": "Task", "id": "t1"}}}"#)
            #expect(put.contains("added Project/p (1 property)"))
            let owner = try json(try await arbor("get", url, "Project", "p", "--json"))
            #expect(owner["properties"]?["lead"]?["$child"]?["id"] == .string("t1"))

            let deleted = try await arbor("delete", url, "Project", "p")
            #expect(deleted.hasSuffix("deleted Project/p and 1 owned record\n"))
            #expect(await arborError("get", url, "Task", "t1")?.code == .notFound)
            #expect(try await arbor("show", url, "HEAD").contains("- Task/t1"))
        }
    }

    @Test func commitsAreSignedWithTheReplica() async throws {
        try await withJSONStore { url async throws in
            _ = try await arbor("put", url, "Task", "1", "{}", "--replica", "laptop-7")
            #expect(try json(try await arbor("log", url, "--json")).elements.first?["replica"] == .string("laptop-7"))
            #expect(try json(try await arbor("log", url, "--json")).elements.first?["message"] == .string("put Task/1"))
            #expect(try await arbor("show", url, "HEAD").contains("replica  laptop-7"))
        }
    }

    @Test func aMemoryStoreWorksForOneCommand() async throws {
        #expect(try await arbor("init", "memory:") == "created an empty store at memory:\n")
        #expect(try await arbor("put", "memory:", "Task", "1", "{}").contains("added Task/1 (0 properties)"))
        #expect(try await arbor("log", "memory:").isEmpty)
    }
}
