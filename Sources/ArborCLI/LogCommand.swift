import Arbor
import ArgumentParser

/// `arbor log URL [--limit N] [--json]`: lists versions, newest first.
public struct LogCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "List the versions, newest first.",
        discussion: """
            One line a version: abbreviated hash, time (ISO 8601, UTC), replica, record count and \
            the first line of the message. With --json, an array of \
            {"id", "parents", "time", "counter", "replica", "message", "recordCount"} with full hashes. \
            Versions are printed as the history is read, so a long history takes little memory.
            """)

    public static let printsListing = true

    @OptionGroup public var store: StoreOptions

    @Option(help: "List at most this many versions.")
    public var limit: Int?

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        // Printed as the history is walked, a batch at a time: a history can be long.
        var printer = JSONArrayPrinter()
        try await store.withStore { store in
            // The heads are read first, so that a store whose heads cannot be read prints nothing.
            let heads = try await store.heads().map(\.id)
            if format.json { printer.begin(&output) }
            try await store.log(from: heads, limit: limit ?? .max, batchSize: 1_000) { versions in
                if format.json {
                    printer.append(versions.map(Rendering.json), to: &output)
                } else {
                    for version in versions { print(Rendering.line(version), to: &output) }
                }
            }
        }
        if format.json {
            printer.end(&output)
            print("", to: &output)
        }
    }
}
