@testable import Arbor
import Synchronization
import Testing

/// History walks over a network: a walk learns each generation from the one before, so without
/// help it costs a request per version. Backends that follow parents themselves answer many
/// generations at once (``Backend/ancestry(of:limit:)``), and exchange asks the target about
/// many versions at once.
@Suite struct HistoryWalkTests {
    /// A store whose history is one line of `count` versions, and the versions in order.
    func line(of count: Int, on backend: any Backend, replica: String = "a") async throws -> (Store, [Version]) {
        let store = Store(backend: backend, configuration: .init(replica: replica, clock: TickClock().read))
        return (store, try await extend(store, through: 0..<count))
    }

    /// Commits a version per index of `indices` on `store`'s head, each changing one of seven records.
    @discardableResult
    func extend(_ store: Store, through indices: Range<Int>) async throws -> [Version] {
        var versions = [Version]()
        for index in indices {
            var changes = ChangeSet()
            try changes.save(item("i\(index % 7)", ["v": .int(Int64(index))]))
            versions.append(try await store.commit(changes, message: "v\(index)"))
        }
        return versions
    }

    @Test(arguments: [AdapterKind.memory] + (PostgresTestServer.isEnabled ? [AdapterKind.postgres] : []))
    func ancestryFollowsParentsInOneRequest(_ kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let (store, versions) = try await line(of: 40, on: backend)
        let head = versions.last!.id
        let all = try await backend.ancestry(of: [head], limit: 1_000)
        #expect(Set(all.keys) == Set(versions.map(\.id)))
        let stored = try await backend.get(versions.map(\.id))
        #expect(all == stored)
        // Cut short: the nearest generations.
        let ten = try await backend.ancestry(of: [head], limit: 10)
        #expect(Set(ten.keys) == Set(versions.suffix(10).map(\.id)))
        // From two places at once, each walk stopping where they meet.
        let both = try await backend.ancestry(of: [versions[5].id, versions[20].id], limit: 1_000)
        #expect(Set(both.keys) == Set(versions.prefix(21).map(\.id)))
        try await store.close()
    }

    @Test(arguments: [true, false])
    func exchangeOfALongHistoryTakesFewRounds(_ followsParents: Bool) async throws {
        let counting = HistoryCountingBackend(MemoryBackend(), followsParents: followsParents)
        let (source, versions) = try await line(of: 10, on: counting)
        let target = Store(backend: MemoryBackend())
        try await source.exchange(to: target)
        try await extend(source, through: 10..<310)
        // Finding what the target lacks: 300 versions behind, the target is asked after 1, 2,
        // 4, … versions walked, so about log2(300) rounds; before, one per version.
        counting.reset()
        let transfer = Transfer(from: counting, to: target.backend, progress: nil)
        let heads = try await Transfer.headState(of: counting).heads
        let (missing, boundary) = try await transfer.missingVersions(from: heads)
        #expect(missing.count == 300)
        #expect(boundary == [versions.last!.id])
        #expect(transfer.rounds <= 11, "\(transfer.rounds) rounds")
        let requests = counting.historyRequests
        if followsParents {
            #expect(requests <= 12, "\(requests) history requests")
        } else {
            #expect(requests >= 300, "\(requests) history requests")
        }
        // The whole exchange: the indexes of a chunk of versions are walked together, so
        // copying costs a few requests per level for up to 256 versions.
        counting.reset()
        let report = try await source.exchange(to: target)
        print("exchange of 300 versions (followsParents: \(followsParents)): \(report.rounds) rounds, \(counting.historyRequests) source requests")
        #expect(report.versions == 300)
        #expect(report.rounds <= 24, "\(report.rounds) rounds")
        if followsParents { #expect(counting.historyRequests <= 40, "\(counting.historyRequests) source requests") }
        #expect(try await target.heads().map(\.id) == source.heads().map(\.id))
        #expect(try await target.log().count == 310)
        let verified = try await target.verify()
        // Unreachable: only the head set the first exchange left.
        #expect(verified.damage.isEmpty && verified.versions == 310 && verified.unreachableObjects == 1)
        #expect(try await target.backend.allHashes().isSubset(of: source.backend.allHashes()))
    }

    @Test func aCorruptVersionTheTargetHoldsDoesNotStopAnExchange() async throws {
        // The walk runs ahead of the target's answers, into versions the target holds; one of
        // those the source cannot read is not an error, since nothing needs it.
        let inner = MemoryBackend()
        let (_, versions) = try await line(of: 30, on: inner)
        let target = Store(backend: MemoryBackend())
        try await Store(backend: inner).exchange(to: target)
        let source = Store(backend: DamagingBackend(inner, damaging: versions[2].id, by: .flippedByte), configuration: .init(replica: "a"))
        try await extend(source, through: 30..<90)
        let report = try await source.exchange(to: target)
        #expect(report.versions == 60)
        #expect(try await target.heads().map(\.id) == source.heads().map(\.id))

        // A version the target lacks and the source cannot read is named.
        let fresh = Store(backend: MemoryBackend())
        await #expect { try await source.exchange(to: fresh) } throws: { error in
            (error as? ArborError)?.code == .corruptObject && "\(error)".contains(versions[2].id.description)
        }
    }

    /// Ancestry.collect counts every read toward the limit, found or not: a commit naming many
    /// missing parents does not make it read past the limit.
    @Test func ancestryCollectionReadsNoMoreThanTheLimit() throws {
        let missing = (0..<40).map { Hash.of([UInt8($0)]) }
        let commit = Version.Content(root: Store.emptyRoot.hash, parents: missing, time: HybridTime(milliseconds: 1), replica: "r", message: "", recordCount: 0).encoded()
        let id = Hash.of(commit)
        var reads = 0
        let found = Ancestry.collect([id], limit: 5) { hash in
            reads += 1
            return hash == id ? commit : nil
        }
        #expect(found.keys.sorted() == [id])
        #expect(reads == 5)
        // The asked objects are read whatever the limit.
        reads = 0
        _ = Ancestry.collect([id] + missing.prefix(3), limit: 1) { _ in reads += 1; return nil }
        #expect(reads == 4)
    }

    @Test func theWalkQueuePopsNewestFirstWhateverTheOrderOfPushes() {
        var random = SeededGenerator(seed: 11)
        func version(_ index: Int) -> Version {
            // Few distinct times, so that ties broken by id are common.
            let content = Version.Content(
                root: Store.emptyRoot.hash, parents: [], time: HybridTime(milliseconds: UInt64.random(in: 0..<20, using: &random), counter: UInt32.random(in: 0..<3, using: &random)),
                replica: "r\(index)", message: "", recordCount: 0)
            return Version(id: Hash.of(content.encoded()), content: content)
        }
        var queue = NewestFirstQueue()
        var reference = [Version]()
        // Pushes and pops interleaved, so that freed slots are reused.
        for round in 0..<400 {
            for index in 0..<Int.random(in: 0...3, using: &random) {
                let pushed = version(round * 4 + index)
                queue.push(pushed)
                reference.append(pushed)
            }
            for _ in 0..<Int.random(in: 0...3, using: &random) {
                reference.sort(by: Store.newestFirst)
                let expected = reference.isEmpty ? nil : reference.removeFirst()
                let popped = queue.pop()
                #expect(popped?.id == expected?.id)
                #expect(popped?.replica == expected?.replica)
            }
        }
        reference.sort(by: Store.newestFirst)
        for expected in reference { #expect(queue.pop()?.id == expected.id) }
        #expect(queue.pop() == nil)
    }

    @Test func versionsComeInOrderFromCacheAndBackendAlike() async throws {
        let store = Store(backend: MemoryBackend())
        var ids = [Hash]()
        for index in 0..<4 { ids.append(try await store.save(Task(id: "t\(index)", title: "\(index)", done: false)).id) }
        let fresh = Store(backend: store.backend)
        // Nothing cached, then some (the first call cached all but ids[1]), then all: the same
        // versions in the asked order, duplicates included.
        let asked = [ids[2], ids[0], ids[2], ids[3]]
        let cold = try await fresh.versions(asked)
        #expect(cold.map(\.id) == asked)
        let partly = try await fresh.versions([ids[1], ids[2], ids[1]])
        #expect(partly.map(\.id) == [ids[1], ids[2], ids[1]])
        let warm = try await fresh.versions(asked)
        #expect(warm.map(\.id) == asked && warm == cold)
    }

    @Test func mergeBaseAndLogReadManyGenerationsPerRequest() async throws {
        let counting = HistoryCountingBackend(MemoryBackend(), followsParents: true)
        let (store, versions) = try await line(of: 200, on: counting)
        var changes = ChangeSet()
        try changes.save(item("side", ["v": .int(1)]))
        try await store.commit(changes, parents: [versions[10].id])
        counting.reset()
        #expect(try await store.log().count == 201)
        #expect(counting.historyRequests <= 16, "\(counting.historyRequests) requests for a log of 201 versions")
        counting.reset()
        // Verify reads the history the same way, and the indexes of 256 versions at a time.
        let verified = try await store.verify()
        #expect(verified.damage.isEmpty && verified.versions == 201)
        #expect(counting.ancestryRequests <= 16, "\(counting.ancestryRequests) history requests for verify")
        #expect(counting.historyRequests <= 30, "\(counting.historyRequests) read requests for verify")
        counting.reset()
        let outcome = try #require(try await store.mergeHeads())
        #expect(outcome.version != nil)
        #expect(counting.historyRequests <= 24, "\(counting.historyRequests) requests for a merge 190 versions past the fork")
    }

    /// The batched log lists what the whole one does, in the same order, in batches of 1 to
    /// the size asked, across branches, a merge and limits.
    @Test func theLogInBatchesListsTheWholeLogInOrder() async throws {
        let (store, versions) = try await line(of: 40, on: MemoryBackend())
        var side = ChangeSet()
        try side.save(item("side", ["v": .int(1)]))
        try await store.commit(side, parents: [versions[5].id])
        try await extend(store, through: 40..<45)
        _ = try await store.mergeHeads()
        try await extend(store, through: 45..<50)
        let whole = try await store.log()
        #expect(whole.count == 52)
        for limit in [Int.max, 1, 17, 52, 60] {
            for batchSize in [1, 7, 52, 1_000] {
                var batches = [[Version]]()
                try await store.log(limit: limit, batchSize: batchSize) { batches.append($0) }
                #expect(batches.allSatisfy { !$0.isEmpty && $0.count <= batchSize })
                #expect(batches.flatMap { $0 }.map(\.id) == whole.prefix(limit).map(\.id), "limit \(limit), batches of \(batchSize)")
            }
        }
        await #expect(throws: ArborError.self) { try await store.log(batchSize: 0) { _ in } }
    }

    @Test func crissCrossLadderMergeWorkIsBounded() async throws {
        // Three replicas that, round after round, each merge all three of the round before:
        // every merge has three best common ancestors, whose virtual ancestor needs the
        // virtual ancestor of the round before, twice. Built once per set of candidates and
        // only `virtualAncestorDepth` levels deep, the work does not grow with the rounds;
        // built once per path down to the first version, it doubled with each round.
        let counting = HistoryCountingBackend(MemoryBackend(), followsParents: true)
        let store = Store(backend: counting, configuration: .init(replica: "ladder", clock: TickClock().read))
        var changes = ChangeSet()
        try changes.save(item("shared", ["v": .int(0)]))
        let first = try await store.commit(changes, parents: [])
        var round = [first, first, first]
        for level in 1...12 {
            var next = [Version]()
            for side in 0..<3 {
                var changes = ChangeSet()
                try changes.save(item("side\(side)", ["v": .int(Int64(level))]))
                let parents = level == 1 ? [first.id] : [round[side].id] + round.indices.filter { $0 != side }.map { round[$0].id }
                next.append(try await store.commit(changes, parents: parents))
            }
            round = next
        }
        counting.reset()
        // Each virtual ancestor is a merge commit written with its index.
        let outcome = try await store.merge(round[0].id, round[1].id)
        #expect(outcome.version != nil)
        #expect(counting.putRequests <= 100, "\(counting.putRequests) writes for a merge above 12 criss-crossed rounds")
    }
}

/// Counts requests that read versions (`get` and `ancestry`); forwards `ancestry` to the inner
/// backend, or, with `followsParents` false, answers it through `get` like most engines.
final class HistoryCountingBackend: ForwardingBackend {
    let inner: any Backend
    let followsParents: Bool
    private let requests = Atomic(0)
    private let ancestryCalls = Atomic(0)
    private let putCalls = Atomic(0)
    init(_ inner: any Backend, followsParents: Bool) {
        self.inner = inner
        self.followsParents = followsParents
    }
    var historyRequests: Int { requests.load(ordering: .relaxed) }
    /// Requests that wrote objects.
    var putRequests: Int { putCalls.load(ordering: .relaxed) }
    /// Requests that asked for ancestors.
    var ancestryRequests: Int { ancestryCalls.load(ordering: .relaxed) }
    func reset() {
        requests.store(0, ordering: .relaxed)
        ancestryCalls.store(0, ordering: .relaxed)
        putCalls.store(0, ordering: .relaxed)
    }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        putCalls.add(1, ordering: .relaxed)
        try await inner.put(objects)
    }
    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        requests.add(1, ordering: .relaxed)
        return try await inner.get(hashes)
    }
    func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]] {
        guard followsParents else { return try await get(hashes) }
        requests.add(1, ordering: .relaxed)
        ancestryCalls.add(1, ordering: .relaxed)
        return try await inner.ancestry(of: hashes, limit: limit)
    }
}
