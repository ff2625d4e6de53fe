import Foundation
import Synchronization
import Testing
@testable import Arbor
import ArborJSON
import ArborLMDB
import ArborPostgres
import ArborSQLite

/// Randomized runs of several `Store` instances on one backend (a shared `MemoryBackend`, or one
/// SQLite file, LMDB environment, JSON folder or PostgreSQL database opened once per instance),
/// whose tasks commit, commit on older versions, merge, exchange with a second store, crash
/// mid-commit and retry, cancel writes, collect garbage and read, all at once; then checks that
/// nothing committed vanished, that no head builds on another, that every version reads back
/// what its commit wrote, that the stores verify, and that a sync ends both stores on one head.
/// Objects found missing in a run where a commit or merge outlasted the grace period are the limit
/// README states for `gc`, and are reported as a known issue (exchanges claim the store, and have
/// no such limit). Concurrency makes runs nondeterministic: a failure prints the seed and the
/// trace of operations as they interleaved. Longer hunts:
/// `CONC_SEEDS=1-50 CONC_STEPS=40 swift test --skip-build --filter ConcurrencyStressTests`
/// (`CONC_ADAPTERS=memory,lmdb` picks adapters, by default all, PostgreSQL where its tests run:
/// `ARBOR_TEST_POSTGRES_URL` or CI; `CONC_GRACE_MS` sets the collections' grace period,
/// `CONC_COLLECTIONS` how many run, `CONC_TRACE=1` prints every run's trace, `CONC_JOURNAL=1`
/// adds every swap, re-used object and removal to it).
@Suite struct ConcurrencyStressTests {
    static let environment = ProcessInfo.processInfo.environment
    static let seeds: [UInt64] = {
        guard let text = environment["CONC_SEEDS"] else { return [1, 2] }
        let bounds = text.split(separator: "-").compactMap { UInt64($0) }
        return bounds.count == 2 ? Array(bounds[0]...bounds[1]) : bounds
    }()
    static let steps = environment["CONC_STEPS"].flatMap(Int.init) ?? 8
    static let grace = Duration.milliseconds(environment["CONC_GRACE_MS"].flatMap(Int.init) ?? 400)
    static let collections = environment["CONC_COLLECTIONS"].flatMap(Int.init) ?? 1
    static let adapters: [AdapterKind] = environment["CONC_ADAPTERS"].map { $0.split(separator: ",").compactMap { AdapterKind(rawValue: String($0)) } }
        ?? [.memory, .sqlite, .lmdb, .json] + (PostgresTestServer.isEnabled ? [.postgres] : [])

    /// Serialized: runs side by side starve one another's writers past the grace period.
    @Test(.serialized, arguments: adapters, seeds)
    func concurrentClients(kind: AdapterKind, seed: UInt64) async throws {
        let run = try await ConcurrentRun(kind: kind, seed: seed, grace: Self.grace)
        defer { run.cleanUp() }
        try await run.run(steps: Self.steps, collections: Self.collections)
    }
}

/// Fails the compare-and-swap of tasks that run with ``crashes`` set, after the commit wrote
/// its objects: a writer that died before moving its heads, leaving garbage a retry re-uses.
/// With a `log`, also tells it every swap and every removal (`CONC_JOURNAL=1`).
final class CrashBeforeHeadsBackend: ForwardingBackend {
    @TaskLocal static var crashes = false
    static let message = "simulated crash before the heads moved"
    let inner: any Backend
    let name: String
    let log: (@Sendable (String) -> Void)?

    init(_ inner: any Backend, name: String, log: (@Sendable (String) -> Void)? = nil) {
        self.inner = inner
        self.name = name
        self.log = log
    }

    func compareAndSwap(ref refName: String, expected: Hash?, new: Hash?) async throws -> Bool {
        if Self.crashes { throw ArborError(.io, Self.message, backend: engineName, operation: "compareAndSwap") }
        let swapped = try await inner.compareAndSwap(ref: refName, expected: expected, new: new)
        log?("\(name) swap \(expected?.abbreviated() ?? "nil") → \(new?.abbreviated() ?? "nil"): \(swapped)")
        return swapped
    }

    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        let present = log == nil ? [] : try await inner.contains(objects.map(\.hash))
        try await inner.put(objects)
        let reused = objects.filter { present.contains($0.hash) }
        let versions = objects.filter { $0.bytes.count > 1 && $0.bytes[1] == ObjectKind.commit.rawValue }
        if let log, !reused.isEmpty || !versions.isEmpty {
            log("\(name) put \(objects.count) (versions \(versions.prefix(4).map { $0.hash.abbreviated() })), \(reused.count) present: \(reused.prefix(6).map { "\(ObjectKind(rawValue: $0.bytes[1]).map { "\($0)" } ?? "?") \($0.hash.abbreviated())" })")
        }
    }

    func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        log?("\(name) lists its objects")
        try await inner.enumerateHashes(batchSize: batchSize, body)
    }

    func delete(_ hashes: [Hash]) async throws {
        if let log {
            let objects = try await inner.get(hashes)
            log("\(name) delete \(hashes.count): \(hashes.map { hash in "\(objects[hash].flatMap { ObjectKind(rawValue: $0[1]) }.map { "\($0)" } ?? "?") \(hash.abbreviated())" }.joined(separator: ", "))")
        }
        try await inner.delete(hashes)
    }
}

/// One randomized run: the stores, and a journal of what every task did and got back.
final class ConcurrentRun: Sendable {
    /// What the run learned, shared by its tasks.
    struct Journal {
        /// What each committed version's change set wrote: a record, or `nil` for a deletion.
        var written: [Hash: [RecordKey: Record?]] = [:]
        /// Versions returned by operations on the local stores and on the remote one.
        var local: [Hash] = []
        var remote: [Hash] = []
        var failures: [String] = []
        var trace: [String] = []
        /// The longest a writing operation (a commit, a merge) took. Exchanges in are left out:
        /// they claim the store, and collections spare them however long they run.
        var slowestWrite = Duration.zero
        /// Which worker's operation that was, and when it ended.
        var slowestWriter = ""
    }

    let kind: AdapterKind
    let seed: UInt64
    /// The collections' grace period.
    let grace: Duration
    /// Store instances on one backend; the first goes through a ``CrashBeforeHeadsBackend``.
    let stores: [Store]
    /// The second store, on memory, that tasks exchange with.
    let remote: Store
    /// Removes what the run's backend left (its files or its database).
    private let removal: @Sendable () -> Void
    let journal = LockedJournal()
    let started = ContinuousClock.now

    init(kind: AdapterKind, seed: UInt64, grace: Duration) async throws {
        self.kind = kind
        self.seed = seed
        self.grace = grace
        let count = 3 + Int(seed % 2)
        var backends = [any Backend]()
        switch kind {
        case .memory:
            let shared = MemoryBackend()
            backends = Array(repeating: shared, count: count)
            removal = {}
        case .json:
            let path = temporaryPath("race-json")
            try await JSONBackend.create(.init(path: path, synchronous: false)).close()
            for _ in 0..<count { backends.append(try JSONBackend.open(.init(path: path, synchronous: false))) }
            removal = { removeItem(path) }
        case .sqlite:
            let path = temporaryPath("race-sqlite")
            try await SQLiteBackend.create(.init(path: path, synchronous: false)).close()
            for _ in 0..<count { backends.append(try SQLiteBackend.open(.init(path: path, synchronous: false))) }
            removal = { for suffix in ["", "-wal", "-shm"] { removeItem(path + suffix) } }
        case .lmdb:
            let path = temporaryPath("race-lmdb")
            let first = try LMDBBackend.create(.init(path: path, synchronous: false))
            backends.append(first)
            for _ in 1..<count { backends.append(try LMDBBackend.open(.init(path: path, synchronous: false))) }
            removal = { removeItem(path) }
        case .postgres:
            // One fresh database, each instance on a connection pool of its own (as separate
            // processes would be).
            let (url, drop) = try PostgresTestServer.makeDatabase()
            do {
                try await PostgresBackend.create(.init(url: url)).close()
                for _ in 0..<count { backends.append(try await PostgresBackend.open(.init(url: url))) }
            } catch {
                drop()
                throw error
            }
            removal = drop
        }
        var log: (@Sendable (String) -> Void)?
        if ConcurrencyStressTests.environment["CONC_JOURNAL"] == "1" {
            let journal = journal, started = started
            log = { (line: String) in
                let stamp = (ContinuousClock.now - started).milliseconds
                journal.withLock { (state: inout Journal) in state.trace.append("+\(stamp)ms \(line)") }
            }
        }
        for index in backends.indices where index == 0 || log != nil {
            backends[index] = CrashBeforeHeadsBackend(backends[index], name: "s\(index)", log: log)
        }
        // Exchanges claim the stores at once: the grace period is shorter than the default delay.
        stores = backends.enumerated().map { index, backend in
            Store(backend: backend, configuration: .init(replica: "s\(index)", exchangeClaimDelay: .zero))
        }
        remote = Store(backend: MemoryBackend(), configuration: .init(replica: "remote"))
    }

    func cleanUp() { removal() }

    // MARK: Journal

    func note(_ line: String) {
        journal.withLock { $0.trace.append("+\((ContinuousClock.now - started).milliseconds)ms \(line)") }
    }

    func fail(_ message: String) {
        note("FAILURE \(message)")
        journal.withLock { $0.failures.append(message) }
    }

    func recordLocal(_ id: Hash, wrote: [RecordKey: Record?]? = nil) {
        journal.withLock {
            $0.local.append(id)
            if let wrote { $0.written[id] = wrote }
        }
    }

    func recordRemote(_ id: Hash, wrote: [RecordKey: Record?]) {
        journal.withLock {
            $0.remote.append(id)
            $0.written[id] = wrote
        }
    }

    var localVersions: [Hash] { journal.withLock { $0.local } }

    // MARK: The run

    func run(steps: Int, collections: Int) async throws {
        let workersPerStore = 2
        await withTaskGroup(of: Void.self) { group in
            for (storeIndex, store) in stores.enumerated() {
                for slot in 0..<workersPerStore {
                    let worker = Worker(run: self, store: store, storeIndex: storeIndex, name: "s\(storeIndex)w\(slot)",
                                        seed: seed &* 0x9E37_79B9 &+ UInt64(storeIndex * workersPerStore + slot))
                    group.addTask { await worker.work(steps: steps) }
                }
            }
            group.addTask { await self.collect(times: collections) }
        }
        await finalChecks()
        try await closeAll()
        let (failures, trace, slowestWrite, slowestWriter) = journal.withLock { ($0.failures, $0.trace, $0.slowestWrite, $0.slowestWriter) }
        if ConcurrencyStressTests.environment["CONC_TRACE"] == "1" {
            print("concurrency stress \(kind.rawValue) seed \(seed) (slowest write \(slowestWrite), \(slowestWriter)):\n\(trace.joined(separator: "\n"))")
        }
        guard !failures.isEmpty else { return }
        let report = """
            concurrency stress \(kind.rawValue) seed \(seed) (\(stores.count) stores, CONC_STEPS=\(steps), grace \(grace), slowest write \(slowestWrite), \(slowestWriter)): \(failures.count) failures
            \(failures.prefix(5).joined(separator: "\n"))
            trace (\(trace.count) lines, to 20 past the first failure):
            \(trace.prefix(through: min(trace.count - 1, (trace.firstIndex { $0.contains("FAILURE") } ?? trace.count) + 20)).suffix(150).joined(separator: "\n"))
            """
        // README (gc): a writer must not take longer than the grace period from writing its
        // objects to moving its heads; else a collection may remove them, and readers find them
        // missing until it writes them back (or for good, past two grace periods). What that
        // explains is a known issue of such a run; anything else is not.
        let unexplained = failures.filter { !ConcurrentRun.isMissingObject($0) }
        // README (gc): a commit that re-used objects a collection then removed (garbage of a
        // crashed attempt) names a version whose reads, and commits on it, fail in the
        // milliseconds between its heads moving after its batch's marking and its own write-back
        // (during the batch itself, readers wait for it: FaultFindings.
        // aCommitOnAVersionWhoseReusedIndexTheSweepDeletedWaitsForItsWriteBack). A worker's
        // operation failing so, in a run whose final checks found all there, is that known issue.
        let duringCollections = failures.allSatisfy { $0.contains(" threw: ") && $0.contains("is missing") && !$0.hasPrefix("gc") && !$0.hasPrefix("the final") }
        if slowestWrite > grace && unexplained.isEmpty {
            withKnownIssue("a writer took \(slowestWrite), longer than the grace period of \(grace)", isIntermittent: true) {
                Issue.record(Comment(rawValue: report))
            }
        } else if duringCollections && collections > 0 {
            withKnownIssue("a version whose re-used objects a collection removed fails to read until they are written back", isIntermittent: true) {
                Issue.record(Comment(rawValue: report))
            }
        } else {
            Issue.record(Comment(rawValue: (unexplained.isEmpty ? "" : "unexplained by slow writers: \(unexplained.prefix(3))\n") + report))
        }
    }

    /// Whether a failure is an object missing from the store (an error, a version no longer
    /// reachable, damage found by verify).
    static func isMissingObject(_ failure: String) -> Bool {
        ["is missing", "not reachable", "is damaged"].contains { failure.contains($0) }
    }

    /// Notes how long a writing operation took.
    func wrote(for duration: Duration, by writer: String) {
        let ended = (ContinuousClock.now - started).milliseconds
        journal.withLock {
            guard duration > $0.slowestWrite else { return }
            $0.slowestWrite = duration
            $0.slowestWriter = "\(writer), ending at +\(ended)ms"
        }
    }

    func closeAll() async throws {
        if kind == .memory {
            try await stores[0].close()
        } else {
            for store in stores { try await store.close() }
        }
    }

    /// Collects garbage `times` times, one after another, on random stores, at random moments,
    /// some cancelled midway; afterwards every version recorded so far must still be reachable.
    func collect(times: Int) async {
        var random = SeededGenerator(seed: seed &+ 0xC0FFEE)
        for round in 0..<times {
            try? await _Concurrency.Task.sleep(for: .milliseconds(Int.random(in: 50...400, using: &random)))
            let index = Int.random(in: 0..<stores.count, using: &random)
            let store = stores[index], grace = grace
            let cancelAfter = random.next() % 3 == 0 ? grace * Double.random(in: 0...2.5, using: &random) : nil
            note("gc\(round) on s\(index) starts\(cancelAfter.map { ", to be cancelled after \($0)" } ?? "")")
            do {
                let collection = _Concurrency.Task { try await store.collectGarbage(gracePeriod: grace) }
                if let cancelAfter {
                    try? await _Concurrency.Task.sleep(for: cancelAfter)
                    collection.cancel()
                }
                let report = try await collection.value
                note("gc\(round) on s\(index): removed \(report.removedObjects), kept late \(report.keptLate), rescued \(report.rescued), reachable \(report.reachableObjects)")
            } catch is CancellationError {
                note("gc\(round) on s\(index) cancelled")
            } catch {
                fail("gc\(round) on s\(index) threw: \(error)")
            }
            do {
                try await checkReachable(in: store, recorded: localVersions, after: "gc\(round)")
            } catch {
                fail("reading the history after gc\(round) threw: \(error)")
            }
        }
    }

    /// Fails for each of `recorded` that the heads of `store` do not reach.
    func checkReachable(in store: Store, recorded: [Hash], after operation: String) async throws {
        let reachable = Set(try await store.log().map(\.id))
        let lost = recorded.filter { !reachable.contains($0) }
        if !lost.isEmpty {
            fail("after \(operation), \(lost.count) recorded versions are not reachable from the heads: \(lost.prefix(5).map { $0.abbreviated() })")
        }
    }

    /// Fails for a head that another head builds on: the heads are the versions no other version
    /// builds on.
    func checkHeadsAreNoAncestors(of store: Store, name: String) async throws {
        let heads = try await store.heads()
        let ancestors = Set(try await store.log(from: heads.flatMap(\.parents)).map(\.id))
        let covered = heads.filter { ancestors.contains($0.id) }
        if !covered.isEmpty {
            fail("the \(name) heads \(heads.map { $0.id.abbreviated() }) hold \(covered.map { $0.id.abbreviated() }), which other heads build on")
        }
    }

    /// Fails unless `version` holds what its commit wrote.
    func checkReadBack(_ version: Hash, in store: Store, storeName: String) async throws {
        guard let wrote = journal.withLock({ $0.written[version] }) else { return }
        let found = try await store.records(Array(wrote.keys), at: version)
        for (key, record) in wrote where found[key] != record {
            fail("version \(version.abbreviated()) read on \(storeName): \(key) is \(found[key].map { "\($0.properties)" } ?? "absent"), its commit wrote \(record.map { "\($0.properties)" } ?? "a deletion")")
            return
        }
    }

    func finalChecks() async {
        let store = stores[stores.count - 1]
        do {
            let (local, remoteVersions) = journal.withLock { ($0.local, $0.remote) }
            try await checkReachable(in: store, recorded: local, after: "the run")
            try await checkReachable(in: remote, recorded: remoteVersions, after: "the run (remote)")
            try await checkHeadsAreNoAncestors(of: store, name: "local")
            try await checkHeadsAreNoAncestors(of: remote, name: "remote")
            for (name, candidate) in [("local", store), ("remote", remote)] {
                let report = try await candidate.verify()
                if !report.isIntact { fail("\(name) store is damaged after the run: \(report.damage.prefix(5).map { "\($0.kind) \($0.hash.abbreviated()): \($0.detail)" })") }
            }
            try await remote.exchange(to: store)
            for version in local + remoteVersions { try await checkReadBack(version, in: store, storeName: "local after the run") }
            // Nothing writes now: a collection without grace must keep all that is reachable.
            try await stores[0].collectGarbage(gracePeriod: .zero)
            try await checkReachable(in: store, recorded: local + remoteVersions, after: "a quiet collection")
            for version in local + remoteVersions { try await checkReadBack(version, in: store, storeName: "local after a quiet collection") }
            var rounds = 0
            while try await store.heads().count > 1, rounds < 4 {
                try await store.mergeHeads()
                rounds += 1
            }
            try await store.sync(with: remote)
            let (localHeads, remoteHeads) = (try await store.heads().map(\.id), try await remote.heads().map(\.id))
            if localHeads.count != 1 || localHeads != remoteHeads {
                fail("after merging and a sync the heads differ: local \(localHeads.map { $0.abbreviated() }), remote \(remoteHeads.map { $0.abbreviated() })")
            }
            for (name, candidate) in [("local", store), ("remote", remote)] {
                let report = try await candidate.verify()
                if !report.isIntact { fail("\(name) store is damaged after the sync: \(report.damage.prefix(5).map { "\($0.kind) \($0.hash.abbreviated()): \($0.detail)" })") }
            }
        } catch {
            fail("the final checks threw: \(error)")
        }
    }
}

/// One worker of a run, in a task of its own: a sequence of random operations on one store
/// instance, on records of its own (ids prefixed with its name), so that what each commit wrote
/// is known exactly.
struct Worker: Sendable {
    let run: ConcurrentRun
    let store: Store
    let storeIndex: Int
    let name: String
    let seed: UInt64

    /// The worker's own state: its generator and its tasks (records) as it last saved them.
    struct State {
        var random: SeededGenerator
        var tasks: [String: Task] = [:]
        var counter = 0

        mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }
        mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &random)] }
        mutating func fresh() -> Int { counter += 1; return counter }
    }

    func work(steps: Int) async {
        var state = State(random: SeededGenerator(seed: seed))
        for step in 0..<steps {
            let roll = Int.random(in: 0..<100, using: &state.random)
            let operation: String
            switch roll {
            case 0..<30: operation = "commit"
            case 30..<40: operation = "commit on an old version"
            case 40..<47: operation = "merge heads"
            case 47..<52: operation = "merge two heads"
            case 52..<58: operation = "exchange out"
            case 58..<64: operation = "exchange in"
            case 64..<70: operation = "commit on the remote"
            case 70..<77 where storeIndex == 0: operation = "crash and retry"
            case 77..<83: operation = "cancelled write"
            default: operation = "read"
            }
            let started = ContinuousClock.now
            // What writes to the collected stores (the retry times itself: it sleeps first), but
            // for exchanges in, which claim the store while they copy.
            let writes = !["read", "exchange out", "exchange in", "commit on the remote", "crash and retry"].contains(operation)
            defer { if writes { run.wrote(for: ContinuousClock.now - started, by: "\(name) step \(step) \(operation)") } }
            do {
                switch operation {
                case "commit": try await commit(&state, parents: nil)
                case "commit on an old version":
                    let versions = run.localVersions
                    if versions.isEmpty { try await commit(&state, parents: nil) } else {
                        try await commit(&state, parents: [state.pick(versions)] + (state.chance(20) ? [state.pick(versions)] : []))
                    }
                case "merge heads": try await mergeHeads()
                case "merge two heads": try await mergeTwoHeads(&state)
                case "exchange out": try await exchangeOut()
                case "exchange in": try await exchangeIn()
                case "commit on the remote": try await commitOnRemote(&state)
                case "crash and retry": try await crashAndRetry(&state)
                case "cancelled write": try await cancelledWrite(&state)
                default: try await read(&state)
                }
            } catch {
                run.fail("\(name) step \(step) \(operation) threw: \(error)")
            }
        }
    }

    /// A random change set on this worker's tasks: new ones, edits, deletions and moves of a
    /// note between two tasks; and what it writes.
    func changes(_ state: inout State) throws -> (changes: ChangeSet, wrote: [RecordKey: Record?], summary: String) {
        var changes = ChangeSet()
        var wrote = [RecordKey: Record?]()
        var used = Set<String>()
        var summary = [String]()
        func save(_ task: Task) throws {
            try changes.save(task)
            for record in try RecordEncoder.records(of: task) { wrote[record.key] = .some(record) }
            used.insert(task.id)
        }
        for _ in 0..<Int.random(in: 1...3, using: &state.random) {
            let available = state.tasks.keys.filter { !used.contains($0) }.sorted()
            // Only a new task when there is none to change.
            switch available.isEmpty ? 0 : Int.random(in: 0..<100, using: &state.random) {
            case 0..<35:
                let id = "\(name)-t\(state.fresh())"
                let notes = (0..<Int.random(in: 0...3, using: &state.random)).map { _ in Note(id: "\(name)-n\(state.fresh())", text: "new") }
                let task = Task(id: id, title: "made \(state.fresh())", done: false, notes: notes)
                try save(task)
                state.tasks[id] = task
                summary.append("new \(id) \(notes.map(\.id))")
            case 35..<70:
                var task = state.tasks[state.pick(available)]!
                task.title = "edited \(state.fresh())"
                if state.chance(40) { task.notes.append(Note(id: "\(name)-n\(state.fresh())", text: "added")) }
                if state.chance(30), !task.notes.isEmpty { task.notes.remove(at: Int.random(in: 0..<task.notes.count, using: &state.random)) }
                if state.chance(40), !task.notes.isEmpty { task.notes[0].text = "changed \(state.fresh())" }
                try save(task)
                state.tasks[task.id] = task
                summary.append("edit \(task.id) \(task.notes.map(\.id))")
            case 70..<82:
                let id = state.pick(available)
                try changes.delete(Task.self, id: id)
                wrote[RecordKey(type: Task.typeName, id: id)] = .some(nil)
                used.insert(id)
                state.tasks[id] = nil
                summary.append("delete \(id)")
            default:
                let holders = available.filter { !(state.tasks[$0]?.notes.isEmpty ?? true) }
                guard !holders.isEmpty, available.count > 1 else { continue }
                let from = state.pick(holders)
                let to = state.pick(available.filter { $0 != from })
                var source = state.tasks[from]!, target = state.tasks[to]!
                let note = source.notes.remove(at: Int.random(in: 0..<source.notes.count, using: &state.random))
                target.notes.append(note)
                try save(source)
                try save(target)
                state.tasks[from] = source
                state.tasks[to] = target
                summary.append("move \(note.id) \(from)→\(to)")
            }
        }
        return (changes, wrote, summary.joined(separator: ", "))
    }

    func commit(_ state: inout State, parents: [Hash]?) async throws {
        let (changes, wrote, summary) = try changes(&state)
        let version = try await store.commit(changes, message: summary, parents: parents)
        run.recordLocal(version.id, wrote: wrote)
        run.note("\(name) commit on \(parents.map { $0.map { $0.abbreviated() } } ?? ["newest head"]) → \(version.id.abbreviated()) parents \(version.parents.map { $0.abbreviated() }): \(summary)")
    }

    func mergeHeads() async throws {
        let outcome = try await store.mergeHeads()
        if let version = outcome?.version { run.recordLocal(version.id) }
        run.note("\(name) merge heads → \(outcome.map(describe) ?? "empty store")")
    }

    func mergeTwoHeads(_ state: inout State) async throws {
        let heads = try await store.heads().map(\.id)
        guard heads.count > 1 else { return try await read(&state) }
        let ours = state.pick(heads)
        let theirs = state.pick(heads.filter { $0 != ours })
        let outcome = try await store.merge(ours, theirs)
        if let version = outcome.version { run.recordLocal(version.id) }
        run.note("\(name) merge \(ours.abbreviated()) and \(theirs.abbreviated()) → \(describe(outcome))")
    }

    func describe(_ outcome: MergeOutcome) -> String {
        switch outcome {
        case .fastForward(let version): "fast-forward to \(version.id.abbreviated())"
        case .merged(let version, _): "merged \(version.id.abbreviated())"
        case .conflicts(let conflicts): "\(conflicts.count) conflicts"
        }
    }

    func exchangeOut() async throws {
        let sent = try await store.heads().map(\.id)
        let report = try await store.exchange(to: run.remote)
        run.note("\(name) exchange out: \(report.versions) versions, remote heads \(report.heads.map { $0.abbreviated() })")
        // The heads sent (and what they reach) are now in the remote's history.
        let reachable = Set(try await run.remote.log().map(\.id))
        if let lost = sent.first(where: { !reachable.contains($0) }) {
            run.fail("\(name): exchange out did not land head \(lost.abbreviated()) in the remote")
        }
    }

    func exchangeIn() async throws {
        let incoming = try await run.remote.heads().map(\.id)
        let report = try await run.remote.exchange(to: store)
        run.note("\(name) exchange in: \(report.versions) versions, heads \(report.heads.map { $0.abbreviated() })")
        let reachable = Set(try await store.log().map(\.id))
        if let lost = incoming.first(where: { !reachable.contains($0) }) {
            run.fail("\(name): exchange in did not land remote head \(lost.abbreviated())")
        }
    }

    func commitOnRemote(_ state: inout State) async throws {
        let (changes, wrote, summary) = try changes(&state)
        let version = try await run.remote.commit(changes, message: summary)
        run.recordRemote(version.id, wrote: wrote)
        run.note("\(name) remote commit → \(version.id.abbreviated()): \(summary)")
    }

    /// Commits a change set on the newest head through a store whose heads never move (a writer
    /// that died after writing its objects), then, a moment later, the same set on the same
    /// parent: the retry makes the same index, whose nodes a collection may be removing.
    func crashAndRetry(_ state: inout State) async throws {
        let parent = try await store.head()
        let (changes, wrote, summary) = try changes(&state)
        let parents = parent.map { [$0.id] } ?? []
        do {
            try await CrashBeforeHeadsBackend.$crashes.withValue(true) {
                try await store.commit(changes, message: summary, parents: parents)
            }
            run.fail("\(name): a commit whose swap fails returned")
        } catch let error as ArborError where error.message == CrashBeforeHeadsBackend.message {
            run.note("\(name) crashed committing on \(parents.map { $0.abbreviated() })")
        }
        try await _Concurrency.Task.sleep(for: .milliseconds(Int.random(in: 0...600, using: &state.random)))
        let started = ContinuousClock.now
        let version = try await store.commit(changes, message: summary, parents: parents)
        run.wrote(for: ContinuousClock.now - started, by: "\(name) retry")
        run.recordLocal(version.id, wrote: wrote)
        run.note("\(name) retried → \(version.id.abbreviated()): \(summary)")
    }

    /// A commit or an exchange in, cancelled after a random moment: it lands or stops with
    /// `CancellationError`, and nothing else.
    func cancelledWrite(_ state: inout State) async throws {
        let (changes, wrote, summary) = try changes(&state)
        let exchanges = state.chance(30)
        let store = store, remote = run.remote
        let write = _Concurrency.Task { () async throws -> Version? in
            if exchanges {
                try await remote.exchange(to: store)
                return nil
            }
            return try await store.commit(changes, message: summary)
        }
        try await _Concurrency.Task.sleep(for: .microseconds(Int.random(in: 0...4_000, using: &state.random)))
        write.cancel()
        do {
            if let version = try await write.value {
                run.recordLocal(version.id, wrote: wrote)
                run.note("\(name) cancelled commit landed → \(version.id.abbreviated()) parents \(version.parents.map { $0.abbreviated() }): \(summary)")
            } else {
                run.note("\(name) cancelled exchange in landed")
            }
        } catch is CancellationError {
            run.note("\(name) cancelled \(exchanges ? "exchange in" : "commit") stopped")
        }
    }

    /// Reads a recorded version back, and diffs two.
    func read(_ state: inout State) async throws {
        let versions = run.localVersions
        guard !versions.isEmpty else { return }
        let version = state.pick(versions)
        try await run.checkReadBack(version, in: store, storeName: name)
        let other = state.pick(versions)
        let changes = try await store.diff(from: other, to: version)
        _ = try await store.records(ofType: Task.typeName, at: version)
        run.note("\(name) read \(version.abbreviated()), \(changes.count) changes from \(other.abbreviated())")
    }
}

private extension Duration {
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}

/// A run's ``ConcurrentRun/Journal`` behind a lock, shareable with the backends it logs.
final class LockedJournal: Sendable {
    private let state = Mutex(ConcurrentRun.Journal())

    func withLock<Result: Sendable>(_ body: (inout ConcurrentRun.Journal) -> Result) -> Result {
        state.withLock { body(&$0) }
    }
}
