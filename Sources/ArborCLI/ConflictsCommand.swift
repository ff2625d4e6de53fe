import Arbor
import ArgumentParser

/// `arbor conflicts URL [--json]`: the conflicts a manual merge of the heads would stop at.
public struct ConflictsCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List the conflicts a manual merge of the current heads would have (nothing is stored).",
        discussion: """
            One line per conflict: "! TYPE/ID PROPERTY: base …, ours …, theirs …" (no property: the record was \
            deleted on one side and changed on the other; values are JSON, (absent) for a missing side). \
            With --json, an array of {"type", "id", "property", "base", "ours", "theirs"}, absent members left out.
            """)

    public static let printsListing = true

    @OptionGroup public var store: StoreOptions

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let conflicts = try await store.withStore { store in try await store.conflicts() }
        if format.json {
            print(JSONValue.array(conflicts.map(Rendering.json)).serialized(pretty: true), to: &output)
        } else {
            for conflict in conflicts { print(Rendering.line(conflict), to: &output) }
        }
    }
}
