import Arbor
import ArgumentParser
import Foundation
import Testing
@testable import ArborCLI

/// `arbor verify` from the command line.
@Suite struct VerifyCommandTests {
    /// Output that cannot be written (standard output on a full device) fails the command with
    /// exit status 1 and says so, instead of ending as if all of it were there.
    @Test func outputThatCannotBeWrittenFailsTheCommand() async throws {
        try await withJSONStore { url in
            _ = try await arbor("put", url, "Task", "t", "{\"title\": \"task\"}")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try ChildProcess.executable("arbor"))
            process.arguments = ["list", url, "--json"]
            process.standardOutput = FileHandle(forWritingAtPath: "/dev/full")
            let errors = Pipe()
            process.standardError = errors
            try process.run()
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 1)
            #expect(message.contains("cannot write the output"), "\(message)")
        }
    }

    @Test func intactThenDamagedStore() async throws {
        try await withJSONStore { url in
            for index in 0..<3 { _ = try await arbor("put", url, "Task", "t\(index)", "{\"title\": \"task \(index)\"}") }
            #expect(try await arbor("verify", url).hasPrefix("intact: 3 versions"))
            let report = try json(try await arbor("verify", url, "--json"))
            #expect(report["intact"] == .bool(true) && report["missing"] == .number("0"))

            // Remove the file of the head version: verify names it and fails.
            let head = try #require(try json(try await arbor("heads", url, "--json")).elements.first?["id"]?.stringValue)
            let path = String(url.dropFirst("json:".count)) + "/objects/\(head.prefix(2))/\(head).json"
            try FileManager.default.removeItem(atPath: path)
            let command = try #require(try ArborCommand.parseAsRoot(["verify", url]) as? VerifyCommand)
            var output = ""
            await #expect(throws: ExitCode.self) { try await command.execute(&output) }
            #expect(output.hasPrefix("DAMAGED:") && output.contains("missing \(head)"))
        }
    }
}
