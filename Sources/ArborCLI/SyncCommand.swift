import Arbor
import ArgumentParser

/// `arbor sync A B [--strategy …] [--json]`: exchanges both ways and merges.
public struct SyncCommand: StorePairCommand {
    public static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Bring two stores to the same head: exchange both ways, merge, and send the merge.",
        discussion: """
            Exchanges A -> B and B -> A, merges the heads in A with the strategy (most-recent by default) and \
            sends the merge to B, so both end on the same head hash. With --strategy manual and conflicts, \
            nothing is merged: both stores keep the same heads, the conflicts are printed and the exit status is 1. With --json: \
            {"sent", "received", "merge", "settled", "heads"}.
            """)

    @OptionGroup public var stores: StorePairOptions

    @Option(help: ArgumentHelp("How conflicts are settled: most-recent (default), ours, theirs or manual.", valueName: "strategy"))
    public var strategy: MergeStrategy?

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func execute(_ output: inout some TextOutputStream) async throws {
        let bar = ProgressBar(label: "sync")
        defer { bar.finish() }
        let report = try await stores.withStores(bothReceive: true) { a, b in try await a.sync(with: b, strategy: strategy, progress: bar.handler) }
        bar.finish()
        if format.json {
            print(Rendering.json(report).serialized(pretty: true), to: &output)
        } else {
            let from = StoreLocation.redactingSecrets(of: stores.from, in: stores.from)
            let to = StoreLocation.redactingSecrets(of: stores.to, in: stores.to)
            for line in Rendering.lines(report, from: from, to: to) { print(line, to: &output) }
        }
        // Exchanged but not merged: a script must not take the stores for in step.
        if case .conflicts? = report.merge { throw ExitCode.failure }
    }
}
