import Arbor
import ArborJSON
import Foundation
import Testing

/// Several `arbor` processes writing to one store at once: nothing is lost.
@Suite struct MultiProcessTests {
    static func run(_ arguments: [String]) async throws -> String {
        try await ChildProcess.run("arbor", arguments, redacting: arguments.count > 1 ? arguments[1] : nil)
    }

    @Test func concurrentProcessesLoseNoCommit() async throws {
        try await withJSONStore { url in
            let processes = 4, commitsEach = 8
            let hashes = try await withThrowingTaskGroup(of: [String].self) { group in
                for writer in 0..<processes {
                    group.addTask {
                        var made = [String]()
                        for index in 0..<commitsEach {
                            let output = try await MultiProcessTests.run(["put", url, "Counter", "w\(writer)", "{\"n\": \(index)}", "--replica", "p\(writer)"])
                            made.append(try committedHash(output))
                        }
                        return made
                    }
                }
                return try await group.reduce(into: [String]()) { $0 += $1 }
            }
            #expect(hashes.count == processes * commitsEach)
            let log = try JSONValue.parse(try await MultiProcessTests.run(["log", url, "--json"]))
            guard case .array(let versions) = log else { Issue.record("log --json is not an array"); return }
            let ids = Set(versions.compactMap { $0["id"]?.stringValue })
            for hash in hashes {
                #expect(ids.contains { $0.hasPrefix(hash) }, "commit \(hash) is not reachable from the heads")
            }
        }
    }

    @Test func twoProcessesOnOneParentLeaveTwoHeads() async throws {
        try await withJSONStore { url in
            let base = try committedHash(try await MultiProcessTests.run(["put", url, "Task", "t", "{\"title\": \"base\"}"]))
            async let first = MultiProcessTests.run(["put", url, "Task", "t", "{\"title\": \"one\"}", "--parent", base])
            async let second = MultiProcessTests.run(["put", url, "Task", "u", "{\"title\": \"two\"}", "--parent", base])
            let made = [try committedHash(try await first), try committedHash(try await second)]
            let heads = try JSONValue.parse(try await MultiProcessTests.run(["heads", url, "--json"]))
            guard case .array(let versions) = heads else { Issue.record("heads --json is not an array"); return }
            let ids = versions.compactMap { $0["id"]?.stringValue }
            #expect(ids.count == 2)
            for hash in made { #expect(ids.contains { $0.hasPrefix(hash) }) }
        }
    }
}
