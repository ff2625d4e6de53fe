import Arbor
@testable import ArborCLI
import Foundation
import Testing

/// A store that another process brings to the delta format (`arbor put --deltas`) while this
/// process has it open without knowing: this process still reads every version, and lists and
/// collects it without losing any.
@Suite struct DeltaProcessTests {
    @Test(arguments: [ExchangeKillTests.Engine.sqlite, .lmdb])
    func aStoreUpgradedByAnotherProcessStillReadsHere(engine: ExchangeKillTests.Engine) async throws {
        let (url, cleanup) = try ExchangeKillTests.makeStore(engine)
        defer { cleanup() }
        let location = try StoreLocation(parsing: url)
        // Opened here at version 1, and kept open while the child upgrades the store.
        let early = Store(backend: try await openBackend(location, create: true), configuration: .init(replica: "here", nodeCacheCapacity: 0))
        var changes = ChangeSet()
        for index in 0..<40 {
            try changes.save(Record(type: "Task", id: String(format: "t%03d", index), properties: ["title": .string(String(repeating: "x", count: 60) + "\(index)")]))
        }
        try await early.commit(changes)
        for index in 0..<6 {
            _ = try await ChildProcess.run("arbor", ["put", url, "--deltas", "Task", String(format: "t%03d", index * 7), "{\"title\": \"edited \(index)\"}"], redacting: url)
        }

        // Read here first: a second backend of this process would share LMDB's environment and
        // open its deltas database for this one.
        let log = try await early.log()
        #expect(log.count == 7)
        var readHere = [Hash: [Record]]()
        for version in log { readHere[version.id] = try await early.records(ofType: "Task", at: version.id) }
        var listed = [Hash: [UInt8]]()
        try await early.backend.enumerateObjects(batchSize: 64) { batch in for (hash, bytes) in batch { listed[hash] = bytes } }
        #expect(listed.allSatisfy { Hash.of($0.value) == $0.key }, "every object listed here is whole")
        // verify here reads every object of every version through this process.
        let report = try await early.verify()
        #expect(report.damage.isEmpty && report.missingCount == 0)

        // A backend opened now knows the format: the child kept replaced nodes as deltas.
        let late = try await openBackend(location, create: false)
        let restated = try ExchangeKillTests.deltaCount(of: late)
        #expect(restated > 0, "the child restated the nodes its commits replaced")
        let reference = Store(backend: late, configuration: .init(nodeCacheCapacity: 0))
        for version in log {
            let there = try await reference.records(ofType: "Task", at: version.id)
            #expect(readHere[version.id]?.count == 40 && readHere[version.id] == there, "version \(version.id) reads the same here")
        }
        #expect(listed.count == (try await hashes(of: late)).count)
        try await reference.close()
        try await early.close()
    }

    private func hashes(of backend: any Backend) async throws -> [Hash] {
        var result = [Hash]()
        try await backend.enumerateHashes(batchSize: 256) { result += $0 }
        return result
    }

    @Test func deltasAreRefusedWhereTheEngineCannotKeepThem() async throws {
        await #expect { try await arbor("put", "memory:", "--deltas", "Task", "t", "{}") } throws: { error in
            (error as? ArborError)?.code == .invalidInput && "\(error)".contains("--deltas")
        }
    }
}
