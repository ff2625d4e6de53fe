import Arbor
import Foundation

/// Long histories: `versions` commits in one line, each saving one of 1,000 records, then the
/// operations that walk history, each timed with the peak of anonymous memory (heap and
/// stacks) while it ran: log, one record's history, a merge with a branch forked at the first
/// version, an exchange into an empty LMDB store, of one more version and in sync, migration
/// into SQLite, verification and garbage collection. Memory held by earlier steps counts in
/// later peaks: the stores stay open throughout. The source is on SQLite, LMDB, JSON or
/// PostgreSQL (a database of its own on the server of ARBOR_BENCH_POSTGRES_URL).
struct HistoryBenchmark {
    var versions: Int
    var engine: String
    let sampler = AnonymousMemorySampler()

    func run() async throws {
        var cleanups = [() -> Void]()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-history-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        // ARBOR_BENCH_KEEP=1 keeps the stores for other tools, and says where they are.
        let keep = ProcessInfo.processInfo.environment["ARBOR_BENCH_KEEP"] == "1"
        defer { if keep { print("history: stores kept in \(folder)") } else { try? FileManager.default.removeItem(atPath: folder) } }
        func url(_ name: String, _ engine: String) -> String { engine + ":" + folder + "/" + name }

        // PostgreSQL: a database of its own on the server of ARBOR_BENCH_POSTGRES_URL, dropped after.
        var source = url("source", engine)
        if engine == "postgres" {
            let postgres = TransferBenchmark(records: 0, jsonRecords: 0, engines: [], postgresURL: ProcessInfo.processInfo.environment["ARBOR_BENCH_POSTGRES_URL"])
            let (location, cleanup) = try postgres.makeLocation("postgres", "history")
            source = location
            cleanups.append(cleanup)
        }
        defer { for cleanup in cleanups { cleanup() } }
        let store = try TransferBenchmark.open(source, create: true)
        try await step("\(versions) versions in one line on \(engine)") {
            for index in 0..<versions {
                var changes = ChangeSet()
                try changes.save(BenchmarkItem(id: "item-\(index % 1_000)", title: "edit \(index)", count: index, done: false))
                _ = try await store.commit(changes, message: "edit \(index)")
            }
        }
        let first = try await store.log().last!
        // A store opened anew, so that its version cache starts cold.
        try await step("log") { _ = try await Store(backend: store.backend, configuration: .init(replica: "bench")).log() }
        try await step("history of one record") { _ = try await store.history(of: RecordKey(type: BenchmarkItem.typeName, id: "item-0")) }

        var branch = ChangeSet()
        try branch.save(BenchmarkItem(id: "branch", title: "a branch from the first version", count: 0, done: true))
        _ = try await store.commit(branch, message: "branch", parents: [first.id])
        try await step("merge with a branch forked at the first version") { _ = try await store.mergeHeads() }

        let target = try TransferBenchmark.open(url("target", "lmdb"), create: true)
        try await step("exchange of \(versions + 2) versions into an empty LMDB store") { _ = try await store.exchange(to: target) }
        var one = ChangeSet()
        try one.save(BenchmarkItem(id: "one", title: "one more", count: 1, done: true))
        _ = try await store.commit(one, message: "one more")
        try await step("exchange of one more version") { _ = try await store.exchange(to: target) }
        try await step("exchange in sync") { _ = try await store.exchange(to: target) }

        let migrated = try TransferBenchmark.open(url("migrated", "sqlite"), create: true)
        try await step("migration LMDB -> SQLite") { _ = try await target.migrate(to: migrated) }
        try await step("verify") { _ = try await migrated.verify() }
        try await step("gc") { _ = try await migrated.collectGarbage(gracePeriod: .zero) }
        for closing in [store, target, migrated] { try await closing.close() }
    }

    /// Runs `body` and prints its seconds and the peak of anonymous memory while it ran.
    private func step(_ label: String, _ body: () async throws -> Void) async throws {
        sampler.reset()
        let start = ContinuousClock.now
        try await body()
        let seconds = (ContinuousClock.now - start).seconds
        print(String(format: "history: %@ %.3f s (peak anon %.0f MB)", label, seconds, sampler.peakMegabytes))
    }
}
