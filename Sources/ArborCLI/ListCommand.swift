import Arbor
import ArgumentParser
import Foundation

/// `arbor list URL [TYPE] [--at VERSION] [--json]`: the records of a version, in key order.
public struct ListCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the records of a version (all, or those of one type), in key order.",
        discussion: """
            One line a record: TYPE/ID, then its properties as compact JSON. With --json, an array of \
            {"type", "id", "properties"}. Records are printed as the index is read, so a store of millions \
            lists in little memory.
            """)

    public static let printsListing = true

    @OptionGroup public var store: StoreOptions

    @Argument(help: "List only the records of this type.")
    public var type: String?

    @Option(name: .long, help: ArgumentHelp("The version to read: a hash, a unique prefix of at least 4 hex digits, or HEAD.", valueName: "version"))
    public var at: String = "HEAD"

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        // A type name is checked as a record's would be: a wrong one fails, it does not list nothing.
        if let type { try RecordKey(type: type, id: "x").validate() }
        var printer = JSONArrayPrinter()
        try await store.withStore { store in
            let snapshot = try await store.snapshot(at: at)
            if format.json { printer.begin(&output) }
            try await snapshot.forEachRecord(ofType: type) { records in
                if format.json {
                    printer.append(records.map(Self.json), to: &output)
                } else {
                    for record in records { print("\(Rendering.key(record.key))  \(Rendering.printable(JSONValue(properties: record.properties).serialized()))", to: &output) }
                }
            }
        }
        if format.json {
            printer.end(&output)
            print("", to: &output)
        }
    }

    static func json(_ record: Record) -> JSONValue {
        .object([("type", .string(record.key.type)), ("id", .string(record.key.id)), ("properties", JSONValue(properties: record.properties))])
    }
}
