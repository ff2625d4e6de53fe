import Arbor
import ArgumentParser

/// `arbor show URL VERSION [--json]`: one version's metadata and what it changed.
public struct ShowCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show a version and its changes against its first parent.",
        discussion: """
            Prints the metadata one field a line, a blank line, then the changes as diff does. With --json, \
            the version object of log --json with a "changes" member holding the diff --json array.
            """)

    public static let printsListing = true

    @OptionGroup public var store: StoreOptions

    @Argument(help: ArgumentHelp("The version: a hash, a unique prefix of at least 4 hex digits, or HEAD.", valueName: "version"))
    public var version: String

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        // The changes are printed as they are found, a batch at a time: a commit can hold millions.
        try await store.withStore { store in
            let version = try await store.resolve(self.version)
            var printer = JSONArrayPrinter(depth: 1)
            if format.json {
                // The version's members, then "changes" last, its array printed in batches.
                output.write("{")
                for member in Rendering.members(of: version) {
                    output.write("\n  " + JSONValue.string(member.key).serialized() + ": " + member.value.serialized(pretty: true, depth: 1) + ",")
                }
                output.write("\n  \"changes\": ")
                printer.begin(&output)
            } else {
                for line in Rendering.details(version) { print(line, to: &output) }
            }
            var first = true
            try await store.diff(from: version.parents.first, to: version.id, batchSize: 1_000) { changes in
                if format.json {
                    printer.append(changes.map(Rendering.json), to: &output)
                } else {
                    // A blank line between the version and its changes (batches are never empty).
                    if first { print("", to: &output) }
                    for line in Rendering.lines(changes) { print(line, to: &output) }
                }
                first = false
            }
            if format.json {
                printer.end(&output)
                print("\n}", to: &output)
            }
        }
    }
}
