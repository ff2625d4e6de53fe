import Arbor
import ArborConformance
import Foundation
import Testing

@Suite struct ConformanceSuiteTests {
    /// Runs the suite on `adapter`, printing its table, and returns the report.
    func report(_ adapter: AdapterUnderTest) async throws -> ConformanceReport {
        let report = try await ConformanceSuite(adapter: adapter).run()
        print(report.table())
        return report
    }

    @Test(arguments: SuiteAdapter.projectAdapters + [.example])
    func adapterPassesTheSuite(adapter: SuiteAdapter) async throws {
        let report = try await report(adapter.adapter)
        #expect(report.succeeded, "\(report.failures.map(\.description).joined(separator: "\n"))")
        #expect(report.results.count == ConformanceCase.all.count)
        let notApplicable = report.results.filter { if case .notApplicable = $0.outcome { true } else { false } }.map(\.caseID)
        switch adapter {
        case .memory: #expect(notApplicable == ["contract.persistence", "contract.second-handle", "store.persistence"])
        case .example: #expect(notApplicable == ["contract.second-handle"])
        default: #expect(notApplicable.isEmpty)
        }
    }

    @Test func aFaultlessWrapperPasses() async throws {
        try await ConformanceSuite(adapter: SuiteAdapter.faulty(nil)).runAll()
    }

    /// Each deliberately broken adapter fails, and the cases named here are among those that catch it.
    @Test(arguments: [
        (FaultyBackend.Fault.nonAtomicSwap, ["contract.refs-racing", "contract.second-handle"]),
        (.dropsEvery1000th, ["contract.put-get-batches"]),
        (.staleRefsAfterReopen, ["contract.persistence", "store.persistence"]),
        (.truncatesLargeObjects, ["contract.large-object"]),
        (.corruptsBytes, ["contract.put-get-batches", "contract.object-sizes", "contract.large-object", "store.commit-read"]),
    ])
    func brokenAdaptersFail(fault: FaultyBackend.Fault, caughtBy expected: [String]) async throws {
        let report = try await report(SuiteAdapter.faulty(fault))
        #expect(!report.succeeded)
        #expect(Set(report.failedCaseIDs).isSuperset(of: expected), "\(fault) was caught by \(report.failedCaseIDs)")
        await #expect(throws: ConformanceSuiteFailure.self) { try await ConformanceSuite(adapter: SuiteAdapter.faulty(fault)).runAll(only: expected) }
    }
}
