import Arbor
import ArborCLI
import ArgumentParser
import Foundation
import Testing

/// Parses `arguments` as the `arbor` command line would and executes the subcommand, returning
/// what it printed. `input` stands in for standard input.
func arbor(_ arguments: String..., input: String? = nil) async throws -> String {
    let command = try ArborCommand.parseAsRoot(arguments)
    var output = ""
    if let input {
        let put = try #require(command as? PutCommand, "only put reads standard input")
        try await put.execute(&output) { Data(input.utf8) }
    } else {
        let storeCommand = try #require(command as? any OutputCommand, "\(arguments) is not a command with output")
        try await storeCommand.execute(&output)
    }
    return output
}

/// What `arguments` print before they end with exit status 1 without an error (as a merge
/// stopped at conflicts does); records an issue if they end otherwise.
func arborStopping(_ arguments: String...) async throws -> String {
    let command = try #require(try ArborCommand.parseAsRoot(arguments) as? any OutputCommand, "\(arguments) is not a command with output")
    var output = ""
    await #expect(throws: ExitCode.failure) { try await command.execute(&output) }
    return output
}

/// The error `arguments` fail with, or `nil` if they succeed.
func arborError(_ arguments: String..., input: String? = nil) async -> ArborError? {
    let command = try? ArborCommand.parseAsRoot(arguments)
    guard let storeCommand = command as? any OutputCommand else { return nil }
    var output = ""
    do {
        if let input, let put = storeCommand as? PutCommand {
            try await put.execute(&output) { Data(input.utf8) }
        } else {
            try await storeCommand.execute(&output)
        }
        return nil
    } catch {
        return error as? ArborError ?? ArborError(.engine, "not an ArborError: \(error)")
    }
}

/// Runs `body` with the URL of a new `json:` store in a fresh temporary folder, removed afterwards.
func withJSONStore(initialized: Bool = true, _ body: (String) async throws -> Void) async throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-cli-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let url = "json:" + folder.appendingPathComponent("store").path
    if initialized { _ = try await arbor("init", url) }
    try await body(url)
}

/// The hash at the start of a `put` or `delete` summary line.
func committedHash(_ output: String) throws -> String {
    let hash = String(output.prefix { $0 != " " })
    try #require(hash.count == 12 && hash.allSatisfy(\.isHexDigit), "no abbreviated hash in \(output)")
    return hash
}

/// The non-empty lines of `text`.
func lines(_ text: String) -> [String] {
    text.split(separator: "\n").map(String.init)
}

/// `text` parsed as JSON.
func json(_ text: String) throws -> JSONValue {
    try JSONValue.parse(text)
}

extension JSONValue {
    /// The elements of an array, or none.
    var elements: [JSONValue] {
        if case .array(let elements) = self { elements } else { [] }
    }
}
