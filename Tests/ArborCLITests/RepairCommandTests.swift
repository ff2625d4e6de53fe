import Arbor
import ArgumentParser
import Foundation
import Testing
@testable import ArborCLI

/// `arbor repair FROM TO` from the command line.
@Suite struct RepairCommandTests {
    /// A store whose head version's file is gone and whose root node is overwritten is mended
    /// from a replica (on another engine) and verifies intact; one that only it held stays
    /// damaged, is named, and the command fails.
    @Test func aDamagedStoreIsMendedFromAReplica() async throws {
        try await withJSONStore { url in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-repair-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let replica = "sqlite:" + folder.appendingPathComponent("replica.sqlite").path
            for index in 0..<3 { _ = try await arbor("put", url, "Task", "t\(index)", "{\"title\": \"task \(index)\"}") }
            _ = try await arbor("clone", url, replica)
            #expect(try await arbor("repair", replica, url).hasPrefix("intact: 0 objects"))

            let objects = String(url.dropFirst("json:".count)) + "/objects"
            func file(_ hash: String) -> String { "\(objects)/\(hash.prefix(2))/\(hash).json" }
            let head = try #require(try json(try await arbor("heads", url, "--json")).elements.first?["id"]?.stringValue)
            let store = Store(backend: try await openBackend(try StoreLocation(parsing: url), create: false))
            let root = try await store.version(try #require(Hash(hex: head))).root.hex
            try await store.close()
            try FileManager.default.removeItem(atPath: file(head))
            try Data("{\"damaged\": true}".utf8).write(to: URL(fileURLWithPath: file(root)))
            let report = try json(try await arbor("repair", replica, url, "--json"))
            // The root, hidden behind the missing version, is checked as the version is fetched.
            #expect(report["intact"] == .bool(true) && report["objectsWritten"] == .number("2") && report["passes"] == .number("2"), "\(report)")
            #expect(try await arbor("verify", url).hasPrefix("intact: 3 versions"))
            #expect(try await arbor("get", url, "Task", "t2").contains("task 2"))

            // A version the replica lacks, without its commit: named, and the command fails.
            _ = try await arbor("put", url, "Task", "t9", "{\"title\": \"only here\"}")
            let newest = try #require(try json(try await arbor("heads", url, "--json")).elements.first?["id"]?.stringValue)
            try FileManager.default.removeItem(atPath: file(newest))
            let command = try #require(try ArborCommand.parseAsRoot(["repair", replica, url]) as? RepairCommand)
            var output = ""
            await #expect(throws: ExitCode.self) { try await command.execute(&output) }
            #expect(output.hasPrefix("DAMAGED: 0 objects") && output.contains("missing \(newest)") && output.contains("the replica does not hold it"), "\(output)")
        }
    }

    @Test func deltasAreRefused() {
        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["repair", "json:/a", "lmdb:/b", "--deltas"]) }
        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["repair", "json:/a"]) }
    }
}
