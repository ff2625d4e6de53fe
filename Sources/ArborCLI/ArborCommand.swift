import ArgumentParser

/// The `arbor` command: its subcommands inspect and change a store.
public struct ArborCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "arbor",
        abstract: "Inspect and change an Arbor store: versioned, content-addressed records.",
        discussion: """
            Every subcommand takes a store URL first: memory:, json:PATH, sqlite:PATH, lmdb:PATH or \
            postgres://user:password@host:port/database. Versions are written as a full hash, a unique \
            prefix of at least 4 hex digits, or HEAD (the newest head).
            """,
        subcommands: [
            InitCommand.self, PutCommand.self, GetCommand.self, DeleteCommand.self,
            LogCommand.self, HeadsCommand.self, DiffCommand.self, ShowCommand.self,
        ])

    public init() {}
}
