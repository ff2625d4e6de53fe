import Arbor
import ArgumentParser

/// `arbor verify URL [--json]`: checks everything reachable; exit 1 on damage.
public struct VerifyCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check that every object reachable from the refs is present, intact and well formed.",
        discussion: """
            Reads every object the refs reach once: each must be present and match its hash; the head set, \
            the versions and the index nodes must parse, sit at the right level with the right record \
            counts, and keep their keys in order; each index must have the one shape format 1 gives its records \
            (node boundaries, root, inline or blob records). Counts the objects nothing reaches (what arbor gc would \
            remove). Prints the counts and each damaged object (missing, corrupt or nonCanonical, and what names \
            it); exits with status 1 when anything reachable is damaged. With --json: {"intact", "versions", \
            "reachableObjects", "reachableBytes", "unreachableObjects", "missing", "corrupt", "nonCanonical", \
            "seconds", "damage": [{"kind", "hash", "detail"}]}.
            """)

    @OptionGroup public var store: StoreOptions
    @OptionGroup public var format: OutputOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let bar = ProgressBar(label: "verify")
        defer { bar.finish() }
        let report = try await store.withStore { store in try await store.verify(progress: bar.handler) }
        bar.finish()
        try format.printCheck(json: Rendering.json(report), lines: Rendering.lines(report), intact: report.isIntact, to: &output)
    }
}

extension Rendering {
    /// What `arbor verify` prints.
    static func lines(_ report: VerifyReport) -> [String] {
        var lines = [
            (report.isIntact ? "intact: " : "DAMAGED: ")
                + "\(count(report.versions, "version", "versions")), \(count(report.reachableObjects, "reachable object", "reachable objects")) "
                + "(\(ProgressBar.bytes(report.reachableBytes))), \(report.missingCount) missing, \(report.corruptCount) corrupt, "
                + "\(report.nonCanonicalCount) non-canonical; "
                + "\(count(report.unreachableObjects, "unreachable object", "unreachable objects")); \(seconds(report.seconds))",
        ]
        lines += report.damage.map { "  \($0.kind.rawValue) \($0.hash): \(printable($0.detail))" }
        if report.damage.count < report.missingCount + report.corruptCount + report.nonCanonicalCount { lines.append("  … and more") }
        return lines
    }

    static func json(_ report: VerifyReport) -> JSONValue {
        .object([
            ("intact", .bool(report.isIntact)), ("versions", .number(String(report.versions))),
            ("reachableObjects", .number(String(report.reachableObjects))), ("reachableBytes", .number(String(report.reachableBytes))),
            ("unreachableObjects", .number(String(report.unreachableObjects))), ("missing", .number(String(report.missingCount))),
            ("corrupt", .number(String(report.corruptCount))), ("nonCanonical", .number(String(report.nonCanonicalCount))),
            ("seconds", number(report.seconds)),
            ("damage", .array(report.damage.map {
                .object([("kind", .string($0.kind.rawValue)), ("hash", .string($0.hash.hex)), ("detail", .string($0.detail))])
            })),
        ])
    }
}
