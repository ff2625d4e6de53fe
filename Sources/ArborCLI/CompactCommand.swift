import Arbor
import ArgumentParser

/// `arbor compact URL [--vacuum] [--json]`: keeps the nodes the history replaced as deltas.
public struct CompactCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Keep the index nodes each version replaced as deltas (sqlite: and lmdb: stores).",
        discussion: """
            Does for the whole history what commits on a store opened with --deltas do as they go: each index \
            node a version replaced is kept as a delta against the node that replaced it, where that loses no \
            byte. Every version reads as before. Opens the store as --deltas does (a store of the earlier \
            format takes the format that holds deltas, which earlier Arbor cannot open). An interrupted one is \
            finished by running it again (which ends with the same deltas, but redoes the work). SQLite and LMDB re-use \
            the space freed for later writes rather than shrinking their files: --vacuum then shrinks a sqlite: \
            file to what its data takes (it holds the store's write lock meanwhile, so other processes' commits \
            wait for it, and needs free disk space about twice the size of the data, half of it in SQLite's \
            temporary directory, SQLITE_TMPDIR); an lmdb: store is made small by a migration into a new one, \
            `arbor migrate lmdb:OLD lmdb:NEW --deltas`. With --json: {"versions", "restatements", "seconds"}, and \
            with --vacuum {"bytesBefore", "bytesAfter", "logTruncated", "vacuumSeconds"} too.
            """)

    @OptionGroup public var store: StoreOptions
    @OptionGroup public var format: OutputOptions

    @OptionGroup public var space: VacuumOptions

    public init() {}

    public func validate() throws { try space.check(store) }

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let bar = ProgressBar(label: "compact")
        defer { bar.finish() }
        // Said here, or opening the store for deltas would refuse a --deltas never given.
        let location = try store.location()
        switch location {
        case .sqlite, .lmdb: break
        default:
            throw ArborError(
                .invalidInput, "compact keeps the nodes a history replaced as deltas, which only sqlite: and lmdb: stores hold; \(location.scheme): stores keep every node whole",
                backend: location.scheme, operation: "compact")
        }
        var options = store
        options.deltas = true
        let (report, vacuumed) = try await options.withStore { store in
            let report = try await store.compactHistory(progress: bar.handler)
            return (report, await space.run(on: store))
        }
        bar.finish()
        if format.json {
            print(JSONValue.object([
                ("versions", .number(String(report.versions))), ("restatements", .number(String(report.restatements))),
                ("seconds", Rendering.number(report.seconds)),
            ] + VacuumOptions.fields(vacuumed)).serialized(pretty: true), to: &output)
        } else {
            print("compacted \(Rendering.count(report.versions, "version", "versions")): "
                + "\(Rendering.count(report.restatements, "node", "nodes")) offered as deltas; \(Rendering.seconds(report.seconds))", to: &output)
            for line in VacuumOptions.lines(vacuumed) { print(line, to: &output) }
        }
        try VacuumOptions.throwIfFailed(vacuumed)
    }
}
