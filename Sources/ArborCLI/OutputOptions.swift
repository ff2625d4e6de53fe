import ArgumentParser

/// How a reading subcommand prints its result.
public struct OutputOptions: ParsableArguments, Sendable {
    /// Print one JSON document instead of text for people.
    @Flag(help: "Print one JSON document instead of text.")
    public var json = false

    public init() {}
}
