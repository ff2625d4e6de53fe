import Arbor
@testable import ArborCLI
import ArgumentParser
import Foundation
import Testing

/// Every subcommand and option parses into the command and values it names.
@Suite struct ParsingTests {
    let url = "json:/tmp/store"

    @Test func initTakesAURL() throws {
        let command = try #require(ArborCommand.parseAsRoot(["init", url]) as? InitCommand)
        #expect(command.store.url == url)
    }

    @Test func putTakesTypeIDPropertiesAndCommitOptions() throws {
        let command = try #require(
            ArborCommand.parseAsRoot(["put", url, "Task", "1", #"{"title":"x"}"#, "-m", "why", "--replica", "laptop"]) as? PutCommand)
        #expect(command.store.url == url)
        #expect(command.type == "Task")
        #expect(command.id == "1")
        #expect(command.properties == #"{"title":"x"}"#)
        #expect(command.commit.message == "why")
        #expect(command.commit.replica == "laptop")

        let long = try #require(ArborCommand.parseAsRoot(["put", url, "Task", "1", "--message", "long form"]) as? PutCommand)
        #expect(long.commit.message == "long form")
        #expect(long.properties == nil)
        #expect(long.commit.replica == nil)
        // Without --replica, commits are signed with the machine's name, as the system has it.
        #expect(long.commit.storeConfiguration.replica == CommitOptions.machineName)
        #expect(!CommitOptions.machineName.isEmpty && !CommitOptions.machineName.contains("\0"))
        #if os(Linux)
        #expect(CommitOptions.machineName == (try String(contentsOfFile: "/proc/sys/kernel/hostname", encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines))
        #endif

        let dash = try #require(ArborCommand.parseAsRoot(["put", url, "Task", "1", "-"]) as? PutCommand)
        #expect(dash.properties == "-")
    }

    @Test func getTakesAVersionAndJSON() throws {
        let plain = try #require(ArborCommand.parseAsRoot(["get", url, "Task", "1"]) as? GetCommand)
        #expect(plain.type == "Task" && plain.id == "1")
        #expect(plain.version == "HEAD")
        #expect(!plain.format.json)

        let pinned = try #require(ArborCommand.parseAsRoot(["get", url, "Task", "1", "--at", "abcd", "--json"]) as? GetCommand)
        #expect(pinned.version == "abcd")
        #expect(pinned.format.json)
    }

    @Test func deleteTakesAMessage() throws {
        let command = try #require(ArborCommand.parseAsRoot(["delete", url, "Task", "1", "-m", "gone"]) as? DeleteCommand)
        #expect(command.type == "Task" && command.id == "1")
        #expect(command.commit.message == "gone")
    }

    @Test func logTakesALimitAndJSON() throws {
        let plain = try #require(ArborCommand.parseAsRoot(["log", url]) as? LogCommand)
        #expect(plain.limit == nil)
        #expect(!plain.format.json)

        let limited = try #require(ArborCommand.parseAsRoot(["log", url, "--limit", "3", "--json"]) as? LogCommand)
        #expect(limited.limit == 3)
        #expect(limited.format.json)

        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["log", url, "--limit", "0"]) }
        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["log", url, "--limit", "many"]) }
    }

    @Test func headsTakesJSON() throws {
        #expect(try #require(ArborCommand.parseAsRoot(["heads", url]) as? HeadsCommand).format.json == false)
        #expect(try #require(ArborCommand.parseAsRoot(["heads", url, "--json"]) as? HeadsCommand).format.json)
    }

    @Test func mergeTakesAStrategyAndJSON() throws {
        let plain = try #require(ArborCommand.parseAsRoot(["merge", url]) as? MergeCommand)
        #expect(plain.strategy == nil && plain.format.json == false)
        for strategy in MergeStrategy.allCases {
            let command = try #require(ArborCommand.parseAsRoot(["merge", url, "--strategy", strategy.rawValue, "--json"]) as? MergeCommand)
            #expect(command.strategy == strategy && command.format.json)
        }
        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["merge", url, "--strategy", "newest"]) }
        #expect(try #require(ArborCommand.parseAsRoot(["conflicts", url, "--json"]) as? ConflictsCommand).format.json)
        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["conflicts"]) }
    }

    @Test func diffTakesTwoVersions() throws {
        let command = try #require(ArborCommand.parseAsRoot(["diff", url, "abcd", "HEAD", "--json"]) as? DiffCommand)
        #expect(command.from == "abcd")
        #expect(command.to == "HEAD")
        #expect(command.format.json)
        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["diff", url, "abcd"]) }
    }

    @Test func showTakesAVersion() throws {
        let command = try #require(ArborCommand.parseAsRoot(["show", url, "HEAD"]) as? ShowCommand)
        #expect(command.version == "HEAD")
        #expect(!command.format.json)
        #expect(try #require(ArborCommand.parseAsRoot(["show", url, "HEAD", "--json"]) as? ShowCommand).format.json)
    }

    @Test func noArgumentsParseAsTheRootCommand() throws {
        #expect(try ArborCommand.parseAsRoot([]) is ArborCommand)
    }

    @Test(arguments: [
        ["frobnicate", "json:x"], ["get", "json:x", "Task"], ["put", "json:x"],
        ["init"], ["show", "json:x"], ["get", "json:x", "Task", "1", "--at"], ["heads", "json:x", "--verbose"],
    ])
    func incompleteOrUnknownCommandLinesFail(arguments: [String]) {
        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(arguments) }
    }
}
