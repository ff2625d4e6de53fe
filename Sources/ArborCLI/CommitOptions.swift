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

    /// The version to build on, instead of the newest head.
    @Option(help: ArgumentHelp("Commit on this version instead of the newest head (a hash, a prefix, or HEAD~N).", valueName: "version"))
    public var parent: String?

    public init() {}

    /// The parents to commit on: ``parent`` resolved in `store`, or `nil` for the newest head.
    func parents(in store: Store) async throws -> [Hash]? {
        guard let parent else { return nil }
        return [try await store.resolve(parent).id]
    }

    /// The store configuration that signs commits with ``replica``.
    var storeConfiguration: Store.Configuration {
        // One name per machine, rather than the core's random default, so that `arbor log`
        // shows where each version was made.
        Store.Configuration(replica: replica ?? Self.machineName)
    }

    /// This machine's name, as `gethostname` gives it: `ProcessInfo.hostName` asks the resolver
    /// (on macOS a reverse lookup that can take seconds on a `.local` name), for every commit.
    static var machineName: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }
}
