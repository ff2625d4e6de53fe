import Arbor
import ArborSQLite
import ArgumentParser

/// `--vacuum` on the commands that free space (`compact`, `gc`): the space goes back to the file
/// system, which SQLite and LMDB otherwise keep for later writes.
public struct VacuumOptions: ParsableArguments, Sendable {
    @Flag(help: "Then give the space freed back to the file system (sqlite: only): the file shrinks to what its data takes.")
    public var vacuum = false

    public init() {}

    /// Refuses `--vacuum` for a store other than `sqlite:` (a URL that does not parse fails as
    /// the command runs).
    func check(_ store: StoreOptions) throws {
        guard vacuum else { return }
        if case .sqlite? = try? store.location() { return }
        throw ValidationError(
            "--vacuum shrinks sqlite: files only; an lmdb: store is made small by a migration into a new one: arbor migrate lmdb:OLD lmdb:NEW --deltas")
    }

    /// Vacuums `store` if asked: the bytes of its files before and after; `nil` if not asked.
    func run(on store: Store) async throws -> (before: Int, after: Int)? {
        guard vacuum else { return nil }
        guard let sqlite = store.backend as? SQLiteBackend else {
            throw ArborError(.invalidInput, "--vacuum shrinks sqlite: files only", backend: store.backend.engineName, operation: "vacuum")
        }
        return try await sqlite.vacuum()
    }

    /// The sizes as `--json` fields.
    static func fields(_ sizes: (before: Int, after: Int)?) -> [(String, JSONValue)] {
        guard let sizes else { return [] }
        return [("bytesBefore", .number(String(sizes.before))), ("bytesAfter", .number(String(sizes.after)))]
    }

    /// The sizes as a line of text.
    static func line(_ sizes: (before: Int, after: Int)) -> String {
        "vacuumed: \(ProgressBar.bytes(sizes.before)) -> \(ProgressBar.bytes(sizes.after))"
    }
}
