import Foundation
import Testing
@testable import Arbor

/// The objects-and-refs contract, on every adapter.
@Suite struct BackendContractTests {
    static func object(_ index: Int, size: Int = 40) -> (hash: Hash, bytes: [UInt8]) {
        var bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: size)
        if size >= 8 { withUnsafeBytes(of: UInt64(index).bigEndian) { bytes.replaceSubrange(0..<8, with: $0) } }
        return (Hash.of(bytes), bytes)
    }

    @Test(arguments: AdapterKind.allCases) func objectsInBatches(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        #expect(try await backend.get([]).isEmpty)
        try await backend.put([])
        let objects = (0..<500).map { BackendContractTests.object($0, size: $0 == 0 ? 0 : 40) }
        try await backend.put(objects)
        try await backend.put(Array(objects.prefix(50)))  // idempotent
        let fetched = try await backend.get(objects.map(\.hash))
        #expect(fetched.count == objects.count)
        #expect(objects.allSatisfy { fetched[$0.hash] == $0.bytes })
        let unknown = Hash.of([9, 9, 9])
        #expect(try await backend.get([unknown]).isEmpty)
        #expect(try await backend.contains(objects.prefix(3).map(\.hash) + [unknown]) == Set(objects.prefix(3).map(\.hash)))
        #expect(try await backend.allHashes() == Set(objects.map(\.hash)))
        try await backend.delete(objects.prefix(100).map(\.hash) + [unknown])
        #expect(try await backend.allHashes() == Set(objects.dropFirst(100).map(\.hash)))
    }

    /// Batches of objects end once they hold 16 MB, however many they may hold: a
    /// migration's verification reads thousands of large records a batch, two batches at once.
    /// The listing still gives every object once.
    @Test(arguments: AdapterKind.allCases) func enumerationBatchesAreBoundedInBytes(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let size = 1 << 20
        // Large objects among small ones (PostgreSQL reads the large ones by hash after its scan).
        let objects = (0..<40).map { index in
            let bytes = [UInt8](repeating: UInt8(index), count: size)
            return (hash: Hash.of(bytes), bytes: bytes)
        } + (0..<300).map { index in
            let bytes = Array("small \(index)".utf8)
            return (hash: Hash.of(bytes), bytes: bytes)
        }
        try await backend.put(objects)
        var listed = [Hash]()
        var largestBatch = 0
        try await backend.enumerateObjects(batchSize: 1_000) { batch in
            listed += batch.map(\.hash)
            largestBatch = max(largestBatch, batch.reduce(0) { $0 + $1.bytes.count })
        }
        #expect(listed.sorted() == objects.map(\.hash).sorted())
        #expect(largestBatch > size && largestBatch <= enumerationBatchBytes + size)
        var hashes = [Hash]()
        try await backend.enumerateHashes(batchSize: 7) { hashes += $0 }
        #expect(hashes.sorted() == objects.map(\.hash).sorted())
        try await backend.close()
    }

    @Test(arguments: AdapterKind.allCases) func refsChangeOnlyByCompareAndSwap(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let (a, b) = (Hash.of([1]), Hash.of([2]))
        #expect(try await backend.compareAndSwap(ref: "heads", expected: nil, new: a))
        #expect(try await !backend.compareAndSwap(ref: "heads", expected: nil, new: b))
        #expect(try await !backend.compareAndSwap(ref: "heads", expected: b, new: b))
        #expect(try await backend.ref("heads") == a)
        #expect(try await backend.compareAndSwap(ref: "branch/main", expected: nil, new: b))
        #expect(try await backend.refs() == ["heads": a, "branch/main": b])
        #expect(try await backend.compareAndSwap(ref: "heads", expected: a, new: nil))
        #expect(try await backend.refs() == ["branch/main": b])
        for bad in ["", "../escape", "/absolute", "a/../b", "nul\u{0}byte", "space here", String(repeating: "x", count: 300), "a//b"] {
            await #expect("\(bad)") { try await backend.compareAndSwap(ref: bad, expected: nil, new: a) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        }
    }

    @Test(arguments: AdapterKind.allCases) func racingSwapsHaveOneWinnerEachRound(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        var current: Hash? = nil
        for round in 0..<20 {
            let expected = current
            let winners = try await withThrowingTaskGroup(of: Hash?.self) { group in
                for racer in 0..<8 {
                    group.addTask {
                        let mine = Hash.of([UInt8(round), UInt8(racer)])
                        return try await backend.compareAndSwap(ref: "race", expected: expected, new: mine) ? mine : nil
                    }
                }
                return try await group.compactMap { $0 }.reduce(into: [Hash]()) { $0.append($1) }
            }
            #expect(winners.count == 1, "round \(round)")
            current = winners.first
            #expect(try await backend.ref("race") == current)
        }
    }

    @Test(arguments: AdapterKind.allCases) func closedBackendsRefuseWork(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        try await backend.close()
        await #expect { try await backend.get([Hash.of([1])]) } throws: { ($0 as? ArborError)?.code == .closed }
        await #expect { try await backend.refs() } throws: { ($0 as? ArborError)?.code == .closed }
    }
}
