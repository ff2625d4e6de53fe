import Arbor
import ArgumentParser

/// A subcommand that works on one store and writes its output to a stream, so that tests can
/// run it and capture what it prints.
public protocol StoreCommand: AsyncParsableCommand {
    /// The store the command works on.
    var store: StoreOptions { get }

    /// Does the command's work, writing its output to `output`. Failures are thrown, with any
    /// password in the store URL redacted.
    func execute(_ output: inout some TextOutputStream) async throws
}

extension StoreCommand {
    /// Executes the command on standard output. A failure is printed as `error: …` on standard
    /// error and ends the process with exit code 1.
    func executeOnStandardOutput() async throws {
        var output = StandardStream.output
        do {
            try await execute(&output)
        } catch let exit as ExitCode {
            throw exit
        } catch {
            var errors = StandardStream.error
            print("error: \(errorMessage(for: error))", to: &errors)
            throw ExitCode.failure
        }
    }

    /// The text printed after `error: ` for `error`, without any secret of the store URL.
    func errorMessage(for error: any Error) -> String {
        let text = (error as? ArborError)?.description ?? String(describing: error)
        return StoreLocation.redactingSecrets(of: store.url, in: text)
    }
}
