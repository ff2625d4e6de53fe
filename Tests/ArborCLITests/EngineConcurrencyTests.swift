import Arbor
import ArborCLI
import Foundation
import Testing

/// Several processes committing to one store on each file-based engine at once: every
/// acknowledged commit stays reachable, and the heads ref stays readable.
@Suite struct EngineConcurrencyTests {
    enum Engine: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case sqlite, lmdb, json
        var testDescription: String { rawValue }
    }

    /// The `arbor-worker` executable built beside the test bundle.
    static func worker() throws -> String {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [directory, directory.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent("arbor-worker").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw ArborError(.notFound, "the arbor-worker executable is not built next to \(directory.path); run `swift build` first")
    }

    /// Runs `arbor-worker commit URL COUNT REPLICA`; returns the hashes it printed.
    static func commit(_ url: String, count: Int, replica: String) async throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try worker())
        process.arguments = ["commit", url, String(count), replica]
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Read both pipes to the end on other threads, so that neither can fill up and stall the child.
        async let data = Task.detached { output.fileHandleForReading.readDataToEndOfFile() }.value
        async let errorData = Task.detached { errors.fileHandleForReading.readDataToEndOfFile() }.value
        let (out, err) = await (data, errorData)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ArborError(.engine, "arbor-worker \(replica) failed: \(String(decoding: err, as: UTF8.self))")
        }
        return String(decoding: out, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    static func withStore(_ engine: Engine, _ body: (String) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-engines-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await body("\(engine.rawValue):" + folder.appendingPathComponent("store").path)
    }

    @Test(arguments: Engine.allCases) func fourProcessesCommitAThousandVersions(engine: Engine) async throws {
        try await EngineConcurrencyTests.withStore(engine) { url in
            try await openBackend(try StoreLocation(parsing: url), create: true).close()
            let processes = 4, commitsEach = 250
            let hashes = try await withThrowingTaskGroup(of: [String].self) { group in
                for writer in 0..<processes {
                    group.addTask { try await EngineConcurrencyTests.commit(url, count: commitsEach, replica: "w\(writer)") }
                }
                return try await group.reduce(into: [String]()) { $0 += $1 }
            }
            #expect(hashes.count == processes * commitsEach)
            #expect(Set(hashes).count == hashes.count)

            let store = Store(backend: try openBackend(try StoreLocation(parsing: url), create: false))
            let heads = try await store.heads()  // decodes the heads ref's head set
            #expect(!heads.isEmpty)
            let reachable = Set(try await store.log().map(\.id.hex))
            let lost = hashes.filter { !reachable.contains($0) }
            #expect(lost.isEmpty, "\(lost.count) acknowledged commits are not reachable from the heads")
            #expect(reachable.count >= processes * commitsEach)
            try await store.close()
        }
    }

    @Test(arguments: [Engine.sqlite, .lmdb]) func initOnAnExistingStoreSaysSo(engine: Engine) async throws {
        try await EngineConcurrencyTests.withStore(engine) { url in
            _ = try await arbor("init", url)
            _ = try await arbor("put", url, "Task", "t", "{\"title\": \"kept\"}")
            let error = try #require(await arborError("init", url))
            #expect(error.code == .alreadyExists)
            #expect(error.message.contains("already exists"))
            #expect(try await arbor("get", url, "Task", "t").contains("kept"))
            // Opening a store that is not there is a clear error too.
            let missing = try #require(await arborError("log", url + "-missing"))
            #expect(missing.code == .notFound)
        }
    }
}
