import Foundation

/// A readable JSON rendering of any object, from which its canonical bytes can be rebuilt
/// exactly. The JSON adapter stores objects this way so a person can read a store's folder.
///
/// Bytes that are not a well-formed Arbor object (a third party's data, say) render as
/// `{"kind": "raw", "base64": ...}`, so the rendering is total and lossless.
public enum ObjectJSON {
    /// The JSON form of the object `bytes`.
    public static func render(_ bytes: [UInt8]) -> JSONValue {
        if let rendered = try? renderArborObject(bytes), (try? canonicalBytes(rendered)) == bytes {
            return rendered
        }
        return .object([("kind", .string("raw")), ("base64", .string(Data(bytes).base64EncodedString()))])
    }

    private static func renderArborObject(_ bytes: [UInt8]) throws -> JSONValue? {
        guard let kind = ObjectKind.of(bytes) else { return nil }
        func hash(_ value: Hash) -> JSONValue { .string(value.hex) }
        func number<N: BinaryInteger>(_ value: N) -> JSONValue { .number(String(value)) }
        switch kind {
        case .leaf, .branch:
            let node = try IndexNode.decode(bytes)
            if node.level == 0 {
                let records = try node.entries.map { entry -> JSONValue in
                    let key = try RecordKey(indexBytes: entry.key[...])
                    var members: [(key: String, value: JSONValue)] = [("type", .string(key.type)), ("id", .string(key.id))]
                    switch entry.payload {
                    case .inline(let record): members.append(("properties", JSONValue(properties: try RecordCoding.decode(record))))
                    case .blob(let blob): members.append(("blob", hash(blob)))
                    case .node: return .null
                    }
                    return .object(members)
                }
                return .object([("kind", .string("leaf")), ("records", .array(records))])
            }
            let children = try node.entries.map { entry -> JSONValue in
                guard case .node(let child, let count) = entry.payload else { return .null }
                let key = try RecordKey(indexBytes: entry.key[...])
                return .object([("last", JSONValue(recordKey: key)), ("node", hash(child)), ("count", number(count))])
            }
            return .object([("kind", .string("branch")), ("level", number(node.level)), ("children", .array(children))])
        case .commit:
            let commit = try Version.Content.decode(bytes)
            return .object([
                ("kind", .string("commit")), ("root", hash(commit.root)), ("parents", .array(commit.parents.map(hash))),
                ("time", .object([("milliseconds", number(commit.time.milliseconds)), ("counter", number(commit.time.counter))])),
                ("replica", .string(commit.replica)), ("message", .string(commit.message)), ("records", number(commit.recordCount)),
            ])
        case .blob:
            return .object([("kind", .string("blob")), ("properties", JSONValue(properties: try RecordCoding.decode(try Blob.decode(bytes))))])
        case .headSet:
            return .object([("kind", .string("heads")), ("heads", .array(try HeadSet.decode(bytes).map(hash)))])
        }
    }

    /// The canonical bytes a rendering stands for. Throws ``ArborError/Code/corruptObject`` if the
    /// JSON is not a valid rendering.
    public static func canonicalBytes(_ json: JSONValue) throws -> [UInt8] {
        do { return try rebuild(json) } catch let error as ArborError {
            throw ArborError(.corruptObject, "not a valid object rendering: \(error.message)")
        }
    }

    private static func rebuild(_ json: JSONValue) throws -> [UInt8] {
        func fail(_ why: String) -> ArborError { ArborError(.corruptObject, why) }
        func hash(_ value: JSONValue?) throws -> Hash {
            guard let text = value?.stringValue, let hash = Hash(hex: text) else { throw fail("expected a hash") }
            return hash
        }
        func integer(_ value: JSONValue?) throws -> UInt64 {
            guard case .number(let text)? = value, let number = UInt64(text) else { throw fail("expected an unsigned integer") }
            return number
        }
        func array(_ value: JSONValue?) throws -> [JSONValue] {
            guard case .array(let elements)? = value else { throw fail("expected an array") }
            return elements
        }
        func string(_ value: JSONValue?) throws -> String {
            guard let text = value?.stringValue else { throw fail("expected a string") }
            return text
        }
        switch json["kind"]?.stringValue {
        case "leaf":
            let entries = try array(json["records"]).map { record -> IndexEntry in
                let key = RecordKey(type: try string(record["type"]), id: try string(record["id"]))
                if let blob = record["blob"] { return IndexEntry(key: key.indexBytes, payload: .blob(try hash(blob))) }
                guard let properties = record["properties"] else { throw fail("a record needs properties or a blob") }
                return IndexEntry(key: key.indexBytes, payload: .inline(RecordCoding.encode(try PropertyValue.properties(json: properties))))
            }
            return IndexNode(level: 0, entries: entries).encoded()
        case "branch":
            let level = try integer(json["level"])
            guard (1...64).contains(level) else { throw fail("a branch level must be 1 to 64") }
            let entries = try array(json["children"]).map { child -> IndexEntry in
                guard let last = child["last"] else { throw fail("a child needs its last key") }
                let key = try PropertyValue.recordKey(last)
                return IndexEntry(key: key.indexBytes, payload: .node(try hash(child["node"]), count: try integer(child["count"])))
            }
            return IndexNode(level: Int(level), entries: entries).encoded()
        case "commit":
            let counter = try integer(json["time"]?["counter"])
            guard counter <= UInt64(UInt32.max) else { throw fail("clock counter out of range") }
            return Version.Content(
                root: try hash(json["root"]), parents: try array(json["parents"]).map { try hash($0) },
                time: HybridTime(milliseconds: try integer(json["time"]?["milliseconds"]), counter: UInt32(counter)),
                replica: try string(json["replica"]), message: try string(json["message"]), recordCount: try integer(json["records"])
            ).encoded()
        case "blob":
            guard let properties = json["properties"] else { throw fail("a blob needs properties") }
            return Blob.encode(record: RecordCoding.encode(try PropertyValue.properties(json: properties)))
        case "heads":
            return try HeadSet.encode(Set(try array(json["heads"]).map { try hash($0) }))
        case "raw":
            guard let text = json["base64"]?.stringValue, let data = Data(base64Encoded: text) else { throw fail("raw objects need base64") }
            return Array(data)
        default:
            throw fail("unknown object kind")
        }
    }
}
