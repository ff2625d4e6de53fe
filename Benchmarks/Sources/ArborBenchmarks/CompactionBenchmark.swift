import Arbor
import ArborLMDB
import ArborSQLite
import CLMDB
import CSQLite
import Foundation

/// A history written whole, kept as deltas after the fact, on SQLite and LMDB. `records`
/// random-id records (~100 bytes each) go into a whole store in commits of `batch`, and into a
/// store that restates replaced nodes as it commits (the anchor). Then:
///
/// - the whole store is migrated into a new store that keeps deltas, and into a new whole one
///   (the anchor): seconds and size on disk;
/// - the whole store is compacted in place (``Store/compactHistory(progress:)``): seconds, and
///   the space its data takes, against the anchor's. Neither engine shrinks its file, so each
///   store's data is measured by a compacting copy of it (LMDB's `mdb_env_copy2` with
///   `MDB_CP_COMPACT`, SQLite's `VACUUM INTO`), which leaves the free pages out;
/// - on SQLite, the compacted store is vacuumed in place (``SQLiteBackend/vacuum()``): seconds,
///   and the file's size against that copy's.
struct CompactionBenchmark {
    var records: Int
    var batch = 10_000
    var engines: [String]

    func run() async throws {
        print("compaction: \(records) random-id records in commits of \(batch), all history")
        let items = CommitBenchmark.items(records)
        for engine in engines {
            guard ["sqlite", "lmdb"].contains(engine) else {
                print("compaction runs on sqlite and lmdb, not \(engine)")
                continue
            }
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-compaction-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let store = EngineStore(engine: engine, folder: folder)

            let whole = Store(backend: try store.open("whole", create: true, deltas: false), configuration: .init(replica: "bench"))
            let (wholeSeconds, _) = try await CommitBenchmark.commit(items, in: whole, batch: batch)
            try await whole.close()
            let restating = Store(backend: try store.open("restating", create: true, deltas: true), configuration: .init(replica: "bench"))
            let (restatingSeconds, _) = try await CommitBenchmark.commit(items, in: restating, batch: batch)
            try await restating.close()
            let wholeSize = try store.sizes("whole"), restatingSize = try store.sizes("restating")
            print(String(format: "%-6@ commits whole:            %7.1f s   on disk %8.1f MB   data %8.1f MB", engine, wholeSeconds, wholeSize.disk, wholeSize.data))
            print(String(format: "%-6@ commits restating:        %7.1f s   on disk %8.1f MB   data %8.1f MB", engine, restatingSeconds, restatingSize.disk, restatingSize.data))

            var migrations = [Bool: Double]()
            for deltas in [false, true] {
                let name = deltas ? "migrated-deltas" : "migrated-whole"
                let source = Store(backend: try store.open("whole", create: false, deltas: false))
                let target = Store(backend: try store.open(name, create: true, deltas: deltas))
                let start = ContinuousClock.now
                let report = try await source.migrate(to: target, verify: false)
                let seconds = (ContinuousClock.now - start).seconds
                migrations[deltas] = seconds
                try await source.close()
                try await target.close()
                let size = try store.sizes(name)
                print(String(format: "%-6@ migrate into %@ %7.1f s   on disk %8.1f MB   data %8.1f MB   (%d objects, %d offered as deltas)",
                             engine, deltas ? "deltas:   " : "whole:    ", seconds, size.disk, size.data, report.exchange.objects, report.exchange.restatements))
            }

            let compacting = Store(backend: try store.open("whole", create: false, deltas: true))
            let report = try await compacting.compactHistory()
            try await compacting.close()
            let compacted = try store.sizes("whole")
            print(String(format: "%-6@ compact in place:         %7.1f s   on disk %8.1f MB   data %8.1f MB   (%d versions, %d offered as deltas)",
                         engine, report.seconds, compacted.disk, compacted.data, report.versions, report.restatements))
            if engine == "sqlite", let backend = try store.open("whole", create: false, deltas: true) as? SQLiteBackend {
                // The space given back: the file shrinks to its data (the anchor: the compacting copy's size).
                let vacuumed = try await backend.vacuum()
                try await backend.close()
                print(String(format: "%-6@ vacuum after compaction:  %7.1f s   on disk %8.1f MB (from %.1f MB; %.2fx the compacting copy's data)",
                             engine, vacuumed.seconds, Double(vacuumed.bytesAfter) / 1e6, Double(vacuumed.bytesBefore) / 1e6,
                             Double(vacuumed.bytesAfter) / 1e6 / compacted.data))
            }
            print(String(format: "%-6@ compacted data / data of commits restating: %.2fx; compaction / whole commits: %.2fx the time; migration into deltas / into whole: %.2fx the time",
                         engine, compacted.data / restatingSize.data, report.seconds / wholeSeconds, (migrations[true] ?? 0) / (migrations[false] ?? 1)))
        }
    }
}

/// The stores of one engine in a folder, by name.
private struct EngineStore {
    let engine: String
    let folder: String

    func path(_ name: String) -> String { engine == "sqlite" ? "\(folder)/\(name).sqlite" : "\(folder)/\(name)" }

    func open(_ name: String, create: Bool, deltas: Bool) throws -> any Backend {
        if engine == "sqlite" {
            let configuration = SQLiteBackend.Configuration(path: path(name), restatesReplacedNodes: deltas)
            return create ? try SQLiteBackend.create(configuration) : try SQLiteBackend.open(configuration)
        }
        let configuration = LMDBBackend.Configuration(path: path(name), restatesReplacedNodes: deltas)
        return create ? try LMDBBackend.create(configuration) : try LMDBBackend.open(configuration)
    }

    /// Megabytes on disk, and of a compacting copy (the data without free pages), which is
    /// removed again.
    func sizes(_ name: String) throws -> (disk: Double, data: Double) {
        let path = path(name)
        let copy = "\(folder)/\(name)-compact-copy"
        defer { try? FileManager.default.removeItem(atPath: copy) }
        if engine == "sqlite" {
            try RawSQLite.checkpoint(path)
            try RawSQLiteFile(path: path, creating: false).exec("VACUUM INTO '\(copy)'")
            return (Double(EngineBenchmark.size(of: [path, path + "-wal", path + "-shm"])) / 1e6, Double(EngineBenchmark.size(of: [copy])) / 1e6)
        }
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        var handle: OpaquePointer?
        try RawLMDBEnvironment.check("mdb_env_create", mdb_env_create(&handle))
        guard let env = handle else { throw ArborError(.engine, "raw lmdb: no environment") }
        defer { mdb_env_close(env) }
        try RawLMDBEnvironment.check("mdb_env_set_maxdbs", mdb_env_set_maxdbs(env, 16))
        try RawLMDBEnvironment.check("mdb_env_open", mdb_env_open(env, path, UInt32(MDB_RDONLY | MDB_NOTLS), 0o600))
        try RawLMDBEnvironment.check("mdb_env_copy2", mdb_env_copy2(env, copy, UInt32(MDB_CP_COMPACT)))
        return (Double(EngineBenchmark.size(ofFolder: path)) / 1e6, Double(EngineBenchmark.size(ofFolder: copy)) / 1e6)
    }
}
