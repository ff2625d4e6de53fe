import Arbor
import ArborCLI
import Foundation
import Testing

/// Commits, migrations and collections killed with SIGKILL at random moments, on every engine:
/// afterwards the store opens, verifies intact (no ref names a missing object), and every commit
/// that was acknowledged before the kill is still there.
///
/// A short mode runs in CI (`ARBOR_CRASH_KILLS` unset: 8 kills per operation and engine); set
/// `ARBOR_CRASH_KILLS=34` or more for the long mode (over 100 kills per engine), and
/// `ARBOR_CRASH_ENGINES` to pick engines.
@Suite struct CrashTests {
    enum Operation: String, CaseIterable, Sendable {
        case commit, migrate, gc
    }

    static let killsPerOperation = Int(ProcessInfo.processInfo.environment["ARBOR_CRASH_KILLS"] ?? "") ?? 8

    /// The engines to crash: all of them, or those `ARBOR_CRASH_ENGINES` lists (`sqlite,postgres`).
    static let engines: [ExchangeKillTests.Engine] = {
        let chosen = (ProcessInfo.processInfo.environment["ARBOR_CRASH_ENGINES"] ?? "").split(separator: ",").map(String.init)
        return ExchangeKillTests.Engine.enabled.filter { chosen.isEmpty || chosen.contains($0.rawValue) }
    }()

    static func open(_ url: String) throws -> Store { try ExchangeKillTests.open(url) }

    /// Checks that the store at `url` opens and verifies intact; returns its version ids.
    static func checkIntact(_ url: String, _ context: String) async throws -> Set<String> {
        let store = try open(url)
        let report = try await store.verify()
        #expect(report.isIntact, "\(context): \(report.damage.prefix(3))")
        let versions = Set(try await store.log().map(\.id.hex))
        try await store.close()
        return versions
    }

    // Each round verifies the whole store, which grows with every round: the long mode takes a while.
    @Test(.timeLimit(.minutes(60)), arguments: CrashTests.engines)
    func killedOperationsLeaveTheStoreIntact(engine: ExchangeKillTests.Engine) async throws {
        let (url, cleanup) = try ExchangeKillTests.makeStore(engine)
        defer { cleanup() }
        _ = try await arbor("init", url)
        var acknowledged = Set<String>()
        var generator = SystemRandomNumberGenerator()
        var kills = [Operation: Int]()
        var killedMidway = [Operation: Int]()
        for round in 0..<Self.killsPerOperation {
            for operation in Operation.allCases {
                let context = "\(engine) \(operation) round \(round)"
                switch operation {
                case .commit:
                    // A worker committing versions one by one; what it printed was acknowledged.
                    let (child, output) = try ChildProcess.startCapturing("arbor-worker", ["commit", url, "400", "r\(round)"])
                    // Every other round the delay counts from its first commit: on a loaded
                    // machine the worker's start-up alone can outlast the longest delay. A worker
                    // that hangs before any commit is killed all the same.
                    DispatchQueue.global().asyncAfter(deadline: .now() + 120) { child.terminate(signal: SIGKILL) }
                    let first = round.isMultiple(of: 2) ? await ChildProcess.firstOutput(of: output) : Data()
                    try await Task.sleep(for: .milliseconds(Int.random(in: 50...600, using: &generator)))
                    child.terminate(signal: SIGKILL)
                    child.waitUntilExit()
                    if child.terminationReason == .uncaughtSignal { killedMidway[operation, default: 0] += 1 }
                    acknowledged.formUnion(lines(String(decoding: first + output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)).filter { $0.count == 64 })
                case .migrate:
                    let (target, dropTarget) = try ExchangeKillTests.makeStore(engine)
                    defer { dropTarget() }
                    let child = try ChildProcess.start("arbor", ["migrate", url, target])
                    try await Task.sleep(for: .milliseconds(Int.random(in: 0...400, using: &generator)))
                    child.terminate(signal: SIGKILL)
                    child.waitUntilExit()
                    // Running the same command again completes the job, wherever the kill landed:
                    // before the target was made, while it was made, during the copy, or after
                    // the copy set its heads (then it verifies and copies nothing).
                    let output = try await arbor("migrate", url, target)
                    #expect(output.contains("verified"), "\(context): \(output)")
                    _ = try await Self.checkIntact(target, context + " (target)")
                case .gc:
                    let child = try ChildProcess.start("arbor", ["gc", url, "--grace", "0"])
                    try await Task.sleep(for: .milliseconds(Int.random(in: 0...300, using: &generator)))
                    child.terminate(signal: SIGKILL)
                    child.waitUntilExit()
                }
                kills[operation, default: 0] += 1
                let versions = try await Self.checkIntact(url, context)
                let lost = acknowledged.subtracting(versions)
                #expect(lost.isEmpty, "\(context): \(lost.count) acknowledged commits lost")
            }
        }
        // The worker was really killed while committing, and had committed something first.
        #expect(killedMidway[.commit, default: 0] > 0 && !acknowledged.isEmpty, "\(engine): no commit worker was killed mid-way")
        print("crash \(engine): \(kills.values.reduce(0, +)) kills (\(Operation.allCases.map { "\($0.rawValue) \(kills[$0] ?? 0)" }.joined(separator: ", "))), \(acknowledged.count) acknowledged commits, none lost, store intact after each")
    }
}
