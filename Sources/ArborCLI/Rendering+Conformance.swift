import Arbor
import ArborConformance

extension Rendering {
    /// The document `arbor conformance --json` prints (see its help).
    static func json(_ reports: [ConformanceReport]) -> JSONValue {
        .object([
            ("succeeded", .bool(reports.allSatisfy(\.succeeded))),
            ("stores", .array(reports.map(json))),
        ])
    }

    static func json(_ report: ConformanceReport) -> JSONValue {
        let (passed, failed, notApplicable) = report.counts
        return .object([
            ("url", .string(report.adapter)),
            ("capabilities", .array(report.capabilities.names.map { .string($0) })),
            ("passed", number(passed)), ("failed", number(failed)), ("notApplicable", number(notApplicable)),
            ("milliseconds", number(ConformanceReport.wholeMilliseconds(report.duration))),
            ("cases", .array(report.results.map(json))),
        ])
    }

    static func json(_ result: ConformanceResult) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [("id", .string(result.caseID))]
        switch result.outcome {
        case .passed:
            members.append(("result", .string("passed")))
        case .failed(let failure):
            members += [("result", .string("failed")), ("message", .string(failure.message)),
                        ("expected", .string(failure.expected)), ("actual", .string(failure.actual))]
        case .notApplicable(let reason):
            members += [("result", .string("notApplicable")), ("reason", .string(reason))]
        }
        members.insert(("milliseconds", number(ConformanceReport.wholeMilliseconds(result.duration))), at: 2)
        return .object(members)
    }

    private static func number<N: BinaryInteger>(_ value: N) -> JSONValue { .number(String(value)) }
}
