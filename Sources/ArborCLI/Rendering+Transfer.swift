import Arbor
import Foundation

extension Rendering {
    /// `copied 3 versions, 120 objects (45.6 kB) in 0.12 s; heads: abc…` or `already in sync`.
    static func line(_ report: ExchangeReport) -> String {
        let heads = "heads: " + (report.heads.isEmpty ? "none" : report.heads.map { $0.abbreviated() }.joined(separator: ", "))
        if report.alreadyInSync { return "already in sync; \(heads)" }
        let deltas = report.restatements > 0 ? "; \(count(report.restatements, "replaced node", "replaced nodes")) offered as deltas" : ""
        return "copied \(count(report.versions, "version", "versions")), \(count(report.objects, "object", "objects")) "
            + "(\(ProgressBar.bytes(report.bytes))) in \(seconds(report.seconds))\(deltas); \(heads)"
    }

    static func seconds(_ value: Double) -> String { String(format: "%.2f s", value) }

    /// `{"versions", "objects", "bytes", "rounds", "restatements", "seconds", "alreadyInSync", "heads"}`.
    static func json(_ report: ExchangeReport) -> JSONValue {
        .object([
            ("versions", .number(String(report.versions))), ("objects", .number(String(report.objects))),
            ("bytes", .number(String(report.bytes))), ("rounds", .number(String(report.rounds))),
            ("restatements", .number(String(report.restatements))),
            ("seconds", number(report.seconds)), ("alreadyInSync", .bool(report.alreadyInSync)),
            ("heads", .array(report.heads.map { .string($0.hex) })),
        ])
    }

    static func number(_ value: Double) -> JSONValue { .number(String(format: "%.6f", value)) }

    /// What `arbor sync` prints.
    static func lines(_ report: SyncReport, from: String, to: String) -> [String] {
        var lines = ["\(from) -> \(to): " + line(report.sent), "\(to) -> \(from): " + line(report.received)]
        if let merge = report.merge {
            lines += Rendering.lines(merge)
            if case .merged = merge { lines.append("\(from) -> \(to): " + line(report.settled)) }
        }
        let heads = report.heads
        switch heads.count {
        case 0: lines.append("both stores are empty")
        case 1: lines.append("both stores are at \(heads[0].abbreviated())")
        default: lines.append("both stores have \(heads.count) heads: merge them once the conflicts are settled")
        }
        return lines
    }

    /// `{"sent", "received", "merge", "settled", "heads"}`.
    static func json(_ report: SyncReport) -> JSONValue {
        .object([
            ("sent", json(report.sent)), ("received", json(report.received)),
            ("merge", report.merge.map { Rendering.json($0) } ?? .null), ("settled", json(report.settled)),
            ("heads", .array(report.heads.map { .string($0.hex) })),
        ])
    }

    /// What `arbor migrate` and `arbor clone` print.
    static func lines(_ report: MigrationReport) -> [String] {
        let copy = report.exchange
        let records = copy.seconds > 0 ? Double(copy.objects) / copy.seconds : 0
        var lines = [
            "copied \(count(copy.versions, "version", "versions"))\(report.latestOnly ? " (latest state only)" : ""), "
                + "\(count(copy.objects, "object", "objects")) (\(ProgressBar.bytes(copy.bytes))) in \(seconds(copy.seconds)) "
                + "(\(Int(records)) objects/s)",
        ]
        if report.verified {
            lines.append("verified: same \(report.latestOnly ? "heads" : "refs") on both sides; \(count(report.objectsChecked, "object", "objects")) "
                + "(\(ProgressBar.bytes(report.bytesChecked))) match their hashes and the source; every head's index is complete "
                + "(\(seconds(report.verifySeconds)))")
            if report.sourceChangedSinceCopy {
                // A latest-only copy shares no version with its source: an exchange would bring
                // the whole history and leave the copy's heads beside the source's.
                lines.append(report.latestOnly
                    ? "the source changed during the migration: the copy holds its heads' state when the copy began; migrate --latest into a new store for the newer one"
                    : "the source changed during the migration: the copy holds its state when the copy began; arbor exchange FROM TO brings it up to date")
            }
        } else {
            lines.append("not verified (--no-verify)")
        }
        lines.append("heads: " + (report.heads.isEmpty ? "none (the source is empty)" : report.heads.map { $0.abbreviated() }.joined(separator: ", ")))
        return lines
    }

    /// `{"versions", "objects", "bytes", "restatements", "seconds", "latestOnly", "verified", "objectsChecked", "bytesChecked", "verifySeconds",
    /// "sourceChangedSinceCopy", "heads"}`.
    static func json(_ report: MigrationReport) -> JSONValue {
        guard case .object(var members) = json(report.exchange) else { return .null }
        members.removeAll { ["alreadyInSync", "rounds"].contains($0.key) }
        members += [
            ("latestOnly", .bool(report.latestOnly)), ("verified", .bool(report.verified)),
            ("objectsChecked", .number(String(report.objectsChecked))), ("bytesChecked", .number(String(report.bytesChecked))),
            ("verifySeconds", number(report.verifySeconds)), ("sourceChangedSinceCopy", .bool(report.sourceChangedSinceCopy)),
        ]
        return .object(members)
    }
}
