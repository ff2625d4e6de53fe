import ArborJSON
import Foundation
import Testing
@testable import Arbor

/// The JSON parsers fed damaged and hostile text: the JSON adapter's object and ref files
/// (edited by people, truncated by full disks, mangled by sync tools) and the property
/// documents the CLI reads. Each input must parse or fail with an ``ArborError`` — never crash,
/// never overflow the stack — and a store whose files were damaged must report them as corrupt,
/// never return other bytes than were stored.
@Suite struct FuzzJSONTests {
    /// JSON fragments that take mutations past the first syntax check: structure, the tags of
    /// the value mapping in the shapes they must not have, numbers at and past the limits,
    /// escapes, and invalid UTF-8.
    static let tokens: [[UInt8]] = [
        "{", "}", "[", "]", ",", ":", "\"", "\\", "null", "true", "false", "-0", "0.0", "1e999", "-1e999", "1e-400",
        "99999999999999999999", "-9223372036854775808", "9223372036854775808", "18446744073709551616", "1.5", "0x10",
        "\"$date\"", "\"$interval\"", "\"$bytes\"", "\"$double\"", "\"$ref\"", "\"$child\"", "\"$map\"", "\"$other\"",
        "{\"$date\": \"2026-01-02T03:04:05.678Z\"}", "{\"$date\": \"9999-12-31T23:59:59.999Z\", \"$interval\": 1e308}",
        "{\"$date\": 5}", "{\"$bytes\": \"!!\"}", "{\"$bytes\": 7}", "{\"$double\": \"NaN\"}", "{\"$ref\": []}",
        "{\"$child\": {\"type\": 1}}", "{\"$ref\": {\"type\": \"T\", \"id\": \"i\"}, \"x\": 1}", "{\"$map\": []}",
        "\"type\"", "\"id\"", "\"kind\"", "\"leaf\"", "\"branch\"", "\"commit\"", "\"blob\"", "\"heads\"", "\"raw\"",
        "\"level\"", "65", "\"counter\"", "4294967296", "\"records\"", "\"properties\"",
        "\"\\u0000\"", "\"\\ud800\"", "\"\\udc00\\ud800\"", "\"\\ud83c\\udf33\"", "\\u", "\\x",
        String(repeating: "[", count: 600), String(repeating: "{\"a\":", count: 600),
    ].map { Array($0.utf8) } + [[0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xFF], [0xE2, 0x82], [0x00]]

    /// The JSON files a real store's JSON adapter writes for random records.
    static func storeFiles() async throws -> (path: String, objects: [(hash: Hash, file: String)], records: [Record]) {
        var random = Mutator(seed: FuzzSettings.seed ^ 0x1507)
        let path = temporaryPath("fuzz-json")
        let store = Store(backend: try JSONBackend.create(.init(path: path, synchronous: false)), configuration: .init(replica: "fuzz", clock: TickClock().read))
        var changes = ChangeSet()
        var records = [Record]()
        for index in 0..<60 {
            var properties = random.properties(count: random.below(4), depth: 2, children: false)
            if index % 30 == 0 { properties["large"] = .string(String(repeating: "large ", count: 200)) }
            let record = Record(type: "Item", id: "i\(index)", properties: properties)
            records.append(record)
            try changes.save(record)
        }
        try await store.commit(changes)
        try await store.change(on: try await store.head(), "second") { try $0.save(Record(type: "Item", id: "late", properties: ["n": .int(1)])) }
        records.append(Record(type: "Item", id: "late", properties: ["n": .int(1)]))
        var objects = [(hash: Hash, file: String)]()
        for hash in try await store.backend.allHashes().sorted() {
            objects.append((hash, "\(path)/objects/\(hash.hex.prefix(2))/\(hash.hex).json"))
        }
        try await store.close()
        return (path, objects, records)
    }

    @Test func mutatedObjectFilesParseOrFailClearly() async throws {
        let (path, objects, _) = try await Self.storeFiles()
        defer { removeItem(path) }
        let seeds = try objects.map { Array(try Data(contentsOf: URL(fileURLWithPath: $0.file))) }
        await FuzzTally.fuzz("JSON object files (ObjectJSON, JSONValue)", seeds: seeds, tokens: Self.tokens, salt: 0x0B1E, Self.parseObjectFile)
    }

    /// Parses `bytes` as an object file: the JSON must survive its own serializations, and an
    /// object rebuilt from it must render back to itself.
    static func parseObjectFile(_ bytes: [UInt8], _ tally: inout FuzzTally) throws {
        let json = try JSONValue.parse(bytes)
        if try JSONValue.parse(json.serializedBytes()) != json || JSONValue.parse(json.serializedBytes(pretty: true)) != json {
            tally.fail(bytes, "a JSON document does not survive its serialization")
        }
        let object = try ObjectJSON.canonicalBytes(json)
        if try ObjectJSON.canonicalBytes(ObjectJSON.render(object)) != object {
            tally.fail(bytes, "an object rebuilt from JSON renders to another object")
        }
    }

    /// A store folder whose object and ref files are damaged one at a time: every read gives the
    /// stored bytes or a clear error, and once a file is put back the store is whole again.
    @Test func damagedStoreFilesAreReportedNeverMisread() async throws {
        let (path, objects, records) = try await Self.storeFiles()
        defer { removeItem(path) }
        let backend = try JSONBackend.open(.init(path: path, synchronous: false))
        let stored = try await backend.get(objects.map(\.hash))
        let refs = try await backend.refs()
        let refFile = path + "/refs/heads.json"
        let files: [(file: String, hash: Hash?)] = objects.map { ($0.file, $0.hash) } + [(refFile, nil)]
        let originals = try files.map { Array(try Data(contentsOf: URL(fileURLWithPath: $0.file))) }
        var mutator = Mutator(seed: FuzzSettings.seed ^ 0xF17E, tokens: Self.tokens)
        var tally = FuzzTally("JSON adapter store files (JSONBackend)", allowing: [.corruptObject, .missingObject])
        let iterations = max(FuzzSettings.iterations / 4, 1)
        while tally.inputs < iterations {
            let index = mutator.below(files.count)
            let input = mutator.mutate(originals[index], donor: mutator.element(originals))
            try overwriteFile(files[index].file, with: input)
            // One read in sixteen goes through a fresh store, reading every record.
            let throughStore = tally.inputs % 16 == 0
            await tally.run(input) { tally in
                if let hash = files[index].hash {
                    let bytes = try await backend.get([hash])[hash]
                    if bytes != stored[hash] { tally.fail(input, "a damaged object file was read as other bytes") }
                } else if let hash = try await backend.refs()[RefName.heads], hash != refs[RefName.heads] {
                    // A ref is not hashed: a changed hex digit names another object, which is missing.
                    let store = Store(backend: backend, configuration: .init(nodeCacheCapacity: 0))
                    _ = try await store.heads()
                    tally.fail(input, "a ref naming a missing object was followed")
                }
                if throughStore {
                    let store = Store(backend: backend, configuration: .init(nodeCacheCapacity: 0))
                    if try await Set(store.records(ofType: "Item")) != Set(records) { tally.fail(input, "a damaged store read other records") }
                }
            }
            try overwriteFile(files[index].file, with: originals[index])
            // The reads never suspend: let other tests have the thread now and then.
            await _Concurrency.Task.yield()
        }
        tally.report()
        // Every file back in place: nothing was lost.
        let store = Store(backend: try JSONBackend.open(.init(path: path)), configuration: .init(nodeCacheCapacity: 0))
        #expect(try await Set(store.records(ofType: "Item")) == Set(records))
        #expect(try await store.backend.get(objects.map(\.hash)) == stored)
    }

    // MARK: The CLI's property documents

    /// Property documents the CLI's `put` reads, as they come from a shell or a script.
    static func propertyDocuments() -> [[UInt8]] {
        var random = Mutator(seed: FuzzSettings.seed ^ 0xD0C5)
        var documents = (0..<48).map { _ in JSONValue(properties: random.properties(count: 1 + random.below(4), depth: 2)).serializedBytes(pretty: random.chance(50)) }
        documents += [
            #"{"title": "Buy milk", "done": false, "count": -3, "ratio": -0.0, "due": {"$date": "2026-05-09T06:13:20.500Z"}}"#,
            #"{"blob": {"$bytes": "3q0="}, "owner": {"$ref": {"type": "Person", "id": "p1"}}, "notes": [{"$child": {"type": "Note", "id": "n1"}}, null]}"#,
            #"{"meta": {"$map": {"$a": {"$double": "inf"}, "b": {"$double": "nan"}}}, "when": {"$date": "0001-01-01T00:00:00.000Z", "$interval": -1e300}}"#,
            #"{"$date": "top-level names need no wrapping", "$ref": 1}"#,
        ].map { Array($0.utf8) }
        return documents
    }

    /// The properties `bytes` stand for, as `arbor put` reads them; what parses must survive
    /// the canonical encoding and the JSON mapping unchanged.
    static func parseProperties(_ bytes: [UInt8], _ tally: inout FuzzTally) throws {
        let properties = try PropertyValue.properties(json: try JSONValue.parse(bytes))
        if try RecordCoding.decode(RecordCoding.encode(properties)) != properties { tally.fail(bytes, "properties do not survive their encoding") }
        if try PropertyValue.properties(json: JSONValue(properties: properties)) != properties { tally.fail(bytes, "properties do not survive their JSON form") }
    }

    @Test func mutatedPropertyDocumentsParseOrFailClearly() async {
        await FuzzTally.fuzz("CLI property documents (JSONValue + PropertyValue)", seeds: Self.propertyDocuments(), tokens: Self.tokens, salt: 0xC11, Self.parseProperties)
    }

    /// Hostile documents aimed at the limits; each is refused with a message that says why.
    static let hostileDocuments: [(input: [UInt8], reason: String)] = [
        (Array(repeating: UInt8(ascii: "["), count: 100_000), "nested deeper than 512"),
        (Array((String(repeating: "[", count: 511) + String(repeating: "]", count: 511)).utf8), "properties must be a JSON object"),
        (Array((#"{"a": "# + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}").utf8), "nested deeper than 64"),
        (Array(String(repeating: #"{"a":"#, count: 100_000).utf8), "nested deeper than 512"),
        (Array((String(repeating: #"{"$map":"#, count: 200) + "{}" + String(repeating: "}", count: 200)).utf8), "nested deeper than 64"),
        (Array((#"{"a": "# + String(repeating: #"{"$map": "#, count: 300) + "{}" + String(repeating: "}", count: 301)).utf8), "nested deeper than 64"),
        (Array(#"{"n": 99999999999999999999}"#.utf8), "does not fit in 64 bits"),
        (Array(#"{"n": 1e999}"#.utf8), "out of the range of a double"),
        (Array(("{\"n\": " + String(repeating: "9", count: 100_000) + "}").utf8), "99999999…"),
        (Array(("{\"" + String(repeating: "k", count: 100_000) + "\": {\"$" + String(repeating: "t", count: 100_000) + "\": 1}}").utf8), "unknown tag $ttttt"),
        (Array(#"{"d": {"$date": "2026-02-30T00:00:00Z"}}"#.utf8), "$date must be a date"),
        (Array(#"{"d": {"$date": 1}}"#.utf8), "$date must be a date"),
        (Array(#"{"d": {"$date": "2026-01-01T00:00:00Z", "$interval": "x"}}"#.utf8), "$interval must be a number"),
        (Array(#"{"d": {"$interval": 1, "$date": "2026-01-01T00:00:00Z"}}"#.utf8), "$date 2026-01-01T00:00:00Z and $interval (2001-01-01T00:00:01.000Z) disagree"),
        (Array(#"{"d": {"$interval": 1}}"#.utf8), "unknown tag $interval"),
        (Array(#"{"b": {"$bytes": "not base64!"}}"#.utf8), "$bytes must be base64"),
        (Array(#"{"b": {"$bytes": "3q0=", "extra": 1}}"#.utf8), "unexpected member extra"),
        (Array(#"{"r": {"$ref": "Person/p1"}}"#.utf8), "a record key must be"),
        (Array(#"{"r": {"$child": {"type": "Note"}}}"#.utf8), "a record key must be"),
        (Array(#"{"x": {"$double": "NaN"}}"#.utf8), "$double must be"),
        (Array(#"{"m": {"$map": [1]}}"#.utf8), "$map must be an object"),
        (Array(#"{"t": {"$tag": 1}}"#.utf8), "unknown tag $tag"),
        (Array(#"{"s": "\ud800"}"#.utf8), "unpaired surrogate"),
        (Array(#"{"s": "a"#.utf8) + [0xC0, 0x80] + Array(#""}"#.utf8), "invalid UTF-8"),
        (Array(#"{"s": "a"#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8), "invalid UTF-8"),
        (Array(#"{"a": 1, "a": 2}"#.utf8), "duplicate member"),
        (Array("{\"e\u{301}\": 1, \"\u{e9}\": 2}".utf8), "duplicate member"),
        (Array("{\"a\": 1}\u{0}".utf8), "unexpected text after the document"),
        ([], "unexpected end"),
    ]

    @Test func aDateTakesItsMembersInEitherOrderAndAnIntegerInterval() throws {
        let precise = Date(timeIntervalSinceReferenceDate: 1.0005)
        let written = JSONValue(propertyValue: .date(precise)).serialized()
        #expect(written.contains("$interval"))
        guard case .object(let members) = try JSONValue.parse(Array(written.utf8)) else { Issue.record("not an object: \(written)"); return }
        for document in [JSONValue.object(members), .object(members.reversed())] {
            #expect(try PropertyValue(json: document) == .date(precise))
        }
        #expect(try PropertyValue(json: JSONValue.parse(Array(#"{"$date": "2001-01-01T00:00:02.000Z", "$interval": 2}"#.utf8))) == .date(Date(timeIntervalSinceReferenceDate: 2)))
    }

    /// The JSON form reads values exactly as deep as the canonical bytes do: what a record
    /// holds, `arbor get` prints and `arbor put` takes back.
    @Test func theDeepestValueARecordHoldsReadsBackFromJSON() throws {
        func nested(_ levels: Int) -> PropertyValue { (0..<levels).reduce(PropertyValue.null) { inner, _ in .array([inner]) } }
        func nestedDate(_ levels: Int) -> PropertyValue {
            (0..<levels).reduce(PropertyValue.date(Date(timeIntervalSinceReferenceDate: 1.0005))) { inner, _ in .array([inner]) }
        }
        let deepest: [String: PropertyValue] = ["a": nested(ByteReader.maximumValueDepth - 1), "d": nestedDate(ByteReader.maximumValueDepth - 1)]
        #expect(try RecordCoding.decode(RecordCoding.encode(deepest)) == deepest)
        #expect(try PropertyValue.properties(json: JSONValue.parse(Array(JSONValue(properties: deepest).serialized().utf8))) == deepest)
        let deeper = JSONValue(properties: ["a": nested(ByteReader.maximumValueDepth)]).serialized()
        #expect { try PropertyValue.properties(json: JSONValue.parse(Array(deeper.utf8))) } throws: { "\($0)".contains("nested deeper than 64") }
    }

    @Test func hostilePropertyDocumentsAreRefusedClearly() {
        var tally = FuzzTally("CLI property documents (hand-made)")
        for (input, reason) in Self.hostileDocuments {
            tally.run(input) { tally in
                do {
                    try Self.parseProperties(input, &tally)
                    tally.fail(input, "accepted; expected \(reason)")
                } catch let error as ArborError {
                    if !error.message.contains(reason) { tally.fail(input, "refused with \(error.message); expected \(reason)") }
                    throw error
                }
            }
        }
        tally.report()
    }
}
