import Arbor

/// One check of the conformance suite: a stable id, what it checks, the capabilities it needs and
/// a body that throws a ``ConformanceFailure`` when the adapter does not keep the contract.
public struct ConformanceCase: Sendable, Identifiable {
    /// The groups cases belong to; the group is the part of the id before the dot.
    public enum Group: String, Sendable, CaseIterable {
        /// The backend contract itself: objects and refs, on the adapter alone.
        case contract
        /// The core's store API (commit, read, diff, log) on the adapter.
        case store
        /// The merge scenarios on the adapter.
        case merge
        /// Exchange, sync and migration between the adapter and the in-memory reference adapter.
        case exchange
    }

    /// A stable id, `group.name`, such as `"contract.put-get-batches"`.
    public let id: String
    /// One sentence on what the case checks.
    public let summary: String
    /// The capabilities the case needs; without them it is not applicable.
    public let requires: AdapterCapabilities
    let body: @Sendable (ConformanceContext) async throws -> Void

    init(_ group: Group, _ name: String, requires: AdapterCapabilities = [], _ summary: String,
         _ body: @escaping @Sendable (ConformanceContext) async throws -> Void) {
        self.id = group.rawValue + "." + name
        self.summary = summary
        self.requires = requires
        self.body = body
    }

    /// The group of the case.
    public var group: Group? { Group(rawValue: String(id.prefix { $0 != "." })) }

    /// Every case, in the order the suite runs them.
    public static let all: [ConformanceCase] = objectCases + restatementCases + refCases + durabilityCases + storeCases + mergeCases + exchangeCases
}
