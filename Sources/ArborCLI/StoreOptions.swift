import Arbor
import ArgumentParser

/// The store URL every subcommand takes as its first argument.
public struct StoreOptions: ParsableArguments, Sendable {
    /// The store URL as written. It is parsed when the command runs, not by the argument parser,
    /// whose errors would repeat it — password included.
    @Argument(help: ArgumentHelp(
        "The store: memory:, json:PATH, sqlite:PATH, lmdb:PATH or postgres://user:password@host:port/database.",
        valueName: "url"))
    public var url: String

    /// Commits keep the index nodes they replace as deltas (SQLite and LMDB).
    @Flag(help: ArgumentHelp(
        "Keep the index nodes commits replace as deltas (sqlite: and lmdb: only): a history of random-id commits takes several times less disk, commits and reads of old versions take longer, and the store takes a format earlier Arbor cannot open."))
    public var deltas = false

    public init() {}

    /// The parsed location.
    func location() throws -> StoreLocation {
        try StoreLocation(parsing: url)
    }

    /// Opens the store (creates it when `create`), runs `body` on it and closes the backend,
    /// also when `body` throws. Errors are rethrown with the URL's password redacted.
    func withStore<Value>(
        create: Bool = false,
        configuration: Store.Configuration = Store.Configuration(),
        _ body: (Store) async throws -> Value
    ) async throws -> Value {
        do {
            let store = Store(backend: try await openBackend(try location(), create: create, restatesReplacedNodes: deltas), configuration: configuration)
            let value: Value
            do {
                value = try await body(store)
            } catch {
                // The work's error matters more than a failure to close after it.
                try? await store.close()
                throw error
            }
            try await store.close()
            return value
        } catch {
            throw StoreLocation.redactingSecrets(of: url, in: error)
        }
    }
}
