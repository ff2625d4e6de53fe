import Arbor
import ArborSQLite
import ArgumentParser

/// `--vacuum` on the commands that free space (`compact`, `gc`): the space goes back to the file
/// system, which SQLite and LMDB otherwise keep for later writes.
public struct VacuumOptions: ParsableArguments, Sendable {
    @Flag(help: "Then give the space freed back to the file system (sqlite: only): the file shrinks to what its data takes.")
    public var vacuum = false

    public init() {}

    /// What became of the vacuum asked for.
    enum Outcome {
        case done(SQLiteBackend.VacuumReport)
        /// Not run, for this reason (the work before it was done).
        case skipped(String)
        case failed(any Error)
    }

    /// Refuses `--vacuum` for a store other than `sqlite:` (a URL that does not parse fails as
    /// the command runs, with the parser's own error).
    func check(_ store: StoreOptions) throws {
        guard vacuum, let location = try? store.location() else { return }
        switch location {
        case .sqlite: return
        case .lmdb:
            throw ValidationError(
                "--vacuum shrinks sqlite: files only; an lmdb: store is made small by a migration into a new one: arbor migrate lmdb:OLD lmdb:NEW --deltas")
        default:
            throw ValidationError("--vacuum shrinks sqlite: files only")
        }
    }

    /// Vacuums `store` if asked (`nil` if not), unless `skipping` gives a reason not to, or the
    /// task was cancelled; a failure is returned, for the command to report its own work first.
    func run(on store: Store, skipping reason: String? = nil) async -> Outcome? {
        guard vacuum else { return nil }
        if let reason { return .skipped(reason) }
        if Task.isCancelled { return .skipped("interrupted") }
        guard let sqlite = store.backend as? SQLiteBackend else {
            return .failed(ArborError(.invalidInput, "--vacuum shrinks sqlite: files only", backend: store.backend.engineName, operation: "vacuum"))
        }
        do { return .done(try await sqlite.vacuum()) } catch { return .failed(error) }
    }

    /// The outcome as `--json` fields.
    static func fields(_ outcome: Outcome?) -> [(String, JSONValue)] {
        switch outcome {
        case .done(let report)?:
            [("bytesBefore", .number(String(report.bytesBefore))), ("bytesAfter", .number(String(report.bytesAfter))),
             ("logTruncated", .bool(report.logTruncated)), ("vacuumSeconds", Rendering.number(report.seconds))]
        case .skipped(let reason)?: [("vacuumSkipped", .string(reason))]
        case .failed?, nil: []
        }
    }

    /// The outcome as lines of text (none when not asked, or failed: the error says it).
    static func lines(_ outcome: Outcome?) -> [String] {
        switch outcome {
        case .done(let report)?:
            ["vacuumed: \(ProgressBar.bytes(report.bytesBefore)) -> \(ProgressBar.bytes(report.bytesAfter)); \(Rendering.seconds(report.seconds))"]
                + (report.logTruncated ? [] : [
                    "another process was reading the store, so its write-ahead log keeps the rewritten pages until a checkpoint can finish (at the latest when the last connection to it closes)",
                ])
        case .skipped(let reason)?: ["not vacuumed: \(reason)"]
        case .failed?, nil: []
        }
    }

    /// Throws the vacuum's error, if it failed: after the command printed its own report.
    static func throwIfFailed(_ outcome: Outcome?) throws {
        if case .failed(let error)? = outcome { throw error }
    }
}
