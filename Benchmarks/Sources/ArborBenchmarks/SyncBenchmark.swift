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
