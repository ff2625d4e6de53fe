import Arbor
import ArborConformance

extension Rendering {
    /// The document `arbor conformance --json` prints (see its help).
    static func json(_ reports: [ConformanceReport], pairs: [ConformanceReport]) -> JSONValue {
        .object([
            ("succeeded", .bool((reports + pairs).allSatisfy(\.succeeded))),
            ("stores", .array(reports.map(json))),
            ("pairs", .array(pairs.map(json))),
        ])
    }

    /// The pair matrix for people: a grid of sources (rows) and targets (columns) whose cells say
    /// how many pair cases passed, then every failure.
    static func matrix(_ pairs: [ConformanceReport], stores all: [String]) -> String {
        let width = max(11, (all.map(\.count).max() ?? 0) + 2)
        func pad(_ text: String) -> String { text + String(repeating: " ", count: max(1, width - text.count)) }
        var lines = [pad("source \\ target") + all.map(pad).joined()].map { String($0.reversed().drop { $0 == " " }.reversed()) }
        for (row, source) in all.enumerated() {
            var cells = [String]()
            for (column, _) in all.enumerated() {
                guard row != column else { cells.append(pad("—")); continue }
                // Pairs run sources in order, each to every other store in order.
                let index = row * (all.count - 1) + (column < row ? column : column - 1)
                guard pairs.indices.contains(index) else { cells.append(pad("")); continue }
                let report = pairs[index]
                let (passed, failed, _) = report.counts
                cells.append(pad(failed == 0 ? "\(passed) pass" : "\(failed) FAIL"))
            }
            lines.append(String((pad(source) + cells.joined()).reversed().drop { $0 == " " }.reversed()))
        }
        for report in pairs {
            for failure in report.failures {
                lines.append("\(report.adapter)  \(failure.caseID): \(failure.message): expected \(failure.expected), got \(failure.actual)")
            }
        }
        let (passed, failed) = pairs.reduce((0, 0)) { ($0.0 + $1.counts.passed, $0.1 + $1.counts.failed) }
        lines.append("pair matrix: \(passed) passed, \(failed) failed on \(pairs.count) ordered pairs in \(ConformanceReport.milliseconds(pairs.reduce(.zero) { $0 + $1.duration }))")
        return lines.joined(separator: "\n")
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
