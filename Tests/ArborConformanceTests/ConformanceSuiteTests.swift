import Arbor
import ArborConformance
import Foundation
import Synchronization
import Testing

/// Serialized: the runs block threads of the shared pool for seconds (64 MB objects, blocking engines), and
/// one at a time leaves room for the timing-sensitive tests of other suites.
@Suite(.serialized) struct ConformanceSuiteTests {
    /// Runs the suite on `adapter`, printing its table, and returns the report.
    func runSuite(_ adapter: AdapterUnderTest) async throws -> ConformanceReport {
        let report = try await ConformanceSuite(adapter: adapter).run()
        print(report.table())
        return report
    }

    @Test(arguments: SuiteAdapter.projectAdapters + [.sqliteDeltas, .lmdbDeltas, .example])
    func adapterPassesTheSuite(adapter: SuiteAdapter) async throws {
        let report = try await adapter.withAdapter { try await runSuite($0) }
        #expect(report.succeeded, "\(report.failures.map(\.description).joined(separator: "\n"))")
        #expect(report.results.count == ConformanceCase.all.count)
        let notApplicable = report.results.filter { if case .notApplicable = $0.outcome { true } else { false } }.map(\.caseID)
        switch adapter {
        case .memory: #expect(notApplicable == ["contract.persistence", "contract.second-handle", "store.persistence"])
        case .example: #expect(notApplicable == ["contract.second-handle"])
        default: #expect(notApplicable.isEmpty)
        }
    }

    /// Exchange, sync and migration between every ordered pair of the project's adapters.
    @Test func theMatrixPassesOnEveryPairOfAdapters() async throws {
        let count = SuiteAdapter.projectAdapters.count
        let reports = try await SuiteAdapter.withAdapters(SuiteAdapter.projectAdapters) { try await ConformanceMatrix(adapters: $0).run() }
        #expect(reports.count == count * (count - 1))
        #expect(reports.allSatisfy { $0.results.count == ConformancePairCase.all.count })
        let failures = reports.filter { !$0.succeeded }.map { $0.adapter + ": " + $0.failures.map(\.description).joined(separator: "; ") }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    /// A broken adapter fails the matrix in both directions.
    @Test func theMatrixCatchesABrokenAdapter() async throws {
        let matrix = ConformanceMatrix(adapters: [SuiteAdapter.memory.adapter, SuiteAdapter.faulty(.corruptsBytes)])
        let reports = try await matrix.run()
        #expect(reports.map(\.adapter) == ["memory → faulty(corruptsBytes)", "faulty(corruptsBytes) → memory"])
        #expect(reports.allSatisfy { Set($0.failedCaseIDs) == Set(ConformancePairCase.all.map(\.id)) }, "\(reports.map(\.failedCaseIDs))")
        await #expect(throws: ConformanceMatrixFailure.self) { try await matrix.runAll(only: ["matrix.exchange"]) }
    }

    /// A cancelled run (Ctrl-C in `arbor conformance`, a time limit) stops after the case running
    /// has cleaned up its store, and throws `CancellationError`; so does the matrix.
    @Test func aCancelledRunStopsOnceTheCaseRunningHasCleanedUp() async throws {
        let counts = Mutex((made: 0, cleaned: 0))
        let adapter = AdapterUnderTest(name: "counted", capabilities: .largeObjects) {
            counts.withLock { $0.made += 1 }
            return FreshBackend(backend: MemoryBackend(), cleanup: { counts.withLock { $0.cleaned += 1 } })
        }
        let reported = Mutex(0)
        // The progress handler runs in the run's task (each run has one of its own): cancelling
        // that task there stops the run as Ctrl-C does, between the first case and the second.
        let cancelAfterTheFirst: @Sendable (Any) -> Void = { _ in
            reported.withLock { $0 += 1 }
            withUnsafeCurrentTask { $0?.cancel() }
        }
        await #expect(throws: CancellationError.self) {
            _ = try await Task { try await ConformanceSuite(adapter: adapter).run(only: ["store.commit-read", "store.diff-log"], progress: cancelAfterTheFirst) }.value
        }
        #expect(reported.withLock { $0 } == 1)
        #expect(counts.withLock { $0 } == (1, 1))
        reported.withLock { $0 = 0 }
        await #expect(throws: CancellationError.self) {
            _ = try await Task { try await ConformanceMatrix(adapters: [adapter, adapter]).run(only: ["matrix.exchange"], progress: cancelAfterTheFirst) }.value
        }
        #expect(reported.withLock { $0 } == 1)
        #expect(counts.withLock { $0 } == (3, 3))
    }

    @Test func aFaultlessWrapperPasses() async throws {
        try await ConformanceSuite(adapter: SuiteAdapter.faulty(nil)).runAll()
    }

    /// Each deliberately broken adapter fails, caught by the cases named here: exactly these where
    /// the fault shows deterministically, at least these where it depends on timing or is everywhere.
    @Test(arguments: [
        (FaultyBackend.Fault.nonAtomicSwap, ["contract.refs-racing", "contract.second-handle"], false),
        (.dropsEvery1000th, ["contract.put-get-batches", "contract.large-batches", "contract.put-order"], true),
        (.staleRefsAfterReopen, ["contract.persistence", "contract.second-handle", "store.persistence"], true),
        (.truncatesLargeObjects, ["contract.large-object"], true),
        (.corruptsBytes, ["contract.put-get-batches", "contract.object-sizes", "contract.large-object", "contract.corruption-detected",
                          "store.commit-read", "store.reference-hashes", "merge.children"], false),
        (.storesBackToFront, ["contract.put-order"], false),
        (.comparesHashPrefixes, ["contract.near-miss-hashes"], false),
        (.swallowsEnumerationErrors, ["contract.enumerate-objects"], false),
        (.deletesBackToFront, ["contract.delete-order"], false),
    ])
    func brokenAdaptersFail(fault: FaultyBackend.Fault, caughtBy expected: [String], exactly: Bool) async throws {
        let report = try await runSuite(SuiteAdapter.faulty(fault))
        let caught = Set(report.failedCaseIDs)
        #expect(exactly ? caught == Set(expected) : caught.isSuperset(of: expected), "\(fault) was caught by \(report.failedCaseIDs)")
        let failure = await #expect(throws: ConformanceSuiteFailure.self) {
            try await ConformanceSuite(adapter: SuiteAdapter.faulty(fault)).runAll(only: [expected[0]])
        }
        #expect(failure?.description.contains("\(expected[0]): ") == true, "the failure names the case: \(String(describing: failure))")
    }

    /// Conformance/README.md lists every case and shows the example adapter as it is in the tests.
    @Test func theGuideShowsTheExampleAndEveryCase() throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = tests.deletingLastPathComponent().deletingLastPathComponent()
        let guide = try String(contentsOf: root.appendingPathComponent("Conformance/README.md"), encoding: .utf8)
        let example = try String(contentsOf: tests.appendingPathComponent("ExampleFileBackend.swift"), encoding: .utf8)
        #expect(guide.contains(example.trimmingCharacters(in: .newlines)))
        for id in ConformanceCase.all.map(\.id) + ConformancePairCase.all.map(\.id) { #expect(guide.contains("| `\(id)` |"), "\(id)") }
    }
}
