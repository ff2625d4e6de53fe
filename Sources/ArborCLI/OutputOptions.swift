import Arbor
import ArgumentParser

/// How a reading subcommand prints its result.
public struct OutputOptions: ParsableArguments, Sendable {
    /// Print one JSON document instead of text for people.
    @Flag(help: "Print one JSON document instead of text.")
    public var json = false

    public init() {}

    /// Prints a check's report (verify, repair) as JSON or as lines for people, then fails the
    /// command with exit status 1 unless the store is `intact`.
    func printCheck(json: @autoclosure () -> JSONValue, lines: @autoclosure () -> [String], intact: Bool, to output: inout some TextOutputStream) throws {
        if self.json {
            print(json().serialized(pretty: true), to: &output)
        } else {
            for line in lines() { print(line, to: &output) }
        }
        if !intact { throw ExitCode.failure }
    }
}
