import Arbor
import ArgumentParser

/// `arbor init URL`: creates an empty store.
public struct InitCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create an empty store.",
        discussion: "Fails, leaving it untouched, if a store already exists at the URL. A memory: store lasts only as long as the command.")

    @OptionGroup public var store: StoreOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        try await store.withStore(create: true) { _ in }
        print("created an empty store at \(try store.location())", to: &output)
    }
}
