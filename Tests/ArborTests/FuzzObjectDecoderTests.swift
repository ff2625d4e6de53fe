import Foundation
import Testing
@testable import Arbor

/// The object decoders fed damaged and hostile bytes. Objects arrive from disks, other
/// processes and other replicas, so every decoder must either decode or throw an
/// ``ArborError`` — never crash, never hang — and, being canonical, anything it accepts must
/// re-encode to exactly the bytes it read (FORMAT.md section 10). The JSON rendering of any
/// bytes, as the JSON adapter writes it, must give the same bytes back.
@Suite struct FuzzObjectDecoderTests {
    /// What the mutated seeds start from: one kind of object, or a record's canonical bytes.
    enum Target: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case leaf, branch, commit, blob, heads, record
        var testDescription: String { rawValue }
    }

    /// Every object of a small real store (random records, large ones in blobs, two heads and
    /// their merge), made by the real encoders, and the records inside its leaves and blobs.
    static func seeds() async throws -> [Target: [[UInt8]]] {
        var random = Mutator(seed: FuzzSettings.seed)
        let backend = MemoryBackend()
        let store = Store(backend: backend, configuration: .init(replica: "fuzz", clock: TickClock().read))
        var changes = ChangeSet()
        for index in 0..<200 {
            var properties = random.properties(count: random.below(4), depth: 2, children: false)
            if index % 40 == 0 { properties["large"] = .bytes(random.bytes(1_100)) }
            try changes.save(Record(type: index % 3 == 0 ? random.typeName() : "Item", id: "i\(index)-\(random.text())", properties: properties))
        }
        let first = try await store.commit(changes)
        for side in 0..<2 {
            try await store.change(on: first, "side \(side)") { changes in
                try changes.save(Record(type: "Item", id: "side\(side)", properties: ["n": .int(Int64(side))]))
            }
        }
        _ = try await store.mergeHeads()

        var seeds = [Target: [[UInt8]]]()
        for (_, bytes) in try await backend.get(Array(backend.allHashes())) {
            switch ObjectKind.of(bytes) {
            case .leaf:
                seeds[.leaf, default: []].append(bytes)
                for entry in try IndexNode.decode(bytes).entries {
                    if case .inline(let record) = entry.payload { seeds[.record, default: []].append(record) }
                }
            case .branch: seeds[.branch, default: []].append(bytes)
            case .commit: seeds[.commit, default: []].append(bytes)
            case .blob:
                seeds[.blob, default: []].append(bytes)
                seeds[.record, default: []].append(try Blob.decode(bytes))
            case .headSet: seeds[.heads, default: []].append(bytes)
            case nil: break
            }
        }
        seeds[.leaf, default: []].append(IndexNode.empty.encoded())
        seeds[.heads, default: []].append(try HeadSet.encode([]))
        // Small nodes too, made by the same encoder: most mutations then land in a field that
        // matters rather than in the middle of a long record, and each input is cheap.
        for _ in 0..<64 {
            var keys = Set<[UInt8]>()
            for _ in 0...random.below(4) { keys.insert(RecordKey(type: random.typeName(), id: random.text()).indexBytes) }
            let sorted = keys.sorted { $0.lexicographicallyPrecedes($1) }
            let record = RecordCoding.encode(random.properties(count: random.below(3), depth: 1))
            seeds[.record, default: []].append(record)
            seeds[.blob, default: []].append(Blob.encode(record: record))
            seeds[.leaf, default: []].append(IndexNode(level: 0, entries: sorted.map { key in
                IndexEntry(key: key, payload: random.chance(70) ? .inline(record) : .blob(Hash.of(key)))
            }).encoded())
            seeds[.branch, default: []].append(IndexNode(level: 1 + random.below(3), entries: sorted.map { key in
                IndexEntry(key: key, payload: .node(Hash.of(key), count: UInt64(1 + random.below(5_000))))
            }).encoded())
        }
        // Sorted: the store's enumeration order must not change which inputs a seed gives.
        return seeds.mapValues { $0.sorted { $0.lexicographicallyPrecedes($1) } }
    }

    @Test(arguments: Target.allCases) func mutatedObjectsDecodeOrFailClearly(target: Target) async throws {
        let seeds = try await Self.seeds()
        let own = try #require(seeds[target], "no \(target) in the seed store")
        let salt = UInt64(Target.allCases.firstIndex(of: target) ?? 0) + 1
        await FuzzTally.fuzz("object decoders (\(target) seeds)", seeds: own, donors: seeds.values.flatMap { $0 }, salt: salt, Self.decodeEveryWay)
    }

    /// Hand-made inputs aimed at the limits: lengths and counts at the largest varint, nesting
    /// at the depth limit, canonically equal names, every kind byte.
    @Test func hostileObjectsFailClearly() {
        var inputs: [[UInt8]] = [[], [0xA1], [0xA1, 0x00], [0xA2, 0x01, 0x00], [0xA1, 0x06], [0xA1, 0xFF]]
        let maxVarint: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]
        for kind in ObjectKind.allCases {
            inputs.append([0xA1, kind.rawValue] + maxVarint)
            inputs.append([0xA1, kind.rawValue, 0x01] + maxVarint)
            inputs.append([0xA1, kind.rawValue] + maxVarint + maxVarint + [UInt8](repeating: 0, count: 64))
            inputs.append([0xA1, kind.rawValue, 0x40] + [UInt8](repeating: 0xFF, count: 4096))
        }
        // Arrays nested 63 deep (accepted) and 64 deep (refused), and a million levels of tags.
        for depth in [63, 64, 100_000] {
            inputs.append([0x01, 0x01, 0x61] + (0..<depth).flatMap { _ in [0x0A, 0x01] as [UInt8] } + [0x00])
        }
        // An array claiming 2^28 elements in a short record.
        inputs.append([0x01, 0x01, 0x61, 0x0A, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00])
        // Two names Swift treats as equal ("e" + combining acute, then precomposed "é"), and an
        // ASCII name equal to one that is not ("K", then the Kelvin sign U+212A).
        inputs.append([0x02, 0x03, 0x65, 0xCC, 0x81, 0x00, 0x02, 0xC3, 0xA9, 0x00])
        inputs.append([0x02, 0x01, 0x4B, 0x00, 0x03, 0xE2, 0x84, 0xAA, 0x00])
        // The same past 16 names, where the check keeps the names otherwise.
        var many = ByteWriter()
        let names = ["K"] + (0..<16).map { "a\($0 < 10 ? "0" : "")\($0)" } + ["\u{212A}"]
        many.varint(names.count)
        for name in names { many.string(name); many.value(.null) }
        inputs.append(many.bytes)
        // A branch whose children claim 2^64 - 1 records each.
        let first: [UInt8] = [0x01, 0x61] + [UInt8](repeating: 0xAA, count: 32) + maxVarint
        let second: [UInt8] = [0x01, 0x62] + [UInt8](repeating: 0xBB, count: 32) + maxVarint
        inputs.append([0xA1, 0x02, 0x01, 0x02] + first + second)
        var tally = FuzzTally("object decoders (hand-made)")
        for input in inputs { tally.run(input) { try Self.decodeEveryWay(input, &$0) } }
        tally.report()
    }

    @Test func countsAndLevelsBeyondWhatTheBytesHoldAreRefused() throws {
        func refused(_ body: () throws -> Any, _ why: String) {
            #expect { _ = try body() } throws: { error in
                (error as? ArborError)?.code == .corruptObject && "\(error)".contains(why)
            }
        }
        // An array claiming 5 elements with 4 bytes left: every element takes at least a byte.
        refused({ try RecordCoding.decode([0x01, 0x01, 0x61, 0x0A, 0x05, 0x00, 0x00, 0x00, 0x00]) }, "implausible count 5")
        #expect(try RecordCoding.decode([0x01, 0x01, 0x61, 0x0A, 0x04, 0x00, 0x00, 0x00, 0x00])["a"] == .array(Array(repeating: .null, count: 4)))
        // Branch levels: 1 to 64, whatever the bytes after them.
        let entry: [UInt8] = [0x01, 0x61] + [UInt8](repeating: 0xAA, count: 32) + [0x01]
        refused({ try IndexNode.decode([0xA1, 0x02, 0x00, 0x01] + entry) }, "branch at level 0")
        refused({ try IndexNode.decode([0xA1, 0x02, 0x41, 0x01] + entry) }, "implausible level 65")
        #expect(try IndexNode.decode([0xA1, 0x02, 0x40, 0x01] + entry).level == 64)
        #expect(try ObjectLinks([0xA1, 0x02, 0x40, 0x01] + entry).level == 64)
        refused({ try ObjectLinks([0xA1, 0x02, 0x00, 0x01] + entry) }, "branch at level 0")
    }

    @Test func namesSwiftTreatsAsEqualAreRefused() throws {
        // Both spellings sort apart as bytes, but a Swift dictionary holds only one: decoding
        // them would silently drop a property, so the decoder refuses the record.
        let record: [UInt8] = [0x02, 0x03, 0x65, 0xCC, 0x81, 0x03, 0x02, 0x02, 0xC3, 0xA9, 0x03, 0x04]
        #expect { try RecordCoding.decode(record) } throws: { error in
            (error as? ArborError)?.code == .corruptObject && "\(error)".contains("canonically equivalent")
        }
        let map: [UInt8] = [0x01, 0x01, 0x6D, 0x0B] + record
        #expect { try RecordCoding.decode(map) } throws: { ($0 as? ArborError)?.code == .corruptObject }
    }

    /// Random valid values through every encoder and back: `decode(encode(x)) == x`.
    @Test func encodersRoundTripRandomValues() async {
        await onTheFuzzQueue { Self.roundTripRandomValues(FuzzSettings.iterations / 4) }.report()
    }

    static func roundTripRandomValues(_ iterations: Int) -> FuzzTally {
        var random = Mutator(seed: FuzzSettings.seed ^ 0xE1C0)
        var tally = FuzzTally("encoders round trip (random values)")
        while tally.inputs < iterations {
            let properties = random.properties(count: random.below(8))
            let record = RecordCoding.encode(properties)
            tally.run(record) { tally in
                if try RecordCoding.decode(record) != properties { tally.fail(record, "a record does not decode to what was encoded") }
                var keys = Set<[UInt8]>()
                for _ in 0..<random.below(20) { keys.insert(RecordKey(type: random.typeName(), id: random.text()).indexBytes) }
                // Branches are never empty: the tree builder emits no empty node above a leaf.
                let level = random.chance(70) || keys.isEmpty ? 0 : 1 + random.below(64)
                let entries = keys.sorted { $0.lexicographicallyPrecedes($1) }.map { key -> IndexEntry in
                    let hash = Hash.of(random.bytes(8))
                    let payload: IndexPayload = level > 0 ? .node(hash, count: random.chance(50) ? UInt64(random.below(1_000)) : UInt64.max) : (random.chance(80) ? .inline(record) : .blob(hash))
                    return IndexEntry(key: key, payload: payload)
                }
                let node = try IndexNode.decode(IndexNode(level: level, entries: entries).encoded())
                if node.level != level || node.entries != entries { tally.fail(record, "an index node does not decode to what was encoded") }
                let commit = Version.Content(
                    root: Hash.of(record), parents: (0..<random.below(3)).map { _ in Hash.of(random.bytes(4)) },
                    time: HybridTime(milliseconds: UInt64(random.below(Int.max)), counter: UInt32(truncatingIfNeeded: random.below(Int.max))),
                    replica: random.text(), message: random.text(), recordCount: UInt64(random.below(Int.max)))
                let decoded = try Version.Content.decode(commit.encoded())
                if decoded.encoded() != commit.encoded() || decoded.message != commit.message || decoded.parents != commit.parents {
                    tally.fail(record, "a commit does not decode to what was encoded")
                }
                let heads = Set((0..<random.below(4)).map { _ in Hash.of(random.bytes(4)) })
                if Set(try HeadSet.decode(try HeadSet.encode(heads))) != heads { tally.fail(record, "a head set does not decode to what was encoded") }
                if try Blob.decode(Blob.encode(record: record)) != record { tally.fail(record, "a blob does not decode to what was encoded") }
            }
        }
        return tally
    }

    // MARK: The harness

    /// Feeds `bytes` to every decoder. Returns when one accepts them, throws the first
    /// decoder's ``ArborError`` when all refuse them; anything else is recorded in `tally`.
    static func decodeEveryWay(_ bytes: [UInt8], _ tally: inout FuzzTally) throws {
        var rejection: ArborError?
        var accepted = false
        /// Runs one decoder: whether it accepted the bytes.
        func attempt(_ body: () throws -> Void) throws -> Bool {
            do {
                try body()
                accepted = true
                return true
            } catch let error as ArborError {
                rejection = rejection ?? error
                return false
            }
        }
        _ = ObjectKind.of(bytes)
        var links: ObjectLinks?
        _ = try attempt { links = try ObjectLinks(bytes) }

        // Index nodes: canonical, and their links and records agree with them.
        var node: IndexNode?
        _ = try attempt {
            let decoded = try IndexNode.decode(bytes)
            node = decoded
            if decoded.encoded() != bytes { tally.fail(bytes, "an index node re-encodes to other bytes") }
            _ = decoded.recordCount
        }
        // A node as point reads keep it: accepted exactly when decoded, and agreeing with it.
        let nodeBytes = try? NodeBytes(validating: bytes)
        if (nodeBytes != nil) != (node != nil) { tally.fail(bytes, "NodeBytes and IndexNode.decode disagree") }
        // A leaf searched where an engine lends it: refused exactly when not a leaf the decoder takes.
        let probe = node?.entries.first?.key ?? Array(bytes.prefix(8))
        let lentAccepted = (try? { _ = try NodeBytes.payload(inLentLeaf: bytes, for: probe, checked: true); return true }()) ?? false
        if lentAccepted != (node?.level == 0) { tally.fail(bytes, "a leaf read in place and IndexNode.decode disagree") }
        // The search of a leaf found sound before skips the checks: on any bytes it must still throw, never trap.
        _ = try? NodeBytes.payload(inLentLeaf: bytes, for: probe, checked: false)
        if let nodeBytes, let node {
            if nodeBytes.level != node.level { tally.fail(bytes, "NodeBytes reads another level") }
            if nodeBytes.count != node.entries.count { tally.fail(bytes, "NodeBytes counts other entries") }
            // The diff's view: every entry in place, and comparisons that agree with the decoded entries.
            for (index, entry) in node.entries.enumerated() where index < nodeBytes.count {
                let payload = try nodeBytes.payload(at: index)
                if nodeBytes.key(at: index) != entry.key || payload != entry.payload {
                    tally.fail(bytes, "NodeBytes reads entry \(index) otherwise")
                }
                let other = (index + 1) % node.entries.count
                if nodeBytes.compareKey(index, with: nodeBytes, other) != compareKeys(entry.key, node.entries[other].key)
                    || nodeBytes.hasSamePayload(index, as: nodeBytes, other) != (entry.payload == node.entries[other].payload) {
                    tally.fail(bytes, "NodeBytes compares entries \(index) and \(other) otherwise")
                }
            }
            for entry in node.entries {
                for probe in [entry.key, entry.key + [0x00], Array(entry.key.dropLast())] {
                    if node.level == 0 {
                        let expected = node.entries.first { $0.key == probe }?.payload
                        if try nodeBytes.payload(for: probe) != expected { tally.fail(bytes, "a point read in a leaf's bytes finds another payload") }
                        for checked in [true, false] where try NodeBytes.payload(inLentLeaf: bytes, for: probe, checked: checked) != expected {
                            tally.fail(bytes, "a point read in a leaf read in place (checked: \(checked)) finds another payload")
                        }
                    } else if try nodeBytes.child(covering: probe) != node.entries[node.childIndex(covering: probe)].payload.childHash {
                        tally.fail(bytes, "a point read in a branch's bytes takes another child")
                    }
                }
            }
        }
        if let node {
            if node.level == 0 {
                let blobs = node.entries.compactMap { entry -> Hash? in if case .blob(let hash) = entry.payload { hash } else { nil } }
                if links?.blobs != blobs || links?.recordCount != UInt64(node.entries.count) { tally.fail(bytes, "a leaf's links disagree with it") }
                for entry in node.entries {
                    _ = try attempt { _ = try RecordKey(indexBytes: entry.key[...]) }
                    if case .inline(let record) = entry.payload { _ = try attempt { try checkRecord(record, &tally) } }
                }
            } else if links.map({ $0.level != node.level || $0.children.map(\.hash) != node.entries.map(\.payload.childHash) }) ?? true {
                tally.fail(bytes, "a branch's links disagree with it")
            }
        }
        // Commits and head sets: canonical, and their links agree with them.
        _ = try attempt {
            let commit = try Version.Content.decode(bytes)
            if commit.encoded() != bytes { tally.fail(bytes, "a commit re-encodes to other bytes") }
            if links?.root != commit.root || links?.parents != commit.parents { tally.fail(bytes, "a commit's links disagree with it") }
        }
        _ = try attempt {
            let heads = try HeadSet.decode(bytes)
            if try HeadSet.encode(Set(heads)) != bytes { tally.fail(bytes, "a head set re-encodes to other bytes") }
            if links?.heads != heads { tally.fail(bytes, "a head set's links disagree with it") }
        }
        // A blob holds a record; any bytes may also be a record's.
        _ = try attempt { try checkRecord(try Blob.decode(bytes), &tally) }
        let objectAccepted = accepted
        // Verification's check of a record refuses exactly what reads refuse.
        let checked = (try? bytes.withUnsafeBufferPointer { try RecordCoding.check($0) }) != nil
        if checked != ((try? RecordCoding.decode(bytes)) != nil) { tally.fail(bytes, "RecordCoding.check and decode disagree") }
        _ = try attempt { try checkRecord(bytes, &tally) }

        // The JSON adapter's rendering is total and lossless, whatever the bytes: checked for
        // every object a decoder accepts and one input in sixteen of the rest (the raw form).
        let rendered = ObjectJSON.render(bytes)
        if objectAccepted || tally.inputs % 16 == 0 {
            do {
                let text = rendered.serializedBytes(pretty: true)
                if try ObjectJSON.canonicalBytes(try JSONValue.parse(text)) != bytes { tally.fail(bytes, "the JSON rendering gives other bytes back") }
            } catch {
                tally.fail(bytes, "the JSON rendering does not read back: \(error)")
            }
        }
        if !accepted, let rejection { throw rejection }
    }

    /// A record's canonical bytes: canonical, its child scan agrees with its decoding, and its
    /// properties survive the JSON mapping.
    static func checkRecord(_ bytes: [UInt8], _ tally: inout FuzzTally) throws {
        let children = try? RecordCoding.childKeys(bytes)
        let properties = try RecordCoding.decode(bytes)
        if RecordCoding.encode(properties) != bytes { tally.fail(bytes, "a record re-encodes to other bytes") }
        if children != Record(type: "T", id: "", properties: properties).childKeys { tally.fail(bytes, "a record's child scan disagrees with its decoding") }
        if try PropertyValue.properties(json: JSONValue(properties: properties)) != properties { tally.fail(bytes, "a record does not survive its JSON form") }
    }
}

extension IndexPayload {
    /// The child node of a branch entry, if it is one.
    var childHash: Hash? { if case .node(let hash, _) = self { hash } else { nil } }
}
