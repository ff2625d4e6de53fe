import Arbor
import ArgumentParser

/// `arbor migrate FROM TO [--latest] [--no-verify] [--json]`: copies a whole store.
public struct MigrateCommand: StorePairCommand {
    public static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Copy a whole store into a new store on any engine, and prove the copy.",
        discussion: """
            TO is created when it does not exist; a store with versions is refused and left untouched. A \
            migration interrupted while it copies leaves TO without versions, and running it again resumes it; \
            one interrupted while it verifies has finished its copy (check it with arbor verify TO). \
            Copies all history, or with --latest only the state of each head (as versions without parents). \
            Then verifies (unless --no-verify) that the heads are the same on both sides, that every object of \
            TO matches its hash and comes from FROM, and that every object one names is in TO (so every \
            head's history and index are complete), in one pass over TO. Memory stays \
            bounded whatever the store's size. With --deltas, TO keeps the nodes each version replaced as \
            deltas (sqlite: and lmdb: only; it takes the format that holds them). With --json: {"versions", \
            "objects", "bytes", "restatements", "seconds", "latestOnly", "verified", "objectsChecked", "bytesChecked", \
            "verifySeconds", "sourceChangedSinceCopy", "heads"}.
            """)

    @OptionGroup public var stores: StorePairOptions

    @Flag(help: "Copy only the state of the current heads, not their history.")
    public var latest = false

    @Flag(inversion: .prefixedNo, help: "Verify the copy afterwards.")
    public var verify = true

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func execute(_ output: inout some TextOutputStream) async throws {
        try await MigrateCommand.migrate(stores, latest: latest, verify: verify, json: format.json, label: "migrate", to: &output)
    }

    /// The work of `migrate` and `clone`.
    static func migrate(
        _ stores: StorePairOptions, latest: Bool, verify: Bool, json: Bool, label: String, to output: inout some TextOutputStream
    ) async throws {
        let bar = ProgressBar(label: label)
        defer { bar.finish() }
        let show = bar.handler
        let report = try await stores.withStores(target: .createIfMissing) { from, to in
            try await from.migrate(to: to, latestOnly: latest, verify: verify) { progress in
                // Past the copy, the target's heads are set: a rerun would be refused.
                if progress.phase == .verifying { Interruption.nowDoing(.verifyingCopy) }
                show?(progress)
            }
        }
        bar.finish()
        if json {
            print(Rendering.json(report).serialized(pretty: true), to: &output)
        } else {
            for line in Rendering.lines(report) { print(line, to: &output) }
        }
    }
}
