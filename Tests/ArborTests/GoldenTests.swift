import Foundation
import Testing
@testable import Arbor

/// Fixed inputs → fixed bytes and hashes. If one of these fails, the canonical format changed:
/// every existing store would stop matching. Change the format version instead.
@Suite struct GoldenTests {
    static let record: [String: PropertyValue] = [
        "title": .string("Buy milk 🥛"), "done": .bool(false), "count": .int(-3), "ratio": .double(-0.0),
        "due": .date(Date(timeIntervalSinceReferenceDate: 800_000_000.5)), "blob": .bytes([0xDE, 0xAD]),
        "owner": .reference(RecordKey(type: "Person", id: "p1")), "notes": .array([.child(RecordKey(type: "Note", id: "n1")), .null]),
        "meta": .map(["b": .double(.nan), "a": .double(.infinity)]),
    ]

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func recordBytes() {
        #expect(GoldenTests.hex(RecordCoding.encode(GoldenTests.record)) == GoldenTests.expectedRecordHex)
    }

    @Test func objectHashes() throws {
        let leaf = IndexNode(level: 0, entries: [IndexEntry(key: RecordKey(type: "Task", id: "t1").indexBytes, payload: .inline(RecordCoding.encode(GoldenTests.record)))])
        let commit = Version.Content(root: Hash.of(leaf.encoded()), parents: [], time: HybridTime(milliseconds: 1_763_700_000_000, counter: 0),
                                     replica: "golden", message: "first", recordCount: 1)
        #expect(Store.emptyRoot.hash.hex == GoldenTests.expectedEmptyRoot)
        #expect(Hash.of(leaf.encoded()).hex == GoldenTests.expectedLeaf)
        #expect(Hash.of(commit.encoded()).hex == GoldenTests.expectedCommit)
        let heads = try HeadSet.encode([Hash.of(commit.encoded())])
        #expect(Hash.of(heads).hex == GoldenTests.expectedHeads)
    }

    @Test func storeCommitIsReproducible() async throws {
        let clock: @Sendable () -> Date = { Date(timeIntervalSince1970: 1_763_700_000) }
        let store = Store(backend: MemoryBackend(), configuration: .init(replica: "golden", clock: clock))
        var changes = ChangeSet()
        for index in 0..<1_000 {
            try changes.save(Task(id: String(format: "t%04d", index), title: "task \(index)", done: index % 3 == 0,
                                  notes: index % 10 == 0 ? [Note(id: "n\(index)", text: "note")] : []))
        }
        let version = try await store.commit(changes, message: "golden")
        #expect(version.recordCount == 1_100)
        #expect(version.root.hex == GoldenTests.expectedStoreRoot)
        #expect(version.id.hex == GoldenTests.expectedStoreVersion)
    }

    static let expectedRecordHex = "0904626c6f620702dead05636f756e74030504646f6e6501036475650641c7d78400400000046d6574610b020161047ff00000000000000162047ff8000000000000056e6f7465730a0209044e6f7465026e3100056f776e65720806506572736f6e02703105726174696f048000000000000000057469746c65050d427579206d696c6b20f09fa59b"
    static let expectedEmptyRoot = "d834dba22a162024b0403cc47d78988d1c0cf9f2f842ae1d37879b09e9a7dae8"
    static let expectedLeaf = "142f7be2aa7656f584ea2348700d86fbf06f4a2cfa12308c421c412033161b1b"
    static let expectedCommit = "ea850ea8464d96d9d7b0cb8f7eb5e76c7cd2c200d67571b2113c452fae51c4a7"
    static let expectedHeads = "07bc627125a6507204b6343e693e8281d8a30a40e9df1571c87e35d86b851d32"
    static let expectedStoreRoot = "19fb9e855e4cde8bf0b8575b740991b98bbf2a3d7756b4e8a922d0b2735d9f40"
    static let expectedStoreVersion = "956465be356f19265ab6e4af08c0bb946b1a6e6da67607f6fe96fa0284bdb58b"
}
