import Arbor
import ArgumentParser
import Foundation

/// `arbor put URL TYPE ID [PROPERTIES] [-m MESSAGE]`: commits a version that saves one record.
public struct PutCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Save a record, committing a new version.",
        discussion: """
            PROPERTIES is a JSON object; without it, or as -, it is read from standard input. \
            Kinds JSON lacks are tagged objects: {"$date": "2026-01-02T03:04:05.678Z"}, {"$bytes": "<base64>"}, \
            {"$ref": {"type": T, "id": I}}, {"$child": {"type": T, "id": I}}. \
            Prints the new version's abbreviated hash and what changed.
            """)

    @OptionGroup public var store: StoreOptions

    @Argument(help: "The record's type name.")
    public var type: String

    @Argument(help: "The record's id.")
    public var id: String

    @Argument(help: ArgumentHelp("The properties as a JSON object; - or nothing reads them from standard input.", valueName: "properties"))
    public var properties: String?

    @OptionGroup public var commit: CommitOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        try await execute(&output) { try FileHandle.standardInput.readToEnd() ?? Data() }
    }

    /// Executes the command, reading properties from `standardInput` when they are not an argument.
    public func execute(_ output: inout some TextOutputStream, standardInput: () throws -> Data) async throws {
        let key = RecordKey(type: type, id: id)
        try key.validate()
        // Parsed before the store is opened: bad input leaves the store as it was.
        let json: [UInt8] = if let properties, properties != "-" { Array(properties.utf8) } else { Array(try standardInput()) }
        let values: [String: PropertyValue]
        do {
            values = try PropertyValue.properties(json: try JSONValue.parse(json))
        } catch let error as ArborError {
            throw ArborError(.invalidInput, "the properties of \(key) are not valid: \(error.message)")
        }

        let (version, changes) = try await store.withStore(configuration: commit.storeConfiguration) { store in
            var changeSet = ChangeSet()
            try changeSet.save(Record(key: key, properties: values))
            let version = try await store.commit(changeSet, message: commit.message ?? "put \(key)", parents: try await commit.parents(in: store))
            return (version, try await store.changes(in: version.id))
        }
        print("\(version.id.abbreviated()) \(Self.summary(of: key, in: changes))", to: &output)
    }

    /// What the commit did to `key`, and how many owned records it dropped with it.
    static func summary(of key: RecordKey, in changes: [RecordChange]) -> String {
        var summary: String
        if let change = changes.first(where: { $0.key == key }) {
            let names = change.properties.map(\.name)
            switch change.kind {
            case .added: summary = "added \(Rendering.key(key)) (\(Rendering.count(names.count, "property", "properties")))"
            default: summary = "modified \(Rendering.key(key)) (changed: \(names.map { Rendering.printable($0) }.joined(separator: ", ")))"
            }
        } else {
            summary = "left \(Rendering.key(key)) unchanged"
        }
        let dropped = changes.filter { $0.key != key && $0.kind == .removed }.count
        if dropped > 0 { summary += ", removed \(Rendering.count(dropped, "owned record", "owned records"))" }
        return summary
    }
}
