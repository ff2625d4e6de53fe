import Arbor
import ArgumentParser

/// `arbor diff URL V1 V2 [--json]`: how the records differ between two versions.
public struct DiffCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Show how the records differ from one version to another, property by property.",
        discussion: """
            For each changed record a line "+ TYPE/ID" (added), "- TYPE/ID" (removed) or "~ TYPE/ID" \
            (modified), then its properties: the values of an added or removed record, "name: old -> new" \
            for a modified one, with (absent) for a missing side. Values are JSON. With --json, an array of \
            {"type", "id", "change", "properties": [{"name", "old", "new"}]} where an absent old or new is \
            left out (null is a value).
            """)

    public static let printsListing = true

    @OptionGroup public var store: StoreOptions

    @Argument(help: ArgumentHelp("The version to compare from: a hash, a unique prefix of at least 4 hex digits, or HEAD.", valueName: "v1"))
    public var from: String

    @Argument(help: ArgumentHelp("The version to compare to.", valueName: "v2"))
    public var to: String

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        // Printed as the diff is found, a batch at a time: a diff of a whole store is long.
        var printer = JSONArrayPrinter()
        try await store.withStore { store in
            let old = try await store.resolve(from)
            let new = try await store.resolve(to)
            if format.json { printer.begin(&output) }
            try await store.diff(from: old.id, to: new.id, batchSize: 1_000) { changes in
                if format.json {
                    printer.append(changes.map(Rendering.json), to: &output)
                } else {
                    for line in Rendering.lines(changes) { print(line, to: &output) }
                }
            }
        }
        if format.json {
            printer.end(&output)
            print("", to: &output)
        }
    }
}
