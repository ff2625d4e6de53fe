import Arbor
import ArgumentParser

/// A subcommand that writes its output to a stream, so that tests can run it and capture what
/// it prints.
public protocol OutputCommand: AsyncParsableCommand {
    /// The store URLs the command was given, whose passwords no message may show.
    var storeURLs: [String] { get }

    /// Does the command's work, writing its output to `output`. Failures are thrown, with any
    /// password in the store URLs redacted.
    func execute(_ output: inout some TextOutputStream) async throws

    /// Whether the command prints a listing (versions, changes) that may run to millions of
    /// lines: its standard output is then written in blocks when piped, as stdio does. Other
    /// commands' lines are written as they are printed, so a line a transfer printed before a
    /// Ctrl-C is not lost with the process.
    static var printsListing: Bool { get }
}

extension OutputCommand {
    public static var printsListing: Bool { false }
}

/// A subcommand that works on one store.
public protocol StoreCommand: OutputCommand {
    /// The store the command works on.
    var store: StoreOptions { get }
}

extension StoreCommand {
    public var storeURLs: [String] { [store.url] }
}

extension OutputCommand {
    /// Executes the command on standard output. A failure is printed as `error: …` on standard
    /// error and ends the process with exit code 1.
    func executeOnStandardOutput() async throws {
        var output = StandardStream.output(blockBuffered: Self.printsListing)
        defer { output.flush() }
        do {
            try await execute(&output)
            output.flush()
            if let failure = output.failure { throw ArborError(.io, "cannot write the output: \(failure.localizedDescription)") }
        } catch let exit as ExitCode {
            throw exit
        } catch {
            // What the command printed before it failed comes first.
            output.flush()
            // A failure caused by Ctrl-C's own clean-up (the demo's folder removed under it) is
            // not reported: the handler says what happened and exits.
            if Interruption.isBeingHandled { throw ExitCode.failure }
            var errors = StandardStream.error
            print("error: \(errorMessage(for: error))", to: &errors)
            throw ExitCode.failure
        }
    }

    /// The text printed after `error: ` for `error`, without any secret of the store URLs, nor
    /// of any other argument of the command line: a URL given where another value was expected
    /// (a version, a case name) can come back quoted in an error.
    func errorMessage(for error: any Error) -> String {
        let sources = storeURLs + CommandLine.arguments.dropFirst()
        let redact = { (text: String) in sources.reduce(text) { StoreLocation.redactingSecrets(of: $1, in: $0) } }
        let text: String
        if var arborError = error as? ArborError {
            // The engine's and the operation's names are Arbor's own words, kept whole: a
            // password that is one of them (postgres) would otherwise hide which engine failed.
            arborError.message = redact(arborError.message)
            if let underlying = arborError.underlying {
                arborError.message += " (\(redact(String(describing: underlying))))"
                arborError.underlying = nil
            }
            text = arborError.description
        } else {
            text = redact(String(describing: error))
        }
        // Errors quote what the store holds (a record's id) and engines' messages: nothing in
        // them may act on the terminal.
        return Rendering.printable(text, keepingNewlines: true)
    }
}
