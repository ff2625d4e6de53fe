import Arbor
import ArgumentParser

/// A subcommand that moves versions from one store to another: it names both URLs for
/// redaction, and says on Ctrl-C that running it again finishes the job.
public protocol StorePairCommand: OutputCommand {
    var stores: StorePairOptions { get }
}

extension StorePairCommand {
    public var storeURLs: [String] { [stores.from, stores.to] }

    public func run() async throws {
        Interruption.explainOnInterrupt()
        try await executeOnStandardOutput()
    }
}

/// The two store URLs of a command that moves versions from one store to another.
public struct StorePairOptions: ParsableArguments {
    /// The store versions come from, as written (parsed when the command runs, so that no parser
    /// error repeats a password).
    @Argument(help: ArgumentHelp("The store to copy from (a URL, as for every subcommand).", valueName: "from"))
    public var from: String

    /// The store versions go to.
    @Argument(help: ArgumentHelp("The store to copy to.", valueName: "to"))
    public var to: String

    /// The store that receives versions keeps the index nodes they replaced as deltas.
    @Flag(help: ArgumentHelp(
        "The store that receives versions (for sync, both stores) keeps the index nodes they replaced as deltas, as --deltas does for one store: sqlite: and lmdb: only, and the store takes the format that holds deltas, which earlier Arbor cannot open."))
    public var deltas = false

    public init() {}

    /// How to open the second store.
    enum TargetOpening {
        /// It must exist.
        case existing
        /// It is created when missing (an existing store is opened as it is).
        case createIfMissing
    }

    /// Opens both stores, runs `body` on them and closes them, also when `body` throws. Errors
    /// are rethrown with the passwords of both URLs redacted. With ``deltas``, the target keeps
    /// deltas, and the source too when `bothReceive` (a sync).
    func withStores<Value>(
        target opening: TargetOpening = .existing,
        bothReceive: Bool = false,
        configuration: Store.Configuration = Store.Configuration(),
        _ body: (_ from: Store, _ to: Store) async throws -> Value
    ) async throws -> Value {
        do {
            let source = Store(
                backend: try await openBackend(try StoreLocation(parsing: from), create: false, restatesReplacedNodes: deltas && bothReceive),
                configuration: configuration)
            let target: Store
            do {
                target = Store(backend: try await openTarget(opening), configuration: configuration)
            } catch {
                try? await source.close()
                throw error
            }
            let value: Value
            do {
                value = try await body(source, target)
            } catch {
                try? await source.close()
                try? await target.close()
                throw error
            }
            // Both, whichever fails: a source that fails to close leaves the target open otherwise.
            do { try await source.close() } catch {
                try? await target.close()
                throw error
            }
            try await target.close()
            return value
        } catch {
            throw StoreLocation.redactingSecrets(of: to, in: StoreLocation.redactingSecrets(of: from, in: error))
        }
    }

    private func openTarget(_ opening: TargetOpening) async throws -> any Backend {
        let location = try StoreLocation(parsing: to)
        switch opening {
        case .existing:
            return try await openBackend(location, create: false, restatesReplacedNodes: deltas)
        case .createIfMissing:
            // Opened as it is first: with --deltas, opening a store gives it the format that
            // holds deltas, and a store with versions (which migrate and clone refuse, or find a
            // finished copy) must be left in its own.
            let existing: any Backend
            do {
                existing = try await openBackend(location, create: false)
            } catch let error as ArborError where error.code == .notFound {
                return try await openBackend(location, create: true, restatesReplacedNodes: deltas)
            }
            guard deltas else { return existing }
            let holdsVersions: Bool
            do {
                holdsVersions = try await Store(backend: existing).holdsVersions()
            } catch {
                try? await existing.close()
                throw error
            }
            if holdsVersions { return existing }
            try await existing.close()
            return try await openBackend(location, create: false, restatesReplacedNodes: true)
        }
    }
}
