import Arbor
import ArborCLI
import ArborPostgres
import Foundation

/// Sync under contention, as the load test runs it but in a release build: `clients` stores
/// (in memory) each commit an edit of their own record and of one record all of them edit, then
/// sync with one hub, for `seconds`; then each syncs twice more, one after another, with nobody
/// else writing. The hub is PostgreSQL when ARBOR_BENCH_POSTGRES_URL is set, else a SQLite file.
/// Printed: syncs done, their median and 90th-percentile time under contention, and the time of
/// a sync alone against a hub with that history.
struct SyncBenchmark {
    var clients = 16
    var seconds = 6.0

    func run() async throws {
        let (hubURL, cleanup) = try makeHub()
        defer { cleanup() }
        let hubLabel = hubURL.hasPrefix("sqlite:") ? "sqlite" : "postgres"
        try await Self.open(hubURL, create: true, replica: "hub").close()
        let deadline = ContinuousClock.now + .seconds(seconds)
        let stores = (0..<clients).map { Store(backend: MemoryBackend(), configuration: .init(replica: "client\($0)")) }
        let syncs = try await withThrowingTaskGroup(of: [(seconds: Double, report: SyncReport)].self) { group in
            for (index, store) in stores.enumerated() {
                group.addTask {
                    let hub = try Self.open(hubURL, create: false, replica: "hub\(index)")
                    var times = [(seconds: Double, report: SyncReport)]()
                    var round = 0
                    repeat {
                        var changes = ChangeSet()
                        try changes.save(Record(type: "Shared", id: "own-\(index)", properties: ["counter": .int(Int64(round))]))
                        try changes.save(Record(type: "Shared", id: "hot", properties: ["owner": .int(Int64(index)), "counter": .int(Int64(round))]))
                        try await store.commit(changes)
                        let start = ContinuousClock.now
                        let report = try await store.sync(with: hub)
                        times.append(((ContinuousClock.now - start).seconds, report))
                        round += 1
                    } while ContinuousClock.now < deadline
                    try await hub.close()
                    return times
                }
            }
            return try await group.reduce(into: [(seconds: Double, report: SyncReport)]()) { $0 += $1 }.sorted { $0.seconds < $1.seconds }
        }
        let latencies = syncs.map(\.seconds)
        let hub = try Self.open(hubURL, create: false, replica: "hub")
        var alone = [Double]()
        for _ in 0..<2 {
            for store in stores {
                let start = ContinuousClock.now
                try await store.sync(with: hub)
                alone.append((ContinuousClock.now - start).seconds)
            }
        }
        alone.sort()
        let versions = try await hub.log().count
        let heads = try await hub.heads().count
        try await hub.close()
        try await catchUp(hubURL)
        func quantile(_ values: [Double], _ q: Double) -> Double { values.isEmpty ? 0 : values[min(values.count - 1, Int(Double(values.count) * q))] }
        // Where the slowest tenth of the syncs spent their time.
        let slow = syncs.suffix(max(1, syncs.count / 10))
        func mean(_ part: (SyncReport) -> Double) -> Double { slow.reduce(0) { $0 + part($1.report) } / Double(slow.count) }
        print(String(format: "sync: the slowest tenth spent on average %.2f s sending, %.2f s receiving (%.0f versions), %.2f s sending the merge",
                     mean { $0.sent.seconds }, mean { $0.received.seconds }, mean { Double($0.received.versions) }, mean { $0.settled.seconds }))
        print(String(format: "sync: %d clients for %.0f s with a %@ hub: %d syncs (%.1f per second), median %.3f s, p90 %.3f s; then alone: median %.3f s, p90 %.3f s; %d versions on the hub, %d head(s)",
                     clients, seconds, hubLabel, latencies.count, Double(latencies.count) / seconds, quantile(latencies, 0.5), quantile(latencies, 0.9),
                     quantile(alone, 0.5), quantile(alone, 0.9), versions, heads))
    }

    /// Replicas that join late, across a network of 1 ms round trips: after a writer pushed
    /// `linearVersions` versions in one line on top of the contention's history, each pulls the
    /// hub's whole history, commits 100 versions of its own and pushes them. With history reads
    /// of a generation per request (as before ``Backend/ancestry(of:limit:)``) and of many, in
    /// turn, three pulls each on the same hub; then one push each.
    func catchUp(_ hubURL: String, linearVersions: Int = 300) async throws {
        let latency = Duration.milliseconds(1)
        func openHub(followsParents: Bool) throws -> (Store, RemoteBackend) {
            let backend = RemoteBackend(try openBackend(try StoreLocation(parsing: hubURL), create: false), followsParents: followsParents, latency: latency)
            return (Store(backend: backend, configuration: .init(replica: "hub")), backend)
        }
        let (writerHub, _) = try openHub(followsParents: true)
        let writer = Store(backend: MemoryBackend(), configuration: .init(replica: "writer"))
        try await writerHub.exchange(to: writer)
        try await Self.commitLine(of: linearVersions, editing: "writer", on: writer)
        try await writer.exchange(to: writerHub)
        let versions = try await writerHub.log().count
        try await writerHub.close()

        var pulls = [false: [(seconds: Double, reads: Int, rounds: Int)](), true: []]
        var late = [Bool: Store]()
        // Only PostgreSQL reads many generations per request; SQLite answers with `get`.
        let modes = hubURL.hasPrefix("sqlite:") ? [false] : [false, true]
        for _ in 0..<3 {
            for followsParents in modes {
                let (hub, backend) = try openHub(followsParents: followsParents)
                let replica = Store(backend: MemoryBackend(), configuration: .init(replica: "late-\(followsParents)"))
                let pull = try await hub.exchange(to: replica)
                pulls[followsParents]!.append((pull.seconds, backend.reads, pull.rounds))
                late[followsParents] = replica
                try await hub.close()
            }
        }
        for followsParents in modes {
            let (hub, backend) = try openHub(followsParents: followsParents)
            let replica = late[followsParents]!
            try await Self.commitLine(of: 100, editing: "late-\(followsParents)", on: replica)
            let push = try await replica.exchange(to: hub)
            try await hub.close()
            let runs = pulls[followsParents]!.sorted { $0.seconds < $1.seconds }
            print(String(format: "sync: a late replica over 1 ms round trips, history read %@: pulls %d versions (the last %d in one line) in %.3f s (median of 3; %d reads of the hub's objects, %d rounds), pushes 100 in %.3f s (%d rounds, %d reads)",
                         followsParents ? "many generations per request" : "a generation per request",
                         versions, linearVersions, runs[1].seconds, runs[1].reads, runs[1].rounds, push.seconds, push.rounds, backend.reads))
        }
    }

    /// Commits `count` versions in one line on `store`, each changing the record `id`.
    static func commitLine(of count: Int, editing id: String, on store: Store) async throws {
        for index in 0..<count {
            var changes = ChangeSet()
            try changes.save(Record(type: "Shared", id: id, properties: ["counter": .int(Int64(index))]))
            try await store.commit(changes)
        }
    }

    static func open(_ url: String, create: Bool, replica: String) throws -> Store {
        Store(backend: try openBackend(try StoreLocation(parsing: url), create: create), configuration: .init(replica: replica))
    }

    func makeHub() throws -> (url: String, cleanup: () -> Void) {
        if let base = ProcessInfo.processInfo.environment["ARBOR_BENCH_POSTGRES_URL"], !base.isEmpty {
            // A generated identifier, never data.
            let database = "arbor_bench_sync_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(8)
            try PostgresSession(url: base).execute("CREATE DATABASE \(database)")
            return (PostgresBenchmark.url(base, database: database), { _ = try? PostgresSession(url: base).execute("DROP DATABASE IF EXISTS \(database) WITH (FORCE)") })
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-sync-\(UUID().uuidString).sqlite").path
        return ("sqlite:" + path, { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } })
    }
}
