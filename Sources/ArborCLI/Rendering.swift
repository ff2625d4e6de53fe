import Arbor
import Foundation

/// The text and JSON forms of versions and changes that several subcommands print.
///
/// Property values are always shown in the lossless JSON mapping of `PropertyValue+JSON`
/// (`{"$date": …}`, `{"$child": …}`, …), compact in lines of text.
enum Rendering {
    // MARK: Versions

    /// One line: abbreviated hash, time, replica, record count, first line of the message.
    static func line(_ version: Version) -> String {
        let records = count(Int(clamping: version.recordCount), "record", "records")
        let columns = [version.id.abbreviated(), version.time.description, version.replica, records, firstLine(version.message)]
        return columns.filter { !$0.isEmpty }.joined(separator: "  ")
    }

    /// The version's metadata, one field a line, for `show`.
    static func details(_ version: Version) -> [String] {
        var lines = ["version  \(version.id.hex)"]
        if !version.parents.isEmpty { lines.append("parents  \(version.parents.map { $0.abbreviated() }.joined(separator: " "))") }
        lines.append("time     \(version.time)")
        lines.append("replica  \(version.replica)")
        lines.append("records  \(version.recordCount)")
        if !version.message.isEmpty {
            lines.append("message  " + version.message.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\n         "))
        }
        return lines
    }

    /// `{"id", "parents", "time", "counter", "replica", "message", "recordCount"}` with full
    /// hashes; `time` is the ISO 8601 wall-clock time in UTC and `counter` the hybrid clock's
    /// counter that orders versions made within one millisecond.
    static func json(_ version: Version) -> JSONValue {
        .object(members(of: version))
    }

    /// The members of ``json(_:)-(Version)``, for documents that add their own.
    static func members(of version: Version) -> [(key: String, value: JSONValue)] {
        [
            ("id", .string(version.id.hex)),
            ("parents", .array(version.parents.map { .string($0.hex) })),
            ("time", .string(version.time.timestamp)),
            ("counter", .number(String(version.time.counter))),
            ("replica", .string(version.replica)),
            ("message", .string(version.message)),
            ("recordCount", .number(String(version.recordCount))),
        ]
    }

    /// `number` and the noun that goes with it: "1 record", "2 records".
    static func count(_ number: Int, _ singular: String, _ plural: String) -> String {
        "\(number) \(number == 1 ? singular : plural)"
    }

    private static func firstLine(_ text: String) -> String {
        String(text.prefix { !$0.isNewline })
    }

    // MARK: Changes

    /// For each changed record a `+`, `-` or `~` line with its key, then its properties: the
    /// values of an added or removed record, and `old -> new` for each property of a modified
    /// one, where `(absent)` stands for a property that is not there.
    static func lines(_ changes: [RecordChange]) -> [String] {
        var lines = [String]()
        for change in changes {
            switch change.kind {
            case .added:
                lines.append("+ \(change.key)")
                lines += change.properties.map { "  \($0.name): \(text($0.new))" }
            case .removed:
                lines.append("- \(change.key)")
                lines += change.properties.map { "  \($0.name): \(text($0.old))" }
            case .modified:
                lines.append("~ \(change.key)")
                lines += change.properties.map { "  \($0.name): \(text($0.old)) -> \(text($0.new))" }
            }
        }
        return lines
    }

    /// `{"type", "id", "change": "added" | "removed" | "modified", "properties": [{"name", "old", "new"}]}`.
    /// An absent side is left out rather than written `null`, which is a property's value.
    static func json(_ change: RecordChange) -> JSONValue {
        let properties = change.properties.map { property in
            var members: [(key: String, value: JSONValue)] = [("name", .string(property.name))]
            if let old = property.old { members.append(("old", JSONValue(propertyValue: old))) }
            if let new = property.new { members.append(("new", JSONValue(propertyValue: new))) }
            return JSONValue.object(members)
        }
        return .object([
            ("type", .string(change.key.type)),
            ("id", .string(change.key.id)),
            ("change", .string(change.kind.rawValue)),
            ("properties", .array(properties)),
        ])
    }

    static func text(_ value: PropertyValue?) -> String {
        value.map { JSONValue(propertyValue: $0).serialized() } ?? "(absent)"
    }
}
