import Arbor
import ArgumentParser

/// `arbor heads URL [--json]`: lists the versions no other version builds on.
public struct HeadsCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "heads",
        abstract: "List the heads: the versions no other version builds on, newest first.",
        discussion: "Prints them as log does; more than one head means concurrent commits wait to be merged.")

    public static let printsListing = true

    @OptionGroup public var store: StoreOptions

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let heads = try await store.withStore { store in try await store.heads() }
        if format.json {
            print(JSONValue.array(heads.map(Rendering.json)).serialized(pretty: true), to: &output)
        } else {
            for head in heads { print(Rendering.line(head), to: &output) }
        }
    }
}
