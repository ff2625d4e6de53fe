import Arbor

extension ConformanceCase {
    /// What must outlast a handle or be shared between handles, and what must never be read
    /// back unnoticed: persistence, a second handle, corruption.
    static let durabilityCases: [ConformanceCase] = [
        ConformanceCase(.contract, "persistence", requires: .reopen, "objects and refs are all there, unchanged, after close and reopen") { context in
            let objects = (0..<500).map { TestObjects.object($0, size: $0 == 0 ? 0 : 40) } + [TestObjects.object(9, size: 300_000)]
            let deleted = TestObjects.object(1000)
            let (a, b, c) = (Hash.of([1]), Hash.of([2]), Hash.of([3]))
            try await context.step("writing objects and refs, then closing") {
                let backend = context.backend
                try await backend.put(objects + [deleted])
                try await backend.delete([deleted.hash])
                for (expected, new) in [(nil, a), (a, b), (b, c)] as [(Hash?, Hash)] {
                    _ = try await backend.compareAndSwap(ref: "heads", expected: expected, new: new)
                }
                _ = try await backend.compareAndSwap(ref: "branch/x", expected: nil, new: a)
                _ = try await backend.compareAndSwap(ref: "gone", expected: nil, new: a)
                _ = try await backend.compareAndSwap(ref: "gone", expected: a, new: nil)
                try await backend.close()
            }
            let reopened = try await context.reopen()
            try await context.step("reading the reopened store") {
                try expectEqual(try await reopened.refs(), ["heads": c, "branch/x": a], "refs after reopening")
                try expectObjects(objects, in: try await reopened.get(objects.map(\.hash) + [deleted.hash]), "objects after reopening")
                try expectEqual(try await reopened.allHashes(), Set(objects.map(\.hash)), "enumeration after reopening")
            }
            try await context.step("writing through the reopened handle and reopening again") {
                try expectEqual(try await reopened.compareAndSwap(ref: "heads", expected: c, new: b), true, "a swap on the reopened store")
                try await reopened.put([deleted])
                try await reopened.close()
            }
            let again = try await context.reopen()
            try await context.step("reading the store reopened a second time") {
                try expectEqual(try await again.refs(), ["heads": b, "branch/x": a], "refs after reopening a second time")
                try expectEqual(try await again.allHashes(), Set(objects.map(\.hash) + [deleted.hash]), "enumeration after reopening a second time")
            }
        },

        ConformanceCase(.contract, "second-handle", requires: .multiProcess, "two handles on one store see each other's writes, and swaps stay atomic across them") { context in
            let first = context.backend
            let second = try await context.openSecondHandle()
            let objects = (0..<100).map { TestObjects.object($0) }
            try await context.step("writing through one handle and reading through the other") {
                try await first.put(Array(objects.prefix(50)))
                try await second.put(Array(objects.dropFirst(50)))
                try expectObjects(objects, in: try await second.get(objects.map(\.hash)), "objects put through either handle, read through the second")
                try expectObjects(objects, in: try await first.get(objects.map(\.hash)), "objects put through either handle, read through the first")
                _ = try await first.compareAndSwap(ref: "heads", expected: nil, new: objects[0].hash)
                try expectEqual(try await second.ref("heads"), objects[0].hash, "a ref set through one handle, read through the other")
                try expectEqual(try await second.compareAndSwap(ref: "heads", expected: nil, new: objects[1].hash), false,
                                "a swap through the second handle from a value the first handle changed")
            }
            try await context.step("deleting through one handle what the other has read, and putting it back through that one") {
                // A handle that remembered what it read (objects, or that they exist) would answer
                // for a deleted object, and take a put of it for done.
                let object = objects[7]
                try expectEqual(try await second.contains([object.hash]), [object.hash], "the second handle finds the object")
                try await first.delete([object.hash])
                try expectEqual(try await second.contains([object.hash]), [], "an object deleted through the first handle, asked about through the second")
                try expectEqual(try await second.get([object.hash]).count, 0, "an object deleted through the first handle, read through the second")
                try await second.put([object])
                try expectObjects([object], in: try await first.get([object.hash]), "an object put again through the second handle, read through the first")
            }
            var current: Hash? = objects[0].hash
            for round in 0..<10 {
                let expected = current
                let winners = try await context.step("round \(round) of 8 racing swaps, 4 through each handle") {
                    try await withThrowingTaskGroup(of: Hash?.self) { group in
                        for racer in 0..<8 {
                            let handle = racer % 2 == 0 ? first : second
                            group.addTask {
                                let mine = Hash.of([UInt8(round), UInt8(racer), 2])
                                return try await handle.compareAndSwap(ref: "heads", expected: expected, new: mine) ? mine : nil
                            }
                        }
                        return try await group.reduce(into: [Hash]()) { if let hash = $1 { $0.append(hash) } }
                    }
                }
                try expectEqual(winners.count, 1, "winners of round \(round) of racing swaps through two handles")
                current = winners.first
            }
            try await context.step("closing one handle") {
                try await second.close()
                try expectEqual(try await first.ref("heads"), current, "the first handle works after the second is closed")
            }
        },

        ConformanceCase(.contract, "corruption-detected", "a corrupted object is reported as ArborError(corruptObject) naming it, on a read, a point read and verification; a missing one as missingObject") { context in
            let store = context.store()
            let version = try await context.step("committing a record") {
                try await store.save(SuitePerson(id: "p", name: "Ada"), message: "one")
            }
            let wrong: [UInt8] = [0xA1, 0x01, 0x00]
            guard try await context.corrupt(version.root, with: wrong) else { return }  // refused on write: detected
            let reader = context.store()
            let error = try await expectError(.corruptObject, "reading a record whose index node was corrupted") {
                try await reader.value(SuitePerson.self, id: "p")
            }
            try expect(error.description.contains(version.root.hex), "the corrupt-object error", expected: "names the object \(version.root.hex)", actual: error.description)
            // A point read takes its own path to the leaf (in place, where the adapter lends bytes).
            let pointError = try await expectError(.corruptObject, "a point read of a record whose index node was corrupted") {
                try await context.store().record(RecordKey(type: SuitePerson.typeName, id: "p"))
            }
            try expect(pointError.description.contains(version.root.hex), "the point read's corrupt-object error", expected: "names the object \(version.root.hex)", actual: pointError.description)
            let found = try await context.step("verifying every object") { try await ConformanceCase.verify(context.backend) }
            try expectEqual(found, [version.root], "the objects whose bytes do not match their hash, by verification")
            // Store.verify reports the damage (it does not throw for it), whichever way the
            // adapter tells of it: the wrong bytes, or its own corruptObject.
            let report = try await context.step("verifying the store") { try await context.store().verify() }
            try expect(report.damage.contains { $0.hash == version.root && $0.kind == .corrupt }, "Store.verify of a store with a corrupted index node",
                       expected: "reports \(version.root.hex) as corrupt", actual: "\(report.damage.prefix(3).map { "\($0.kind) \($0.hash.abbreviated())" })")
            try await context.step("deleting the version object") { try await context.backend.delete([version.id]) }
            try await expectError(.missingObject, "reading the heads when the version object is missing") { try await context.store().heads() }
        },
    ]

    /// The objects whose bytes do not match their hash: every object enumerated, read and hashed.
    /// An object the adapter itself reports as corrupt counts as found.
    static func verify(_ backend: any Backend) async throws -> Set<Hash> {
        var corrupt = Set<Hash>()
        var all = [Hash]()
        try await backend.enumerateHashes(batchSize: 1000) { all += $0 }
        for hash in all {
            do {
                if let bytes = try await backend.get([hash])[hash], Hash.of(bytes) != hash { corrupt.insert(hash) }
            } catch let error as ArborError where error.code == .corruptObject {
                corrupt.insert(hash)
            }
        }
        return corrupt
    }
}
