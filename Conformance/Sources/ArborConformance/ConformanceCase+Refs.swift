import Arbor

extension ConformanceCase {
    /// The ref half of the contract, and the errors every operation maps to ``ArborError``.
    static let refCases: [ConformanceCase] = [
        ConformanceCase(.contract, "refs-compare-and-swap", "refs change only by compare-and-swap: a wrong expected value fails and changes nothing") { context in
            let backend = context.backend
            let (a, b, c) = (Hash.of([1]), Hash.of([2]), Hash.of([3]))
            try await context.step("creating, updating and removing refs") {
                try expectEqual(try await backend.refs(), [:], "a fresh store has no refs")
                try expectEqual(try await backend.compareAndSwap(ref: "heads", expected: nil, new: a), true, "creating a ref that does not exist")
                try expectEqual(try await backend.compareAndSwap(ref: "heads", expected: nil, new: b), false, "creating a ref that exists")
                try expectEqual(try await backend.compareAndSwap(ref: "heads", expected: b, new: c), false, "a swap from a wrong value")
                try expectEqual(try await backend.compareAndSwap(ref: "other", expected: a, new: b), false, "a swap of a ref that does not exist, from a value")
                try expectEqual(try await backend.refs(), ["heads": a], "refs after failed swaps")
                try expectEqual(try await backend.compareAndSwap(ref: "heads", expected: a, new: b), true, "a swap from the current value")
                try expectEqual(try await backend.compareAndSwap(ref: "heads", expected: b, new: b), true, "a swap to the same value")
                try expectEqual(try await backend.compareAndSwap(ref: "branch/main", expected: nil, new: c), true, "creating a ref with a / in its name")
                try expectEqual(try await backend.refs(), ["heads": b, "branch/main": c], "refs after two creations and an update")
                try expectEqual(try await backend.ref("branch/main"), c, "reading one ref")
                try expectEqual(try await backend.compareAndSwap(ref: "heads", expected: a, new: nil), false, "removing a ref from a wrong value")
                try expectEqual(try await backend.compareAndSwap(ref: "heads", expected: b, new: nil), true, "removing a ref from its value")
                try expectEqual(try await backend.refs(), ["branch/main": c], "refs after a removal")
                try expectEqual(try await backend.ref("heads"), nil, "a removed ref reads as absent")
                try expectEqual(try await backend.compareAndSwap(ref: "heads", expected: nil, new: a), true, "creating a removed ref again")
            }
            try await context.step("swaps of a ref that does not exist, to nothing") {
                try expectEqual(try await backend.compareAndSwap(ref: "absent", expected: nil, new: nil), true, "removing a ref that does not exist, expecting none (it is already as asked)")
                try expectEqual(try await backend.compareAndSwap(ref: "absent", expected: a, new: nil), false, "removing a ref that does not exist, from a value")
                try expectEqual(try await backend.refs(), ["branch/main": c, "heads": a], "refs after swaps of an absent ref")
            }
        },

        ConformanceCase(.contract, "refs-racing", "8 tasks racing to swap one ref: exactly one wins each round") { context in
            let backend = context.backend
            var current: Hash? = nil
            for round in 0..<20 {
                let expected = current
                let winners = try await context.step("round \(round) of 8 racing swaps") {
                    try await withThrowingTaskGroup(of: Hash?.self) { group in
                        for racer in 0..<8 {
                            group.addTask {
                                let mine = Hash.of([UInt8(round), UInt8(racer)])
                                return try await backend.compareAndSwap(ref: "race", expected: expected, new: mine) ? mine : nil
                            }
                        }
                        return try await group.reduce(into: [Hash]()) { if let hash = $1 { $0.append(hash) } }
                    }
                }
                try expectEqual(winners.count, 1, "winners of round \(round) of 8 tasks swapping from the same value")
                current = winners.first
                try expectEqual(try await backend.ref("race"), current, "the ref after round \(round) holds the winner's value")
            }
        },

        ConformanceCase(.contract, "errors-invalid-ref-name", "invalid ref names throw ArborError(invalidInput); valid ones of every allowed character work") { context in
            let backend = context.backend
            let value = Hash.of([1])
            let invalid = ["", "../escape", "/absolute", "trailing/", "a/../b", "./a", "nul\u{0}byte", "space here", "ümlaut", "a//b",
                           "back\\slash", String(repeating: "x", count: 201)]
            for name in invalid {
                try await expectError(.invalidInput, "a compare-and-swap of the ref \(String(reflecting: String(name.prefix(40))))") {
                    try await backend.compareAndSwap(ref: name, expected: nil, new: value)
                }
            }
            try expectEqual(try await context.step("reading refs") { try await backend.refs() }, [:], "refs after invalid names were refused")
            // Names a ref kept as a file could confuse: one differing only in case, a leading dot,
            // a lock file's name, and a name that is a prefix folder of another.
            let valid = ["a", "A", "A-Z_0.9", "branch/feature.x/v-1_2", ".hidden", "x.lock", "x", "x/y", String(repeating: "y", count: 200)]
            for name in valid {
                try expectEqual(try await context.step("swapping the ref \(name.prefix(40))") {
                    try await backend.compareAndSwap(ref: name, expected: nil, new: value)
                }, true, "creating the valid ref \(String(reflecting: String(name.prefix(40))))")
            }
            try expectEqual(try await backend.refs(), Dictionary(uniqueKeysWithValues: valid.map { ($0, value) }), "refs with every allowed character read back")
        },

        ConformanceCase(.contract, "errors-closed", "after close every operation throws ArborError(closed) naming the backend and the operation") { context in
            let backend = context.backend
            let object = TestObjects.object(1)
            try await context.step("closing") { try await backend.close() }
            let operations: [(String, @Sendable () async throws -> Void)] = [
                ("get", { _ = try await backend.get([object.hash]) }),
                ("contains", { _ = try await backend.contains([object.hash]) }),
                ("put", { try await backend.put([object]) }),
                ("enumerateHashes", { try await backend.enumerateHashes(batchSize: 10) { _ in } }),
                ("delete", { try await backend.delete([object.hash]) }),
                ("refs", { _ = try await backend.refs() }),
                ("compareAndSwap", { _ = try await backend.compareAndSwap(ref: "heads", expected: nil, new: object.hash) }),
                // Calls an adapter may implement on its own handles (the defaults go through those above).
                ("ancestry", { _ = try await backend.ancestry(of: [object.hash], limit: 10) }),
                ("enumerateObjects", { try await backend.enumerateObjects(batchSize: 10) { _ in } }),
            ]
            let lending: [(String, @Sendable () async throws -> Void)] = if let lender = backend as? any InPlaceReading {
                [("withObjectBytes", { _ = try lender.withObjectBytes(object.hash) { $0 == nil } })]
            } else {
                []
            }
            for (name, operation) in operations + lending {
                let error = try await expectError(.closed, "\(name) after close") { try await operation() }
                try expect(error.backend == backend.engineName && !(error.operation ?? "").isEmpty, "the error of \(name) after close",
                           expected: "an ArborError naming the backend and the operation", actual: "backend \(error.backend ?? "nil"), operation \(error.operation ?? "nil")")
            }
            // An engine that cannot hash says so (false) without touching anything; one that can must refuse.
            do {
                let checked = try await backend.enumerateHashesCheckedByEngine(batchSize: 10) { _ in }
                try expect(!checked, "enumerateHashesCheckedByEngine after close", expected: "closed, or false (the engine cannot hash)", actual: "true")
            } catch let error as ArborError where error.code == .closed {}
            context.step("closing a second time")
            do { try await backend.close() } catch let error as ArborError where error.code == .closed {}
        },
    ]
}
