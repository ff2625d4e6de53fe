import Arbor

/// Exchange, sync and migration between every ordered pair of several adapters: for each pair
/// (source, target) of different adapters, every ``ConformancePairCase`` on a fresh store of each.
///
/// ```swift
/// let reports = try await ConformanceMatrix(adapters: [sqlite, postgres, mine]).run()
/// for report in reports { print(report.table()) }    // one report per ordered pair, "sqlite → mine"
/// ```
public struct ConformanceMatrix: Sendable {
    /// The adapters, paired in this order.
    public let adapters: [AdapterUnderTest]

    public init(adapters: [AdapterUnderTest]) {
        self.adapters = adapters
    }

    /// The ordered pairs of different adapters (by position), sources in order, then targets.
    public var pairs: [(source: AdapterUnderTest, target: AdapterUnderTest)] {
        adapters.indices.flatMap { source in
            adapters.indices.filter { $0 != source }.map { (adapters[source], adapters[$0]) }
        }
    }

    /// Runs the pair cases `only` selects (ids such as `matrix.sync`; all by default) on every
    /// ordered pair, one after another, and returns one report per pair, named
    /// `"source → target"`; `progress` hears of each report as it is done. A cancelled task stops
    /// the run: the case running ends and cleans up its stores, then `CancellationError` is thrown.
    ///
    /// - Complexity: *n*(*n* − 1) pairs for *n* adapters, each holding a fresh store of both.
    public func run(only: [String] = [], progress: (@Sendable (ConformanceReport) -> Void)? = nil) async throws -> [ConformanceReport] {
        let cases = try Self.cases(only: only)
        var reports = [ConformanceReport]()
        for (source, target) in pairs {
            var results = [ConformanceResult]()
            for testCase in cases {
                // Cancelled (Ctrl-C, a time limit): the case running has ended and cleaned up.
                try Task.checkCancellation()
                results.append(await SuiteExecutor.run {
                    await ConformanceResult.measuring(testCase.id) {
                        try await ConformanceContext.withFresh(source) { sourceContext in
                            try await ConformanceContext.withFresh(target) { targetContext in
                                try await testCase.body(sourceContext, targetContext)
                            }
                        }
                    }
                })
            }
            let report = ConformanceReport(
                adapter: "\(source.name) → \(target.name)", capabilities: source.capabilities.intersection(target.capabilities), results: results)
            progress?(report)
            reports.append(report)
        }
        return reports
    }

    /// The pair cases `only` selects, in order: ids such as `matrix.sync`, or `matrix` for all;
    /// an empty list selects all. Throws ``Arbor/ArborError/Code/invalidInput`` for an entry
    /// that names nothing.
    public static func cases(only: [String] = []) throws -> [ConformancePairCase] {
        for name in only where name != "matrix" && !ConformancePairCase.all.contains(where: { $0.id == name }) {
            throw ArborError(.invalidInput, "no matrix case is named \(String(reflecting: name)); cases: \(ConformancePairCase.all.map(\.id).joined(separator: ", "))")
        }
        return ConformancePairCase.all.filter { testCase in only.isEmpty || only.contains { $0 == testCase.id || $0 == "matrix" } }
    }

    /// Runs every pair case on every ordered pair and throws a ``ConformanceMatrixFailure``
    /// listing every failed case of every pair.
    public func runAll(only: [String] = []) async throws {
        let reports = try await run(only: only)
        if !reports.allSatisfy(\.succeeded) { throw ConformanceMatrixFailure(reports: reports) }
    }
}

/// One case of the matrix: a check on a fresh store of each of two adapters.
public struct ConformancePairCase: Sendable, Identifiable {
    /// A stable id, such as `"matrix.sync"`.
    public let id: String
    /// One sentence on what the case checks.
    public let summary: String
    let body: @Sendable (_ source: ConformanceContext, _ target: ConformanceContext) async throws -> Void

    /// Every pair case, in the order the matrix runs them.
    public static let all: [ConformancePairCase] = [
        ConformancePairCase(id: "matrix.exchange", summary: "an exchange from the source carries every version to the target, with the same heads hash and records; a second one copies one new version, a third nothing") { source, target in
            try await Transfers.checkExchange(source, from: source.store(), to: target.store())
        },
        ConformancePairCase(id: "matrix.sync", summary: "after edits on both, a sync leaves one head, the same hash on both, with both sides' edits") { source, target in
            try await Transfers.checkSync(source, source.store(), target.store(replica: "target"))
        },
        ConformancePairCase(id: "matrix.migrate", summary: "a verified migration from the source to the empty target gives the same heads hash and records") { source, target in
            try await Transfers.checkMigration(source, from: source.store(), to: target.store())
        },
        ConformancePairCase(id: "matrix.repair", summary: "the target, with a fifth of its objects deleted and others corrupted, is repaired from the source to the same heads and records; an object the source lacks is reported") { source, target in
            try await Transfers.checkRepair(target, damaged: target.store(), replica: source.store(replica: "source"), damagedIsAdapter: true)
        },
    ]
}

/// Thrown by ``ConformanceMatrix/runAll(only:)`` when a pair case failed.
public struct ConformanceMatrixFailure: Error, Sendable, CustomStringConvertible {
    /// One report per ordered pair.
    public var reports: [ConformanceReport]

    public init(reports: [ConformanceReport]) { self.reports = reports }

    public var description: String {
        let failed = reports.filter { !$0.succeeded }
        return (["\(failed.count) of \(reports.count) adapter pairs failed:"]
            + failed.flatMap { report in report.failures.map { "  - \(report.adapter): \($0)" } }).joined(separator: "\n")
    }
}
