import Foundation
import Synchronization
import Testing
@testable import Arbor

@Suite struct CodingTests {
    /// A stored value of another shape (a type changed since it was written) fails to decode
    /// with the property's path, what was expected and what kind of value was found, with its
    /// size but none of its contents, which may be large or secret.
    @Test func aMismatchNamesTheKindOfValueFoundNotItsContents() async throws {
        struct Token: Codable, Equatable { var value: String }
        struct Account: Storable, Equatable {
            static let typeName = "Account"
            var id: String
            var token: Token
        }
        let store = Store(backend: MemoryBackend())
        var changes = ChangeSet()
        let secret = "s3cr3t-" + String(repeating: "x", count: 10_000)
        try changes.save(Record(type: "Account", id: "a", properties: ["id": .string("a"), "token": .string(secret)]))
        try await store.commit(changes)
        await #expect { try await store.value(Account.self, id: "a") } throws: { error in
            let text = "\(error)"
            return (error as? ArborError)?.code == .coding && !text.contains("s3cr3t") && text.contains("at token")
                && text.contains("found a string of 10007 bytes") && text.count < 1_000
        }
        // A type's own decoding (an enum's raw value) quotes the string it refuses: not here.
        enum Level: String, Codable { case low, high }
        struct Levelled: Storable {
            static let typeName = "Account"
            var id: String
            var token: Level
        }
        await #expect { try await store.value(Levelled.self, id: "a") } throws: { error in
            let text = "\(error)"
            return (error as? ArborError)?.code == .coding && !text.contains("s3cr3t") && text.contains("at token") && text.count < 1_000
        }
        // Nor in a dictionary stored as pairs (its keys name records), whose values decode flat.
        struct Roles: Storable {
            static let typeName = "Roles"
            var id: String
            var roles: [Ref<Person>: Level]
        }
        var pairs = ChangeSet()
        try pairs.save(Record(type: "Roles", id: "r", properties: ["id": .string("r"), "roles": .array([.array([.reference(RecordKey(type: Person.typeName, id: "p")), .string(secret)])])]))
        try await store.commit(pairs)
        await #expect { try await store.value(Roles.self, id: "r") } throws: { error in
            let text = "\(error)"
            return (error as? ArborError)?.code == .coding && !text.contains("s3cr3t") && text.contains("at roles.1") && text.count < 1_000
        }
    }

    @Test func everyPropertyKindRoundTripsThroughRecords() throws {
        let value = Everything(id: 42)
        let records = try RecordEncoder.records(of: value)
        #expect(records.count == 1)
        #expect(records[0].key == RecordKey(type: "Everything", id: "42"))
        let properties = records[0].properties
        #expect(properties["int64Min"] == .int(.min))
        #expect(properties["negativeZero"] == .double(-0.0))
        #expect(properties["negativeZero"] != .double(0.0))
        #expect(properties["nan"] == .double(.nan))
        #expect(properties["date"] == .date(value.date))
        #expect(properties["data"] == .bytes([0, 1, 2, 255]))
        #expect(properties["url"] == .string("https://example.com/a?b=c"))
        #expect(properties["priority"] == .string("high"))
        #expect(properties["optionalAbsent"] == nil)
        #expect(properties["address"] == .map(["street": .string("Main")]))
        let decoded = try RecordDecoder.value(Everything.self, key: records[0].key, records: [records[0].key: records[0]])
        #expect(decoded == value)

        // And through canonical bytes and the JSON form.
        let bytes = RecordCoding.encode(properties)
        #expect(try RecordCoding.decode(bytes) == properties)
        let json = JSONValue(properties: properties)
        let reparsed = try JSONValue.parse(json.serialized(pretty: true))
        #expect(try PropertyValue.properties(json: reparsed) == properties)
    }

    @Test func valueTreesBecomeOwnedChildRecords() throws {
        let task = Task(
            id: "t1", title: "Write", done: false,
            notes: [Note(id: "n1", text: "first", attachments: [Attachment(id: "a1", data: Data([9]))]), Note(id: "n2", text: "second")],
            owner: Ref(id: "p1"), pinned: Note(id: "n3", text: "pinned"))
        let records = try RecordEncoder.records(of: task)
        #expect(records.map(\.key.description) == ["Task/t1", "Note/n1", "Attachment/a1", "Note/n2", "Note/n3"])
        #expect(records[0].properties["notes"] == .array([.child(RecordKey(type: "Note", id: "n1")), .child(RecordKey(type: "Note", id: "n2"))]))
        #expect(records[0].properties["owner"] == .reference(RecordKey(type: "Person", id: "p1")))
        #expect(records[0].childKeys.map(\.id) == ["n1", "n2", "n3"])
        let tree = Dictionary(uniqueKeysWithValues: records.map { ($0.key, $0) })
        #expect(try RecordDecoder.value(Task.self, key: records[0].key, records: tree) == task)
    }

    /// Sets and dictionaries with non-string keys iterate in an order that depends on the
    /// process's hash seed and the table's capacity; equal values must still give equal bytes.
    @Test func equalSetsAndDictionariesEncodeToEqualBytes() throws {
        var grownSet = Set<String>(minimumCapacity: 4_096)
        var grownDictionary = [Weekday: [Int]](minimumCapacity: 4_096)
        for number in (0..<300).reversed() { grownSet.insert("tag-\(number)") }
        for day in Weekday.allCases.reversed() { grownDictionary[day] = [day.rawValue.count] }
        let compact = Tagged(id: "x", tags: Set((0..<300).map { "tag-\($0)" }),
                             byDay: Dictionary(uniqueKeysWithValues: Weekday.allCases.map { ($0, [$0.rawValue.count]) }),
                             nested: [Set([3, 1, 2]), Set([9, 8])])
        var grown = compact
        grown.tags = grownSet
        grown.byDay = grownDictionary
        grown.nested = [Set([2, 3, 1]), Set([8, 9])]
        // The test means something only if the two sets iterate differently.
        #expect(Array(compact.tags) != Array(grown.tags))

        let first = try RecordEncoder.records(of: compact)[0]
        let second = try RecordEncoder.records(of: grown)[0]
        #expect(RecordCoding.encode(first.properties) == RecordCoding.encode(second.properties))
        guard case .array(let tags)? = first.properties["tags"] else {
            Issue.record("tags did not encode as an array")
            return
        }
        #expect(tags.count == 300)
        #expect(tags.first == .string("tag-0"))
        // Pairs keep their keys and values together, sorted by key.
        #expect(first.properties["byDay"] == .array([
            .string("fri"), .array([.int(3)]), .string("mon"), .array([.int(3)]), .string("thursday"), .array([.int(8)]),
        ]))
        let decoded = try RecordDecoder.value(Tagged.self, key: first.key, records: [first.key: first])
        #expect(decoded == compact)
    }

    /// A dictionary whose keys and values name records is stored as `[key, value]` pairs:
    /// alternating, it read as an array of references, which a merge combined as a set (pairs
    /// split, values dropped as repeats). One stored alternating before reads back as it was.
    @Test func dictionariesThatNameRecordsAreStoredAsPairs() throws {
        let person = { (id: String) in RecordKey(type: "Person", id: id) }
        let roster = Roster(
            id: "r", roles: [Ref(id: "p2"): Ref(id: "admin"), Ref(id: "p1"): Ref(id: "admin")],
            notes: [Ref(id: "p1"): Note(id: "n1", text: "x")], counts: [Weekday.mon: 1])
        let records = try RecordEncoder.records(of: roster)
        #expect(records[0].properties["roles"] == .array([
            .array([.reference(person("p1")), .reference(person("admin"))]),
            .array([.reference(person("p2")), .reference(person("admin"))]),
        ]))
        #expect(records[0].properties["notes"] == .array([.array([.reference(person("p1")), .child(RecordKey(type: "Note", id: "n1"))])]))
        // Pairs that name no record stay alternating, as they were.
        #expect(records[0].properties["counts"] == .array([.string("mon"), .int(1)]))
        let tree = Dictionary(uniqueKeysWithValues: records.map { ($0.key, $0) })
        #expect(try RecordDecoder.value(Roster.self, key: records[0].key, records: tree) == roster)

        var flat = records[0]
        flat.properties["roles"] = .array([.reference(person("p1")), .reference(person("admin")), .reference(person("p2")), .reference(person("admin"))])
        flat.properties["notes"] = .array([.reference(person("p1")), .child(RecordKey(type: "Note", id: "n1"))])
        #expect(try RecordDecoder.value(Roster.self, key: flat.key, records: tree.merging([flat.key: flat]) { $1 }) == roster)
    }

    /// Both sides adding a role to such a dictionary is a conflict on it, settled for a side,
    /// whose dictionary reads back whole: merged as a set of references, it paired keys with
    /// other keys' values, or failed to read at all.
    @Test func aDictionaryOfPairsMergesWhole() async throws {
        let store = Store.ticking()
        let base = try await store.change(on: nil) { try $0.save(Roster(id: "r", roles: [Ref(id: "p1"): Ref(id: "admin")])) }
        let ours = Roster(id: "r", roles: [Ref(id: "p1"): Ref(id: "admin"), Ref(id: "p2"): Ref(id: "editor")])
        let theirs = Roster(id: "r", roles: [Ref(id: "p1"): Ref(id: "admin"), Ref(id: "p3"): Ref(id: "viewer")])
        let a = try await store.change(on: base) { try $0.save(ours) }
        let b = try await store.change(on: base) { try $0.save(theirs) }
        guard case .conflicts(let conflicts) = try await store.merge(a.id, b.id, strategy: .manual) else {
            Issue.record("the two dictionaries merged without a conflict")
            return
        }
        #expect(conflicts.map(\.property) == ["roles"])
        let merged = try #require(try await store.merge(a.id, b.id, strategy: .mostRecent).version)
        #expect(try await store.value(Roster.self, id: "r", at: merged.id) == theirs)
    }

    /// Pairs that name no record (a merge let the children of a dictionary of arrays go) read
    /// back as pairs; a dictionary stored flat whose keys and values are two-element arrays
    /// reads back as it was written.
    @Test func pairsThatNameNoRecordAndFlatPairsOfArraysReadBack() throws {
        let key = RecordKey(type: "Lanes", id: "l")
        let emptied = Record(key: key, properties: ["id": .string("l"), "grid": .array([]), "lanes": .array([.array([.string("mon"), .array([])])])])
        #expect(try RecordDecoder.value(Lanes.self, key: key, records: [key: emptied]) == Lanes(id: "l", lanes: [.mon: []]))
        let grid = Record(key: key, properties: ["id": .string("l"), "lanes": .array([]), "grid": .array([.array([.int(1), .int(2)]), .array([.int(3), .int(4)])])])
        #expect(try RecordDecoder.value(Lanes.self, key: key, records: [key: grid]) == Lanes(id: "l", grid: [[1, 2]: [3, 4]]))
    }

    /// A dictionary stored flat before pairs were written, re-encoded unchanged as pairs on one
    /// side while the other adds a pair: the unchanged side is no change, and the addition
    /// stands (it was a conflict, and most-recent could drop the addition).
    @Test func aLegacyFlatDictionaryReencodedUnchangedIsNoChange() async throws {
        let store = Store.ticking()
        let person = { (id: String) in PropertyValue.reference(RecordKey(type: "Person", id: id)) }
        let flat = Record(type: "Roster", id: "r", properties: ["roles": .array([person("p1"), person("admin")]), "label": .string("old")])
        let base = try await store.change(on: nil) { try $0.save(flat) }
        let added = try await store.change(on: base) { try $0.save(Roster(id: "r", roles: [Ref(id: "p1"): Ref(id: "admin"), Ref(id: "p2"): Ref(id: "editor")], label: "old")) }
        let relabelled = try await store.change(on: base) { try $0.save(Roster(id: "r", roles: [Ref(id: "p1"): Ref(id: "admin")], label: "new")) }
        guard case .merged(let version, let report) = try await store.merge(added.id, relabelled.id, strategy: .manual) else {
            Issue.record("an unchanged dictionary re-encoded as pairs conflicted")
            return
        }
        #expect(report.resolved.isEmpty)
        #expect(try await store.value(Roster.self, id: "r", at: version.id) == Roster(id: "r", roles: [Ref(id: "p1"): Ref(id: "admin"), Ref(id: "p2"): Ref(id: "editor")], label: "new"))
    }

    /// Elements of a set, or keys of a dictionary, that encode alike (a type whose `Hashable`
    /// uses a field its `Codable` leaves out) are refused: their order was the process's hash
    /// order, so equal values differed in bytes, and only one read back.
    @Test func elementsOrKeysThatEncodeAlikeAreRefused() throws {
        let (morning, labelled) = (Slot(hour: 9, label: ""), Slot(hour: 9, label: "standup"))
        #expect { try RecordEncoder.records(of: Timetable(id: "t", slots: [morning, labelled])) } throws: { ($0 as? ArborError)?.code == .coding }
        #expect { try RecordEncoder.records(of: Timetable(id: "t", rooms: [morning: "a", labelled: "b"])) } throws: { ($0 as? ArborError)?.code == .coding }
        #expect(try RecordEncoder.records(of: Timetable(id: "t", slots: [morning, Slot(hour: 10, label: "")], rooms: [morning: "a"])).count == 1)
    }

    /// A child record whose encoding fails, in a value that swallows the error (`try?` in its own
    /// `encode(to:)`), is not left in the tree: it was committed with no properties, held by
    /// nothing, and failed every read of it.
    @Test func aChildWhoseEncodingFailedIsNotLeftInTheTree() throws {
        let records = try RecordEncoder.records(of: Forgiving(id: "f", priced: Priced(id: "p", price: .nan)))
        #expect(records.map(\.key.description) == ["Forgiving/f"])
        // Nor a sibling encoded before it, in the array whose encoding failed.
        let siblings = try RecordEncoder.records(of: Forgiving(id: "f", list: [Priced(id: "ok", price: 1), Priced(id: "p", price: .nan)]))
        #expect(siblings.map(\.key.description) == ["Forgiving/f"])
        // Nor a child of a plain value whose other field failed after it.
        let lines = try RecordEncoder.records(of: Forgiving(id: "f", lines: [Line(item: Priced(id: "ok", price: 1), price: .nan)]))
        #expect(lines.map(\.key.description) == ["Forgiving/f"])
    }

    /// A child written over by a later write of its key (a custom `encode(to:)` writing a key
    /// twice, the last write winning, as in Foundation's encoders) is not left in the tree, held
    /// by nothing: nor where a nested container takes the key, or a container of another kind.
    @Test func aChildWrittenOverIsNotLeftInTheTree() throws {
        let replaced = try RecordEncoder.records(of: Rewriting(id: "r", first: Priced(id: "a", price: 1), then: .value(Priced(id: "b", price: 2))))
        #expect(replaced.map(\.key.description) == ["Rewriting/r", "Priced/b"])
        #expect(replaced[0].properties["slot"] == .child(RecordKey(type: "Priced", id: "b")))
        let nested = try RecordEncoder.records(of: Rewriting(id: "r", first: Priced(id: "a", price: 1), then: .nestedContainer))
        #expect(nested.map(\.key.description) == ["Rewriting/r"])
        #expect(nested[0].properties["slot"] == .map(["note": .string("replaced")]))
        // A container of another kind taken at a key whose array held a child hides the array.
        let kinds = try RecordEncoder.records(of: Rewriting(id: "r", first: Priced(id: "a", price: 1), then: .arrayThenMap(Priced(id: "c", price: 3))))
        #expect(kinds.map(\.key.description) == ["Rewriting/r", "Priced/a"])
        #expect(kinds[0].properties["other"] == .map(["note": .string("replaced")]))
        let kept = try RecordEncoder.records(of: Rewriting(id: "r", first: Priced(id: "a", price: 1), then: nil))
        #expect(kept.map(\.key.description) == ["Rewriting/r", "Priced/a"])
    }

    /// Strings in canonical bytes must be valid UTF-8: every malformed sequence is refused, and
    /// valid text (a replacement character included) comes back byte for byte.
    @Test func canonicalStringsAreCheckedUTF8() throws {
        func encoded(_ utf8: [UInt8]) -> [UInt8] {
            var writer = ByteWriter()
            writer.varint(1)
            writer.string("p")
            writer.byte(ValueTag.string.rawValue)
            writer.lengthPrefixed(utf8)
            return writer.bytes
        }
        let invalid: [[UInt8]] = [[0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0x61, 0x80], [0xEF, 0xBF]]
        for bytes in invalid {
            #expect(throws: ArborError.self, "\(bytes)") { try RecordCoding.decode(encoded(bytes)) }
        }
        for text in ["", "plain", "caf\u{E9}", "\u{FFFD}", "a\u{FFFD}b", "\u{1F333} arbor", "nul\u{0}inside"] {
            #expect(try RecordCoding.decode(encoded(Array(text.utf8)))["p"] == .string(text))
        }
    }

    /// The default type name is `String(describing:)` of the type, as stored data has always
    /// named it, also for nested and generic types and when asked many times from many tasks;
    /// ids of the common types and of others that encode as a string or an integer give the
    /// same strings as before.
    @Test func defaultTypeNamesAndIdStringsAreUnchanged() async throws {
        #expect(Outer.Nested.typeName == "Nested")
        #expect(Outer.Nested.typeName == String(describing: Outer.Nested.self))
        #expect(Wrapper<Int>.typeName == "Wrapper<Int>")
        #expect(Wrapper<Outer.Nested>.typeName == "Wrapper<Nested>")
        #expect(Renamed.typeName == "custom-name")
        let names = try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<8 { group.addTask { (0..<1_000).map { _ in Wrapper<String>.typeName } } }
            return try await group.reduce(into: Set<String>()) { $0.formUnion($1) }
        }
        #expect(names == ["Wrapper<String>"])

        let uuid = UUID()
        #expect(try RecordEncoder.idString(of: Outer.Nested(id: "n1")) == "n1")
        #expect(try RecordEncoder.idString(of: Wrapper<Int>(id: -7)) == "-7")
        #expect(try RecordEncoder.idString(of: Wrapper<UUID>(id: uuid)) == uuid.uuidString)
        #expect(try RecordEncoder.idString(of: Wrapper<Int16>(id: 12)) == "12")
        #expect(try RecordEncoder.idString(of: Wrapper<Code>(id: Code(raw: "abc"))) == "abc")
        #expect(throws: ArborError.self) { try RecordEncoder.idString(of: Wrapper<Double>(id: 1.5)) }
        #expect(try RecordEncoder.records(of: Wrapper<Int>(id: 3))[0].key == RecordKey(type: "Wrapper<Int>", id: "3"))
    }

    /// Hand-written encoders that nest containers, use a super encoder, and write one key twice
    /// (as a value, then as a container, and the other way round): the last write of a key wins,
    /// and a container reached again by the same key keeps what was written into it.
    @Test func nestedContainersAndRewrittenKeysEncodeAsWritten() throws {
        let records = try RecordEncoder.records(of: HandEncoded(id: "h"))
        #expect(records.count == 1)
        #expect(records[0].properties == [
            "id": .string("h"),
            "valueThenNested": .map(["inner": .int(1)]),
            "nestedThenValue": .string("last"),
            "nested": .map(["a": .int(1), "b": .array([.bool(true), .map(["deep": .null])])]),
            "super": .map(["fromSuper": .string("s")]),
        ])
    }

    /// A change set encodes a value straight to canonical bytes (``PropertyList``), not through
    /// its record's dictionary: the same bytes and children as the record's, also for names
    /// written twice, names equal only as Unicode (one property, spelled as first written, as
    /// a dictionary keeps it), and more names than are searched one by one.
    @Test func changeSetBytesAreTheRecordsBytes() throws {
        func check<Value: Storable>(_ value: Value) throws {
            let direct = try RecordEncoder.encodedRecords(of: value)
            let viaRecords = try RecordEncoder.records(of: value).map(ChangeSet.EncodedRecord.init)
            #expect(direct.map(\.key) == viaRecords.map(\.key))
            #expect(direct.map(\.bytes) == viaRecords.map(\.bytes))
            #expect(direct.map(\.childKeys) == viaRecords.map(\.childKeys))
        }
        try check(Everything(id: 7))
        try check(HandEncoded(id: "h"))
        try check(Task(id: "t1", title: "Write", done: false,
                       notes: [Note(id: "n1", text: "first", attachments: [Attachment(id: "a1", data: Data([9]))])],
                       owner: Ref(id: "p1"), pinned: Note(id: "n3", text: "pinned")))
        try check(ManyNames(id: "m"))

        let properties = try RecordEncoder.records(of: ManyNames(id: "m"))[0].properties
        #expect(properties.count == 1 + 40 + 1)
        #expect(properties["name-3"] == .int(-3))
        #expect(properties["name-20"] == .map(["inner": .bool(true)]))
        // Precomposed first, then decomposed: one property, the first spelling, the last value.
        #expect(properties.keys.filter { $0 == "caf\u{E9}" }.map { Array($0.utf8) } == [Array("caf\u{E9}".utf8)])
        #expect(properties["caf\u{E9}"] == .string("decomposed"))
    }

    /// A hand-made record may name one child twice (the encoder never does): a chain of such
    /// records is decoded a record at a time, not once per path (2^n for a chain of n).
    @Test func aChildNamedTwiceIsDecodedOnce() async throws {
        let store = Store(backend: MemoryBackend())
        var changes = ChangeSet()
        let depth = 12
        for level in 0...depth {
            let next = RecordKey(type: CountedNode.typeName, id: "n\(level + 1)")
            let below: [PropertyValue] = level < depth ? [.child(next), .child(next)] : []
            try changes.save(Record(type: CountedNode.typeName, id: "n\(level)", properties: ["id": .string("n\(level)"), "below": .array(below)]))
        }
        try await store.commit(changes)
        CountedNode.decoded.withLock { $0 = 0 }
        let root = try #require(try await store.value(CountedNode.self, id: "n0"))
        #expect(CountedNode.decoded.withLock { $0 } == depth + 1)
        var node = root, levels = 0
        while let first = node.below.first { #expect(node.below.count == 2); node = first; levels += 1 }
        #expect(levels == depth)
    }

    /// A hand-made chain of child records longer than any value decodes is refused once it
    /// passes that depth, not loaded to its end a batch of reads per level first.
    @Test func aChainOfChildRecordsTooDeepToDecodeIsNotLoadedToItsEnd() async throws {
        let store = Store(backend: MemoryBackend())
        var changes = ChangeSet()
        let depth = 1_000
        for level in 0...depth {
            let below: [PropertyValue] = level < depth ? [.child(RecordKey(type: CountedNode.typeName, id: "n\(level + 1)"))] : []
            try changes.save(Record(type: CountedNode.typeName, id: "n\(level)", properties: ["id": .string("n\(level)"), "below": .array(below)]))
        }
        try await store.commit(changes)
        await #expect { try await store.value(CountedNode.self, id: "n0") } throws: { error in
            (error as? ArborError)?.code == .coding && "\(error)".contains("past 256 levels of child records")
        }
    }

    /// A type that does not decode its id (as `let id = UUID()` does not) read back as a value
    /// with another id, which a save then wrote as a second record. The read is now refused,
    /// as a root and as a child; the records stay as they were.
    @Test func aValueThatDoesNotDecodeItsIDIsRefusedWhenRead() async throws {
        let store = Store(backend: MemoryBackend())
        var changes = ChangeSet()
        try changes.save(ForgetsItsID(id: "kept", name: "a"))
        try changes.save(HoldsForgetful(id: "owner", child: ForgetsItsID(id: "inner", name: "b")))
        try await store.commit(changes)
        for read in [{ _ = try await store.value(ForgetsItsID.self, id: "kept") }, { _ = try await store.value(HoldsForgetful.self, id: "owner") }] {
            await #expect {
                try await read()
            } throws: { error in
                let error = error as? ArborError
                return error?.code == .coding && error?.message.contains("does not decode its id") == true
            }
        }
        #expect(try await store.record(RecordKey(type: ForgetsItsID.typeName, id: "kept"))?.properties["name"] == .string("a"))
    }

    /// A date, bytes, a URL, a decimal or a reference that encodes itself (as property wrappers
    /// and hand-written `encode(to:)` forward them) reads back through a container, and one a
    /// container encoded reads back through `init(from:)`: both ways used to fail at read.
    @Test func valuesInTheirOwnCodableFormReadBackEitherWay() async throws {
        let store = Store(backend: MemoryBackend())
        let value = Forwarded(id: "f", at: Date(timeIntervalSinceReferenceDate: 12.5), data: Data([1, 2, 255]), url: URL(string: "https://example.com/a?b=1")!, price: Decimal(string: "12.34")!, owner: Ref(id: "p1"))
        for forwards in [true, false] {
            var written = value
            written.forwards = forwards
            try await store.save(written)
            let read = try #require(try await store.value(Forwarded.self, id: "f"))
            #expect(read.at == value.at && read.data == value.data && read.url == value.url && read.price == value.price && read.owner == value.owner)
        }
        // Written by containers, the kinds of their own; forwarded, their Codable forms.
        var forwarded = value
        forwarded.forwards = true
        let properties = try RecordEncoder.records(of: forwarded)[0].properties
        #expect(properties["at"] == .double(12.5) && properties["data"] == .array([.int(1), .int(2), .int(255)]))
        #expect(try RecordEncoder.records(of: value)[0].properties["at"] == .date(value.at))
        // An integer is no date's own form (a Date encodes a Double): still refused.
        struct Dated: Storable { var id: String; var at: Date }
        let key = RecordKey(type: Dated.typeName, id: "d")
        #expect(throws: DecodingError.self) {
            try RecordDecoder.value(Dated.self, key: key, records: [key: Record(key: key, properties: ["id": .string("d"), "at": .int(1_700_000_000)])])
        }
    }

    /// Names compare by their bytes where bytes are what is stored: references whose ids differ
    /// only in Unicode form name two records (a set of them kept one), and a map name that
    /// starts with the byte "$" is wrapped in `$map` in JSON, a combining mark after it or not.
    @Test func namesInTwoUnicodeFormsStayTwo() throws {
        let (composed, decomposed) = ("Zo\u{EB}", "Zoe\u{308}")
        #expect(Set([Ref<Person>(id: composed), Ref<Person>(id: decomposed)]).count == 2)
        #expect(PropertyValue.map(["\u{E9}": .int(1)]) != PropertyValue.map(["e\u{301}": .int(1)]))
        #expect(Record(type: "T", id: "t", properties: ["\u{E9}": .int(1)]) != Record(type: "T", id: "t", properties: ["e\u{301}": .int(1)]))
        // A record whose only change is a name's spelling lists it: removed, then added.
        let respelled = RecordChange(key: RecordKey(type: "T", id: "t"), old: Record(type: "T", id: "t", properties: ["\u{E9}": .int(1), "x": .int(0)]),
                                     new: Record(type: "T", id: "t", properties: ["e\u{301}": .int(1), "x": .int(0)]))
        #expect(respelled.properties.map(\.name.unicodeScalars.count).sorted() == [1, 2])
        #expect(respelled.properties.allSatisfy { ($0.old == nil) != ($0.new == nil) })
        let marked = PropertyValue.map(["$\u{301}": .int(1)])
        let json = JSONValue(propertyValue: marked)
        #expect(json.serialized().contains("$map"))
        #expect(try PropertyValue(json: json) == marked)
        // As an earlier version wrote it, without `$map`, it reads back too.
        #expect(try PropertyValue(json: .object([("$\u{301}", .number("1"))])) == marked)
    }

    /// A tree of records is written only as deep as it is read back: 85 folders nested in
    /// arrays (three levels each, as the decoder counts) commit and read back whole; one more
    /// is refused when encoded, where it used to commit and then fail every read.
    @Test func aTreeOfRecordsIsWrittenOnlyAsDeepAsItIsRead() async throws {
        func chain(_ levels: Int) -> Folder {
            var folder = Folder(id: "f\(levels)", subfolders: [])
            for level in stride(from: levels - 1, through: 0, by: -1) { folder = Folder(id: "f\(level)", subfolders: [folder]) }
            return folder
        }
        let store = Store(backend: MemoryBackend())
        try await store.save(chain(85))
        var folder = try #require(try await store.value(Folder.self, id: "f0"))
        var depth = 0
        while let next = folder.subfolders.first { folder = next; depth += 1 }
        #expect(depth == 85)
        #expect { try RecordEncoder.records(of: chain(86)) } throws: { ($0 as? ArborError)?.code == .coding }
    }

    /// Records nested through a super encoder take a level more each (the decoder's
    /// superDecoder adds one); the deepest tree that encodes reads back, where trees from 65
    /// to 85 deep committed and then failed every read.
    @Test func aTreeNestedThroughSuperEncodersIsWrittenOnlyAsDeepAsItIsRead() async throws {
        func chain(_ levels: Int) -> SuperFolder {
            var folder = SuperFolder(id: "s\(levels)", subfolders: [])
            for level in stride(from: levels - 1, through: 0, by: -1) { folder = SuperFolder(id: "s\(level)", subfolders: [folder]) }
            return folder
        }
        var deepest = 1
        while (try? RecordEncoder.records(of: chain(deepest + 1))) != nil { deepest += 1 }
        #expect(deepest < 85)
        let store = Store(backend: MemoryBackend())
        try await store.save(chain(deepest))
        var folder = try #require(try await store.value(SuperFolder.self, id: "s0"))
        var depth = 0
        while let next = folder.subfolders.first { folder = next; depth += 1 }
        #expect(depth == deepest)
    }

    /// Two types that both default to one type name (their names without what they are nested
    /// in) would overwrite each other's records: once both are known, neither is written.
    /// Reads refuse them too: the records under the name are one set, which a read would decode
    /// as either type.
    @Test func twoTypesWithOneDefaultNameAreRefused() async throws {
        enum Inbox { struct Gadget: Storable { var id: String } }
        enum Archive { struct Gadget: Storable { var id: String } }
        let store = Store(backend: MemoryBackend())
        try await store.save(Inbox.Gadget(id: "1"))
        #expect(try RecordEncoder.records(of: Inbox.Gadget(id: "1"))[0].key.type == "Gadget")
        #expect(Archive.Gadget.typeName == "Gadget")
        for encode in [{ try RecordEncoder.records(of: Inbox.Gadget(id: "1")) }, { try RecordEncoder.records(of: Archive.Gadget(id: "1")) }] {
            #expect { try encode() } throws: { error in
                (error as? ArborError)?.code == .coding && "\(error)".contains("Inbox.Gadget and") && "\(error)".contains("Archive.Gadget")
            }
        }
        let refused = { (error: any Error) in (error as? ArborError)?.code == .coding && "\(error)".contains("typeName of its own") }
        await #expect { try await store.value(Archive.Gadget.self, id: "1") } throws: { refused($0) }
        await #expect { try await store.values(Archive.Gadget.self) } throws: { refused($0) }
        await #expect { try await store.snapshot().value(Inbox.Gadget.self, id: "1") } throws: { refused($0) }
    }

    @Test func aDecimalNaNIsRefusedWhenEncoded() throws {
        #expect { try RecordEncoder.records(of: Priced(id: "p", price: .nan)) } throws: { ($0 as? ArborError)?.code == .coding }
        // In a child record: where the child sits, up to the root.
        #expect { try RecordEncoder.records(of: Basket(id: "b", items: [Priced(id: "ok", price: 1), Priced(id: "p", price: .nan)])) } throws: {
            ($0 as? ArborError)?.message == "a Decimal NaN cannot be stored (at price) (in the Priced at items.1)"
        }
        #expect(try RecordEncoder.records(of: Priced(id: "p", price: Decimal(string: "12.50")!))[0].properties["price"] == .string("12.5"))
    }

    @Test func aChildHeldTwiceIsAnError() throws {
        let note = Note(id: "n", text: "x")
        let task = Task(id: "t", title: "", done: false, notes: [note], pinned: note)
        #expect(throws: ArborError.self) { try RecordEncoder.records(of: task) }
    }

    /// Unsigned values above Int64.max, and so most `Duration`s (whose low half is a UInt64),
    /// were refused; they are stored as their decimal strings, and only unsigned decoders read
    /// such a string as a number.
    @Test func unsignedValuesBeyondInt64AndDurationsRoundTrip() async throws {
        struct Timing: Storable, Equatable { var id: String; var timeout: Duration; var mask: UInt64; var masks: [UInt]; var small: UInt64 }
        let value = Timing(id: "t", timeout: .seconds(10), mask: .max, masks: [UInt(Int64.max) + 1, 3], small: 7)
        let record = try RecordEncoder.records(of: value)[0]
        #expect(record.properties["mask"] == .string("18446744073709551615"))
        #expect(record.properties["small"] == .int(7))
        let store = Store(backend: MemoryBackend())
        try await store.save(value)
        #expect(try await store.value(Timing.self, id: "t") == value)
        for negative in [Duration.milliseconds(-1), .zero, .nanoseconds(1), .seconds(-1e9)] {
            let timing = Timing(id: "n", timeout: negative, mask: 0, masks: [], small: 0)
            try await store.save(timing)
            #expect(try await store.value(Timing.self, id: "n") == timing)
        }
        // Such a string is no signed integer, nor is a string of a value an int holds.
        struct Signed: Storable { var id: String; var mask: Int64 }
        struct Unsigned: Storable { var id: String; var mask: UInt64 }
        #expect(throws: DecodingError.self) { try RecordDecoder.value(Signed.self, key: record.key, records: [record.key: Record(key: record.key, properties: ["id": .string("t"), "mask": .string("18446744073709551615")])]) }
        #expect(throws: DecodingError.self) { try RecordDecoder.value(Unsigned.self, key: record.key, records: [record.key: Record(key: record.key, properties: ["id": .string("t"), "mask": .string("7")])]) }
    }

    /// Plain Codable values nest exactly as deep as the format reads: arrays 63 levels below a
    /// property commit and read back, 64 are refused when encoded.
    @Test func codableValuesNestAsDeepAsTheFormatReads() async throws {
        struct DeepArrays: Storable { var id: String; var nested: [PropertyNest] }
        func nest(_ levels: Int) -> [PropertyNest] { (1..<levels).reduce([PropertyNest.leaf]) { inner, _ in [.list(inner)] } }
        let store = Store(backend: MemoryBackend())
        try await store.save(DeepArrays(id: "d", nested: nest(63)))
        #expect(try await store.value(DeepArrays.self, id: "d")?.nested == nest(63))
        #expect { try RecordEncoder.records(of: DeepArrays(id: "d", nested: nest(64))) } throws: { ($0 as? ArborError)?.code == .coding }
    }

    @Test func valuesNestedTooDeeplyAreRefusedBeforeWriting() throws {
        indirect enum Nest: Codable, Sendable { case leaf(Int); case nested(Nest) }
        struct Deep: Storable { var id: String; var nested: Nest }
        var nest = Nest.leaf(1)
        for _ in 0..<70 { nest = .nested(nest) }
        let value = Deep(id: "d", nested: nest)
        #expect { try RecordEncoder.records(of: value) } throws: { ($0 as? ArborError)?.code == .coding }
    }

    /// Levels a custom `encode(to:)` adds with nested containers or super encoders lengthen no
    /// coding path; they are counted all the same, so what commits reads back.
    @Test func levelsOfNestedContainersAndSuperEncodersCount() throws {
        struct ContainerChain: Storable {
            var id: String
            var levels: Int
            var viaSuperEncoder: Bool
            enum Keys: String, CodingKey { case id, next, value }
            init(id: String, levels: Int, viaSuperEncoder: Bool) { (self.id, self.levels, self.viaSuperEncoder) = (id, levels, viaSuperEncoder) }
            init(from decoder: any Decoder) throws { (id, levels, viaSuperEncoder) = ("", 0, false) }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Keys.self)
                try container.encode(id, forKey: .id)
                var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .next)
                for _ in 1..<levels {
                    nested = viaSuperEncoder ? nested.superEncoder().container(keyedBy: Keys.self) : nested.nestedContainer(keyedBy: Keys.self, forKey: .next)
                }
                try nested.encode(1, forKey: .value)
            }
        }
        for viaSuperEncoder in [false, true] {
            // Property `next` at depth 0, its innermost map at 62, the value in it at 63: the deepest read back.
            let deepest = try RecordEncoder.records(of: ContainerChain(id: "n", levels: 63, viaSuperEncoder: viaSuperEncoder))[0]
            #expect(try RecordCoding.decode(RecordCoding.encode(deepest.properties)) == deepest.properties)
            #expect { try RecordEncoder.records(of: ContainerChain(id: "n", levels: 64, viaSuperEncoder: viaSuperEncoder)) } throws: { error in
                (error as? ArborError)?.code == .coding && "\(error)".contains("levels deep")
            }
        }
    }

    /// A stored double beyond `Float`'s range is an error when read as a `Float`, as
    /// `JSONDecoder` has it, not infinity in silence; infinities and NaN read as they are.
    @Test func aDoubleBeyondFloatIsAnErrorReadAsFloat() throws {
        struct Sample: Storable { var id: String; var ratio: Float }
        func read(_ number: Double) throws -> Float {
            let key = RecordKey(type: Sample.typeName, id: "s")
            let records = [key: Record(key: key, properties: ["id": .string("s"), "ratio": .double(number)])]
            let sample: Sample = try RecordDecoder.value(Sample.self, key: key, records: records)
            return sample.ratio
        }
        #expect(try read(0.5) == 0.5)
        #expect(try read(.infinity) == .infinity)
        #expect(try read(.nan).isNaN)
        #expect { try read(1e39) } throws: { error in
            guard case DecodingError.dataCorrupted(let context)? = error as? DecodingError else { return false }
            return context.debugDescription.contains("does not fit in Float")
        }
    }

    @Test func malformedCanonicalBytesAreRejected() throws {
        let good = RecordCoding.encode(["a": .int(1), "b": .string("x")])
        #expect(throws: ArborError.self) { try RecordCoding.decode(good + [0]) }  // trailing byte
        #expect(throws: ArborError.self) { try RecordCoding.decode(Array(good.dropLast())) }  // truncated
        // Names out of order are not canonical.
        var swapped = ByteWriter()
        swapped.varint(2)
        swapped.string("b"); swapped.value(.int(1))
        swapped.string("a"); swapped.value(.int(1))
        #expect(throws: ArborError.self) { try RecordCoding.decode(swapped.bytes) }
        // A NaN with another payload is not canonical.
        var nan = ByteWriter()
        nan.varint(1); nan.string("x"); nan.byte(ValueTag.double.rawValue); nan.fixed64(0x7FF8_0000_0000_0001)
        #expect(throws: ArborError.self) { try RecordCoding.decode(nan.bytes) }
        // A non-minimal varint is not canonical.
        #expect(throws: ArborError.self) { try RecordCoding.decode([0x80, 0x00]) }
    }

    @Test func jsonParserIsStrict() throws {
        for bad in ["", "{", "[1,]", "{\"a\":1,}", "01", "1.", "\"\\x\"", "{\"a\":1,\"a\":2}", "nul", "\"\u{1}\"", "\"\\ud800\"", "[1] 2"] {
            #expect(throws: ArborError.self, "\(bad)") { try JSONValue.parse(bad) }
        }
        #expect(throws: ArborError.self) { try JSONValue.parse(String(repeating: "[", count: 600) + String(repeating: "]", count: 600)) }
        #expect(try JSONValue.parse(" {\"a\": [1, -2.5e3, true, null, \"\\u00e9\\ud83c\\udf33\"]} ")
            == .object([("a", .array([.number("1"), .number("-2.5e3"), .bool(true), .null, .string("é🌳")]))]))
    }

    @Test func jsonPropertyMappingRejectsWhatItCannotStore() throws {
        #expect(throws: ArborError.self) { try PropertyValue(json: .number("9223372036854775808")) }
        #expect(try PropertyValue(json: .number("-9223372036854775808")) == .int(.min))
        #expect(try PropertyValue(json: .number("1.0")) == .double(1))
        #expect(throws: ArborError.self) { try PropertyValue(json: .object([("$unknown", .null)])) }
        #expect(throws: ArborError.self) { try PropertyValue(json: .object([("$date", .string("yesterday"))])) }
        #expect(try PropertyValue(json: .object([("$date", .string("2026-01-02T03:04:05.678Z"))]))
            == .date(Date(timeIntervalSince1970: 1_767_323_045.678)))
    }

    @Test func datesFormatExactly() throws {
        for seconds in [0.0, 1_767_323_045.678, -86_400.001, 253_402_300_799.999] {
            let date = Date(timeIntervalSince1970: seconds)
            let (text, _) = ISODate.format(date)
            #expect(ISODate.parse(text).map { abs($0.timeIntervalSince1970 - seconds) < 0.0005 } == true, "\(text)")
        }
        #expect(ISODate.format(Date(timeIntervalSince1970: 0)).text == "1970-01-01T00:00:00.000Z")
        #expect(ISODate.parse("2026-02-31T00:00:00Z") == nil)
        #expect(ISODate.parse("2024-02-29T00:00:00Z") != nil)
        #expect(ISODate.parse("2100-02-29T00:00:00Z") == nil)
        #expect(ISODate.format(Date(timeIntervalSince1970: -0.5)).text == "1969-12-31T23:59:59.500Z")
        // The last half millisecond of 9999 rounds into 10000: inexact, and back through JSON whole.
        let last = Date(timeIntervalSince1970: 253_402_300_799.9996)
        #expect(ISODate.format(last).exact == false)
        #expect(try PropertyValue(json: JSONValue(propertyValue: .date(last))) == .date(last))
    }

    @Test func commitTimesPrintAsFoundationFormatsThem() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var generator = SystemRandomNumberGenerator()
        let samples = (0..<1_000).map { _ in UInt64.random(in: 0..<ISODate.endOfYear9999, using: &generator) }
        for milliseconds in [0, 1, 999, 1_000, 951_782_400_000, 1_764_030_243_989, ISODate.endOfYear9999 - 1] + samples {
            let time = HybridTime(milliseconds: milliseconds)
            #expect(time.timestamp == formatter.string(from: Date(timeIntervalSince1970: TimeInterval(milliseconds / 1000)) + TimeInterval(milliseconds % 1000) / 1000 + 0.0001), "\(milliseconds)")
        }
        #expect(HybridTime(milliseconds: 1_764_030_243_989, counter: 2).description == "2025-11-25T00:24:03.989Z+2")
        #expect(HybridTime(milliseconds: 0).description == "1970-01-01T00:00:00.000Z")
        #expect(HybridTime(milliseconds: .max, counter: .max).description == "18446744073709551615 ms after 1970+4294967295")
        #expect(HybridTime(milliseconds: ISODate.endOfYear9999).timestamp == "253402300800000 ms after 1970")
    }

    @Test func objectRenderingsRebuildTheSameBytes() throws {
        let record = RecordCoding.encode(try RecordEncoder.records(of: Everything(id: 1))[0].properties)
        let leaf = IndexNode(level: 0, entries: [
            IndexEntry(key: RecordKey(type: "Everything", id: "1").indexBytes, payload: .inline(record)),
            IndexEntry(key: RecordKey(type: "Everything", id: "2").indexBytes, payload: .blob(Hash.of([1]))),
        ])
        let branch = IndexNode(level: 1, entries: [IndexEntry(key: RecordKey(type: "T", id: "z").indexBytes, payload: .node(Hash.of([2]), count: 77))])
        let commit = Version.Content(root: Hash.of([3]), parents: [Hash.of([4]), Hash.of([5])], time: HybridTime(milliseconds: 1_700_000_000_000, counter: 3),
                                     replica: "r", message: "hello\nworld", recordCount: 9)
        let objects = [leaf.encoded(), branch.encoded(), commit.encoded(), Blob.encode(record: record), try HeadSet.encode([Hash.of([6]), Hash.of([7])]), [1, 2, 3], []]
        for bytes in objects {
            let json = ObjectJSON.render(bytes)
            let reparsed = try JSONValue.parse(json.serialized(pretty: true))
            #expect(try ObjectJSON.canonicalBytes(reparsed) == bytes)
        }
        #expect(ObjectJSON.render([1, 2, 3])["kind"] == .string("raw"))
        #expect(ObjectJSON.render(commit.encoded())["kind"] == .string("commit"))
    }
}

private enum Weekday: String, Codable, CaseIterable {
    case mon, thursday, fri
}

private struct Tagged: Storable, Equatable {
    var id: String
    var tags: Set<String>
    var byDay: [Weekday: [Int]]
    var nested: [Set<Int>]
}

private enum Outer {
    struct Nested: Storable { var id: String }
}

/// Decodes everything but its id, which it makes afresh (as `let id = UUID()` would).
private struct ForgetsItsID: Storable {
    var id: String
    var name: String
    init(id: String, name: String) { self.id = id; self.name = name }
    init(from decoder: any Decoder) throws {
        id = "fresh"
        name = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .name)
    }
}

private struct HoldsForgetful: Storable {
    var id: String
    var child: ForgetsItsID
}

private struct Wrapper<ID: Codable & Hashable & Sendable>: Storable { var id: ID }

extension Outer.Nested: Hashable {}

private struct Renamed: Storable {
    static let typeName = "custom-name"
    var id: String
}

/// An id that encodes as a single string.
private struct Code: Codable, Hashable, Sendable {
    var raw: String
    init(raw: String) { self.raw = raw }
    init(from decoder: any Decoder) throws { raw = try decoder.singleValueContainer().decode(String.self) }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(raw)
    }
}

/// A value tree node that counts how many times one is decoded.
private struct CountedNode: Storable {
    static let decoded = Mutex(0)
    var id: String
    var below: [CountedNode]

    init(from decoder: any Decoder) throws {
        enum Keys: String, CodingKey { case id, below }
        let container = try decoder.container(keyedBy: Keys.self)
        id = try container.decode(String.self, forKey: .id)
        below = try container.decode([CountedNode].self, forKey: .below)
        CountedNode.decoded.withLock { $0 += 1 }
    }
}

private struct Folder: Storable {
    var id: String
    var subfolders: [Folder]
}

/// Writes its date, bytes, URL, decimal and reference through containers, or (`forwards`) has
/// each encode itself; reads them the other way round.
private struct Forwarded: Storable {
    var id: String
    var at: Date
    var data: Data
    var url: URL
    var price: Decimal
    var owner: Ref<Person>
    var forwards = false
    enum Keys: CodingKey { case id, at, data, url, price, owner, forwards }
    init(id: String, at: Date, data: Data, url: URL, price: Decimal, owner: Ref<Person>) {
        (self.id, self.at, self.data, self.url, self.price, self.owner) = (id, at, data, url, price, owner)
    }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        id = try container.decode(String.self, forKey: .id)
        forwards = try container.decode(Bool.self, forKey: .forwards)
        if forwards {
            at = try container.decode(Date.self, forKey: .at)
            data = try container.decode(Data.self, forKey: .data)
            url = try container.decode(URL.self, forKey: .url)
            price = try container.decode(Decimal.self, forKey: .price)
            owner = try container.decode(Ref<Person>.self, forKey: .owner)
        } else {
            at = try Date(from: container.superDecoder(forKey: .at))
            data = try Data(from: container.superDecoder(forKey: .data))
            url = try container.decode(URL.self, forKey: .url)
            price = try container.decode(Decimal.self, forKey: .price)
            owner = try container.decode(Ref<Person>.self, forKey: .owner)
        }
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(id, forKey: .id)
        try container.encode(forwards, forKey: .forwards)
        if forwards {
            try at.encode(to: container.superEncoder(forKey: .at))
            try data.encode(to: container.superEncoder(forKey: .data))
            try url.encode(to: container.superEncoder(forKey: .url))
            try price.encode(to: container.superEncoder(forKey: .price))
            try owner.encode(to: container.superEncoder(forKey: .owner))
        } else {
            try container.encode(at, forKey: .at)
            try container.encode(data, forKey: .data)
            try container.encode(url, forKey: .url)
            try container.encode(price, forKey: .price)
            try container.encode(owner, forKey: .owner)
        }
    }
}

/// A folder that writes its subfolders through a super encoder.
private struct SuperFolder: Storable {
    var id: String
    var subfolders: [SuperFolder]
    enum Keys: CodingKey { case id, subfolders }
    init(id: String, subfolders: [SuperFolder]) { (self.id, self.subfolders) = (id, subfolders) }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        id = try container.decode(String.self, forKey: .id)
        subfolders = try container.superDecoder().container(keyedBy: Keys.self).decode([SuperFolder].self, forKey: .subfolders)
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(id, forKey: .id)
        var inner = container.superEncoder().container(keyedBy: Keys.self)
        try inner.encode(subfolders, forKey: .subfolders)
    }
}

private struct Priced: Storable {
    var id: String
    var price: Decimal
}

/// A value that writes its properties by hand, its id first, and reads back only its id.
private protocol HandWritten: Storable where ID == String {
    init(id: String)
    /// Writes what follows the id.
    func encodeRest(into container: inout KeyedEncodingContainer<AnyKey>) throws
}

extension HandWritten {
    init(from decoder: any Decoder) throws { self.init(id: try decoder.container(keyedBy: AnyKey.self).decode(String.self, forKey: AnyKey("id"))) }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyKey.self)
        try container.encode(id, forKey: AnyKey("id"))
        try encodeRest(into: &container)
    }
}

/// Encodes through every kind of nested container, by hand.
private struct HandEncoded: HandWritten {
    var id: String

    func encodeRest(into container: inout KeyedEncodingContainer<AnyKey>) throws {
        try container.encode("first", forKey: AnyKey("valueThenNested"))
        var replacing = container.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("valueThenNested"))
        try replacing.encode(1, forKey: AnyKey("inner"))
        var replaced = container.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("nestedThenValue"))
        try replaced.encode(2, forKey: AnyKey("gone"))
        try container.encode("last", forKey: AnyKey("nestedThenValue"))
        var nested = container.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("nested"))
        try nested.encode(1, forKey: AnyKey("a"))
        var list = nested.nestedUnkeyedContainer(forKey: AnyKey("b"))
        try list.encode(true)
        var deep = list.nestedContainer(keyedBy: AnyKey.self)
        try deep.encodeNil(forKey: AnyKey("deep"))
        var again = container.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("nested"))
        try again.encode(1, forKey: AnyKey("a"))
        var fromSuper = container.superEncoder().container(keyedBy: AnyKey.self)
        try fromSuper.encode("s", forKey: AnyKey("fromSuper"))
    }
}

/// More names than ``PropertyList`` searches one by one, some written again, one replaced by a
/// nested container past that count, and two names equal only as Unicode.
private struct ManyNames: HandWritten {
    var id: String

    func encodeRest(into container: inout KeyedEncodingContainer<AnyKey>) throws {
        try container.encode("precomposed", forKey: AnyKey("caf\u{E9}"))
        for number in 0..<40 { try container.encode(number, forKey: AnyKey("name-\(number)")) }
        for number in 0..<10 { try container.encode(-number, forKey: AnyKey("name-\(number)")) }
        var nested = container.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("name-20"))
        try nested.encode(true, forKey: AnyKey("inner"))
        try container.encode("decomposed", forKey: AnyKey("cafe\u{301}"))
    }
}

private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// An array of arrays, as deep as it is made: each level one array (a single-value container).
indirect enum PropertyNest: Codable, Equatable, Sendable {
    case leaf
    case list([PropertyNest])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .leaf } else { self = .list(try container.decode([PropertyNest].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .leaf: try container.encodeNil()
        case .list(let items): try container.encode(items)
        }
    }
}

/// Dictionaries whose keys or values name records, and one whose pairs name none.
private struct Roster: Storable, Equatable {
    var id: String
    var roles: [Ref<Person>: Ref<Person>] = [:]
    var notes: [Ref<Person>: Note] = [:]
    var counts: [Weekday: Int] = [:]
    var label = ""
}

private struct Lanes: Storable, Equatable {
    var id: String
    var lanes: [Weekday: [Note]] = [:]
    var grid: [[Int]: [Int]] = [:]
}

/// A key whose `Codable` form leaves out `label`, which its `Hashable` uses.
private struct Slot: Hashable, Codable {
    var hour: Int
    var label: String
    enum CodingKeys: String, CodingKey { case hour }
    init(hour: Int, label: String) { (self.hour, self.label) = (hour, label) }
    init(from decoder: any Decoder) throws {
        hour = try decoder.container(keyedBy: CodingKeys.self).decode(Int.self, forKey: .hour)
        label = ""
    }
}

private struct Timetable: Storable, Equatable {
    var id: String
    var slots: Set<Slot> = []
    var rooms: [Slot: String] = [:]
}

/// A value that leaves out a child it cannot encode, swallowing the error.
private struct Forgiving: Storable {
    var id: String
    var priced: Priced?
    var list: [Priced] = []
    var lines: [Line] = []
    enum CodingKeys: String, CodingKey { case id, priced, list, lines }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try? container.encode(priced, forKey: .priced)
        try? container.encode(list, forKey: .list)
        try? container.encode(lines, forKey: .lines)
    }
}

/// A value whose `encode(to:)` writes its key `slot` twice: a child, then what `then` says.
private struct Rewriting: Storable {
    enum Then { case value(Priced), nestedContainer, arrayThenMap(Priced), moved(Priced), swallowedFailure(Priced), alsoElsewhere(Priced) }
    var id: String
    var first: Priced
    var then: Then?
    enum CodingKeys: String, CodingKey { case id, slot, other }
    enum NoteKeys: String, CodingKey { case note }
    init(id: String, first: Priced, then: Then?) {
        (self.id, self.first, self.then) = (id, first, then)
    }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try container.decode(String.self, forKey: .id), first: try container.decode(Priced.self, forKey: .slot), then: nil)
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(first, forKey: .slot)
        switch then {
        case .value(let second): try container.encode(second, forKey: .slot)
        case .nestedContainer:
            var nested = container.nestedContainer(keyedBy: NoteKeys.self, forKey: .slot)
            try nested.encode("replaced", forKey: .note)
        case .arrayThenMap(let child):
            var list = container.nestedUnkeyedContainer(forKey: .other)
            try list.encode(child)
            var nested = container.nestedContainer(keyedBy: NoteKeys.self, forKey: .other)
            try nested.encode("replaced", forKey: .note)
        case .moved(let child):
            try container.encodeNil(forKey: .slot)
            var list = container.nestedUnkeyedContainer(forKey: .other)
            try list.encode(child)
        case .swallowedFailure(let child):
            try? container.encode(child, forKey: .slot)
        case .alsoElsewhere(let child):
            try container.encode(child, forKey: .other)
        case nil: break
        }
    }
}

/// A plain value holding a child, and a field encoded after it.
private struct Line: Codable {
    var item: Priced
    var price: Decimal
}

extension CodingTests {
    /// A child written again by the record that holds it (a custom `encode(to:)` writing a key
    /// twice, or moving a child to another key; a subclass re-encoding its superclass's key),
    /// the last write winning as in Foundation's encoders: one record, as the surviving write
    /// has it, with its own children once.
    @Test func aChildWrittenAgainByItsHolderIsKeptAsTheLastWriteHasIt() async throws {
        let again = try RecordEncoder.records(of: Rewriting(id: "r", first: Priced(id: "a", price: 1), then: .value(Priced(id: "a", price: 2))))
        #expect(again.map(\.key.description) == ["Rewriting/r", "Priced/a"])
        #expect(again[0].properties["slot"] == .child(RecordKey(type: "Priced", id: "a")))
        #expect(again[1].properties["price"] == .string("2"))

        let moved = try RecordEncoder.records(of: Rewriting(id: "r", first: Priced(id: "a", price: 1), then: .moved(Priced(id: "a", price: 3))))
        #expect(moved.map(\.key.description) == ["Rewriting/r", "Priced/a"])
        #expect(moved[0].properties["slot"] == .null)
        #expect(moved[0].properties["other"] == .array([.child(RecordKey(type: "Priced", id: "a"))]))
        #expect(moved[1].properties["price"] == .string("3"))

        // The second write failed and was swallowed: the first stands.
        let failed = try RecordEncoder.records(of: Rewriting(id: "r", first: Priced(id: "a", price: 1), then: .swallowedFailure(Priced(id: "a", price: .nan))))
        #expect(failed.map(\.key.description) == ["Rewriting/r", "Priced/a"])
        #expect(failed[1].properties["price"] == .string("1"))

        // A child with children of its own, written twice: each record once, as last written.
        let note = Note(id: "n", text: "second", attachments: [Attachment(id: "x", data: Data([2]))])
        let nested = try RecordEncoder.records(of: WritingTwice(id: "w", first: Note(id: "n", text: "first", attachments: [Attachment(id: "x", data: Data([1]))]), second: note))
        #expect(nested.map(\.key.description) == ["WritingTwice/w", "Note/n", "Attachment/x"])
        #expect(nested[1].properties["text"] == .string("second") && nested[2].properties["data"] == .bytes([2]))
        let store = Store(backend: MemoryBackend())
        try await store.save(WritingTwice(id: "w", first: Note(id: "n", text: "first", attachments: [Attachment(id: "x", data: Data([1]))]), second: note))
        #expect(try await store.value(WritingTwice.self, id: "w")?.first == note)
        #expect(try await store.verify().isIntact)
    }

    /// A child both writes keep, under two keys of its holder or under two holders, is refused:
    /// a child record has one owner.
    @Test func aChildKeptTwiceIsRefusedWhereverItWasWritten() throws {
        #expect { try RecordEncoder.records(of: Rewriting(id: "r", first: Priced(id: "a", price: 1), then: .alsoElsewhere(Priced(id: "a", price: 1)))) } throws: {
            "\($0)".contains("holds Priced/a twice")
        }
        let shared = Attachment(id: "x", data: Data())
        let task = Task(id: "t", title: "", done: false, notes: [Note(id: "n", text: "", attachments: [shared])], pinned: Note(id: "m", text: "", attachments: [shared]))
        #expect { try RecordEncoder.records(of: task) } throws: { "\($0)".contains("holds Attachment/x twice") }
    }

    /// A graph of class instances that shares each node twice under one holder, 40 levels deep,
    /// would be 2^40 records written again: refused after a few hundred.
    @Test(.timeLimit(.minutes(1))) func aSharedClassGraphIsRefusedBeforeItMultiplies() throws {
        var node = SharedNode(id: "leaf", next: [])
        for level in 0..<40 { node = SharedNode(id: "n\(level)", next: [node, node]) }
        #expect { try RecordEncoder.records(of: node) } throws: { "\($0)".contains("twice") }
    }
}

/// A class whose instances may be shared by several holders.
private final class SharedNode: Storable {
    let id: String
    let next: [SharedNode]
    init(id: String, next: [SharedNode]) { (self.id, self.next) = (id, next) }
}

/// Writes `first` under `note`, then `second` under the same key.
private struct WritingTwice: Storable {
    var id: String
    var first: Note
    var second: Note
    enum CodingKeys: String, CodingKey { case id, note }
    init(id: String, first: Note, second: Note) { (self.id, self.first, self.second) = (id, first, second) }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let note = try container.decode(Note.self, forKey: .note)
        self.init(id: try container.decode(String.self, forKey: .id), first: note, second: note)
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(first, forKey: .note)
        try container.encode(second, forKey: .note)
    }
}

extension CodingTests {
    /// A child written again into a Set sorts there by its own key, as it would written once:
    /// the same value, whether its encoder wrote a child twice or not, has the same bytes.
    @Test func aChildWrittenAgainIntoASetSortsByItsKey() throws {
        let children = (0..<20).map { SetMember(id: "t\($0)") }
        for child in children {
            let once = try RecordEncoder.records(of: TaggingTwice(id: "s", earlier: nil, set: Set(children)))
            let twice = try RecordEncoder.records(of: TaggingTwice(id: "s", earlier: child, set: Set(children)))
            #expect(twice.map(\.key) == once.map(\.key))
            #expect(twice[0].properties == once[0].properties, "\(child.id)")
        }
    }
}

private struct SetMember: Storable, Hashable {
    var id: String
}

/// Writes `earlier` under `set`, then `set` over it.
private struct TaggingTwice: Storable {
    var id: String
    var earlier: SetMember?
    var set: Set<SetMember>
    enum CodingKeys: String, CodingKey { case id, set }
    init(id: String, earlier: SetMember?, set: Set<SetMember>) { (self.id, self.earlier, self.set) = (id, earlier, set) }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try container.decode(String.self, forKey: .id), earlier: nil, set: try container.decode(Set<SetMember>.self, forKey: .set))
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        if let earlier { try container.encode(earlier, forKey: .set) }
        try container.encode(set, forKey: .set)
    }
}

extension CodingTests {
    /// An array element that fails to decode is not consumed, as with JSONDecoder: a lenient
    /// array that then skips it another way keeps every element after it (a case an app
    /// removed, in records an older version wrote).
    @Test func anArrayElementThatFailsToDecodeIsNotConsumed() throws {
        let key = RecordKey(type: LenientCard.typeName, id: "c")
        let record = Record(key: key, properties: ["id": .string("c"), "tags": .array([.string("blue"), .string("green"), .string("red"), .int(7)])])
        let read = try RecordDecoder.value(LenientCard.self, key: key, records: [key: record])
        let json = try JSONDecoder().decode(LenientCard.self, from: Data(#"{"id": "c", "tags": ["blue", "green", "red", 7]}"#.utf8))
        #expect(read.tags.values == [.green, .red] && json.tags.values == read.tags.values)
        #expect(read.tags.skipped == 2)
    }
}

/// Tags that skip the elements they cannot read.
private struct LenientTags: Codable, Equatable, Sendable {
    enum Tag: String, Codable, Sendable { case red, green }
    private struct Skip: Decodable {
        init(from decoder: any Decoder) throws { _ = try decoder.singleValueContainer() }
    }
    var values: [Tag]
    var skipped = 0
    init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        values = []
        while !container.isAtEnd {
            if let tag = try? container.decode(Tag.self) {
                values.append(tag)
            } else {
                _ = try container.decode(Skip.self)
                skipped += 1
            }
        }
    }
    func encode(to encoder: any Encoder) throws { try values.encode(to: encoder) }
}

private struct LenientCard: Storable {
    var id: String
    var tags: LenientTags
}

extension CodingTests {
    /// A `Ref` that a wrapper forwards to (a property wrapper's `encode(to:)` and
    /// `init(from:)`) is stored as the reference a container writes, and reads back from it.
    @Test func aForwardedReferenceIsStoredAsAReference() async throws {
        let value = ForwardedOwner(id: "f", owner: Ref(id: "p1"))
        let record = try RecordEncoder.records(of: value)[0]
        #expect(record.properties["owner"] == .reference(RecordKey(type: Person.typeName, id: "p1")))
        let store = Store(backend: MemoryBackend())
        try await store.save(value)
        #expect(try await store.value(ForwardedOwner.self, id: "f")?.owner == Ref(id: "p1"))
        // Written by a container before the wrapper was added: read through it all the same.
        let key = RecordKey(type: ForwardedOwner.typeName, id: "g")
        let plain = Record(key: key, properties: ["id": .string("g"), "owner": .reference(RecordKey(type: Person.typeName, id: "p2"))])
        #expect(try RecordDecoder.value(ForwardedOwner.self, key: key, records: [key: plain]).owner == Ref(id: "p2"))
    }
}

/// A property wrapper that forwards its coding to the value it wraps.
@propertyWrapper private struct Forwarding<Value: Codable & Sendable>: Codable, Sendable {
    var wrappedValue: Value
    init(wrappedValue: Value) { self.wrappedValue = wrappedValue }
    init(from decoder: any Decoder) throws { wrappedValue = try Value(from: decoder) }
    func encode(to encoder: any Encoder) throws { try wrappedValue.encode(to: encoder) }
}

private struct ForwardedOwner: Storable {
    var id: String
    @Forwarding var owner: Ref<Person>
    init(id: String, owner: Ref<Person>) { self.id = id; _owner = Forwarding(wrappedValue: owner) }
}

extension CodingTests {
    /// 128-bit integers are stored without loss: as ints where they fit in 64 bits, else as
    /// their decimal strings, which only the types they fit read back.
    @Test func integersOf128BitsRoundTrip() async throws {
        struct Ledger: Storable, Equatable { var id: String; var total: Int128; var mask: UInt128; var entries: [Int128]; var single: Wide }
        struct Wide: Codable, Equatable { var value: UInt128
            init(_ value: UInt128) { self.value = value }
            init(from decoder: any Decoder) throws { value = try decoder.singleValueContainer().decode(UInt128.self) }
            func encode(to encoder: any Encoder) throws { var container = encoder.singleValueContainer(); try container.encode(value) }
        }
        let store = Store(backend: MemoryBackend())
        let values = [
            Ledger(id: "a", total: .min, mask: .max, entries: [.max, Int128(Int64.min) - 1, 5, 0], single: Wide(.max)),
            Ledger(id: "b", total: 42, mask: 7, entries: [], single: Wide(UInt128(UInt64.max))),
        ]
        for value in values {
            try await store.save(value)
            #expect(try await store.value(Ledger.self, id: value.id) == value)
        }
        let record = try RecordEncoder.records(of: values[0])[0]
        #expect(record.properties["total"] == .string("-170141183460469231731687303715884105728"))
        #expect(record.properties["entries"] == .array([.string(String(Int128.max)), .string("-9223372036854775809"), .int(5), .int(0)]))
        #expect(try RecordEncoder.records(of: values[1])[0].properties["total"] == .int(42))
        // A UInt64 beyond Int64 reads as a UInt128; an Int128 beyond 64 bits does not read as an Int64.
        struct Narrow: Storable { var id: String; var total: Int64 }
        struct Widened: Storable { var id: String; var total: UInt128 }
        let key = RecordKey(type: "N", id: "n")
        let stored = Record(key: key, properties: ["id": .string("n"), "total": try PropertyEncoder.integer(UInt64.max, at: [])])
        #expect(try RecordDecoder.value(Widened.self, key: key, records: [key: stored]).total == UInt128(UInt64.max))
        #expect(throws: DecodingError.self) { try RecordDecoder.value(Narrow.self, key: key, records: [key: stored]) }
        let wide = Record(key: key, properties: ["id": .string("n"), "total": .string(String(UInt128.max))])
        #expect(throws: DecodingError.self) { try RecordDecoder.value(Narrow.self, key: key, records: [key: wide]) }
        #expect(throws: DecodingError.self) { try RecordDecoder.value(Ledger.self, key: key, records: [key: Record(key: key, properties: ["id": .string("n"), "total": .string("007"), "mask": .int(0), "entries": .array([]), "single": .int(0)])]) }
    }
}

/// Holds priced children.
private struct Basket: Storable {
    var id: String
    var items: [Priced]
}

extension CodingTests {
    /// A child whose first write was abandoned (its holder's encoding failed after it, the
    /// error swallowed) may be held by another record: the abandoned write is not an owner.
    @Test func aChildOfAnAbandonedWriteMayBeHeldElsewhere() throws {
        let item = Priced(id: "ok", price: 1)
        let records = try RecordEncoder.records(of: HoldingAfterForgiving(id: "h", forgiving: Forgiving(id: "f", lines: [Line(item: item, price: .nan)]), item: item))
        #expect(records.map(\.key.description) == ["HoldingAfterForgiving/h", "Forgiving/f", "Priced/ok"])
        #expect(records[0].properties["item"] == .child(RecordKey(type: "Priced", id: "ok")))
        // Held for real twice, an abandoned write beside: still refused.
        #expect { try RecordEncoder.records(of: HoldingAfterForgiving(id: "h", forgiving: Forgiving(id: "f", list: [item], lines: [Line(item: item, price: .nan)]), item: item)) } throws: {
            "\($0)".contains("holds Priced/ok twice")
        }
    }
}

private struct HoldingAfterForgiving: Storable {
    var id: String
    var forgiving: Forgiving
    var item: Priced
}
