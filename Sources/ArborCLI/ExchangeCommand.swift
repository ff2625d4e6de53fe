import Arbor
import ArgumentParser

/// `arbor exchange FROM TO [--json]`: sends FROM's versions that TO lacks.
public struct ExchangeCommand: StorePairCommand {
    public static let configuration = CommandConfiguration(
        commandName: "exchange",
        abstract: "Send every version of one store that another lacks; its heads become heads there.",
        discussion: """
            Both stores must exist; they may be on any two engines. Only what the target lacks is read and \
            written, and the target's heads change last, so an exchange that is interrupted (Ctrl-C, a dropped \
            connection, a full disk) is completed by running it again. Shows progress on a terminal. With \
            --json: {"versions", "objects", "bytes", "rounds", "restatements", "seconds", "alreadyInSync", "heads"} (restatements: index nodes the target, if it keeps deltas, was asked to keep so).
            """)

    @OptionGroup public var stores: StorePairOptions
    @Option(help: ArgumentHelp("The most objects written to the target in one batch (one transaction); by default as many as its engine prefers.", valueName: "count"))
    public var batchSize: Int?

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func validate() throws {
        if let batchSize, batchSize < 1 { throw ValidationError("--batch-size must be at least 1") }
    }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let bar = ProgressBar(label: "exchange")
        defer { bar.finish() }
        let report = try await stores.withStores { from, to in try await from.exchange(to: to, batchSize: batchSize, progress: bar.handler) }
        bar.finish()
        print(format.json ? Rendering.json(report).serialized(pretty: true) : Rendering.line(report), to: &output)
    }
}
