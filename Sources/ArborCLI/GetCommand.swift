import Arbor
import ArgumentParser

/// `arbor get URL TYPE ID [--at VERSION] [--json]`: prints one record's properties.
public struct GetCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print a record's properties.",
        discussion: """
            Prints a TYPE/ID header line and the properties as pretty JSON; with --json, one document \
            {"type", "id", "version", "properties"}. Fails if the record does not exist at the version.
            """)

    @OptionGroup public var store: StoreOptions

    @Argument(help: "The record's type name.")
    public var type: String

    @Argument(help: "The record's id.")
    public var id: String

    @Option(name: .customLong("at"), help: ArgumentHelp("The version to read: a hash, a unique prefix of at least 4 hex digits, or HEAD.", valueName: "version"))
    public var version: String = "HEAD"

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let key = RecordKey(type: type, id: id)
        let (version, record) = try await store.withStore { store in
            let version = try await store.resolve(self.version)
            return (version, try await store.record(key, at: version.id))
        }
        guard let record else {
            throw ArborError(.notFound, "no \(key) at \(version.id.abbreviated())")
        }
        let properties = JSONValue(properties: record.properties)
        if format.json {
            let document = JSONValue.object([
                ("type", .string(key.type)),
                ("id", .string(key.id)),
                ("version", .string(version.id.hex)),
                ("properties", properties),
            ])
            print(document.serialized(pretty: true), to: &output)
        } else {
            print("\(Rendering.key(key)) at \(version.id.abbreviated())", to: &output)
            print(Rendering.printable(properties.serialized(pretty: true), keepingNewlines: true), to: &output)
        }
    }
}
