import Arbor

extension ConformanceCase {
    /// `bytes` written against `base` in the ``ObjectDelta`` format, from runs that are either a
    /// range of `base` to copy or bytes as they are.
    static func delta(making bytes: [UInt8], from runs: [Either], base: [UInt8]) -> [UInt8] {
        var delta: [UInt8] = [0xD1]
        func varint(_ value: Int) {
            var value = UInt64(value)
            while value >= 0x80 {
                delta.append(UInt8(value & 0x7F) | 0x80)
                value >>= 7
            }
            delta.append(UInt8(value))
        }
        varint(bytes.count)
        for run in runs {
            switch run {
            case .copy(let range):
                delta.append(1)
                varint(range.lowerBound)
                varint(range.count)
            case .literal(let literal):
                delta.append(0)
                varint(literal.count)
                delta += literal
            }
        }
        return delta
    }

    enum Either {
        case copy(Range<Int>)
        case literal([UInt8])
    }

    /// Restatements (``Backend/restate(_:)``): optional for an adapter, but whatever it keeps,
    /// every object reads, lists and is removed as before.
    static let restatementCases: [ConformanceCase] = [
        ConformanceCase(.contract, "restated-objects", "objects restated as deltas read, list, size and are removed as whole ones; a wrong or baseless restatement changes nothing") { context in
            let backend = context.backend
            let base = TestObjects.object(1, size: 3_000, seed: 91)
            let fresh = TestObjects.bytes(100, seed: 92)
            let oldBytes = Array(base.bytes[0..<2_000]) + fresh + Array(base.bytes[2_500..<3_000])
            let old = (hash: Hash.of(oldBytes), bytes: oldBytes)
            let runs: [Either] = [.copy(0..<2_000), .literal(fresh), .copy(2_500..<3_000)]
            let unrelated = TestObjects.object(2, size: 2_600, seed: 93)
            let laterBytes = Array(oldBytes[0..<1_500]) + TestObjects.bytes(50, seed: 94)
            let later = (hash: Hash.of(laterBytes), bytes: laterBytes)
            let all = [base, old, unrelated, later]
            func expectAll(_ objects: [(hash: Hash, bytes: [UInt8])], _ when: String) async throws {
                try expectObjects(objects, in: try await backend.get(objects.map(\.hash)), "every object reads back byte for byte \(when)")
                for object in objects {
                    try expectSameBytes(try await backend.get([object.hash])[object.hash], object.bytes, "an object read alone reads back \(when)")
                }
                try expectEqual(try await backend.contains(objects.map(\.hash) + [TestObjects.unknownHash(5)]), Set(objects.map(\.hash)), "contains finds exactly the objects held \(when)")
                if let sizes = try await backend.objectSizes(objects.map(\.hash)) {
                    try expectEqual(sizes, Dictionary(uniqueKeysWithValues: objects.map { ($0.hash, $0.bytes.count) }), "objectSizes tells each object's size \(when)")
                }
                var seen = [Hash: Int]()
                var right = true
                try await backend.enumerateObjects(batchSize: 2) { batch in
                    for (hash, bytes) in batch {
                        seen[hash, default: 0] += 1
                        right = right && Hash.of(bytes) == hash
                    }
                }
                try expectEachOnce(seen, of: Set(objects.map(\.hash)), wrong: "bytes that are not their hash's", "enumerateObjects lists each object once, whole, \(when)", right)
                seen = [:]
                try await backend.enumerateHashes(batchSize: 2) { batch in for hash in batch { seen[hash, default: 0] += 1 } }
                try expectEachOnce(seen, of: Set(objects.map(\.hash)), "enumerateHashes lists each object once \(when)")
            }
            try await context.step("restating an object against another") {
                try await backend.put(all)
                try await backend.restate([
                    Restatement(hash: old.hash, base: base.hash, delta: delta(making: oldBytes, from: runs, base: base.bytes)),
                    // Wrong: makes other bytes than the object's, so it must be ignored.
                    Restatement(hash: unrelated.hash, base: base.hash, delta: delta(making: Array(base.bytes[0..<2_600]), from: [.copy(0..<2_600)], base: base.bytes)),
                    // Not a delta at all.
                    Restatement(hash: unrelated.hash, base: old.hash, delta: [0xD1, 9, 7]),
                    // Of an object, and against a base, the store does not hold.
                    Restatement(hash: TestObjects.unknownHash(6), base: base.hash, delta: delta(making: [1], from: [.literal([1])], base: base.bytes)),
                    Restatement(hash: later.hash, base: TestObjects.unknownHash(7), delta: delta(making: laterBytes, from: [.literal(laterBytes)], base: [])),
                ])
                try await expectAll(all, "after restatements, right and wrong")
            }
            try await context.step("restating against an object that is itself restated") {
                try await backend.restate([
                    Restatement(hash: later.hash, base: old.hash, delta: delta(making: laterBytes, from: [.copy(0..<1_500), .literal(Array(laterBytes[1_500...]))], base: oldBytes)),
                    // A chain: `old` against `base`, `base` against `unrelated`.
                    Restatement(hash: base.hash, base: unrelated.hash, delta: delta(making: base.bytes, from: [.literal(base.bytes)], base: unrelated.bytes)),
                ])
                try await expectAll(all, "after a restatement against a restated object")
            }
            try await context.step("removing the base of restated objects") {
                try await backend.delete([base.hash])
                try await expectAll([old, unrelated, later], "once the base is removed")
            }
            try await context.step("putting a restated object again, then removing it") {
                try await backend.put([old, later])
                try await expectAll([old, unrelated, later], "once restated objects are put again")
                try await backend.delete([old.hash])
                try await expectAll([unrelated, later], "once a restated object is removed")
                try expectEqual(try await backend.get([old.hash]).count, 0, "a removed object no longer reads")
            }
        },
    ]
}
