import Arbor
import ArgumentParser

extension MergeStrategy: ExpressibleByArgument {}

/// `arbor merge URL [--strategy most-recent|ours|theirs|manual] [--json]`: merges the heads.
public struct MergeCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Merge the store's heads into one version.",
        discussion: """
            Heads are merged in pairs in hash order, then the results in pairs, record by record and property by property, from their \
            common ancestor; the result is the same on every replica. Prints the merge commit, the records that \
            merged cleanly ("  = TYPE/ID") and the conflicts the strategy settled ("  ! TYPE/ID PROPERTY: \
            base …, ours …, theirs …"). With --strategy manual and conflicts, nothing is committed, the \
            conflicts are printed and the exit status is 1. With --json: {"result": "merged" | "fast-forward" | "conflicts" | "empty", \
            "version", "ancestor", "clean": [{"type", "id"}], "conflicts": [{"type", "id", "property", "base", \
            "ours", "theirs"}]}, absent members left out.
            """)

    @OptionGroup public var store: StoreOptions

    @Option(help: ArgumentHelp("How conflicts are settled: most-recent (default), ours, theirs or manual.", valueName: "strategy"))
    public var strategy: MergeStrategy?

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let outcome = try await store.withStore { store in try await store.mergeHeads(strategy: strategy) }
        if format.json {
            print(Rendering.json(outcome).serialized(pretty: true), to: &output)
        } else {
            for line in Rendering.lines(outcome) { print(line, to: &output) }
        }
        // Nothing committed: a script must not take the heads for merged.
        if case .conflicts? = outcome { throw ExitCode.failure }
    }
}
