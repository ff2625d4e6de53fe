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

    @OptionGroup public var store: StoreOptions

    @Argument(help: ArgumentHelp("The version: a hash, a unique prefix of at least 4 hex digits, or HEAD.", valueName: "version"))
    public var version: String

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let (version, changes) = try await store.withStore { store in
            let version = try await store.resolve(self.version)
            return (version, try await store.changes(in: version.id))
        }
        if format.json {
            var members = Rendering.members(of: version)
            members.append(("changes", .array(changes.map(Rendering.json))))
            print(JSONValue.object(members).serialized(pretty: true), to: &output)
        } else {
            for line in Rendering.details(version) { print(line, to: &output) }
            if !changes.isEmpty {
                print("", to: &output)
                for line in Rendering.lines(changes) { print(line, to: &output) }
            }
        }
    }
}
