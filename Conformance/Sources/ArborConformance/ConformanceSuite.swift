import Arbor

/// The conformance suite: every case of ``ConformanceCase/all`` run on one adapter.
///
/// Cases run one after another, each on a fresh store and on a few threads of the suite's own
/// (never the shared concurrency pool, which an adapter's blocking calls would starve).
///
/// It needs no test framework: a failure is a thrown ``ConformanceFailure`` (or, from
/// ``runAll(only:)``, a ``ConformanceSuiteFailure`` listing every failed case), so it runs from
/// Swift Testing, XCTest or a command line alike.
///
/// ```swift
/// @Test func conforms() async throws {
///     try await ConformanceSuite(adapter: myAdapter).runAll()
/// }
/// ```
public struct ConformanceSuite: Sendable {
    /// The adapter the suite runs on.
    public let adapter: AdapterUnderTest

    public init(adapter: AdapterUnderTest) {
        self.adapter = adapter
    }

    /// The cases `only` selects, in order: each entry is a case id (`contract.refs-racing`) or a
    /// group (`contract`); an empty list selects every case. Throws
    /// ``Arbor/ArborError/Code/invalidInput`` for an entry that names nothing.
    public static func cases(only: [String] = []) throws -> [ConformanceCase] {
        guard !only.isEmpty else { return ConformanceCase.all }
        for name in only where !ConformanceCase.all.contains(where: { $0.id == name || $0.group?.rawValue == name }) {
            let groups = ConformanceCase.Group.allCases.map(\.rawValue).joined(separator: ", ")
            throw ArborError(.invalidInput, "no conformance case or group is named \(String(reflecting: name)); groups: \(groups)")
        }
        return ConformanceCase.all.filter { testCase in only.contains { $0 == testCase.id || $0 == testCase.group?.rawValue } }
    }

    /// Runs the cases `only` selects (all by default), one after another, each on a fresh store,
    /// and reports every result; `progress` hears of each result as it comes. A failing case does
    /// not stop the run. A cancelled task stops it: the case running ends and cleans up its store,
    /// then `CancellationError` is thrown.
    ///
    /// - Complexity: a few seconds for the whole suite on a local engine.
    public func run(
        only: [String] = [], progress: (@Sendable (ConformanceResult) -> Void)? = nil
    ) async throws -> ConformanceReport {
        let cases = try Self.cases(only: only)
        var results = [ConformanceResult]()
        for testCase in cases {
            // Cancelled (Ctrl-C, a time limit): the case running has ended and cleaned up.
            try Task.checkCancellation()
            let result = await run(testCase)
            progress?(result)
            results.append(result)
        }
        return ConformanceReport(adapter: adapter.name, capabilities: adapter.capabilities, results: results)
    }

    /// Runs the cases `only` selects (all by default) and throws a ``ConformanceSuiteFailure``
    /// listing every case that failed.
    public func runAll(only: [String] = []) async throws {
        let report = try await run(only: only)
        if !report.succeeded { throw ConformanceSuiteFailure(report: report) }
    }

    /// Runs one case on a fresh store and cleans up after it, whatever happens.
    public func run(_ testCase: ConformanceCase) async -> ConformanceResult {
        let missing = testCase.requires.subtracting(adapter.capabilities)
        guard missing.isEmpty else {
            return ConformanceResult(caseID: testCase.id, outcome: .notApplicable(reason: "the adapter lacks \(missing)"), duration: .zero)
        }
        return await SuiteExecutor.run {
            await ConformanceResult.measuring(testCase.id) {
                try await ConformanceContext.withFresh(adapter) { try await testCase.body($0) }
            }
        }
    }
}

extension ConformanceFailure {
    /// An error with its type and, for an ``ArborError``, its code.
    static func describe(_ error: any Error) -> String {
        if let error = error as? ArborError { return "ArborError(\(error.code)): \(error)" }
        return "\(type(of: error)): \(error)"
    }
}
