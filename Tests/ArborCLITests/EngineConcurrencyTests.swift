import Arbor
import ArborCLI
@testable import ArborLMDB
@testable import ArborSQLite
import Foundation
import Testing

#if os(Linux)
private let isLinux = true
#else
private let isLinux = false
#endif

/// Several processes committing to one store on each file-based engine at once: every
/// acknowledged commit stays reachable, and the heads ref stays readable.
@Suite struct EngineConcurrencyTests {
    enum Engine: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case sqlite, lmdb, json
        var testDescription: String { rawValue }
    }

    /// Runs `arbor-worker commit URL COUNT REPLICA`; returns the hashes it printed.
    static func commit(_ url: String, count: Int, replica: String) async throws -> [String] {
        try await ChildProcess.run("arbor-worker", ["commit", url, String(count), replica], redacting: url)
            .split(separator: "\n").map(String.init)
    }

    static func withStore(_ engine: Engine, _ body: (String) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-engines-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await body("\(engine.rawValue):" + folder.appendingPathComponent("store").path)
    }

    /// A store on a read-only file system is opened without locks (LMDB) or as immutable
    /// (SQLite), which is safe only while nobody writes it, as another process can through
    /// another mount of it (a container's read-only volume of a live store). Such an open first
    /// looks for a process that has the store open, as this probe does, and refuses then. (A
    /// read-only mount cannot be made here without privileges: the probe is tested alone.)
    @Test(arguments: [Engine.sqlite, .lmdb])
    func aProcessThatHasTheStoreOpenIsFound(engine: Engine) async throws {
        try await EngineConcurrencyTests.withStore(engine) { url in
            let store = Store(backend: try await openBackend(try StoreLocation(parsing: url), create: true))
            try await store.close()
            let path = String(url.drop { $0 != ":" }.dropFirst())
            let probe = { engine == .sqlite ? SQLiteFiles.processWithTheStoreOpen(path) : LMDBEnvironment.processWithTheStoreOpen(path) }
            #expect(probe() == nil, "nobody has the store open")
            let (child, output) = try ChildProcess.startCapturing("arbor-worker", ["commit", url, "1000000", "holder"])
            defer { child.terminate(); child.waitUntilExit() }
            // Its first commit's hash: it has the store open.
            _ = output.fileHandleForReading.availableData
            #expect(probe() == child.processIdentifier)
        }
        // Linux reports 0 for a holder in another PID namespace: named as such, not "process 0".
        #expect(FileLockProbe.describe(0).contains("outside this PID namespace") && FileLockProbe.describe(42) == "process 42")
    }

    /// Processes killed while reading an LMDB store leave their reader slots taken; once the
    /// table is full, a process that opened the store before goes on reading (it frees the dead
    /// processes' slots and tries again) instead of failing every read until it restarts.
    @Test func readsGoOnWhenKilledReadersFilledLMDBsReaderTable() async throws {
        try await EngineConcurrencyTests.withStore(.lmdb) { url in
            let store = Store(backend: try await openBackend(try StoreLocation(parsing: url), create: true), configuration: .init(nodeCacheCapacity: 0))
            var changes = ChangeSet()
            try changes.save(Record(type: "T", id: "a", properties: ["n": .int(1)]))
            try await store.commit(changes)
            let (child, output) = try ChildProcess.startCapturing("arbor-worker", ["hold-lmdb-readers", String(url.dropFirst("lmdb:".count))])
            child.waitUntilExit()
            #expect(child.terminationReason == .uncaughtSignal && child.terminationStatus == SIGKILL)
            let held = Int(String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            // The table the store was created with, which the worker adopted: 500 slots.
            #expect(held >= 450, "the worker held \(held) reader slots")
            #expect(try await store.snapshot().record(RecordKey(type: "T", id: "a"))?.properties["n"] == .int(1))
            try await store.close()
        }
    }

    /// Processes killed while reading pin the pages freed after their snapshot, so a process
    /// that opened the store before them grew its map at every write that freed pages. Now a
    /// full map frees the dead processes' slots first: through a map that cannot grow, 8 MB of
    /// writes and deletes go through 4 MiB, where a round before the twentieth used to fail.
    @Test func writesReuseThePagesKilledReadersPinned() async throws {
        try await EngineConcurrencyTests.withStore(.lmdb) { url in
            let path = String(url.dropFirst("lmdb:".count))
            let size = 4 << 20
            let backend = try LMDBBackend.create(.init(path: path, synchronous: false, initialMapSize: size, maximumMapSize: size))
            let (child, _) = try ChildProcess.startCapturing("arbor-worker", ["hold-lmdb-readers", path])
            child.waitUntilExit()
            #expect(child.terminationReason == .uncaughtSignal && child.terminationStatus == SIGKILL)
            for round in 0..<40 {
                let objects = (0..<200).map { index -> (hash: Hash, bytes: [UInt8]) in
                    let bytes = [UInt8](repeating: UInt8(round), count: 1_000) + withUnsafeBytes(of: index) { Array($0) }
                    return (Hash.of(bytes), bytes)
                }
                // No reads here: a read finding the reader table full frees the slots itself.
                try await backend.put(objects)
                try await backend.delete(objects.map(\.hash))
            }
            #expect(backend.mapSize == size)
            let last = [UInt8](repeating: 39, count: 1_000) + withUnsafeBytes(of: 0) { Array($0) }
            try await backend.put([(Hash.of(last), last)])
            #expect(try await backend.get([Hash.of(last)]) == [Hash.of(last): last])
            try await backend.close()
        }
    }

    /// LMDB 0.9 unmaps the old map before mapping the grown one and, if that fails, keeps
    /// pointers into the memory it gave back: the next call crashed the process. In a process
    /// whose address space is limited, a put that needs more map than it can have now fails
    /// with an error, and the store reads on.
    @Test(.enabled(if: isLinux)) func aMapThatCannotGrowFailsThePutNotTheProcess() async throws {
        try await EngineConcurrencyTests.withStore(.lmdb) { url in
            let output = try await ChildProcess.run("arbor-worker", ["grow-lmdb-under-limit", String(url.dropFirst("lmdb:".count))])
            #expect(output.hasPrefix("ok: the LMDB map of"), "\(output)")
            #expect(output.contains("cannot grow to") || output.contains("could not be remapped"), "\(output)")
        }
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

            let store = Store(backend: try await openBackend(try StoreLocation(parsing: url), create: false))
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
