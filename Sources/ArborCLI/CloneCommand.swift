import Arbor
import ArgumentParser

/// `arbor clone FROM TO [--json]`: `migrate` with all history, into a store without versions.
public struct CloneCommand: StorePairCommand {
    public static let configuration = CommandConfiguration(
        commandName: "clone",
        abstract: "Copy a store with all its history into a new store (migrate without options).",
        discussion: """
            TO is created when it does not exist; a store with versions is refused and left untouched (a clone \
            interrupted while it copies leaves none, and running it again resumes it; one interrupted while it \
            verifies has finished its copy: check it with arbor verify TO). The copy is verified. With --json, \
            the summary of arbor migrate.
            """)

    @OptionGroup public var stores: StorePairOptions
    @OptionGroup public var format: OutputOptions

    public init() {}

    public func execute(_ output: inout some TextOutputStream) async throws {
        try await MigrateCommand.migrate(stores, latest: false, verify: true, json: format.json, label: "clone", to: &output)
    }
}
