import Foundation
import Synchronization
import Testing
@testable import Arbor

/// Exchange, sync and migration over every ordered pair of adapters.
@Suite struct ExchangeTests {
    /// Two fresh stores of the given kinds, closed and removed after `body`.
    func withStores(
        _ a: AdapterKind, _ b: AdapterKind, _ more: [AdapterKind] = [],
        _ body: ([Store]) async throws -> Void
    ) async throws {
        var made = [(backend: any Backend, cleanup: @Sendable () -> Void)]()
        defer { for entry in made { entry.cleanup() } }
        for (index, kind) in ([a, b] + more).enumerated() {
            made.append(try makeBackend(kind))
            _ = index
        }
        let clock = TickClock()
        let stores = made.enumerated().map { index, entry in
            Store(backend: entry.backend, configuration: .init(replica: "replica-\(index)", clock: clock.read))
        }
        try await body(stores)
        for store in stores { try? await store.close() }
    }

    /// A store with history: tasks with notes (one with a large attachment, stored as a blob),
    /// over several commits.
    @discardableResult
    func fill(_ store: Store, tasks: Int = 40, commits: Int = 3) async throws -> Version {
        var last: Version?
        for commit in 0..<commits {
            var changes = ChangeSet()
            for index in stride(from: commit, to: tasks, by: commits) {
                var task = Task(id: "t\(index)", title: "task \(index) v\(commit)", done: index % 2 == 0)
                task.notes = [Note(id: "n\(index)", text: "note \(index)")]
                if index == 1 { task.notes[0].attachments = [Attachment(id: "a1", data: Data(repeating: 7, count: 3_000))] }
                try changes.save(task)
            }
            last = try await store.commit(changes, message: "commit \(commit)")
        }
        return last!
    }

    func headsRef(_ store: Store) async throws -> Hash? { try await store.backend.ref(RefName.heads) }

    func sameContent(_ a: Store, _ b: Store) async throws {
        let left = try await a.values(Task.self).sorted { $0.id < $1.id }
        let right = try await b.values(Task.self).sorted { $0.id < $1.id }
        #expect(left.count == right.count && !left.isEmpty)
        #expect(left == right, "the stores differ in \(zip(left, right).filter { $0 != $1 }.count) tasks")
    }

    @Test(arguments: AdapterKind.allCases, AdapterKind.allCases)
    func cloneThenIncrementalExchange(from: AdapterKind, to: AdapterKind) async throws {
        try await withStores(from, to) { stores in
            let (source, target) = (stores[0], stores[1])
            try await fill(source)
            let clone = try await source.exchange(to: target)
            #expect(clone.versions == 3)
            #expect(try await headsRef(target) == headsRef(source))
            try await sameContent(source, target)
            #expect(try await target.log().map(\.id) == source.log().map(\.id))

            // Two more commits on the source; only they and their new nodes travel.
            var changes = ChangeSet()
            try changes.save(Task(id: "t5", title: "changed", done: true))
            try changes.delete(Task.self, id: "t7")
            try await source.commit(changes)
            try await source.save(Task(id: "new", title: "added", done: false))
            // The other way, the target has nothing the source lacks.
            let back = try await target.exchange(to: source)
            #expect(back.versions == 0 && back.objects == 0)
            let incremental = try await source.exchange(to: target)
            #expect(incremental.versions == 2)
            #expect(incremental.objects < clone.objects)
            #expect(try await headsRef(target) == headsRef(source))
            #expect(try await target.exchange(to: source).alreadyInSync)
            #expect(try await target.heads().count == 1)
            try await sameContent(source, target)

            let again = try await source.exchange(to: target)
            #expect(again.alreadyInSync && again.objects == 0 && again.rounds == 0)
            // The other way there is nothing to send either.
            #expect(try await target.exchange(to: source).alreadyInSync)
        }
    }

    @Test(arguments: AdapterKind.allCases, AdapterKind.allCases)
    func syncWithConcurrentEditsAndAConflict(a: AdapterKind, b: AdapterKind) async throws {
        try await withStores(a, b) { stores in
            let (left, right) = (stores[0], stores[1])
            try await left.save(Task(id: "x", title: "base", done: false))
            try await left.save(Task(id: "y", title: "base", done: false))
            try await left.exchange(to: right)
            // Left edits x.title and y.title; right edits x.done and y.title later: a conflict.
            try await left.save(Task(id: "x", title: "left title", done: false))
            try await left.save(Task(id: "y", title: "left y", done: false))
            try await right.save(Task(id: "x", title: "base", done: true))
            try await right.save(Task(id: "y", title: "right y", done: false))
            try await right.save(Task(id: "z", title: "only right", done: false))

            let report = try await left.sync(with: right)
            #expect(report.heads.count == 1)
            guard case .merged(_, let mergeReport)? = report.merge else {
                Issue.record("expected a merge, got \(String(describing: report.merge))")
                return
            }
            #expect(mergeReport.resolved.count == 1)
            #expect(try await headsRef(left) == headsRef(right))
            #expect(try await left.value(Task.self, id: "x") == Task(id: "x", title: "left title", done: true))
            // Right's edit of y came later (the shared tick clock), so most-recent keeps it.
            #expect(try await right.value(Task.self, id: "y")?.title == "right y")
            #expect(try await left.value(Task.self, id: "z")?.title == "only right")
            // Syncing again finds nothing to do.
            let again = try await right.sync(with: left)
            #expect(again.sent.alreadyInSync && again.received.alreadyInSync && again.merge == nil)
        }
    }

    @Test(arguments: AdapterKind.allCases, AdapterKind.allCases)
    func migrationThereAndBackIsIdentical(a: AdapterKind, b: AdapterKind) async throws {
        try await withStores(a, b, [a]) { stores in
            let (original, migrated, back) = (stores[0], stores[1], stores[2])
            try await fill(original, tasks: 60, commits: 4)
            // A second head, so the head set holds two versions.
            let first = try await original.log().last!
            try await original.change(on: first) { try $0.save(Task(id: "branch", title: "side", done: true)) }
            let there = try await original.migrate(to: migrated)
            #expect(there.verified && there.exchange.versions == 5)
            let home = try await migrated.migrate(to: back)
            #expect(home.verified)
            #expect(try await headsRef(back) == headsRef(original))
            #expect(try await back.heads().count == 2)
            // Every object of the copies is byte-identical, and each is in the original.
            let migratedObjects = try await allObjects(migrated.backend)
            let backObjects = try await allObjects(back.backend)
            #expect(migratedObjects == backObjects)
            let originals = try await original.backend.get(Array(backObjects.keys))
            #expect(originals == backObjects)
            #expect(home.objectsChecked == backObjects.count)
        }
    }

    func allObjects(_ backend: any Backend) async throws -> [Hash: [UInt8]] {
        try await backend.get(Array(backend.allHashes()))
    }

    @Test(arguments: AdapterKind.allCases)
    func latestOnlyMigrationKeepsTheStateWithoutHistory(kind: AdapterKind) async throws {
        try await withStores(.memory, kind) { stores in
            let (source, target) = (stores[0], stores[1])
            let head = try await fill(source, tasks: 30, commits: 5)
            let report = try await source.migrate(to: target, latestOnly: true)
            #expect(report.verified && report.exchange.versions == 1)
            let copied = try #require(try await target.head())
            #expect(copied.root == head.root && copied.parents.isEmpty && copied.recordCount == head.recordCount)
            #expect(try await target.log().count == 1)
            try await sameContent(source, target)
        }
    }

    /// Large records are read a few megabytes at a time however many there are: a group of
    /// leaves can name thousands, of up to 256 MiB each, and they used to be read all at once.
    @Test func largeRecordsAreReadInRequestsOfBoundedSize() async throws {
        let size = 1 << 20
        let (store, source) = try await storeOfLargeRecords(count: 40, size: size)
        let target = Store(backend: MemoryBackend())
        let report = try await store.exchange(to: target)
        #expect(report.objects > 40)
        #expect(source.largestRead > size)
        #expect(source.largestRead <= BlobRequestSizer.byteBudget + size + 1_024)
        #expect(try await target.values(Attachment.self) == store.values(Attachment.self))
    }

    /// Large records after many smaller blobs: requests sized by the reads so far would have grown
    /// to a thousand blobs, and met forty records of 1 MB at once. The engine tells the sizes
    /// before reading (``Backend/objectSizes(_:)``), and every request holds about 16 MB.
    @Test func largeRecordsAfterManySmallerOnesAreReadInRequestsOfBoundedSize() async throws {
        let size = 1 << 20
        let backend = LargestReadBackend(MemoryBackend())
        let store = Store(backend: backend)
        var changes = ChangeSet()
        for index in 0..<1_500 { try changes.save(Attachment(id: String(format: "a%04d", index), data: Data(repeating: UInt8(index % 256), count: 2_000))) }
        for index in 0..<40 { try changes.save(Attachment(id: "z\(index)", data: Data(repeating: UInt8(index), count: size))) }
        try await store.commit(changes)
        let bound = BlobRequestSizer.byteBudget + 1_024
        backend.reset()
        let target = Store(backend: MemoryBackend())
        try await store.exchange(to: target)
        #expect(backend.largestRead > size && backend.largestRead <= bound, "exchange: \(backend.largestRead)")
        backend.reset()
        #expect(try await store.verify().isIntact)
        #expect(backend.largestRead > size && backend.largestRead <= bound, "verify: \(backend.largestRead)")
        backend.reset()
        _ = try await store.collectGarbage(gracePeriod: .zero)
        #expect(backend.largestRead > size && backend.largestRead <= bound, "gc: \(backend.largestRead)")
        #expect(try await target.values(Attachment.self) == store.values(Attachment.self))
    }

    /// Requests cut by the sizes an engine tells: as many as 16 MB holds, one at least, and a
    /// blob it does not know counts as empty.
    @Test func blobRequestsFollowTheSizesTold() {
        let sizer = BlobRequestSizer(maximumCount: 1_000)
        let hashes = (0..<6).map { Hash.of([UInt8($0)]) }
        let mb = 1 << 20
        let sizes = [hashes[0]: 10 * mb, hashes[1]: 6 * mb, hashes[2]: 1 * mb, hashes[3]: 40 * mb, hashes[4]: 5]
        #expect(sizer.count(of: hashes, sizes: sizes) == 2)
        #expect(sizer.count(of: hashes[2...], sizes: sizes) == 1)
        #expect(sizer.count(of: hashes[3...], sizes: sizes) == 1)
        #expect(sizer.count(of: hashes[4...], sizes: sizes) == 2)
        #expect(sizer.count(of: hashes, sizes: nil) == 1)
    }

    /// Requests of blobs start at one, grow at most twofold, and hold about 16 MB of the
    /// largest blob read so far: after many small records, large ones are not met a thousand
    /// at once.
    @Test func blobRequestsGrowStepByStep() {
        var sizer = BlobRequestSizer(maximumCount: 1_000)
        var counts = [Int]()
        for _ in 0..<12 {
            counts.append(sizer.count)
            sizer.read(Array(repeating: 2_000, count: sizer.count), requested: sizer.count)
        }
        #expect(counts == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1_000, 1_000])
        sizer.read([2_000, 1 << 20], requested: 1_000)
        #expect(sizer.count == BlobRequestSizer.byteBudget / (1 << 20))
        sizer.read([], requested: 1)
        #expect(sizer.count == 2)
    }

    @Test func verificationCatchesMissingAndForeignObjects() async throws {
        try await withStores(.memory, .memory) { stores in
            let (source, target) = (stores[0], stores[1])
            let head = try await fill(source, tasks: 300, commits: 2)
            try await source.migrate(to: target)
            var report = try await source.migrate(to: Store(backend: MemoryBackend()))
            // A foreign object in the target.
            let foreign: [UInt8] = [0xA1, 4, 1, 2, 3]
            try await target.backend.put([(Hash.of(foreign), foreign)])
            await #expect {
                try await MigrationCheck(source: source.backend, target: target.backend, latestOnly: false).run(&report)
            } throws: { ($0 as? ArborError)?.message.contains("not in the source") == true }
            // A leaf missing from the head's index.
            try await target.backend.delete([Hash.of(foreign)])
            // The head's first leaf: follow the first child down from its root.
            var leaf = head.root
            while let bytes = try await target.backend.get([leaf])[leaf], case .node(let child, _) = try IndexNode.decode(bytes).entries[0].payload {
                leaf = child
            }
            let leafBytes = try #require(try await target.backend.get([leaf])[leaf])
            try await target.backend.delete([leaf])
            await #expect {
                try await MigrationCheck(source: source.backend, target: target.backend, latestOnly: false).run(&report)
            } throws: { error in
                (error as? ArborError)?.code == .missingObject && "\(error)".contains(leaf.description)
            }
            // The leaf back with one byte changed.
            var damaged = leafBytes
            damaged[damaged.count / 2] ^= 0x20
            try await target.backend.put([(leaf, damaged)])
            await #expect {
                try await MigrationCheck(source: source.backend, target: target.backend, latestOnly: false).run(&report)
            } throws: { error in
                (error as? ArborError)?.code == .corruptObject && "\(error)".contains("\(leaf) does not match its hash")
            }
            // Repaired, the copy checks out again.
            try await target.backend.delete([leaf])
            try await target.backend.put([(leaf, leafBytes)])
            try await MigrationCheck(source: source.backend, target: target.backend, latestOnly: false).run(&report)
            let held = try await target.backend.allHashes().count
            #expect(report.verified && report.objectsChecked == held)
            #expect(head.recordCount > 0)
        }
    }

    /// A migration reports its copy, then its verification, ending on every object checked.
    @Test func migrationReportsTheVerificationsProgressToo() async throws {
        try await withStores(.memory, .memory) { stores in
            try await fill(stores[0], tasks: 300, commits: 3)
            let reports = Mutex([TransferProgress]())
            let report = try await stores[0].migrate(to: stores[1]) { progress in reports.withLock { $0.append(progress) } }
            let seen = reports.withLock { $0 }
            let firstVerifying = try #require(seen.firstIndex { $0.phase == .verifying })
            #expect(firstVerifying > 0 && seen[..<firstVerifying].allSatisfy { $0.phase == .copying })
            #expect(seen[firstVerifying...].allSatisfy { $0.phase == .verifying })
            let last = try #require(seen.last)
            #expect(last.objects == report.objectsChecked && last.bytes == report.bytesChecked && last.fractionDone == 1)
            #expect(report.objectsChecked == report.exchange.objects + 1)  // and the head set
        }
    }

    /// A migration run again on its finished copy verifies it whole: its progress used to be
    /// measured against the objects that run copied (none), so it showed 100% at once.
    @Test func aVerificationRunAgainMeasuresItsProgressAgainstTheWholeTarget() async throws {
        let source = Store(backend: MemoryBackend(), configuration: .init(replica: "source"))
        try await fill(source, tasks: 300, commits: 3)
        let targetBackend = MemoryBackend()
        try await source.migrate(to: Store(backend: targetBackend))
        let reports = Mutex([TransferProgress]())
        let again = try await source.migrate(to: Store(backend: SlowEnumerationBackend(targetBackend))) { progress in
            reports.withLock { $0.append(progress) }
        }
        let verifying = reports.withLock { $0 }.filter { $0.phase == .verifying }
        #expect(verifying.count >= 3, "\(verifying.count) reports")
        for report in verifying where report.objects < again.objectsChecked {
            #expect(report.fractionDone < 1, "\(report.objects) of \(again.objectsChecked) objects at \(report.fractionDone)")
        }
        #expect(verifying.last?.fractionDone == 1)
    }

    /// The verification's check that every name resolves finds a missing object whether it
    /// keeps everything in memory or, past its limit, asks the store.
    @Test(arguments: [1_000_000, 6, 3])
    func linkCheckFindsEveryMissingNameWithinItsMemory(limit: Int) async throws {
        let backend = MemoryBackend()
        let objects = (0..<20).map { index in
            let bytes = Array("object \(index)".utf8)
            return (hash: Hash.of(bytes), bytes: bytes)
        }
        try await backend.put(objects)
        let batches = stride(from: 0, to: 20, by: 4).map { Array(objects[$0..<($0 + 4)].map(\.hash)) }
        // Each batch names objects of batches before and after it.
        func names(_ index: Int) -> Set<Hash> { [objects[(index * 4 + 7) % 20].hash, objects[(index * 4 + 13) % 20].hash] }
        var complete = LinkCheck(target: backend)
        complete.memoryLimit = limit
        for (index, batch) in batches.enumerated() { try await complete.add(batch, naming: names(index)) }
        try await complete.resolve()

        let absent = Hash.of(Array("never stored".utf8))
        var broken = LinkCheck(target: backend)
        broken.memoryLimit = limit
        await #expect {
            for (index, batch) in batches.enumerated() {
                try await broken.add(batch, naming: index == 1 ? names(index).union([absent]) : names(index))
            }
            try await broken.resolve()
        } throws: { error in
            (error as? ArborError)?.code == .missingObject && "\(error)".contains(absent.description)
        }
    }

    /// SipHash-2-4 as its authors give it (the 32-byte message 00…1f under the key 00…0f), and a
    /// digest that depends on which hashes were added and how often, not in what order.
    @Test func objectSetDigestsAreKeyedSipHashSums() {
        let message: (UInt64, UInt64, UInt64, UInt64) = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908, 0x1716_1514_1312_1110, 0x1f1e_1d1c_1b1a_1918)
        #expect(ObjectSetDigest.sipHash24(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908, message) == 0x7127_512f_72f2_7cce)
        let hashes = (0..<5).map { Hash.of(Array("object \($0)".utf8)) }
        let key = ObjectSetDigest.Key.random()
        func digest(_ hashes: [Hash]) -> ObjectSetDigest {
            var digest = ObjectSetDigest(key: key)
            for hash in hashes { digest.insert(hash) }
            return digest
        }
        let reordered = digest(Array(hashes[3...]) + hashes[..<3].reversed())
        #expect(reordered == digest(hashes) && reordered.count == 5)
        #expect(digest(Array(hashes.dropLast())) != digest(hashes))
        #expect(digest(hashes + [hashes[0]]) != digest(hashes))
        #expect(digest(Array(hashes.dropLast()) + [hashes[0]]) != digest(hashes))  // same count, other objects
        var otherKey = ObjectSetDigest(key: .random())
        for hash in hashes { otherKey.insert(hash) }
        #expect(otherKey != digest(hashes))
    }

    /// Into a new store, a migration proves that the target holds what it wrote by digest, and
    /// asks the source nothing while verifying.
    @Test(arguments: AdapterKind.allCases, [false, true])
    func migrationIntoANewStoreVerifiesWithoutAskingTheSource(kind: AdapterKind, latestOnly: Bool) async throws {
        try await withStores(.memory, kind) { stores in
            let counting = CountingBackend(stores[0].backend)
            let source = Store(backend: counting, configuration: .init(replica: "counted"))
            try await fill(source, tasks: 120, commits: 3)
            // (Commits ask after their own objects once their heads moved.)
            let askedByCommits = counting.hashesAsked
            let report = try await source.migrate(to: stores[1], latestOnly: latestOnly)
            #expect(report.verified && report.objectsChecked == report.exchange.objects + 1)
            #expect(counting.hashesAsked == askedByCommits)
        }
    }

    /// Verifying from what the copy recorded still reads every object of the target (where the
    /// engine hashes, the engine checks it): one with a byte changed fails, naming it.
    @Test(arguments: AdapterKind.allCases)
    func verificationFromTheCopysRecordCatchesADamagedObject(kind: AdapterKind) async throws {
        try await withStores(.memory, kind) { stores in
            let (source, target) = (stores[0], stores[1])
            try await fill(source, tasks: 120, commits: 3)
            var report = try await source.migrate(to: target)
            // The record the copy kept: every object but the head set, with what they name.
            let ref = try await headsRef(target)
            let written = try await allObjects(target.backend).filter { $0.key != ref }.map { (hash: $0.key, bytes: $0.value) }
            var record = CopyRecord(key: .random(), target: target.backend)
            try await record.add(written.map(\.hash), naming: CopyRecord.names(of: written))
            let check = MigrationCheck(source: source.backend, target: target.backend, latestOnly: false, record: record)
            try await check.run(&report)
            #expect(report.objectsChecked == written.count + 1)

            let victim = try #require(written.first { $0.bytes.count > 100 })
            var damaged = victim.bytes
            damaged[damaged.count / 2] ^= 0x20
            try await target.backend.delete([victim.hash])
            try await target.backend.put([(victim.hash, damaged)])
            await #expect { try await check.run(&report) } throws: { error in
                // (The JSON adapter checks what it reads itself, and names the object's file.)
                (error as? ArborError)?.code == .corruptObject && "\(error)".contains(victim.hash.description) && "\(error)".contains("does not match its hash")
            }
        }
    }

    /// A target that loses an object it was given no longer has the digest of what the copy
    /// wrote, and the whole check that follows finds the name that does not resolve.
    @Test func aTargetThatLosesAnObjectFailsTheVerification() async throws {
        let source = Store(backend: MemoryBackend())
        try await fill(source, tasks: 120, commits: 3)
        let lossy = LosingBackend(MemoryBackend(), losing: 10)
        await #expect { try await source.migrate(to: Store(backend: lossy)) } throws: { error in
            (error as? ArborError)?.code == .missingObject && lossy.lost.map { "\(error)".contains($0.description) } == true
        }
    }

    /// Objects that another writer slips into the target during a migration make the digests
    /// differ; the verification then asks the source about every object, and fails on one the
    /// source lacks but passes when it holds them all.
    @Test func objectsTheCopyDidNotWriteAreAskedOfTheSource() async throws {
        let counting = CountingBackend(MemoryBackend())
        let source = Store(backend: counting, configuration: .init(replica: "counted"))
        try await fill(source, tasks: 120, commits: 3)
        let unreachable: [UInt8] = [0xA1, 4, 9, 9, 9]
        try await counting.put([(Hash.of(unreachable), unreachable)])

        let foreign: [UInt8] = [0xA1, 4, 1, 2, 3]
        let spoiled = SlippingBackend(MemoryBackend(), slips: [(Hash.of(foreign), foreign)])
        await #expect {
            try await source.migrate(to: Store(backend: spoiled))
        } throws: { ($0 as? ArborError)?.message.contains("object \(Hash.of(foreign)) is not in the source") == true }

        counting.reset()
        let joined = SlippingBackend(MemoryBackend(), slips: [(Hash.of(unreachable), unreachable)])
        let report = try await source.migrate(to: Store(backend: joined))
        #expect(report.verified && report.objectsChecked == report.exchange.objects + 2)
        #expect(counting.hashesAsked == report.objectsChecked)
    }

    /// A migration run again once its copy is done (stopped before it reported) verifies the
    /// copy and copies nothing; with `latestOnly` too.
    @Test func aMigrationRunAgainOnItsFinishedCopyVerifiesIt() async throws {
        for latestOnly in [false, true] {
            try await withStores(.memory, .sqlite) { stores in
                try await fill(stores[0])
                let first = try await stores[0].migrate(to: stores[1], latestOnly: latestOnly)
                let again = try await stores[0].migrate(to: stores[1], latestOnly: latestOnly)
                #expect(again.exchange.objects == 0 && again.verified && again.objectsChecked == first.objectsChecked)
                #expect(again.heads == first.heads)
                // Another store's copy is not this one's.
                try await stores[0].save(Task(id: "later", title: "new", done: false))
                await #expect { try await stores[0].migrate(to: stores[1], latestOnly: latestOnly) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
            }
        }
    }

    /// Refs besides the heads (no Arbor API writes one; another tool may: a tag naming an older
    /// version, a head set kept aside) are copied by a migration of all history and verified;
    /// they used to be left out while the verification passed. A copy stopped after its heads,
    /// before those refs, is finished by running it again; a latest-only copy leaves them out.
    @Test(arguments: [AdapterKind.memory, .sqlite, .lmdb])
    func aMigrationCopiesEveryRefWithWhatItReaches(kind: AdapterKind) async throws {
        try await withStores(.memory, kind) { stores in
            let (source, target) = (stores[0], stores[1])
            let first = try await source.save(Task(id: "a", title: "first", done: false))
            try await source.save(Task(id: "b", title: "second", done: false))
            let keptHeadSet = try #require(try await headsRef(source))
            try await fill(source)
            #expect(try await source.backend.compareAndSwap(ref: "tags/first", expected: nil, new: first.id))
            #expect(try await source.backend.compareAndSwap(ref: "kept/heads", expected: nil, new: keptHeadSet))
            let report = try await source.migrate(to: target)
            #expect(report.verified)
            #expect(try await target.backend.refsBesidesClaims() == source.backend.refsBesidesClaims())
            #expect(try await target.value(Task.self, id: "a", at: first.id)?.title == "first")
            #expect(try await target.verify().isIntact)

            // Stopped between the heads and the other refs: run again, it makes them.
            #expect(try await target.backend.compareAndSwap(ref: "tags/first", expected: first.id, new: nil))
            let again = try await source.migrate(to: target)
            #expect(again.verified && again.exchange.objects == 0)
            #expect(try await target.backend.ref("tags/first") == first.id)

            // Run again after a tag was made on a draft the heads do not reach, built on the
            // head: the draft is copied before the tag is made, and the head stays a head.
            let tip = try #require(try await source.heads().first)
            var changes = ChangeSet()
            try changes.save(Task(id: "draft", title: "not in the heads", done: false))
            let headsBefore = try await headsRef(source)
            let draft = try await source.commit(changes, message: "draft", parents: [tip.id])
            #expect(try await source.backend.compareAndSwap(ref: RefName.heads, expected: try await headsRef(source), new: headsBefore))
            #expect(try await source.backend.compareAndSwap(ref: "tags/draft", expected: nil, new: draft.id))
            let withDraft = try await source.migrate(to: target)
            #expect(withDraft.verified)
            #expect(try await target.backend.ref("tags/draft") == draft.id)
            #expect(try await target.heads().map(\.id) == [tip.id])
            #expect(try await target.value(Task.self, id: "draft", at: draft.id)?.title == "not in the heads")
            #expect(try await target.verify().isIntact)

            // A target whose tag names another version is not this copy.
            #expect(try await target.backend.compareAndSwap(ref: "tags/first", expected: first.id, new: report.heads[0]))
            await #expect { try await source.migrate(to: target) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
        }
        try await withStores(.memory, kind) { stores in
            let first = try await stores[0].save(Task(id: "a", title: "first", done: false))
            try await fill(stores[0])
            #expect(try await stores[0].backend.compareAndSwap(ref: "tags/first", expected: nil, new: first.id))
            #expect(try await stores[0].migrate(to: stores[1], latestOnly: true).verified)
            #expect(try await stores[1].backend.ref("tags/first") == nil)
        }
    }

    /// A source whose heads ref is gone but which keeps a tag (another tool removed the heads):
    /// the migration copies the tag with the history it reaches, and the target has no heads, as
    /// the source. It used to copy nothing and pass its check.
    @Test(arguments: [AdapterKind.memory, .sqlite])
    func aMigrationOfASourceWithoutHeadsCopiesItsOtherRefs(kind: AdapterKind) async throws {
        try await withStores(.memory, kind) { stores in
            let (source, target) = (stores[0], stores[1])
            let first = try await source.save(Task(id: "a", title: "first", done: false))
            try await source.save(Task(id: "b", title: "second", done: false))
            #expect(try await source.backend.compareAndSwap(ref: "tags/first", expected: nil, new: first.id))
            #expect(try await source.backend.compareAndSwap(ref: RefName.heads, expected: try await headsRef(source), new: nil))
            let report = try await source.migrate(to: target)
            #expect(report.verified && !report.sourceChangedSinceCopy)
            #expect(try await target.backend.refsBesidesClaims() == ["tags/first": first.id])
            #expect(try await target.value(Task.self, id: "a", at: first.id)?.title == "first")
            #expect(try await target.heads().isEmpty)
        }
    }

    /// A source written to while it is migrated: the copy is of its state when the copy read its
    /// refs, and is verified against that state; the report says the source moved on. The
    /// verification used to compare the target with the source's refs of the moment and call a
    /// correct copy damaged.
    @Test(arguments: [false, true])
    func aSourceWrittenToDuringItsMigrationGivesAVerifiedCopyOfItsEarlierState(latestOnly: Bool) async throws {
        let source = Store(backend: MemoryBackend(), configuration: .init(replica: "source"))
        try await fill(source)
        let before = try #require(try await headsRef(source))
        let target = Store(backend: SwapHookBackend(MemoryBackend()) {
            try await source.save(Task(id: "meanwhile", title: "written during the migration", done: false))
        })
        let report = try await source.migrate(to: target, latestOnly: latestOnly)
        #expect(report.verified && report.sourceChangedSinceCopy)
        #expect(try await headsRef(source) != before)
        if !latestOnly { #expect(try await headsRef(target) == before) }
        #expect(try await target.value(Task.self, id: "meanwhile") == nil)
        #expect(try await target.verify().isIntact)
        // Unmoved, it says so.
        let still = Store(backend: MemoryBackend())
        #expect(try await source.migrate(to: still, latestOnly: latestOnly).sourceChangedSinceCopy == false)
    }

    /// A head left behind (a branch nobody builds on, as a manual merge leaves) used to make
    /// every exchange into the store walk its history back to that head's time, to see whether
    /// the incoming versions build on it: one commit brought in read hundreds.
    @Test func anExchangeIntoAStoreWithAHeadLeftBehindReadsWhatChanged() async throws {
        let counting = CountingBackend()
        let clock = TickClock()
        let target = Store(backend: counting, configuration: .init(replica: "target", clock: clock.read))
        let base = try await target.save(Task(id: "base", title: "base", done: false))
        var aside = ChangeSet()
        try aside.save(Task(id: "aside", title: "left behind", done: false))
        let leftBehind = try await target.commit(aside, message: "aside", parents: [base.id])
        var tip = base
        for index in 0..<150 {
            var changes = ChangeSet()
            try changes.save(Task(id: "main", title: "step \(index)", done: false))
            tip = try await target.commit(changes, message: "step \(index)", parents: [tip.id])
        }
        #expect(Set(try await target.heads().map(\.id)) == [leftBehind.id, tip.id])
        let source = Store(backend: MemoryBackend(), configuration: .init(replica: "source", clock: clock.read))
        try await target.exchange(to: source)
        var changes = ChangeSet()
        try changes.save(Task(id: "main", title: "one more", done: false))
        let newer = try await source.commit(changes, message: "one more", parents: [tip.id])
        counting.reset()
        try await source.exchange(to: target)
        #expect(Set(try await target.heads().map(\.id)) == [leftBehind.id, newer.id])
        #expect(counting.objectsRead < 40, "the exchange read \(counting.objectsRead) objects of the target")
        // A version the target had, sent back as a head (a replica behind), is still seen to be
        // an ancestor: the heads do not change.
        let behind = Store(backend: MemoryBackend(), configuration: .init(replica: "behind", clock: clock.read))
        try await target.exchange(to: behind)
        let stale = try HeadSet.encode([tip.id])
        try await behind.backend.put([(Hash.of(stale), stale)])
        #expect(try await behind.backend.compareAndSwap(ref: RefName.heads, expected: try await headsRef(behind), new: Hash.of(stale)))
        try await behind.exchange(to: target)
        #expect(Set(try await target.heads().map(\.id)) == [leftBehind.id, newer.id])
    }

    @Test func migrateRefusesATargetWithVersionsAndLeavesIt() async throws {
        try await withStores(.memory, .memory) { stores in
            try await fill(stores[0])
            try await stores[1].save(Task(id: "mine", title: "keep", done: false))
            let before = try await headsRef(stores[1])
            await #expect { try await stores[0].migrate(to: stores[1]) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
            #expect(try await headsRef(stores[1]) == before)
        }
    }

    @Test func threeReplicasSyncingInAnyOrderConverge() async throws {
        try await withStores(.memory, .sqlite, [.json]) { stores in
            try await stores[0].save(Task(id: "shared", title: "base", done: false))
            try await stores[0].exchange(to: stores[1])
            try await stores[0].exchange(to: stores[2])
            for (index, store) in stores.enumerated() {
                try await store.save(Task(id: "shared", title: "edit \(index)", done: index == 1))
                try await store.save(Task(id: "own\(index)", title: "own", done: false))
            }
            try await stores[0].sync(with: stores[1])
            try await stores[2].sync(with: stores[1])
            try await stores[0].sync(with: stores[2])
            let refs = try await stores.asyncMap { try await headsRef($0) }
            #expect(Set(refs).count == 1)
            #expect(try await stores[1].values(Task.self).count == 4)
        }
    }

    @Test func manualSyncKeepsBothHeadsAndReportsTheConflict() async throws {
        try await withStores(.memory, .lmdb) { stores in
            try await stores[0].save(Task(id: "x", title: "base", done: false))
            try await stores[0].exchange(to: stores[1])
            try await stores[0].save(Task(id: "x", title: "left", done: false))
            try await stores[1].save(Task(id: "x", title: "right", done: false))
            let report = try await stores[0].sync(with: stores[1], strategy: .manual)
            #expect(report.conflicts.count == 1)
            #expect(report.heads.count == 2)
            #expect(try await headsRef(stores[0]) == headsRef(stores[1]))
        }
    }

    // MARK: Batches

    /// A transfer writes batches of at most what the target asks for, in objects and in bytes,
    /// unless the caller names a count; the forwarding wrappers pass the target's wish on.
    @Test func transfersWriteInTheBatchesTheTargetAsksFor() async throws {
        let source = Store(backend: MemoryBackend())
        try await fill(source, tasks: 300, commits: 4)
        let largest = try await source.backend.get(Array(try await source.backend.allHashes())).values.map(\.count).max() ?? 0
        for (limit, batchSize) in [(WriteBatchLimit(objects: 50, bytes: 1 << 30), nil), (WriteBatchLimit(objects: 100_000, bytes: 20_000), nil),
                                   (WriteBatchLimit(objects: 50, bytes: 1 << 30), 7)] as [(WriteBatchLimit, Int?)] {
            let target = BatchRecordingBackend(limit: limit)
            #expect(RecordingBackend(target).writeBatchLimit == limit, "a forwarding wrapper reports the inner backend's wish")
            try await source.exchange(to: Store(backend: target), batchSize: batchSize)
            let batches = target.batches
            #expect(batches.reduce(0) { $0 + $1.objects } == (try await target.allHashes().count), "every object written once")
            #expect(batches.allSatisfy { $0.objects <= batchSize ?? limit.objects }, "\(limit), \(String(describing: batchSize)): \(batches.map(\.objects))")
            #expect(batches.allSatisfy { $0.bytes < limit.bytes + largest }, "\(limit): \(batches.map(\.bytes))")
            #expect(batches.count > 2, "the limit splits the copy: \(batches.count) batches")
        }
        #expect(MemoryBackend().writeBatchLimit == .standard)
    }

    // MARK: Faults

    @Test(arguments: AdapterKind.allCases)
    func interruptedExchangeResumesAndCopiesNothingTwice(kind: AdapterKind) async throws {
        let source = Store(backend: MemoryBackend())
        try await fill(source, tasks: 200, commits: 4)
        for failAfter in [0, 1, 2, 3, 5] {
            let (backend, cleanup) = try makeBackend(kind)
            defer { cleanup() }
            let recorder = RecordingBackend(backend)
            let failing = Store(backend: FailingBackend(recorder, failingAfterPuts: failAfter))
            // Small batches, so that the failure lands in the middle of the copy.
            await #expect(throws: ArborError.self) {
                try await Transfer(from: source.backend, to: failing.backend, progress: nil, batchSize: 10).exchange()
            }
            #expect(try await backend.ref(RefName.heads) == nil, "refs change last")
            let target = Store(backend: recorder)
            let resumed = try await source.exchange(to: target)
            #expect(resumed.versions <= 4)
            #expect(try await headsRef(target) == headsRef(source))
            #expect(recorder.duplicates.isEmpty, "copied twice after failing at put \(failAfter): \(recorder.duplicates.count)")
            try await sameContent(source, target)
            try await backend.close()
        }
    }

    @Test(arguments: AdapterKind.allCases)
    func killedAfterTheObjectsBeforeTheRefsResumes(kind: AdapterKind) async throws {
        // The objects landed but the refs did not: the rerun finds the head present and orphaned.
        try await withStores(.memory, kind) { stores in
            let (source, target) = (stores[0], stores[1])
            try await fill(source)
            try await source.exchange(to: target)
            try await source.save(Task(id: "late", title: "late", done: false))
            let objects = try await allObjects(source.backend)
            try await target.backend.put(objects.map { ($0.key, $0.value) })
            let report = try await source.exchange(to: target)
            #expect(report.versions == 0 && report.objects == 0)
            #expect(try await headsRef(target) == headsRef(source))
            #expect(try await target.heads().count == 1)
        }
    }

    /// A damaged version of the source that the target holds, on an adapter that refuses a
    /// damaged object with its whole batch (the JSON files) or that returns it damaged: older
    /// than where the histories meet, the walk of the source's history ahead of the target's
    /// answers reaches it and leaves it out, as one that does not match its hash; exactly where
    /// they meet (the target's head, the parent of the first version copied), its time and
    /// index root are read from the target, which holds it intact. The exchange completes; it
    /// used to fail with the adapter's error, and could then never bring the later versions.
    @Test(arguments: [(2, DamagingBackend.Damage.refusal), (5, .refusal), (5, .flippedByte)])
    func aDamagedVersionTheTargetHoldsDoesNotStopAnExchange(damagedVersion: Int, damage: DamagingBackend.Damage) async throws {
        let inner = MemoryBackend()
        let writer = Store(backend: inner, configuration: .init(replica: "s"))
        var versions = [Version]()
        for index in 0..<6 { versions.append(try await writer.save(Task(id: "t\(index)", title: "v\(index)", done: false))) }
        // The target holds the history up to version 5; the source goes on to version 39.
        let target = Store(backend: MemoryBackend(), configuration: .init(replica: "t"))
        try await writer.exchange(to: target)
        for index in 6..<40 { versions.append(try await writer.save(Task(id: "t\(index)", title: "v\(index)", done: false))) }
        let source = Store(backend: DamagingBackend(inner, damaging: versions[damagedVersion].id, by: damage), configuration: .init(replica: "s"))
        let report = try await source.exchange(to: target)
        #expect(report.versions == 34)
        #expect(try await target.heads().map(\.id) == [versions[39].id])
        #expect(try await target.verify().isIntact)
    }

    /// A corrupt object of the source stops an exchange or a migration (with and without only
    /// the latest state), named, before any ref of the target changes; repaired, the same call
    /// completes.
    @Test(arguments: [0, 1, 2]) func corruptSourceObjectIsNamedAndNothingIsApplied(transfer: Int) async throws {
        let inner = MemoryBackend()
        let source = Store(backend: inner)
        try await fill(source)
        let root = try #require(try await source.head()).root
        let corrupting = Store(backend: DamagingBackend(inner, damaging: root, by: .flippedByte))
        let target = Store(backend: MemoryBackend())
        func run(_ from: Store) async throws {
            switch transfer {
            case 0: try await from.exchange(to: target)
            case 1: try await from.migrate(to: target)
            default: try await from.migrate(to: target, latestOnly: true)
            }
        }
        await #expect {
            try await run(corrupting)
        } throws: { error in
            guard let error = error as? ArborError else { return false }
            return error.code == .corruptObject && error.message.contains(root.hex)
        }
        #expect(try await target.backend.ref(RefName.heads) == nil)
        // Repaired (here: read without the fault), the same call completes.
        try await run(source)
        if transfer < 2 { try await sameContent(source, target) }
        #expect(try await target.verify().isIntact)
    }

    /// Ways a correctly hashed index can misdescribe itself, which lookups (down the branches'
    /// keys and counts) and diffs (along the leaves) would answer differently.
    enum MisfiledNode: CaseIterable, Sendable {
        /// The root files its first child, which the version before holds too, under a key
        /// other than the child's last.
        case sharedNodeUnderAnotherKey
        /// The root says that child holds one record more than it does.
        case sharedNodeWithAnotherCount
        /// The root's first child is new, and does not end on the key it is filed under.
        case newNodeUnderAnotherKey
        /// The root's first child is new, and holds fewer records than the root says.
        case newNodeWithAnotherCount
        /// The version says its index holds one record more than it does.
        case versionWithAnotherCount
        /// The root names its first child, which is new, twice: the second time with more records.
        case newNodeNamedTwiceWithAnotherCount
        /// The root's second child is new and starts with its first child's first entry: the
        /// siblings overlap.
        case newSiblingsOverlap
    }

    /// An exchange or a migration checks the nodes it copies against the parents that file
    /// them, as `verify` does, and the nodes it does not read against the index they were
    /// changed from: a damaged or hostile source whose objects all match their hashes is
    /// refused, with the node named, before any ref of the target moves.
    @Test(arguments: MisfiledNode.allCases, [false, true])
    func aMisfiledIndexNodeIsRefusedAndNoRefMoves(damage: MisfiledNode, migrating: Bool) async throws {
        let inner = MemoryBackend()
        let source = Store(backend: inner, configuration: .init(replica: "s"))
        var changes = ChangeSet()
        for index in 0..<600 { try changes.save(Person(id: "p\(index)", name: "person \(index)")) }
        let head = try await source.commit(changes)
        var root = try IndexNode.decode(try #require(try await inner.get(head.root)))
        try #require(root.level > 1 && root.entries.count > 1)
        guard case .node(let child, let count) = root.entries[0].payload else { Issue.record("a one-level tree"); return }
        // The child without its last entry: a node of its own, which ends on another key.
        var shorter = try IndexNode.decode(try #require(try await inner.get(child)))
        shorter.entries.removeLast()
        let shorterBytes = shorter.encoded()
        var overlappingBytes = shorterBytes
        let named: Hash
        switch damage {
        case .sharedNodeUnderAnotherKey:
            // Still below the next entry's key: the node stays in order and parses.
            root.entries[0].key += [0x01]
            named = child
        case .sharedNodeWithAnotherCount:
            root.entries[0].payload = .node(child, count: count + 1)
            named = child
        case .newNodeUnderAnotherKey:
            root.entries[0].payload = .node(Hash.of(shorterBytes), count: shorter.recordCount)
            named = Hash.of(shorterBytes)
        case .newNodeWithAnotherCount:
            root.entries[0].key = try #require(shorter.entries.last).key
            root.entries[0].payload = .node(Hash.of(shorterBytes), count: count)
            named = Hash.of(shorterBytes)
        case .versionWithAnotherCount:
            named = head.root
        case .newNodeNamedTwiceWithAnotherCount:
            root.entries[0].key = try #require(shorter.entries.last).key
            root.entries[0].payload = .node(Hash.of(shorterBytes), count: shorter.recordCount)
            root.entries[1].payload = .node(Hash.of(shorterBytes), count: shorter.recordCount + 1)
            named = Hash.of(shorterBytes)
        case .newSiblingsOverlap:
            guard case .node(let second, let secondCount) = root.entries[1].payload else { Issue.record("a second child"); return }
            let first = try IndexNode.decode(try #require(try await inner.get(child)))
            var overlapping = try IndexNode.decode(try #require(try await inner.get(second)))
            overlapping.entries.insert(first.entries[0], at: 0)
            overlappingBytes = overlapping.encoded()
            root.entries[1].payload = .node(Hash.of(overlappingBytes), count: secondCount + first.entries[0].payload.recordCount)
            named = Hash.of(overlappingBytes)
        }
        let rootBytes = root.encoded()
        var content = head.content
        content.root = Hash.of(rootBytes)
        content.recordCount = root.recordCount + (damage == .versionWithAnotherCount ? 1 : 0)
        content.parents = [head.id]
        content.time = HybridTime.next(after: [head.time], now: Date())
        let commit = content.encoded()
        try await inner.put([(Hash.of(shorterBytes), shorterBytes), (Hash.of(overlappingBytes), overlappingBytes), (Hash.of(rootBytes), rootBytes), (Hash.of(commit), commit)])
        try await source.updateHeads(removing: [head.id], adding: Hash.of(commit))

        let target = Store(backend: MemoryBackend())
        await #expect {
            if migrating { try await source.migrate(to: target) } else { try await source.exchange(to: target) }
        } throws: { error in
            guard let error = error as? ArborError, error.code == .corruptObject, error.message.contains(named.hex) else { return false }
            switch damage {
            case .sharedNodeUnderAnotherKey: return error.message.contains("under another key")
            case .sharedNodeWithAnotherCount: return error.message.contains("with \(count + 1) records, not \(count)")
            case .newNodeUnderAnotherKey: return error.message.contains("last key is not the key")
            case .newNodeWithAnotherCount: return error.message.contains("holds \(shorter.recordCount) records") && error.message.contains("says \(count)")
            case .versionWithAnotherCount: return error.message.contains("says \(content.recordCount) records")
            case .newNodeNamedTwiceWithAnotherCount: return error.message.contains("otherwise than node \(Hash.of(rootBytes))")
            case .newSiblingsOverlap: return error.message.contains("first key is not past")
            }
        }
        #expect(try await target.backend.refs().isEmpty)
        // verify names the node too (a version's count: the version), also when later versions
        // back on the sound root, walked first and in another batch of versions, reach the node
        // filed soundly.
        let report = try await source.verify()
        let flagged = damage == .versionWithAnotherCount ? Hash.of(commit) : named
        #expect(report.damage.contains { $0.hash == flagged }, "\(damage): \(report.damage.map(\.detail))")
        var later = head.content
        (later.parents, later.time) = ([Hash.of(commit)], content.time)
        var laterCommits = [(hash: Hash, bytes: [UInt8])]()
        for _ in 0..<300 {
            later.time = HybridTime.next(after: [later.time], now: Date())
            let bytes = later.encoded()
            laterCommits.append((Hash.of(bytes), bytes))
            later.parents = [Hash.of(bytes)]
        }
        try await inner.put(laterCommits)
        try await source.updateHeads(removing: [Hash.of(commit)], adding: laterCommits[laterCommits.count - 1].hash)
        let walkedLater = try await source.verify()
        #expect(walkedLater.damage.contains { $0.hash == flagged }, "\(damage), walked from later versions: \(walkedLater.damage.map(\.detail))")
        try await source.updateHeads(removing: [laterCommits[laterCommits.count - 1].hash], adding: Hash.of(commit))
        // With the damaged version gone from the heads, the same exchange completes over what landed.
        try await source.updateHeads(removing: [Hash.of(commit)], adding: head.id)
        try await source.exchange(to: target)
        #expect(try await target.heads().map(\.id) == [head.id])
        #expect(try await target.verify().isIntact)
    }

    /// A version whose root the target already holds is not walked, but the root must still
    /// be an index node: a hostile version naming its parent's commit as its root (and 0
    /// records, which a commit "holds") is refused before any ref moves.
    @Test(arguments: [false, true]) func aRootTheTargetHoldsMustBeAnIndexNode(migrating: Bool) async throws {
        let inner = MemoryBackend()
        let source = Store(backend: inner, configuration: .init(replica: "s"))
        let head = try await source.save(Person(id: "p", name: "one"))
        let target = Store(backend: MemoryBackend())
        if migrating {
            // An interrupted migration left the parent's commit there, and no ref.
            try await target.backend.put([(head.id, try #require(try await inner.get(head.id)))])
        } else {
            try await source.exchange(to: target)
        }
        let refsBefore = try await target.backend.refs()
        var content = head.content
        content.root = head.id
        content.recordCount = 0
        content.parents = [head.id]
        content.time = HybridTime.next(after: [head.time], now: Date())
        let commit = content.encoded()
        try await inner.put([(Hash.of(commit), commit)])
        try await source.updateHeads(removing: [head.id], adding: Hash.of(commit))
        await #expect {
            if migrating { try await source.migrate(to: target) } else { try await source.exchange(to: target) }
        } throws: { error in
            (error as? ArborError)?.code == .corruptObject && "\(error)".contains("not an index root") && "\(error)".contains(head.id.hex)
        }
        #expect(try await target.backend.refs() == refsBefore)
    }

    /// A version must be later than its parents also where the target holds the parent: the
    /// target's heads are pruned by time, and a head older than its parent would hide that
    /// parent from the pruning.
    @Test func aVersionOlderThanAParentTheTargetHoldsIsRefused() async throws {
        let inner = MemoryBackend()
        let source = Store(backend: inner, configuration: .init(replica: "s"))
        let parent = try await source.save(Person(id: "p", name: "one"))
        let target = Store(backend: MemoryBackend())
        try await source.exchange(to: target)
        var content = parent.content
        content.parents = [parent.id]
        content.time = HybridTime(milliseconds: parent.time.milliseconds - 1)
        content.message = "older than its parent"
        let commit = content.encoded()
        try await inner.put([(Hash.of(commit), commit)])
        try await source.updateHeads(removing: [parent.id], adding: Hash.of(commit))
        await #expect { try await source.exchange(to: target) } throws: { error in
            (error as? ArborError)?.code == .corruptObject && "\(error)".contains("not later than its parent \(parent.id)")
        }
        #expect(try await target.heads().map(\.id) == [parent.id])
    }

    /// A target whose heads name a version it lacks (a collection removed it under a writer
    /// slower than its grace period) gets it back from an exchange, and it stops being a head
    /// when the exchange brings a child of it: the exchange used to keep it among the heads, the
    /// child beside its parent.
    @Test(arguments: AdapterKind.allCases) func aHeadTheTargetLackedIsNoHeadOnceItsChildArrives(kind: AdapterKind) async throws {
        let source = Store(backend: MemoryBackend(), configuration: .init(replica: "s"))
        let parent = try await source.save(Person(id: "p", name: "one"))
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let target = Store(backend: backend)
        try await source.exchange(to: target)
        try await backend.delete([parent.id])
        let child = try await source.save(Person(id: "p", name: "two"))
        let report = try await source.exchange(to: target)
        #expect(report.versions == 2)
        #expect(try await target.heads().map(\.id) == [child.id])
        #expect(try await target.verify().isIntact)
        #expect(try await target.value(Person.self, id: "p")?.name == "two")
        try await target.close()
    }

    @Test func targetOfAnotherFormatIsRefusedUntouched() async throws {
        let source = Store(backend: MemoryBackend())
        try await fill(source)
        let target = MemoryBackend()
        let alien: [UInt8] = [0xA2, 5, 0]
        try await target.put([(Hash.of(alien), alien)])
        #expect(try await target.compareAndSwap(ref: RefName.heads, expected: nil, new: Hash.of(alien)))
        await #expect { try await source.exchange(to: Store(backend: target)) } throws: { ($0 as? ArborError)?.code == .unsupportedFormat }
        #expect(try await target.allHashes() == [Hash.of(alien)])
    }

    // MARK: Counted costs

    /// A migration writes each object once, and never before what it names: also a node that
    /// one version's index holds at its root and another's (taller, in the same chunk of history)
    /// holds lower down, which a deeper walk copies first; a node two walks of one call reach
    /// at different levels; and a node named again after its batch landed, which an empty target
    /// is asked about only when the transfer may have written it (``LandedObjects``). A bulk load
    /// of random ids in ten commits has all of them; a history whose index then shrinks (most
    /// records deleted) and grows again walks taller indexes before shorter ones. Small groups
    /// and batches make walks split and batches land in the middle of them, as a million
    /// records do.
    @Test(arguments: [(Transfer.groupSize, nil, false), (4, 64, false), (Transfer.groupSize, nil, true), (4, 64, true)] as [(Int, Int?, Bool)])
    func aMigrationIntoAnEmptyStoreCopiesEachObjectOnce(groupSize: Int, batchSize: Int?, shrinks: Bool) async throws {
        let source = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
        var generator = SeededGenerator(seed: 21)
        var ids = [String]()
        func insert(_ count: Int) async throws {
            var changes = ChangeSet()
            for _ in 0..<count {
                let id = String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 16)
                ids.append(id)
                try changes.save(item(id, ["title": .string("Item \(id) with a title long enough to make a record of ~100 bytes")]))
            }
            try await source.commit(changes)
        }
        for _ in 0..<10 { try await insert(3_000) }
        if shrinks {
            ids.shuffle(using: &generator)
            for _ in 0..<3 {
                var changes = ChangeSet()
                for id in ids.suffix(9_500) { changes.delete(itemKey(id)) }
                ids.removeLast(9_500)
                try await source.commit(changes)
            }
            for _ in 0..<3 { try await insert(2_000) }
        }
        let counting = CountingBackend(MemoryBackend())
        let target = OrderCheckingBackend(counting)
        let transfer = Transfer(from: source.backend, to: target, progress: nil, batchSize: batchSize)
        transfer.groupSize = groupSize
        transfer.targetStartedEmpty = true
        let report = try await transfer.exchange()
        let stored = try await counting.allHashes().count
        #expect(target.violations.isEmpty, "\(target.violations.count) objects written before what they name, as \(target.violations.prefix(3))")
        #expect(counting.objectsPut == stored, "\(counting.objectsPut) objects put for \(stored) stored")
        #expect(report.objects == stored - 1, "\(report.objects) objects copied for \(stored - 1) (the head set aside)")
        var check = MigrationReport(latestOnly: false)
        try await MigrationCheck(source: source.backend, target: counting, latestOnly: false).run(&check)
        #expect(check.verified)
    }

    /// The order check used above sees an object written before what it names, in one batch
    /// or across two, and accepts it written after.
    @Test func theOrderCheckCatchesAnObjectWrittenBeforeWhatItNames() async throws {
        let blob = Blob.encode(record: RecordCoding.encode(["title": .string("a record stored apart")]))
        let leaf = IndexNode(level: 0, entries: [IndexEntry(key: itemKey("a").indexBytes, payload: .blob(Hash.of(blob)))]).encoded()
        let backwards = OrderCheckingBackend(MemoryBackend())
        try await backwards.put([(Hash.of(leaf), leaf), (Hash.of(blob), blob)])
        #expect(backwards.violations == ["\(Hash.of(leaf)) names \(Hash.of(blob))"])
        let apart = OrderCheckingBackend(MemoryBackend())
        try await apart.put([(Hash.of(leaf), leaf)])
        try await apart.put([(Hash.of(blob), blob)])
        #expect(apart.violations.count == 1)
        let inOrder = OrderCheckingBackend(MemoryBackend())
        try await inOrder.put([(Hash.of(blob), blob), (Hash.of(leaf), leaf)])
        try await inOrder.put([(Hash.of(leaf), leaf)])
        #expect(inOrder.violations.isEmpty)
    }

    @Test func exchangeCostGrowsWithTheChangeNotTheStore() async throws {
        let source = Store(backend: MemoryBackend(), configuration: .init(replica: "a"))
        let n = 20_000
        var generator = SeededGenerator(seed: 11)
        for start in stride(from: 0, to: n, by: 5_000) {
            var changes = ChangeSet()
            for index in start..<(start + 5_000) { try changes.save(item("i\(index)", ["v": .int(Int64(index))])) }
            try await source.commit(changes)
        }
        let counting = CountingBackend(MemoryBackend())
        let target = Store(backend: counting)
        try await source.exchange(to: target)
        let height = try await treeHeight(source)
        let k = 100
        var changes = ChangeSet()
        for _ in 0..<k { try changes.save(item("i\(Int.random(in: 0..<n, using: &generator))", ["v": .int(-1)])) }
        try await source.commit(changes)
        counting.reset()
        let report = try await source.exchange(to: target)
        print("exchange of \(k) changed records at n = \(n): \(report.objects) objects copied, \(counting.hashesAsked) hashes asked in \(report.rounds) rounds, height \(height)")
        #expect(report.objects <= (k + 1) * height + 2)
        // Only the nodes of the change are asked about, not their unchanged siblings.
        #expect(counting.hashesAsked <= 2 * ((k + 1) * height + 2))
        #expect(counting.objectsWritten == report.objects + 1)  // and the new head set

        // Stores in sync find out from their refs: no object is read from the target.
        counting.reset()
        let inSync = try await source.exchange(to: target)
        #expect(inSync.alreadyInSync && inSync.rounds == 0)
        #expect(counting.getCalls == 0 && counting.objectsWritten == 0)
    }

    func treeHeight(_ store: Store) async throws -> Int {
        var hash = try #require(try await store.head()).root
        var height = 1
        while true {
            let node = try IndexNode.decode(try #require(try await store.backend.get(hash)))
            guard node.level > 0, case .node(let child, _) = node.entries[0].payload else { return height }
            hash = child
            height += 1
        }
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result = [T]()
        for element in self { result.append(try await transform(element)) }
        return result
    }
}

/// Forwards to a backend whose enumeration of objects comes in batches of 50, 120 ms apart:
/// long enough for progress reports in between.
final class SlowEnumerationBackend: ForwardingBackend {
    let inner: any Backend
    init(_ inner: any Backend) { self.inner = inner }
    func enumerateObjects(batchSize: Int, _ body: ([(hash: Hash, bytes: [UInt8])]) async throws -> Void) async throws {
        try await inner.enumerateObjects(batchSize: 50) { batch in
            try await _Concurrency.Task.sleep(for: .milliseconds(120))
            try await body(batch)
        }
    }
}

/// Forwards to a backend, and runs `hook` once, after the first swap of its heads that lands.
final class SwapHookBackend: ForwardingBackend {
    let inner: any Backend
    private let hook: Mutex<(@Sendable () async throws -> Void)?>
    init(_ inner: any Backend, afterTheHeadsMove hook: @escaping @Sendable () async throws -> Void) {
        self.inner = inner
        self.hook = Mutex(hook)
    }
    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        let swapped = try await inner.compareAndSwap(ref: name, expected: expected, new: new)
        if swapped, name == RefName.heads, let hook = hook.withLock({ hook in defer { hook = nil }; return hook }) { try await hook() }
        return swapped
    }
}

/// A memory store that asks for batches of `limit` and records the size of each `put`.
final class BatchRecordingBackend: ForwardingBackend {
    let inner: any Backend = MemoryBackend()
    let writeBatchLimit: WriteBatchLimit
    private let recorded = Mutex([(objects: Int, bytes: Int)]())
    init(limit: WriteBatchLimit) { writeBatchLimit = limit }
    var batches: [(objects: Int, bytes: Int)] { recorded.withLock { $0 } }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        recorded.withLock { $0.append((objects.count, objects.reduce(0) { $0 + $1.bytes.count })) }
        try await inner.put(objects)
    }
}

/// Forwards to a backend and remembers which objects were put through it more than once.
final class RecordingBackend: ForwardingBackend {
    let inner: any Backend
    private let seen = Mutex((all: Set<Hash>(), twice: Set<Hash>()))
    init(_ inner: any Backend) { self.inner = inner }
    var duplicates: Set<Hash> { seen.withLock { $0.twice } }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try await inner.put(objects)
        seen.withLock { seen in
            for object in objects where !seen.all.insert(object.hash).inserted { seen.twice.insert(object.hash) }
        }
    }
}

/// Forwards to a backend until `failingAfterPuts` batches were written, then fails every write,
/// as a dropped connection or a full disk would.
final class FailingBackend: ForwardingBackend {
    let inner: any Backend
    private let remaining: Mutex<Int>
    init(_ inner: any Backend, failingAfterPuts count: Int) {
        self.inner = inner
        remaining = Mutex(count)
    }
    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        let allowed = remaining.withLock { count in
            defer { count -= 1 }
            return count > 0
        }
        guard allowed else { throw ArborError(.io, "injected failure: no space left on device", backend: engineName, operation: "put") }
        try await inner.put(objects)
    }
    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        guard remaining.withLock({ $0 > 0 }) else { throw ArborError(.io, "injected failure", backend: engineName, operation: "refs") }
        return try await inner.compareAndSwap(ref: name, expected: expected, new: new)
    }
}

/// A target into which another writer slips `slips` just as a migration sets its heads.
final class SlippingBackend: ForwardingBackend {
    let inner: any Backend
    let slips: [(hash: Hash, bytes: [UInt8])]

    init(_ inner: any Backend, slips: [(hash: Hash, bytes: [UInt8])]) {
        self.inner = inner
        self.slips = slips
    }

    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try await inner.put(slips)
        return try await inner.compareAndSwap(ref: name, expected: expected, new: new)
    }
}

/// A target that silently drops the `losing`-th object it is given.
final class LosingBackend: ForwardingBackend {
    let inner: any Backend
    private let state: Mutex<(remaining: Int, lost: Hash?)>

    init(_ inner: any Backend, losing index: Int) {
        self.inner = inner
        state = Mutex((index, nil))
    }

    /// The object dropped, once it has been.
    var lost: Hash? { state.withLock { $0.lost } }

    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        let kept = state.withLock { state in
            objects.filter { object in
                state.remaining -= 1
                guard state.remaining == 0 else { return true }
                state.lost = object.hash
                return false
            }
        }
        try await inner.put(kept)
    }
}

/// Cancels the task that makes its `cancelAt`th `get`, as a caller giving up mid-transfer would.
final class CancellingBackend: ForwardingBackend {
    let inner: any Backend
    let cancelAt: Int
    let gets = Atomic<Int>(0)
    init(_ inner: any Backend, cancelAt: Int) { (self.inner, self.cancelAt) = (inner, cancelAt) }
    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        if gets.add(1, ordering: .relaxed).newValue == cancelAt { withUnsafeCurrentTask { $0?.cancel() } }
        return try await inner.get(hashes)
    }
}

extension ExchangeTests {
    /// A cancelled exchange or migration stops at its next request with `CancellationError`,
    /// the target's heads untouched; run again, it finishes the job. (Cancellation was ignored:
    /// the transfer ran to its end and reported success.)
    @Test func aCancelledTransferStopsAndResumes() async throws {
        for migrating in [false, true] {
            let source = MemoryBackend()
            let head = try await fill(Store(backend: source), tasks: 3_000, commits: 4)
            let target = Store(backend: MemoryBackend())
            let cancelling = Store(backend: CancellingBackend(source, cancelAt: 3))
            // In a task of its own: a test whose own task is cancelled ends there, silently.
            let transfer = _Concurrency.Task {
                if migrating { try await cancelling.migrate(to: target) } else { try await cancelling.exchange(to: target) }
            }
            await #expect(throws: CancellationError.self) { try await transfer.value }
            #expect(try await target.backend.refs().isEmpty)
            let report = try await Store(backend: source).exchange(to: target)
            #expect(report.heads == [head.id])
            #expect(try await target.verify().isIntact)
            #expect(try await target.values(Task.self).count == 3_000)
        }
    }
}
