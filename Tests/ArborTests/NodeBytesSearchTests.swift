import Foundation
import Testing
@testable import Arbor

/// `NodeBytes` searches a node by key abbreviations (8 bytes past the prefix its keys share) and
/// reads key bytes only on a tie; these hold that search to a plain scan of the keys.
@Suite struct NodeBytesSearchTests {
    static let alphabet: [UInt8] = [0, 1, 0x61, 0x62, 0xFF]

    /// Sorted distinct keys that share prefixes of every length, hold zero bytes (the padding
    /// of a short abbreviation), end inside one another, and differ only past their 8th byte;
    /// every key starts with `common` (as records of one type share their type's name).
    static func keys(_ count: Int, common: [UInt8], using generator: inout some RandomNumberGenerator) -> [[UInt8]] {
        let stem = (0..<Int.random(in: 0...12, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
        var keys = Set<[UInt8]>()
        while keys.count < count {
            var key = common + stem.prefix(Int.random(in: 0...stem.count, using: &generator))
            for _ in 0..<Int.random(in: (key.isEmpty ? 1 : 0)...14, using: &generator) { key.append(alphabet.randomElement(using: &generator)!) }
            keys.insert(key)
        }
        return keys.sorted { compareKeys($0, $1) < 0 }
    }

    /// A prefix every key shares in half the nodes: none, or 1 to 20 bytes.
    static func common(using generator: inout some RandomNumberGenerator) -> [UInt8] {
        guard Bool.random(using: &generator) else { return [] }
        return (0..<Int.random(in: 1...20, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
    }

    /// Keys to look for: every key, every proper prefix and one-byte extension of one; around
    /// the prefix all keys share: it, its proper prefixes, it with a byte raised or lowered, it
    /// followed by 7 to 9 bytes; and others from the same alphabet.
    static func probes(for keys: [[UInt8]], using generator: inout some RandomNumberGenerator) -> [[UInt8]] {
        var probes = [[UInt8]()]
        for key in keys {
            probes.append(key)
            probes.append(Array(key.dropLast()))
            probes.append(key + [0])
            probes.append(key + [0xFF])
        }
        var shared = keys[0]
        for key in keys.dropFirst() { shared = Array(zip(shared, key).prefix { $0 == $1 }.map(\.0)) }
        for length in 0...shared.count { probes.append(Array(shared.prefix(length))) }
        for index in shared.indices {
            var raised = shared, lowered = shared
            if raised[index] < 0xFF { raised[index] += 1; probes.append(raised) }
            if lowered[index] > 0 { lowered[index] -= 1; probes.append(lowered) }
        }
        for extra in 7...9 {
            probes.append(shared + [UInt8](repeating: 0, count: extra))
            probes.append(shared + (0..<extra).map { _ in alphabet.randomElement(using: &generator)! })
        }
        probes += Self.keys(20, common: Self.common(using: &generator), using: &generator)
        return probes
    }

    @Test func theEmptyNodeHoldsNothing() throws {
        #expect(try NodeBytes.empty.payload(for: []) == nil)
        #expect(try NodeBytes.empty.payload(for: [0x61]) == nil)
        #expect(NodeBytes.empty.count == 0)
    }

    @Test func aLeafSearchFindsWhatAScanFinds() throws {
        var generator = SeededGenerator(seed: 0xAB12)
        for _ in 0..<300 {
            let keys = Self.keys(Int.random(in: 1...60, using: &generator), common: Self.common(using: &generator), using: &generator)
            let node = IndexNode(level: 0, entries: keys.enumerated().map { IndexEntry(key: $1, payload: .inline(Array("\($0)".utf8))) })
            let bytes = try NodeBytes(validating: node.encoded())
            for probe in Self.probes(for: keys, using: &generator) {
                let expected = keys.firstIndex(of: probe).map { IndexPayload.inline(Array("\($0)".utf8)) }
                #expect(try bytes.payload(for: probe) == expected, "key \(probe) among \(keys)")
            }
        }
    }

    @Test func aBranchSearchPicksTheChildAScanPicks() throws {
        var generator = SeededGenerator(seed: 0xCD34)
        for _ in 0..<300 {
            let keys = Self.keys(Int.random(in: 1...60, using: &generator), common: Self.common(using: &generator), using: &generator)
            let children = keys.indices.map { Hash.of(Array("child \($0)".utf8)) }
            let node = IndexNode(level: 1, entries: zip(keys, children).map { IndexEntry(key: $0, payload: .node($1, count: 1)) })
            let bytes = try NodeBytes(validating: node.encoded())
            for probe in Self.probes(for: keys, using: &generator) {
                // The first child whose last key is at least the probe, or the last child.
                let expected = keys.firstIndex { compareKeys($0, probe) >= 0 } ?? keys.count - 1
                #expect(bytes.childIndex(covering: probe) == expected, "key \(probe) among \(keys)")
                #expect(try bytes.child(covering: probe) == children[expected])
            }
        }
    }
}
