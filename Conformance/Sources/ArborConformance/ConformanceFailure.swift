import Arbor

/// Why one case failed: which case, what it checked, what was expected and what happened.
public struct ConformanceFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The id of the case, such as `"contract.refs-racing"`.
    public var caseID: String
    /// What was being checked, such as `"get returns every object of a batch of 10000"`.
    public var message: String
    /// What the contract asks for.
    public var expected: String
    /// What the adapter did.
    public var actual: String

    public init(caseID: String = "", message: String, expected: String, actual: String) {
        self.caseID = caseID
        self.message = message
        self.expected = expected
        self.actual = actual
    }

    public var description: String {
        "\(caseID.isEmpty ? "" : caseID + ": ")\(message): expected \(expected), got \(actual)"
    }
}

/// Thrown by ``ConformanceSuite/runAll(only:)`` when a case failed: the whole report, and a
/// description that lists every failed case with what was expected and what happened.
public struct ConformanceSuiteFailure: Error, Sendable, CustomStringConvertible {
    /// The report of the run.
    public var report: ConformanceReport

    public init(report: ConformanceReport) { self.report = report }

    /// The failures, in the order the cases ran.
    public var failures: [ConformanceFailure] { report.failures }

    public var description: String {
        let count = failures.count
        let lines = failures.map { "  - \($0)" }
        return (["adapter \(report.adapter) failed \(count) conformance case\(count == 1 ? "" : "s"):"] + lines).joined(separator: "\n")
    }
}
