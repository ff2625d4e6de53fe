/// What one run of the suite on one adapter found: a result and a duration for every case.
public struct ConformanceReport: Sendable {
    /// The name of the adapter.
    public var adapter: String
    /// The capabilities the adapter declared.
    public var capabilities: AdapterCapabilities
    /// One result per case, in the order the cases ran.
    public var results: [ConformanceResult]

    public init(adapter: String, capabilities: AdapterCapabilities, results: [ConformanceResult]) {
        self.adapter = adapter
        self.capabilities = capabilities
        self.results = results
    }

    /// The failures, in the order the cases ran.
    public var failures: [ConformanceFailure] {
        results.compactMap { if case .failed(let failure) = $0.outcome { failure } else { nil } }
    }

    /// The ids of the cases that failed.
    public var failedCaseIDs: [String] { failures.map(\.caseID) }

    /// Whether no case failed (cases that are not applicable do not count).
    public var succeeded: Bool { failures.isEmpty }

    /// How many cases passed, failed and were not applicable.
    public var counts: (passed: Int, failed: Int, notApplicable: Int) {
        results.reduce(into: (0, 0, 0)) { counts, result in
            switch result.outcome {
            case .passed: counts.0 += 1
            case .failed: counts.1 += 1
            case .notApplicable: counts.2 += 1
            }
        }
    }

    /// The time all cases took together.
    public var duration: Duration { results.reduce(.zero) { $0 + $1.duration } }

    /// A table for people: case, result (`pass`, `FAIL`, `n/a`) and time, one line per case,
    /// with the reason of every failure and non-applicable case below its line, and a summary.
    ///
    /// - Complexity: O(*n*) in the number of cases.
    public func table() -> String {
        let width = max(4, results.map(\.caseID.count).max() ?? 0)
        func pad(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }
        var lines = ["\(pad("case", width))  result  time"]
        for result in results {
            lines.append("\(pad(result.caseID, width))  \(pad(result.outcome.label, 6))  \(Self.milliseconds(result.duration))")
            switch result.outcome {
            case .passed: break
            case .failed(let failure): lines.append("    \(failure.message): expected \(failure.expected), got \(failure.actual)")
            case .notApplicable(let reason): lines.append("    \(reason)")
            }
        }
        let (passed, failed, notApplicable) = counts
        lines.append("\(passed) passed, \(failed) failed, \(notApplicable) not applicable on \(adapter) in \(Self.milliseconds(duration))")
        return lines.joined(separator: "\n")
    }

    /// A duration as whole milliseconds, such as `"12 ms"`.
    public static func milliseconds(_ duration: Duration) -> String {
        "\(wholeMilliseconds(duration)) ms"
    }

    /// A duration in whole milliseconds.
    public static func wholeMilliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

/// The result of one case.
public struct ConformanceResult: Sendable {
    /// What became of a case.
    public enum Outcome: Sendable {
        case passed
        case failed(ConformanceFailure)
        /// The adapter lacks a capability the case needs; the reason names it.
        case notApplicable(reason: String)

        /// `pass`, `FAIL` or `n/a`.
        public var label: String {
            switch self {
            case .passed: "pass"
            case .failed: "FAIL"
            case .notApplicable: "n/a"
            }
        }
    }

    /// The id of the case.
    public var caseID: String
    public var outcome: Outcome
    /// How long the case took, making and cleaning its store included.
    public var duration: Duration

    public init(caseID: String, outcome: Outcome, duration: Duration) {
        self.caseID = caseID
        self.outcome = outcome
        self.duration = duration
    }

    /// The result of running `body` as the case `caseID`: passed, or failed with what it threw.
    static func measuring(_ caseID: String, _ body: () async throws -> Void) async -> ConformanceResult {
        let clock = ContinuousClock()
        let start = clock.now
        var outcome = Outcome.passed
        do { try await body() } catch {
            var failure = error as? ConformanceFailure
                ?? ConformanceFailure(message: "the case", expected: "no error", actual: ConformanceFailure.describe(error))
            failure.caseID = caseID
            outcome = .failed(failure)
        }
        return ConformanceResult(caseID: caseID, outcome: outcome, duration: clock.now - start)
    }
}
