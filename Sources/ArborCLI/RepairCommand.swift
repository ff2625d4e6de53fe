import Arbor
import ArgumentParser

/// `arbor repair FROM TO [--json]`: mends TO's damaged objects from FROM; exit 1 if damage is left.
public struct RepairCommand: StorePairCommand {
    public static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Mend a store's missing and corrupt objects from a replica that holds them intact.",
        discussion: """
            Verifies the second store (as arbor verify does), fetches each missing or corrupt object from the \
            first, a replica or a backup on any engine, checks it against its hash and writes it over the damaged \
            one, with everything it names that the store lacks or holds damaged (children first), reading what the \
            damage hid; then verifies again. Writes only objects whose bytes match their hashes and moves no ref, \
            so no version changes. Prints what was written and each damaged object left, with why (the replica \
            lacks it or holds it damaged too; it names such an object; it is malformed on every replica); exits \
            with status 1 when damage is left. An interrupted repair is finished by running it again. With --json: \
            {"intact", "objectsWritten", "bytesWritten", "passes", "missing", "corrupt", "nonCanonical", \
            "seconds", "unrepaired": [{"kind", "hash", "detail"}]}.
            """)

    @OptionGroup public var stores: StorePairOptions
    @OptionGroup public var format: OutputOptions

    public init() {}

    public func validate() throws {
        if stores.deltas { throw ValidationError("--deltas does not apply to repair: it writes objects whole, over damaged ones") }
    }

    public func run() async throws {
        Interruption.explainOnInterrupt(.repair)
        try await executeOnStandardOutput()
    }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let bar = ProgressBar(label: "repair")
        defer { bar.finish() }
        let report = try await stores.withStores { from, to in try await to.repair(from: from, progress: bar.handler) }
        bar.finish()
        try format.printCheck(json: Rendering.json(report), lines: Rendering.lines(report), intact: report.isIntact, to: &output)
    }
}

extension Rendering {
    /// What `arbor repair` prints.
    static func lines(_ report: RepairReport) -> [String] {
        let left = report.verification
        var lines = [
            (report.isIntact ? "intact: " : "DAMAGED: ")
                + "\(count(report.objectsWritten, "object", "objects")) (\(ProgressBar.bytes(report.bytesWritten))) written from the replica "
                + "in \(count(report.passes, "verification", "verifications")); left: \(left.missingCount) missing, \(left.corruptCount) corrupt, "
                + "\(left.nonCanonicalCount) non-canonical; \(seconds(report.seconds))",
        ]
        lines += report.unrepaired.map { "  \($0.kind.rawValue) \($0.hash): \(printable($0.detail))" }
        if report.unrepaired.count < left.missingCount + left.corruptCount + left.nonCanonicalCount { lines.append("  … and more") }
        return lines
    }

    static func json(_ report: RepairReport) -> JSONValue {
        let left = report.verification
        return .object([
            ("intact", .bool(report.isIntact)), ("objectsWritten", .number(String(report.objectsWritten))),
            ("bytesWritten", .number(String(report.bytesWritten))), ("passes", .number(String(report.passes))),
            ("missing", .number(String(left.missingCount))), ("corrupt", .number(String(left.corruptCount))),
            ("nonCanonical", .number(String(left.nonCanonicalCount))), ("seconds", number(report.seconds)),
            ("unrepaired", .array(report.unrepaired.map {
                .object([("kind", .string($0.kind.rawValue)), ("hash", .string($0.hash.hex)), ("detail", .string($0.detail))])
            })),
        ])
    }
}
