import Arbor

extension ConformanceCase {
    /// Checks that an enumeration, which saw each hash `seen` times, saw exactly the objects
    /// `expected`, once each, and that `right` (when not, `wrong` says what else it got wrong).
    static func expectEachOnce(_ seen: [Hash: Int], of expected: Set<Hash>, wrong: String? = nil, _ what: String, _ right: Bool = true) throws {
        let repeated = seen.values.filter { $0 > 1 }.count
        let missing = expected.filter { seen[$0] == nil }.count
        let extra = seen.keys.filter { !expected.contains($0) }.count
        try expect(repeated == 0 && missing == 0 && extra == 0 && right, what,
                   expected: "\(expected.count) objects", actual: "\(missing) missing, \(extra) never put, \(repeated) repeated" + (wrong.map { ", \($0)" } ?? ""))
    }

    /// Puts `objects` in batches of 500, as the step `name`.
    static func putInBatches(_ objects: [(hash: Hash, bytes: [UInt8])], _ name: String, _ context: ConformanceContext) async throws {
        try await context.step(name) {
            for start in stride(from: 0, to: objects.count, by: 500) {
                try await context.backend.put(Array(objects[start..<min(start + 500, objects.count)]))
            }
        }
    }

    /// The object half of the contract: batches, idempotence, sizes, unknown hashes,
    /// enumeration and deletion.
    static let objectCases: [ConformanceCase] = [
        ConformanceCase(.contract, "put-get-batches", "put, get and contains take batches of 0, 1 and 10,000 objects") { context in
            let backend = context.backend
            try await context.step("empty batches") {
                try expectEqual(try await backend.get([]).count, 0, "get of an empty batch returns nothing")
                try expectEqual(try await backend.contains([]), [], "contains of an empty batch returns nothing")
                try await backend.put([])
                try await backend.delete([])
                try expectEqual(try await backend.allHashes().count, 0, "an empty put stores nothing")
            }
            let one = TestObjects.object(0)
            try await context.step("a batch of 1") {
                try await backend.put([one])
                try expectObjects([one], in: try await backend.get([one.hash]), "get of a batch of 1 returns it")
                try expectEqual(try await backend.contains([one.hash]), [one.hash], "contains of a batch of 1 finds it")
            }
            let many = (1...10_000).map { TestObjects.object($0) }
            try await context.step("a batch of 10,000") {
                try await backend.put(many)
                try expectObjects(many, in: try await backend.get(many.map(\.hash)), "get of a batch of 10,000 put in one batch returns each, byte for byte")
                let found = try await backend.contains(many.map(\.hash) + [one.hash])
                try expectEqual(found.count, many.count + 1, "contains of a batch of 10,001 stored objects finds each")
                try expectEqual(try await backend.allHashes(), Set(many.map(\.hash) + [one.hash]), "the store holds exactly the objects put")
            }
        },

        ConformanceCase(.contract, "put-idempotent", "putting objects that exist, also twice in one batch or from racing tasks, changes nothing") { context in
            let backend = context.backend
            let objects = (0..<200).map { TestObjects.object($0) }
            try await context.step("putting the same objects again") {
                try await backend.put(Array(objects.prefix(100)))
                try await backend.put(Array(objects.prefix(100)))
                try await backend.put(Array(objects.prefix(150)) + Array(objects.prefix(150)))
                try expectObjects(Array(objects.prefix(150)), in: try await backend.get(objects.map(\.hash)), "objects put again read back once, unchanged")
                try expectEqual(try await backend.allHashes().count, 150, "objects put several times are stored once")
            }
            try await context.step("eight tasks putting overlapping batches at once") {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for task in 0..<8 {
                        let batch = Array(objects[(task * 15)..<(task * 15 + 95)])  // together: all 200, most of them several times
                        group.addTask { try await backend.put(batch) }
                    }
                    try await group.waitForAll()
                }
                try expectObjects(objects, in: try await backend.get(objects.map(\.hash)), "objects put by racing tasks are all stored, unchanged")
                try expectEqual(try await backend.allHashes().count, objects.count, "objects put by racing tasks are stored once")
            }
        },

        ConformanceCase(.contract, "object-sizes", "objects of 0 bytes to 4 MB read back byte for byte, and their sizes are told right") { context in
            let sizes = [0, 1, 31, 32, 33, 1000, 4096, 65_535, 65_536, 65_537, 1 << 20, (1 << 20) + 1, 4 << 20]
            let objects = sizes.enumerated().map { TestObjects.object($0.offset, size: $0.element, seed: 7) }
            try await context.step("putting objects of \(sizes.count) sizes") {
                try await context.backend.put(objects)
                for (size, object) in zip(sizes, objects) {
                    try expectSameBytes(try await context.backend.get([object.hash])[object.hash], object.bytes, "an object of \(size) bytes reads back")
                }
                try expectObjects(objects, in: try await context.backend.get(objects.map(\.hash)), "objects of all sizes read back in one batch")
            }
            try await context.step("asking the objects' sizes") {
                // Optional (nil: not known before reading); where told, exact: requests are cut by them.
                let unknown = TestObjects.unknownHash(0)
                if let told = try await context.backend.objectSizes(objects.map(\.hash) + [unknown]) {
                    try expectEqual(told, Dictionary(uniqueKeysWithValues: objects.map { ($0.hash, $0.bytes.count) }),
                                    "objectSizes tells each stored object's size in bytes, and leaves out an unknown hash")
                }
            }
        },

        ConformanceCase(.contract, "large-object", requires: .largeObjects, "an object of 64 MB reads back byte for byte") { context in
            let object = TestObjects.object(1, size: 64 << 20, seed: 64)
            try await context.step("putting and getting a 64 MB object") {
                try await context.backend.put([object])
                try expectSameBytes(try await context.backend.get([object.hash])[object.hash], object.bytes, "an object of 64 MB reads back")
                try expectEqual(try await context.backend.contains([object.hash]), [object.hash], "contains finds the 64 MB object")
            }
        },

        ConformanceCase(.contract, "unknown-hashes", "unknown hashes are left out of get and contains, and ignored by delete") { context in
            let backend = context.backend
            let unknown = (0..<3).map(TestObjects.unknownHash)
            try await context.step("asking an empty store") {
                try expectEqual(try await backend.get(unknown).count, 0, "get of unknown hashes on an empty store returns nothing")
                try expectEqual(try await backend.contains(unknown), [], "contains of unknown hashes on an empty store")
                try await backend.delete(unknown)
            }
            let objects = (0..<5).map { TestObjects.object($0) }
            try await context.step("mixing known and unknown hashes") {
                try await backend.put(objects)
                let mixed = [unknown[0]] + objects.map(\.hash) + [unknown[1], objects[0].hash]
                try expectObjects(objects, in: try await backend.get(mixed), "get of known, unknown and repeated hashes returns the known ones")
                try expectEqual(try await backend.contains(mixed), Set(objects.map(\.hash)), "contains of known and unknown hashes")
                try expectEqual(try await backend.get(unknown[2]), nil, "get of one unknown hash")
                try await backend.delete(unknown)
                try expectEqual(try await backend.allHashes(), Set(objects.map(\.hash)), "deleting unknown hashes removes nothing")
            }
        },

        ConformanceCase(.contract, "near-miss-hashes", "a hash one bit away from a stored one, or all zeros or all ones, is not stored: get, contains and delete tell every bit of a hash apart") { context in
            let backend = context.backend
            let stored = (0..<16).map { TestObjects.object($0, seed: 23) }
            try await context.step("putting 16 objects") { try await backend.put(stored) }
            var nearMisses = [[UInt8](repeating: 0, count: 32), [UInt8](repeating: 0xFF, count: 32)].compactMap { Hash(bytes: $0) }
            for object in stored {
                for (byte, bit) in [(0, 7), (0, 0), (15, 3), (16, 4), (31, 0), (31, 7)] {
                    var bytes = object.hash.bytes
                    bytes[byte] ^= 1 << bit
                    if let hash = Hash(bytes: bytes) { nearMisses.append(hash) }
                }
            }
            try await context.step("asking for \(nearMisses.count) hashes that differ from stored ones in one bit") {
                try expectEqual(try await backend.get(nearMisses).count, 0, "get of hashes one bit away from stored ones returns nothing")
                try expectEqual(try await backend.contains(nearMisses), [], "contains of hashes one bit away from stored ones finds nothing")
                try await backend.delete(nearMisses)
                try expectObjects(stored, in: try await backend.get(stored.map(\.hash)), "deleting hashes one bit away from stored ones removes none of them")
            }
            let unknown = (0..<20_000).map { TestObjects.unknownHash($0 + 1_000) }
            try await context.step("asking for 20,000 unknown hashes at once") {
                try expectEqual(try await backend.contains(unknown), [], "contains of 20,000 unknown hashes finds nothing")
                try expectEqual(try await backend.get(unknown).count, 0, "get of 20,000 unknown hashes returns nothing")
            }
        },

        ConformanceCase(.contract, "large-batches", "one put, get, contains and delete of 40,000 objects works (calls take batches of any size; an engine's limit on parameters per statement is the adapter's to work around)") { context in
            let backend = context.backend
            let objects = (0..<40_000).map { TestObjects.object($0, size: 24, seed: 29) }
            try await context.step("putting 40,000 objects in one call") { try await backend.put(objects) }
            try await context.step("reading them back in one call each") {
                try expectObjects(objects, in: try await backend.get(objects.map(\.hash)), "get of 40,000 objects in one call returns each")
                try expectEqual(try await backend.contains(objects.map(\.hash)).count, objects.count, "contains of 40,000 objects in one call finds each")
            }
            try await context.step("deleting them in one call") {
                try await backend.delete(objects.map(\.hash))
                try expectEqual(try await backend.contains(objects.map(\.hash)), [], "a delete of 40,000 objects in one call removes each")
            }
        },

        ConformanceCase(.contract, "put-order", "a put never stores an object ahead of one given before it: readers polling during a put of 20,000 objects always find a prefix of them (or none, or all)") { context in
            let backend = context.backend
            let objects = (0..<20_000).map { TestObjects.object($0, size: 32, seed: 31) }
            let hashes = objects.map(\.hash)
            // Each poll asks about one object at a time, from the last towards the first: an
            // object found present was stored before every later answer, so every object given
            // before it must be found too. (One request for all could be answered in any order.)
            let probes = Array(stride(from: objects.count - 1, through: 0, by: -97))
            try await context.step("polling while 20,000 objects are put in one call") {
                let done = Flag()
                let violation = try await withThrowingTaskGroup(of: String?.self) { group in
                    group.addTask {
                        defer { done.set() }
                        try await backend.put(objects)
                        return nil
                    }
                    group.addTask {
                        while !done.isSet {
                            var present: Int?
                            for index in probes {
                                let found = try await backend.contains([hashes[index]]).contains(hashes[index])
                                if found, present == nil { present = index }
                                if !found, let present { return "object \(index) was missing after object \(present), given after it, was found" }
                            }
                            await Task.yield()
                        }
                        return nil
                    }
                    var first: String?
                    for try await result in group { first = first ?? result }
                    return first
                }
                try expect(violation == nil, "a put of 20,000 objects, polled", expected: "a prefix of the batch stored at every moment", actual: violation ?? "")
                try expectEqual(try await backend.contains(hashes).count, objects.count, "the put stored all 20,000 objects")
            }
        },

        ConformanceCase(.contract, "delete-order", "a delete never removes an object before one given before it: readers polling during a delete of 20,000 objects always find a prefix of them removed (or none, or all)") { context in
            let backend = context.backend
            let objects = (0..<20_000).map { TestObjects.object($0, size: 32, seed: 37) }
            let hashes = objects.map(\.hash)
            try await context.step("putting 20,000 objects") { try await backend.put(objects) }
            // From the last towards the first, one at a time: an object found removed went
            // before every later answer, so every object given before it must be gone too.
            let probes = Array(stride(from: objects.count - 1, through: 0, by: -97))
            try await context.step("polling while the 20,000 objects are deleted in one call") {
                let done = Flag()
                let violation = try await withThrowingTaskGroup(of: String?.self) { group in
                    group.addTask {
                        defer { done.set() }
                        try await backend.delete(hashes)
                        return nil
                    }
                    group.addTask {
                        while !done.isSet {
                            var removed: Int?
                            for index in probes {
                                let found = try await backend.contains([hashes[index]]).contains(hashes[index])
                                if !found, removed == nil { removed = index }
                                if found, let removed { return "object \(index) was still there after object \(removed), given after it, was removed" }
                            }
                            await Task.yield()
                        }
                        return nil
                    }
                    var first: String?
                    for try await result in group { first = first ?? result }
                    return first
                }
                try expect(violation == nil, "a delete of 20,000 objects, polled", expected: "a prefix of the batch removed at every moment", actual: violation ?? "")
                try expectEqual(try await backend.contains(hashes), [], "the delete removed all 20,000 objects")
            }
        },

        ConformanceCase(.contract, "enumerate", "enumeration returns exactly the objects put, once each, in batches of at most the size asked") { context in
            let backend = context.backend
            let objects = (0..<2_345).map { TestObjects.object($0, size: 20 + $0 % 50) }
            let expected = Set(objects.map(\.hash))
            try await context.step("enumerating an empty store") {
                var count = 0
                try await backend.enumerateHashes(batchSize: 10) { count += $0.count }
                try expectEqual(count, 0, "an empty store enumerates no hashes")
            }
            try await putInBatches(objects, "putting 2,345 objects in batches of 500", context)
            for batchSize in [1_000, 7, 100_000] {
                try await context.step("enumerating in batches of \(batchSize)") {
                    var seen = [Hash: Int]()
                    var largest = 0
                    try await backend.enumerateHashes(batchSize: batchSize) { batch in
                        for hash in batch { seen[hash, default: 0] += 1 }
                        largest = max(largest, batch.count)
                    }
                    try expect(largest <= batchSize, "enumeration with batchSize \(batchSize)", expected: "batches of at most \(batchSize)", actual: "a batch of \(largest)")
                    try expectEachOnce(seen, of: expected, "enumeration with batchSize \(batchSize) yields exactly the objects put, once each")
                }
            }
            struct Stop: Error {}
            try await context.step("stopping an enumeration by throwing") {
                var calls = 0
                var stopped = false
                do {
                    try await backend.enumerateHashes(batchSize: 100) { _ in
                        calls += 1
                        throw Stop()
                    }
                } catch is Stop {
                    stopped = true
                }
                try expect(stopped && calls == 1, "an error thrown by the enumeration's body", expected: "ends the enumeration and is rethrown",
                           actual: stopped ? "\(calls) calls of the body" : "no error")
                try expectEqual(try await backend.allHashes().count, objects.count, "the store works after a stopped enumeration")
            }
        },

        ConformanceCase(.contract, "enumerate-objects", "enumerating objects returns each object put once, with exactly its bytes, in batches of at most the size asked, while the body uses the backend") { context in
            let backend = context.backend
            let sizes = [0, 1, 32, 4096, 65_537, 1 << 20] + (0..<1_200).map { 20 + $0 % 300 }
            let objects = sizes.enumerated().map { TestObjects.object($0.offset, size: $0.element, seed: 13) }
            let expected = Dictionary(objects.map { ($0.hash, $0.bytes) }, uniquingKeysWith: { first, _ in first })
            try await context.step("enumerating an empty store") {
                var count = 0
                try await backend.enumerateObjects(batchSize: 10) { count += $0.count }
                try expectEqual(count, 0, "an empty store enumerates no objects")
            }
            try await putInBatches(objects, "putting \(objects.count) objects of 0 bytes to 1 MB in batches of 500", context)
            for batchSize in [1_000, 7, 100_000] {
                try await context.step("enumerating objects in batches of \(batchSize), asking the backend about each batch") {
                    var seen = [Hash: Int]()
                    var largest = 0
                    var wrongBytes = 0
                    try await backend.enumerateObjects(batchSize: batchSize) { batch in
                        largest = max(largest, batch.count)
                        for (hash, bytes) in batch {
                            seen[hash, default: 0] += 1
                            if expected[hash] != bytes { wrongBytes += 1 }
                        }
                        // What a migration's verification does during the scan.
                        let held = try await backend.contains(batch.map(\.hash))
                        try expectEqual(held.count, Set(batch.map(\.hash)).count, "contains during an enumeration finds the batch")
                    }
                    try expect(largest <= batchSize, "enumerating objects with batchSize \(batchSize)", expected: "batches of at most \(batchSize)", actual: "a batch of \(largest)")
                    try expectEachOnce(seen, of: Set(expected.keys), wrong: "\(wrongBytes) with other bytes",
                                       "enumerating objects with batchSize \(batchSize) yields each object put once, byte for byte", wrongBytes == 0)
                }
            }
            try await context.step("stopping an enumeration of objects by throwing") {
                try await expectRethrows("an error thrown by the body of enumerateObjects") { body in
                    try await backend.enumerateObjects(batchSize: 100) { _ in try body() }
                }
            }
        },

        ConformanceCase(.contract, "enumerate-checked-hashes", "an engine that checks hashes itself (enumerateHashesCheckedByEngine) returns each object put once with its size, and reports a corrupted object as ArborError(corruptObject) naming it; one that cannot says so without calling the body") { context in
            let backend = context.backend
            let sizes = [0, 1, 32, 4096, 65_537, 1 << 20] + (0..<600).map { 20 + $0 % 300 }
            let objects = sizes.enumerated().map { TestObjects.object($0.offset, size: $0.element, seed: 17) }
            let expected = Dictionary(objects.map { ($0.hash, $0.bytes.count) }, uniquingKeysWith: { first, _ in first })
            try await putInBatches(objects, "putting \(objects.count) objects of 0 bytes to 1 MB in batches of 500", context)
            for batchSize in [1_000, 7] {
                let checked = try await context.step("enumerating hashes checked by the engine in batches of \(batchSize)") {
                    var seen = [Hash: Int]()
                    var largest = 0
                    var wrongSizes = 0
                    let checked = try await backend.enumerateHashesCheckedByEngine(batchSize: batchSize) { batch in
                        largest = max(largest, batch.count)
                        for (hash, size) in batch {
                            seen[hash, default: 0] += 1
                            if expected[hash] != size { wrongSizes += 1 }
                        }
                    }
                    guard checked else {
                        try expect(seen.isEmpty, "an engine that cannot check hashes", expected: "no call of the body", actual: "\(seen.count) hashes")
                        return false
                    }
                    try expect(largest <= batchSize, "checked hashes with batchSize \(batchSize)", expected: "batches of at most \(batchSize)", actual: "a batch of \(largest)")
                    try expectEachOnce(seen, of: Set(expected.keys), wrong: "\(wrongSizes) with other sizes",
                                       "checked hashes with batchSize \(batchSize) yield each object put once, with its size", wrongSizes == 0)
                    return true
                }
                guard checked else { return }
            }
            try await context.step("stopping an enumeration of checked hashes by throwing") {
                try await expectRethrows("an error thrown by the body of enumerateHashesCheckedByEngine") { body in
                    _ = try await backend.enumerateHashesCheckedByEngine(batchSize: 100) { _ in try body() }
                }
            }
            let victim = objects[3]
            guard try await context.corrupt(victim.hash, with: Array(victim.bytes.reversed())) else { return }  // refused on write: detected
            let error = try await expectError(.corruptObject, "enumerating hashes checked by the engine over a corrupted object") {
                _ = try await backend.enumerateHashesCheckedByEngine(batchSize: 1_000) { _ in }
            }
            try expect(error.description.contains(victim.hash.hex), "the corrupt-object error", expected: "names the object \(victim.hash.hex)", actual: error.description)
        },

        ConformanceCase(.contract, "in-place-reads", "an adapter that lends objects in place (InPlaceReading) lends exactly the bytes get returns, of 0 bytes to 1 MB, and nil for an object it lacks or deleted") { context in
            guard let lender = context.backend as? any InPlaceReading else { return }  // point reads use get
            let sizes = [0, 1, 32, 4096, 65_537, 1 << 20]
            let objects = sizes.enumerated().map { TestObjects.object($0.offset, size: $0.element, seed: 11) }
            try await context.step("lending objects of \(sizes.count) sizes") {
                try await context.backend.put(objects)
                for object in objects {
                    let lent = try lender.withObjectBytes(object.hash) { $0.map { [UInt8]($0) } }
                    try expect(lent == object.bytes, "the bytes lent for an object of \(object.bytes.count) bytes",
                               expected: "the \(object.bytes.count) bytes put", actual: lent.map { "\($0.count) other bytes" } ?? "nil")
                }
            }
            try await context.step("lending an object the store lacks, then one it deleted") {
                try expectEqual(try lender.withObjectBytes(TestObjects.unknownHash(0)) { $0 == nil }, true, "an unknown object is lent as nil")
                try await context.backend.delete([objects[3].hash])
                try expectEqual(try lender.withObjectBytes(objects[3].hash) { $0 == nil }, true, "a deleted object is lent as nil")
                try expectEqual(try lender.withObjectBytes(objects[4].hash) { $0?.count }, 65_537, "the objects not deleted are still lent")
            }
        },

        ConformanceCase(.contract, "concurrent-reads", "eight tasks reading at once (get, contains and, where the adapter lends them, objects in place) while another writes each read exactly what was put") { context in
            let backend = context.backend
            let objects = (0..<240).map { TestObjects.object($0, size: 64 + ($0 % 7) * 1_500, seed: 13) }
            let (present, later) = (Array(objects.prefix(160)), Array(objects.dropFirst(160)))
            try await backend.put(present)
            try await context.step("8 readers and a writer at once") {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for start in stride(from: 0, to: later.count, by: 10) { try await backend.put(Array(later[start..<start + 10])) }
                    }
                    for reader in 0..<8 {
                        group.addTask {
                            for round in 0..<40 {
                                let picked = (0..<12).map { present[(reader * 37 + round * 11 + $0 * 13) % present.count] }
                                try expectObjects(picked, in: try await backend.get(picked.map(\.hash)), "objects read by one of 8 concurrent readers")
                                try expectEqual(try await backend.contains(picked.map(\.hash)), Set(picked.map(\.hash)), "contains from one of 8 concurrent readers")
                                if let lender = backend as? any InPlaceReading {
                                    let object = picked[round % picked.count]
                                    let lent = try lender.withObjectBytes(object.hash) { $0.map { [UInt8]($0) } }
                                    try expect(lent == object.bytes, "the bytes lent to one of 8 concurrent readers",
                                               expected: "the \(object.bytes.count) bytes put", actual: lent.map { "\($0.count) other bytes" } ?? "nil")
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try await context.step("reading everything afterwards") {
                try expectObjects(objects, in: try await backend.get(objects.map(\.hash)), "objects read after the concurrent reads and writes")
            }
        },

        ConformanceCase(.contract, "delete", "deleted objects are gone from get, contains and enumeration; the others stay; they can be put again") { context in
            let backend = context.backend
            let objects = (0..<300).map { TestObjects.object($0) }
            let (gone, kept) = (Array(objects.prefix(100)), Array(objects.dropFirst(100)))
            try await context.step("deleting 100 of 300 objects") {
                try await backend.put(objects)
                try await backend.delete(gone.map(\.hash) + [TestObjects.unknownHash(0)])
                try expectObjects(kept, in: try await backend.get(objects.map(\.hash)), "get after a delete returns only the objects kept")
                try expectEqual(try await backend.contains(objects.map(\.hash)), Set(kept.map(\.hash)), "contains after a delete")
                try expectEqual(try await backend.allHashes(), Set(kept.map(\.hash)), "enumeration after a delete")
                try await backend.delete(gone.map(\.hash))
            }
            try await context.step("putting deleted objects again") {
                try await backend.put(gone)
                try expectObjects(objects, in: try await backend.get(objects.map(\.hash)), "objects put again after a delete read back")
            }
        },

        ConformanceCase(.contract, "replace", "replace writes objects over damaged ones and stores absent ones; get, contains and enumeration then give each once with its bytes, and the others are untouched") { context in
            let backend = context.backend
            let objects = (0..<300).map { TestObjects.object($0, seed: 41) }
            try await context.step("putting 300 objects") { try await backend.put(objects) }
            let damaged = Array(objects.prefix(50))
            for (index, object) in damaged.enumerated() {
                _ = try await context.corrupt(object.hash, with: Array("damaged \(index)".utf8))
            }
            let absent = (300..<320).map { TestObjects.object($0, seed: 41) }
            let all = objects + absent
            try await context.step("replacing 50 damaged objects and 20 absent ones in one call") {
                try await backend.replace(damaged + absent)
                try expectObjects(all, in: try await backend.get(all.map(\.hash)), "get after a replace returns every object with its own bytes")
                try expectEqual(try await backend.contains(all.map(\.hash)), Set(all.map(\.hash)), "contains after a replace")
                var seen = [Hash: Int]()
                try await backend.enumerateHashes(batchSize: 1_000) { batch in for hash in batch { seen[hash, default: 0] += 1 } }
                try expectEachOnce(seen, of: Set(all.map(\.hash)), "enumeration after a replace yields every object once")
            }
            try await context.step("replacing intact objects by their own bytes, and with no objects") {
                try await backend.replace(Array(objects.suffix(10)))
                try await backend.replace([])
                try expectObjects(all, in: try await backend.get(all.map(\.hash)), "get after replacing intact objects")
            }
        },
    ]
}
