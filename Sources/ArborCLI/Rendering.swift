import Arbor
import Foundation

/// The text and JSON forms of versions and changes that several subcommands print.
///
/// Property values are always shown in the lossless JSON mapping of `PropertyValue+JSON`
/// (`{"$date": …}`, `{"$child": …}`, …), compact in lines of text.
enum Rendering {
    // MARK: Versions

    // MARK: Text from the store

    /// `text` (a record's id, a replica's name, a message: what other replicas write) with the
    /// characters that would act on a terminal or break a line written as `\u{…}`: C0 and C1
    /// controls, DEL, line and paragraph separators, and the bidirectional controls that reorder
    /// what is shown. With `keepingNewlines`, `\n` stays (a message's own lines, an error's).
    static func printable(_ text: String, keepingNewlines: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { isControl($0, keepingNewlines: keepingNewlines) }) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar, keepingNewlines: keepingNewlines) {
                result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    private static func isControl(_ scalar: Unicode.Scalar, keepingNewlines: Bool) -> Bool {
        switch scalar.value {
        case 0x0A: !keepingNewlines
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: true
        default: false
        }
    }

    /// A record's key as text lines show it, `Type/id`, ``printable(_:keepingNewlines:)``.
    static func key(_ key: RecordKey) -> String { printable("\(key)") }

    /// One line: abbreviated hash, time, replica, record count, first line of the message.
    static func line(_ version: Version) -> String {
        let records = count(Int(clamping: version.recordCount), "record", "records")
        let columns = [version.id.abbreviated(), version.time.description, printable(version.replica), records, printable(firstLine(version.message))]
        return columns.filter { !$0.isEmpty }.joined(separator: "  ")
    }

    /// The version's metadata, one field a line, for `show`.
    static func details(_ version: Version) -> [String] {
        var lines = ["version  \(version.id.hex)"]
        if !version.parents.isEmpty { lines.append("parents  \(version.parents.map { $0.abbreviated() }.joined(separator: " "))") }
        lines.append("time     \(version.time)")
        lines.append("replica  \(printable(version.replica))")
        lines.append("records  \(version.recordCount)")
        if !version.message.isEmpty {
            lines.append("message  " + version.message.split(separator: "\n", omittingEmptySubsequences: false).map { printable(String($0)) }.joined(separator: "\n         "))
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
                lines.append("+ \(key(change.key))")
                lines += change.properties.map { "  \(printable($0.name)): \(text($0.new))" }
            case .removed:
                lines.append("- \(key(change.key))")
                lines += change.properties.map { "  \(printable($0.name)): \(text($0.old))" }
            case .modified:
                lines.append("~ \(key(change.key))")
                lines += change.properties.map { "  \(printable($0.name)): \(text($0.old)) -> \(text($0.new))" }
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
        value.map { printable(JSONValue(propertyValue: $0).serialized()) } ?? "(absent)"
    }
}
