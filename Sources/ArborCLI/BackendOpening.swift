import Arbor
import ArborJSON
import ArborLMDB
import ArborPostgres
import ArborSQLite

/// Opens (or, with `create`, creates) the backend of a store location: the one place that maps
/// URL schemes to adapters, so that a new adapter is added here and nowhere else.
///
/// Opening a store that does not exist throws ``ArborError/Code/notFound``; creating one where a
/// store exists throws ``ArborError/Code/alreadyExists`` and leaves it untouched. A `memory:`
/// store is always new and empty.
///
/// With `restatesReplacedNodes`, a SQLite or LMDB store keeps the index nodes its commits
/// replace as deltas (and takes the format that holds them); other engines throw
/// ``ArborError/Code/invalidInput``.
public func openBackend(_ location: StoreLocation, create: Bool, restatesReplacedNodes: Bool = false) throws -> any Backend {
    if restatesReplacedNodes {
        switch location {
        case .sqlite(let path):
            let configuration = SQLiteBackend.Configuration(path: path, restatesReplacedNodes: true)
            return create ? try SQLiteBackend.create(configuration) : try SQLiteBackend.open(configuration)
        case .lmdb(let path):
            let configuration = LMDBBackend.Configuration(path: path, restatesReplacedNodes: true)
            return create ? try LMDBBackend.create(configuration) : try LMDBBackend.open(configuration)
        case .memory, .json, .postgres:
            throw ArborError(.invalidInput, "--deltas needs a sqlite: or lmdb: store; \(location.scheme): stores keep every node whole")
        }
    }
    switch location {
    case .memory:
        return MemoryBackend()
    case .json(let path):
        let configuration = JSONBackend.Configuration(path: path)
        return create ? try JSONBackend.create(configuration) : try JSONBackend.open(configuration)
    case .sqlite(let path):
        let configuration = SQLiteBackend.Configuration(path: path)
        return create ? try SQLiteBackend.create(configuration) : try SQLiteBackend.open(configuration)
    case .lmdb(let path):
        let configuration = LMDBBackend.Configuration(path: path)
        return create ? try LMDBBackend.create(configuration) : try LMDBBackend.open(configuration)
    case .postgres(let connection):
        // Connects while opening (blocking this thread once); later calls run on the adapter's own queues.
        let configuration = PostgresBackend.Configuration(url: connection.url)
        return create ? try PostgresBackend.create(configuration) : try PostgresBackend.open(configuration)
    }
}

/// ``openBackend(_:create:)`` for async callers: a PostgreSQL store connects on the adapter's
/// own queue, not on the calling thread, which belongs to Swift's cooperative pool (an
/// unreachable server holds the connect for its whole timeout, per address). The file-based
/// engines open in microseconds and open in place.
public func openBackend(_ location: StoreLocation, create: Bool, restatesReplacedNodes: Bool = false) async throws -> any Backend {
    guard case .postgres(let connection) = location, !restatesReplacedNodes else {
        let open: () throws -> any Backend = { try openBackend(location, create: create, restatesReplacedNodes: restatesReplacedNodes) }
        return try open()
    }
    let configuration = PostgresBackend.Configuration(url: connection.url)
    return create ? try await PostgresBackend.create(configuration) : try await PostgresBackend.open(configuration)
}
