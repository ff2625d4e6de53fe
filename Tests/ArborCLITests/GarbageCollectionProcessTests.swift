import Arbor
import ArborCLI
import Foundation
import Testing

/// `arbor gc` while other processes commit to the same store: no acknowledged commit is lost and
/// the store verifies intact, on every engine several processes can share.
@Suite struct GarbageCollectionProcessTests {
    /// A grace period whose milliseconds would not fit an Int64 is refused when parsed, not a crash.
    @Test func aGracePeriodTooLongIsRefused() throws {
        for grace in ["1e16", "inf", "nan", "-1"] {
            #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["gc", "memory:", "--grace", grace]) }
        }
        #expect(try ArborCommand.parseAsRoot(["gc", "memory:", "--grace", "1000000000"]) is GarbageCollectCommand)
    }

    /// Ctrl-C stops a collection where it is safe to: during its grace period, before it has
    /// removed anything, at once, with a message and status 130, the store as it was.
    @Test func ctrlCStopsACollectionSafely() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-gc-int-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let url = "sqlite:\(folder).sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: "\(folder).sqlite\(suffix)") } }
        _ = try await arbor("init", url)
        for index in 0..<3 { _ = try await arbor("put", url, "Task", "t\(index)", "{\"n\": \(index)}") }
        func objects() async throws -> [JSONValue?] {
            let report = try json(try await arbor("verify", url, "--json"))
            return [report["reachableObjects"], report["unreachableObjects"]]
        }
        let before = try await objects()
        #expect(before[1] != nil && before[1] != .number("0"), "the store holds garbage to collect")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try ChildProcess.executable("arbor"))
        process.arguments = ["gc", url, "--grace", "60"]
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        // Marking three versions takes milliseconds, then it waits its grace period.
        let interrupted = try await ChildProcess.interruptOnceHandled(process)
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130, "\(said)")
        #expect(interrupted.duration(to: .now) < .seconds(30), "it waited out its grace period")
        #expect(said.contains("stopping") && said.contains("stopped safely"), "\(said)")
        // Nothing was removed: the unreachable objects are all still there.
        #expect(try await objects() == before)
    }

    // A guard against a hang, not a clock: 300 commits by CLI processes, three collections and
    // two verifications took over 5 minutes for PostgreSQL in a loaded full run (12 s alone).
    @Test(.timeLimit(.minutes(15)), arguments: ExchangeKillTests.Engine.enabled)
    func gcWhileTwoProcessesCommit(engine: ExchangeKillTests.Engine) async throws {
        let (url, cleanup) = try ExchangeKillTests.makeStore(engine)
        defer { cleanup() }
        _ = try await arbor("init", url)
        // Garbage to collect from the start: every commit leaves its old head set behind.
        for index in 0..<20 { _ = try await arbor("put", url, "Task", "seed\(index)", "{\"n\": \(index)}") }
        let (hashes, collections) = try await withThrowingTaskGroup(of: (commits: [String], gc: [JSONValue]).self) { group in
            for writer in 0..<2 {
                group.addTask { (try await EngineConcurrencyTests.commit(url, count: 150, replica: "w\(writer)"), []) }
            }
            group.addTask {
                // Collections back to back while the writers run. The grace period must outlast a
                // commit (from its first write to its heads moving); on this loaded test machine
                // commits take up to some tenths of a second, and a stall of the whole machine
                // seconds, so five seconds (the default is 60).
                var runs = [JSONValue]()
                for _ in 0..<3 {
                    runs.append(try json(try await ChildProcess.run("arbor", ["gc", url, "--grace", "5", "--json"], redacting: url)))
                }
                return ([], runs)
            }
            return try await group.reduce(into: ([String](), [JSONValue]())) { $0.0 += $1.commits; $0.1 += $1.gc }
        }
        #expect(hashes.count == 300)
        func counts(_ member: String) -> [Int] {
            collections.compactMap { $0[member].flatMap { if case .number(let text) = $0 { Int(text) } else { nil } } }
        }
        let removed = counts("removedObjects")
        #expect(removed.count == 3 && removed.reduce(0, +) > 0)
        print("gc \(engine) with 2 committing processes: 3 collections removed \(removed) objects; kept late \(counts("keptLate")), written back \(counts("rescued"))")
        let store = Store(backend: try await openBackend(try StoreLocation(parsing: url), create: false))
        let report = try await store.verify()
        #expect(report.isIntact, "\(report.damage.prefix(5))")
        let reachable = Set(try await store.log().map(\.id.hex))
        let lost = hashes.filter { !reachable.contains($0) }
        #expect(lost.isEmpty, "\(lost.count) acknowledged commits are not reachable")
        try await store.close()
        // And a last collection leaves nothing unreachable.
        _ = try await arbor("gc", url, "--grace", "0")
        let final = Store(backend: try await openBackend(try StoreLocation(parsing: url), create: false))
        #expect(try await final.verify().unreachableObjects == 0)
        try await final.close()
    }
}
