import ArgumentParser
import Foundation

/// The `arbor` command: its subcommands inspect and change a store.
public struct ArborCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "arbor",
        abstract: "Inspect and change an Arbor store: versioned, content-addressed records.",
        discussion: """
            Every subcommand takes a store URL first (exchange, sync, migrate, clone and repair take two): memory:, json:PATH, sqlite:PATH, lmdb:PATH or \
            postgres://user:password@host:port/database. Versions are written as a full hash, a unique \
            prefix of at least 4 hex digits, or HEAD (the newest head).
            """,
        subcommands: [
            InitCommand.self, PutCommand.self, GetCommand.self, ListCommand.self, DeleteCommand.self,
            LogCommand.self, HeadsCommand.self, DiffCommand.self, ShowCommand.self, MergeCommand.self, ConflictsCommand.self,
            ExchangeCommand.self, SyncCommand.self, MigrateCommand.self, CloneCommand.self, VerifyCommand.self, RepairCommand.self,
            GarbageCollectCommand.self, CompactCommand.self, ConformanceCommand.self, DemoCommand.self,
        ])

    public init() {}

    /// Runs the command line of this process.
    public static func main() async {
        await main(nil)
    }

    /// Parses `arguments` (default: this process's), runs the subcommand and exits, as
    /// ArgumentParser's `main` does — except that no message shows a password of a store URL.
    /// The parser quotes arguments it does not expect, and a URL may be one of them.
    public static func main(_ arguments: [String]?) async {
        let arguments = arguments ?? Array(CommandLine.arguments.dropFirst())
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            // A failure caused by Ctrl-C's own clean-up is not reported: the handler exits.
            if Interruption.isBeingHandled { try? await Task.sleep(for: .seconds(10)) }
            let code = exitCode(for: error)
            let message = redactedMessage(for: error, arguments: arguments)
            if !message.isEmpty {
                // Help and other clean exits go to standard output, failures to standard error.
                var stream = code.isSuccess ? StandardStream.output() : StandardStream.error
                print(message, to: &stream)
                stream.flush()
            }
            Foundation.exit(code.rawValue)
        }
    }

    /// ArgumentParser's full message for `error`, with the secrets of every argument that looks
    /// like a URL replaced by `***`.
    static func redactedMessage(for error: any Error, arguments: [String]) -> String {
        Rendering.printable(arguments.reduce(fullMessage(for: error)) { StoreLocation.redactingSecrets(of: $1, in: $0) }, keepingNewlines: true)
    }
}
