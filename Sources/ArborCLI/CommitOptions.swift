import Arbor
import ArgumentParser
import Foundation

/// The options of a subcommand that commits a version.
public struct CommitOptions: ParsableArguments {
    /// The commit message; each command has its own default.
    @Option(name: [.short, .long], help: "The commit message.")
    public var message: String?

    /// The replica name the version is signed with.
    @Option(help: ArgumentHelp("The replica name to sign the version with (default: this machine's host name).", valueName: "name"))
    public var replica: String?

    public init() {}

    /// The store configuration that signs commits with ``replica``.
    var storeConfiguration: Store.Configuration {
        // One name per machine, rather than the core's random default, so that `arbor log`
        // shows where each version was made.
        Store.Configuration(replica: replica ?? ProcessInfo.processInfo.hostName)
    }
}
