import Arbor
import ArborConformance
import ArborJSON
import ArborLMDB
import ArborPostgres
import ArborSQLite
import Foundation
import Testing

/// The project's five adapters, SQLite and LMDB once more with commits that keep replaced nodes
/// as deltas (`sqliteDeltas`, `lmdbDeltas`), and the example adapter of Conformance/README.md.
enum SuiteAdapter: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case memory, json, sqlite, sqliteDeltas, lmdb, lmdbDeltas, postgres, example
    var testDescription: String { rawValue }

    /// The project's adapters, with `postgres` only when a test server is configured or under
    /// CI=true (where its run then fails instead of being skipped).
    static var projectAdapters: [SuiteAdapter] {
        [.memory, .json, .sqlite, .lmdb] + (PostgresDatabase.isEnabled ? [.postgres] : [])
    }

    /// Runs `body` with the adapter; for `postgres`, on a new database dropped afterwards.
    func withAdapter<Value>(_ body: (AdapterUnderTest) async throws -> Value) async throws -> Value {
        guard self == .postgres else { return try await body(adapter) }
        return try await PostgresDatabase.withDatabase { url in try await body(adapter(postgresURL: url)) }
    }

    /// Runs `body` with the adapters of `kinds`, in order (see ``withAdapter(_:)``).
    static func withAdapters<Value>(_ kinds: [SuiteAdapter], _ body: ([AdapterUnderTest]) async throws -> Value) async throws -> Value {
        guard let first = kinds.first else { return try await body([]) }
        return try await first.withAdapter { adapter in
            try await withAdapters(Array(kinds.dropFirst())) { rest in try await body([adapter] + rest) }
        }
    }

    /// The adapter (`postgres` only through ``withAdapter(_:)``, which gives it a database).
    var adapter: AdapterUnderTest { adapter(postgresURL: nil) }

    private func adapter(postgresURL: String?) -> AdapterUnderTest {
        switch self {
        case .memory:
            // Nothing survives a handle, and no second handle can reach the store.
            return AdapterUnderTest(name: "memory", capabilities: .largeObjects) { FreshBackend(backend: MemoryBackend()) }
        case .json:
            return Self.onDisk("json") { path, create in
                let configuration = JSONBackend.Configuration(path: path, synchronous: false)
                return create ? try JSONBackend.create(configuration) : try JSONBackend.open(configuration)
            }
        case .sqlite:
            return Self.onDisk("sqlite") { path, create in
                let configuration = SQLiteBackend.Configuration(path: path, synchronous: false)
                return create ? try SQLiteBackend.create(configuration) : try SQLiteBackend.open(configuration)
            }
        case .sqliteDeltas:
            return Self.onDisk("sqlite-deltas") { path, create in
                let configuration = SQLiteBackend.Configuration(path: path, synchronous: false, restatesReplacedNodes: true)
                return create ? try SQLiteBackend.create(configuration) : try SQLiteBackend.open(configuration)
            }
        case .lmdb:
            return Self.onDisk("lmdb") { path, create in
                let configuration = LMDBBackend.Configuration(path: path, synchronous: false)
                return create ? try LMDBBackend.create(configuration) : try LMDBBackend.open(configuration)
            }
        case .lmdbDeltas:
            return Self.onDisk("lmdb-deltas") { path, create in
                let configuration = LMDBBackend.Configuration(path: path, synchronous: false, restatesReplacedNodes: true)
                return create ? try LMDBBackend.create(configuration) : try LMDBBackend.open(configuration)
            }
        case .postgres:
            // One database for the run, given by withAdapter; every case gets fresh tables in it.
            guard let url = postgresURL else { preconditionFailure("use withAdapter for postgres") }
            return AdapterUnderTest(name: "postgres") {
                let open: @Sendable () async throws -> any Backend = { try await PostgresBackend.open(.init(url: url)) }
                return FreshBackend(backend: try await PostgresBackend.create(.init(url: url)), reopen: open, openSecondHandle: open,
                                    cleanup: { try PostgresDatabase.dropTables(url) })
            }
        case .example:
            return AdapterUnderTest(name: "example-file", capabilities: [.reopen, .largeObjects]) {
                let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-example-\(UUID().uuidString)")
                return FreshBackend(
                    backend: try ExampleFileBackend.create(at: folder),
                    reopen: { try ExampleFileBackend.open(at: folder) },
                    cleanup: { try? FileManager.default.removeItem(at: folder) })
            }
        }
    }

    /// An adapter on a temporary path, reopened and shared by opening the path again.
    static func onDisk(_ name: String, _ open: @escaping @Sendable (_ path: String, _ create: Bool) throws -> any Backend) -> AdapterUnderTest {
        AdapterUnderTest(name: name) {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-conformance-\(name)-\(UUID().uuidString)").path
            let reopen: @Sendable () async throws -> any Backend = { try open(path, false) }
            return FreshBackend(backend: try open(path, true), reopen: reopen, openSecondHandle: reopen, cleanup: {
                // SQLite keeps its log beside the file.
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            })
        }
    }

    /// An adapter whose stores are `FaultyBackend` handles with `fault` on a shared disk.
    static func faulty(_ fault: FaultyBackend.Fault?) -> AdapterUnderTest {
        AdapterUnderTest(name: fault.map { "faulty(\($0))" } ?? "faultless") {
            let disk = MemoryBackend()
            let open: @Sendable () async throws -> any Backend = { try await FaultyBackend(disk: disk, fault: fault) }
            return FreshBackend(backend: try await open(), reopen: open, openSecondHandle: open)
        }
    }
}
